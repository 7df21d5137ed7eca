/*
 * A plain blocking client for the network tests that drive eddy servers over real sockets
 * (tests/pipeline/test_socket.c, test_uring.c), so the peer can misbehave as no eddy client
 * would: connect with DEADLINE_MS send and receive timeouts, send or receive exactly n bytes.
 * They assert, so the test's thread only. Include after <cmocka.h> and support/wait_util.h.
 */
#ifndef EDDY_TESTS_SUPPORT_SOCKET_UTIL_H
#define EDDY_TESTS_SUPPORT_SOCKET_UTIL_H

#include <eddy/channel.h>

#include <stddef.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* A connected blocking socket to addr, with DEADLINE_MS send and receive timeouts. */
static inline int client_connect(const eddy_addr_t *addr)
{
    int fd = socket(addr->u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, &addr->u.sa, addr->len), 0);
    struct timeval tv = {DEADLINE_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Send all n bytes (a timeout or an error fails the test). */
static inline void send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* Receive exactly n bytes (a timeout, an error or the peer's FIN fails the test). */
static inline void recv_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        assert_true(r > 0);
        p += r;
        n -= (size_t)r;
    }
}

#endif /* EDDY_TESTS_SUPPORT_SOCKET_UTIL_H */
