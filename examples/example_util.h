/*
 * examples/example_util.h: what the example programs share (not part of the library).
 */
#ifndef EDDY_EXAMPLES_EXAMPLE_UTIL_H
#define EDDY_EXAMPLES_EXAMPLE_UTIL_H

#include <eddy/eddy.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* A whole decimal number in [0, max] from a command-line argument: true and *out, or false. */
static inline bool example_parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v > max) {
        return false;
    }
    *out = v;
    return true;
}

/* Block SIGINT and SIGTERM on the calling thread and fill *stop with them, for a server's
 * sigwait(). Call before any thread starts, so that every thread inherits the mask and the
 * signals reach only the sigwait() of the main thread. */
static inline void example_block_stop_signals(sigset_t *stop)
{
    sigemptyset(stop);
    sigaddset(stop, SIGINT);
    sigaddset(stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, stop, NULL);
}

/* Bind b on host:port and wait for it: the listening channel (retained: the caller releases
 * it), or NULL after one line on stderr naming the program (name) and the error. */
static inline eddy_channel_t *example_bind(eddy_server_bootstrap_t *b, const char *host,
                                           unsigned long port, const char *name)
{
    eddy_future_t *bound = eddy_server_bootstrap_bind(b, host, (uint16_t)port);
    if (bound == NULL || eddy_future_await(bound, -1) != 0 || eddy_future_error(bound) != 0) {
        fprintf(stderr, "%s: cannot listen on %s:%lu: %s\n", name, host, port,
                bound != NULL ? eddy_strerror(eddy_future_error(bound)) : "out of memory");
        eddy_future_release(bound);
        return NULL;
    }
    eddy_channel_t *listener = eddy_channel_retain(eddy_future_channel(bound));
    eddy_future_release(bound);
    return listener;
}

#endif /* EDDY_EXAMPLES_EXAMPLE_UTIL_H */
