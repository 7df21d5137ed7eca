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
/* A new TLS context for mode, or NULL after saying why on stderr as program: eddy built
 * without TLS (EDDY_WITH_TLS=OFF), or out of memory. */
static inline eddy_tls_context_t *example_tls_context(eddy_tls_mode_t mode, const char *program)
{
    if (!eddy_tls_available()) {
        fprintf(stderr, "%s: this eddy was built without TLS (EDDY_WITH_TLS=OFF)\n", program);
        return NULL;
    }
    eddy_tls_context_t *c = eddy_tls_context_new(mode);
    if (c == NULL) {
        fprintf(stderr, "%s: out of memory\n", program);
    }
    return c;
}

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

/* The servers' bootstrap: boss accepts and workers serve (NULL: boss serves too), a backlog
 * of 1024, TCP_NODELAY, and reading paused while a peer does not take what it is sent
 * (bounded memory against slow readers); init(child, arg) adds each connection's handlers. */
static inline void example_configure(eddy_server_bootstrap_t *b, eddy_loop_group_t *boss,
                                     eddy_loop_group_t *workers, eddy_channel_init_cb init,
                                     void *arg)
{
    eddy_server_bootstrap_group(b, boss, workers);
    eddy_server_bootstrap_option(b, EDDY_SO_BACKLOG, 1024);
    eddy_server_bootstrap_child_option(b, EDDY_TCP_NODELAY, 1);
    eddy_server_bootstrap_child_option(b, EDDY_PAUSE_READ_WHEN_UNWRITABLE, 1);
    eddy_server_bootstrap_child_init(b, init, arg);
}

/* Stop accepting: close the listener (waiting up to 2 s) and release it. */
static inline void example_unbind(eddy_channel_t *listener)
{
    eddy_channel_close(listener, NULL);
    eddy_future_await(eddy_channel_close_future(listener), 2000);
    eddy_channel_release(listener);
}

/* Let the loops close every connection (each gets one last try at what it flushed) and end,
 * workers first (either group may be NULL); then free b and the groups. 0, or 1 when a group
 * would not free. Read b's counters before. */
static inline int example_shutdown(eddy_server_bootstrap_t *b, eddy_loop_group_t *workers,
                                   eddy_loop_group_t *boss)
{
    eddy_loop_group_t *groups[2] = {workers, boss};
    for (int i = 0; i < 2; i++) {
        if (groups[i] != NULL) {
            eddy_future_await(eddy_loop_group_shutdown_gracefully(groups[i], 0, 2000), 5000);
        }
    }
    eddy_server_bootstrap_free(b);
    int rc = eddy_loop_group_free(workers) | eddy_loop_group_free(boss);
    return rc == 0 ? 0 : 1;
}

#endif /* EDDY_EXAMPLES_EXAMPLE_UTIL_H */
