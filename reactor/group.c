/*
 * Loop groups (Netty's MultithreadEventLoopGroup): N loops on N threads, a chooser, and one
 * termination future for all of them.
 */
#include "reactor/internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct eddy_loop_group_s {
    eddy_loop_t **loops;
    size_t n;
    _Atomic size_t next;
    bool pow2;
    eddy_future_t *termination;
    _Atomic size_t live; /* loops not yet terminated */
};

static void on_loop_terminated(eddy_future_t *f, void *arg)
{
    eddy_loop_group_t *g = arg;
    assert(eddy_future_is_done(f));
    size_t live = atomic_fetch_sub(&g->live, 1);
    assert(live > 0 && live <= g->n); /* each loop terminates once */
    if (live == 1) {
        eddy_promise_succeed(g->termination, NULL);
    }
}

static void group_destroy(eddy_loop_group_t *g)
{
    for (size_t i = 0; i < g->n; i++) {
        if (g->loops[i] != NULL) {
            eddy_loop_free(g->loops[i]);
        }
    }
    free(g->loops);
    eddy_future_release(g->termination);
    free(g);
}

eddy_loop_group_t *eddy_loop_group_new(size_t n, const eddy_loop_options_t *opts)
{
    if (n == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus > 0 ? (size_t)cpus : 1;
    }
    eddy_loop_group_t *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return NULL;
    }
    g->loops = calloc(n, sizeof(*g->loops));
    g->termination = eddy__future_new_unowned();
    if (g->loops == NULL || g->termination == NULL) {
        free(g->loops);
        eddy_future_release(g->termination);
        free(g);
        return NULL;
    }
    g->n = n;
    g->pow2 = (n & (n - 1)) == 0;
    atomic_init(&g->next, 0);
    atomic_init(&g->live, n);
    eddy_loop_options_t o = {0};
    if (opts != NULL) {
        o = *opts;
    }
    const char *base = o.name ? o.name : "eddy-loop";
    for (size_t i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "%.9s-%u", base, (unsigned)(i % 10000));
        eddy_loop_options_t lo = o;
        lo.name = name;
        lo.cpu = (int)i;
        g->loops[i] = eddy_loop_new(&lo);
        if (g->loops[i] == NULL) {
            group_destroy(g);
            return NULL;
        }
        g->loops[i]->index = i; /* before the loop starts: its thread sees it as it is */
    }
    /* Every loop counts towards the group's termination before any starts: a failed start
     * below terminates them all, those that never ran included. */
    for (size_t i = 0; i < n; i++) {
        eddy_future_add_listener(eddy_loop_termination_future(g->loops[i]), on_loop_terminated,
                                 g);
    }
    for (size_t i = 0; i < n; i++) {
        if (eddy_loop_start(g->loops[i]) != 0) {
            /* Shut down the ones that started; the rest never ran and terminate at once. */
            for (size_t k = 0; k < n; k++) {
                eddy_loop_shutdown_gracefully(g->loops[k], 0, 0);
            }
            eddy_future_await(g->termination, -1);
            group_destroy(g);
            return NULL;
        }
    }
    return g;
}

eddy_loop_t *eddy_loop_group_next(eddy_loop_group_t *g)
{
    /* Relaxed: the counter only spreads the choices; the loops array is written once, before
     * the group is handed out, so any thread may read it. */
    size_t i = atomic_fetch_add_explicit(&g->next, 1, memory_order_relaxed);
    assert(g->n > 0 && (!g->pow2 || (g->n & (g->n - 1)) == 0));
    return g->loops[g->pow2 ? (i & (g->n - 1)) : (i % g->n)];
}

int eddy_loop_group_execute(eddy_loop_group_t *g, eddy_task_cb fn, void *arg)
{
    return eddy_loop_execute(eddy_loop_group_next(g), fn, arg);
}

size_t eddy_loop_group_size(const eddy_loop_group_t *g)
{
    return g->n;
}

eddy_loop_t *eddy_loop_group_loop(const eddy_loop_group_t *g, size_t i)
{
    return i < g->n ? g->loops[i] : NULL;
}

eddy_future_t *eddy_loop_group_shutdown_gracefully(eddy_loop_group_t *g, int64_t quiet_ms,
                                                   int64_t timeout_ms)
{
    for (size_t i = 0; i < g->n; i++) {
        eddy_loop_shutdown_gracefully(g->loops[i], quiet_ms, timeout_ms);
    }
    return g->termination;
}

eddy_future_t *eddy_loop_group_termination_future(eddy_loop_group_t *g)
{
    return g->termination;
}

int eddy_loop_group_free(eddy_loop_group_t *g)
{
    if (g == NULL) {
        return 0;
    }
    for (size_t i = 0; i < g->n; i++) {
        if (eddy_loop_in_event_loop(g->loops[i])) {
            return EDDY_EDEADLK;
        }
    }
    if (!eddy_future_is_done(g->termination)) {
        return EDDY_EBUSY;
    }
    group_destroy(g);
    return 0;
}

void eddy_loop_group_metrics(const eddy_loop_group_t *g, eddy_loop_metrics_t *m)
{
    memset(m, 0, sizeof(*m));
    for (size_t i = 0; i < g->n; i++) {
        eddy_loop_metrics_t l;
        eddy_loop_metrics(g->loops[i], &l);
        m->task_queue_depth += l.task_queue_depth;
        m->tasks_run += l.tasks_run;
        m->timers_fired += l.timers_fired;
        m->io_events += l.io_events;
        m->wakeups += l.wakeups;
        m->turns += l.turns;
        m->poll_ns += l.poll_ns;
        m->io_ns += l.io_ns;
        m->task_ns += l.task_ns;
        m->lag_total_ns += l.lag_total_ns;
        m->stalls += l.stalls;
        if (l.lag_max_ns > m->lag_max_ns) {
            m->lag_max_ns = l.lag_max_ns;
        }
        if (l.last_stall_fn != NULL) {
            m->last_stall_ns = l.last_stall_ns;
            m->last_stall_fn = l.last_stall_fn;
        }
    }
}
