/*
 * Waiting with a deadline in the network tests (tests/pipeline/test_socket.c, test_tls.c,
 * tests/bootstrap/test_bootstrap.c): WAIT_FOR(cond) polls every millisecond until cond holds
 * or DEADLINE_MS (10 s unless the file defines it first) pass, then asserts cond. The test's
 * thread only: assert_true longjmps. Include after <cmocka.h>.
 */
#ifndef EDDY_TESTS_SUPPORT_WAIT_UTIL_H
#define EDDY_TESTS_SUPPORT_WAIT_UTIL_H

#include <eddy/loop.h>

#include <stdint.h>
#include <unistd.h>

#ifndef DEADLINE_MS
#define DEADLINE_MS 10000
#endif

/* eddy_now_ns() in milliseconds. */
static inline int64_t now_ms(void)
{
    return eddy_now_ns() / 1000000;
}

#define WAIT_FOR(cond)                                                                         \
    do {                                                                                       \
        int64_t until_ = now_ms() + DEADLINE_MS;                                               \
        while (!(cond) && now_ms() < until_)                                                   \
            usleep(1000);                                                                      \
        assert_true(cond);                                                                     \
    } while (0)

#endif /* EDDY_TESTS_SUPPORT_WAIT_UTIL_H */
