/*
 * Calls that abort the process in debug builds and refuse in release builds (a retain the
 * reference count cannot take, tests/buffer/test_buf.c, test_leak.c, test_composite.c,
 * tests/reactor/test_timer.c, test_future.c): expect_abort_in_debug(fn, arg, needle) runs
 * fn(arg) in a child process, its stderr captured, and asserts that without NDEBUG the child
 * died of SIGABRT after printing needle, and with NDEBUG that fn returned. The library and the
 * tests are built with the same flags, so NDEBUG here is NDEBUG there.
 *
 * The test's thread only (cmocka asserts longjmp); the child runs on the forking thread alone,
 * so fn must not wait for other threads. fn must not assert: it runs where cmocka cannot
 * report. Include after <cmocka.h>.
 */
#ifndef EDDY_TESTS_SUPPORT_ABORT_UTIL_H
#define EDDY_TESTS_SUPPORT_ABORT_UTIL_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static inline void expect_abort_in_debug(void (*fn)(void *arg), void *arg, const char *needle)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL); /* nothing buffered is written twice, by the parent and the child */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core); /* an expected abort leaves no core file */
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    char text[4096];
    size_t n = 0;
    ssize_t k;
    while ((k = read(fds[0], text + n, sizeof(text) - 1 - n)) > 0) {
        n += (size_t)k;
        if (n == sizeof(text) - 1) {
            break;
        }
    }
    text[n] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
#ifdef NDEBUG
    (void)needle;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fail_msg("the call did not return (status %#x): %s", (unsigned)status, text);
    }
#else
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) {
        fail_msg("the call did not abort (status %#x): %s", (unsigned)status, text);
    }
    if (strstr(text, needle) == NULL) {
        fail_msg("the abort did not say \"%s\": %s", needle, text);
    }
#endif
}

#endif /* EDDY_TESTS_SUPPORT_ABORT_UTIL_H */
