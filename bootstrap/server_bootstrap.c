/*
 * The server bootstrap (Netty's ServerBootstrap): bind resolves the host, listens with
 * eddy_channel_listen on a boss loop (or on every worker loop in SO_REUSEPORT mode), and
 * wraps child_init to count live children and enforce the server's limits.
 *
 * The server state is refcounted, since listeners and children outlive the bootstrap: the
 * bootstrap holds one reference, each bind in progress one, each listener one and each live
 * child one. A listener's reference outlasts its close: children it accepted may still wait
 * in a worker loop's task queue to start (and call child_init with the state), so it is
 * dropped by a task queued on every worker loop after the close, which runs after them.
 */
#include <eddy/bootstrap.h>

#include "bootstrap/internal.h" /* eddy__bootstrap_resolve */
#include "pipeline/layer.h"  /* the close hook */

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Defined in bootstrap.c. */
int eddy__bootstrap_refuse(eddy_channel_t *ch, int err);

typedef struct attr_s {
    const void *key;
    void *value;
} attr_t;

typedef struct server_s {
    _Atomic uint32_t refcnt;
    eddy_loop_group_t *boss, *workers;
    eddy_channel_config_t config, child_config;
    attr_t *attrs, *child_attrs;
    size_t nattrs, nchild_attrs;
    eddy_channel_init_cb handler, child_init;
    void *handler_arg, *child_arg;
    bool reuseport;
    uint64_t max_connections, accepts_per_second;
    eddy__close_hook_t child_hook; /* child_closed, for every live child */

    /* Counters: relaxed, they are statistics; active is also the limit's count, where
     * fetch_add makes each admission see every earlier one. */
    _Atomic uint64_t accepted, active, rejected_max, rejected_rate;
    _Atomic int64_t window_s;      /* the accept-rate window: its second */
    _Atomic uint64_t window_count; /* accepts in it */
    _Atomic int64_t last_log_ns;
    _Atomic(eddy_promise_t *) shutdown; /* eddy_server_bootstrap_shutdown()'s, until done */
} server_t;

struct eddy_server_bootstrap_s {
    server_t *s;
};

static void server_retain(server_t *s)
{
    eddy__refcnt_add(&s->refcnt);
}

static void server_release(server_t *s)
{
    /* acq_rel: pairs with itself, so the last releaser sees every loop's writes. */
    if (!eddy__refcnt_sub(&s->refcnt, 1)) {
        return;
    }
    assert(atomic_load_explicit(&s->active, memory_order_relaxed) == 0); /* children hold s */
    free(s->attrs);
    free(s->child_attrs);
    free(s);
}

static int attrs_put(attr_t **attrs, size_t *n, const void *key, void *value)
{
    for (size_t i = 0; i < *n; i++) {
        if ((*attrs)[i].key == key) {
            (*attrs)[i].value = value;
            return 0;
        }
    }
    attr_t *a = realloc(*attrs, (*n + 1) * sizeof(*a));
    if (a == NULL) {
        return EDDY_ENOMEM;
    }
    a[(*n)++] = (attr_t){key, value};
    *attrs = a;
    return 0;
}

static int attrs_apply(eddy_channel_t *ch, const attr_t *attrs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = eddy_channel_attr_set(ch, attrs[i].key, attrs[i].value);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Children: the child_init wrapper and the limits
 */

/* A fixed one-second window: cheap and lock-free; two loops crossing into a new second at
 * once may let a few more through than the limit, which is fine for a flood guard. */
static bool rate_admit(server_t *s)
{
    int64_t sec = eddy_now_ns() / 1000000000;
    int64_t w = atomic_load_explicit(&s->window_s, memory_order_relaxed);
    if (w != sec && atomic_compare_exchange_strong_explicit(
                        &s->window_s, &w, sec, memory_order_relaxed, memory_order_relaxed)) {
        atomic_store_explicit(&s->window_count, 0, memory_order_relaxed);
    }
    return atomic_fetch_add_explicit(&s->window_count, 1, memory_order_relaxed) <
           s->accepts_per_second;
}

/* At most one line a second, whichever loop rejects. */
static void log_rejected(server_t *s, const char *why, uint64_t limit)
{
    int64_t now = eddy_now_ns();
    int64_t prev = atomic_load_explicit(&s->last_log_ns, memory_order_relaxed);
    if (now - prev < 1000000000 ||
        !atomic_compare_exchange_strong_explicit(&s->last_log_ns, &prev, now, memory_order_relaxed,
                                                 memory_order_relaxed)) {
        return;
    }
    eddy__log(EDDY_LOG_WARN,
              "server: closing new connections: %s (%llu); %llu + %llu closed so far", why,
              (unsigned long long)limit,
              (unsigned long long)atomic_load_explicit(&s->rejected_max, memory_order_relaxed),
              (unsigned long long)atomic_load_explicit(&s->rejected_rate, memory_order_relaxed));
}

/* The shutdown's promise, once no child is left: completed and released by whoever takes it
 * first. */
static void shutdown_check(server_t *s)
{
    if (atomic_load(&s->active) != 0 || atomic_load(&s->shutdown) == NULL) {
        return;
    }
    eddy_promise_t *p = atomic_exchange(&s->shutdown, NULL);
    if (p != NULL) {
        eddy_promise_succeed(p, NULL);
        eddy_future_release(p);
    }
}

static void child_closed(eddy_channel_t *ch, void *arg)
{
    (void)ch;
    server_t *s = arg;
    uint64_t was = atomic_fetch_sub(&s->active, 1); /* seq_cst: against shutdown_check */
    assert(was > 0); /* admitted children only: a refused one has no hook */
    if (was == 1) {
        shutdown_check(s);
    }
    server_release(s);
}

/* On the child's loop: a refused child is closed before it becomes active, so no handler of
 * the user ever sees it. */
static int child_init(eddy_channel_t *ch, void *arg)
{
    server_t *s = arg;
    assert(s->child_init != NULL); /* bind refuses to start without it */
    atomic_fetch_add_explicit(&s->accepted, 1, memory_order_relaxed);
    if (s->accepts_per_second > 0 && !rate_admit(s)) {
        atomic_fetch_add_explicit(&s->rejected_rate, 1, memory_order_relaxed);
        log_rejected(s, "accept rate per second reached", s->accepts_per_second);
        return eddy__bootstrap_refuse(ch, EDDY_ECONNABORTED);
    }
    uint64_t live = atomic_fetch_add_explicit(&s->active, 1, memory_order_relaxed) + 1;
    if (s->max_connections > 0 && live > s->max_connections) {
        atomic_fetch_sub_explicit(&s->active, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->rejected_max, 1, memory_order_relaxed);
        log_rejected(s, "max connections reached", s->max_connections);
        return eddy__bootstrap_refuse(ch, EDDY_ECONNABORTED);
    }
    server_retain(s); /* the child's: the hook lives in s */
    eddy__channel_set_close_hook(ch, &s->child_hook);
    int rc = attrs_apply(ch, s->child_attrs, s->nchild_attrs);
    if (rc == 0) {
        rc = s->child_init(ch, s->child_arg);
    }
    return rc != 0 ? eddy__bootstrap_refuse(ch, rc) : 0;
}

/* ---------------------------------------------------------------------------------------
 * Listeners
 */

typedef struct closer_s {
    server_t *s;                 /* the listener's reference */
    eddy_loop_group_t *children; /* NULL: children start on the listener's own loop */
    eddy__close_hook_t hook;     /* listener_closed */
} closer_t;

/* A loop task dropping a reference to the server state; also the fan-out's release. */
static void release_task(void *arg)
{
    server_release(arg);
}

/* The listener's close hook: it runs before the close future completes, so that whoever waited
 * for that may free the worker group at once (a close-future listener would still be queueing
 * onto its loops then). */
static void listener_closed(eddy_channel_t *ch, void *arg)
{
    (void)ch;
    closer_t *cl = arg;
    server_t *s = cl->s;
    if (cl->children != NULL) {
        /* Tasks from one thread run in order: these run after every child_start this
         * listener queued. A loop that refuses (shutting down) has run them already or
         * refused them too. */
        size_t n = eddy_loop_group_size(cl->children);
        for (size_t i = 0; i < n; i++) {
            server_retain(s);
            if (eddy_loop_execute(eddy_loop_group_loop(cl->children, i), release_task, s) != 0) {
                server_release(s);
            }
        }
    }
    free(cl);
    server_release(s);
}

static void listener_close_future_done(eddy_future_t *f, void *arg)
{
    (void)f;
    listener_closed(NULL, arg);
}

static void start_listener(eddy__fanout_t *fo, size_t i);

/* On the listener's loop, once eddy_channel_listen completed. */
static void listener_bound(eddy_future_t *f, void *arg)
{
    eddy__fanout_slot_t *slot = arg;
    eddy__fanout_t *fo = slot->fo;
    server_t *s = fo->owner;
    int err = eddy_future_error(f);
    eddy_channel_t *ch = eddy_future_channel(f);
    eddy_future_release(f);
    eddy_channel_t *held = NULL; /* the bind's reference, once bound */
    if (ch == NULL) {
        server_release(s); /* the listener's reference: it never accepted */
    } else {
        closer_t *cl = malloc(sizeof(*cl));
        if (cl == NULL) {
            err = EDDY_ENOMEM;
            eddy_channel_close(ch, NULL);
            server_release(s); /* nothing was accepted yet: this loop turn bound it */
        } else {
            cl->s = s;
            cl->children = fo->reuseport ? NULL : s->workers;
            cl->hook = (eddy__close_hook_t){listener_closed, cl};
            bool on_loop = eddy_loop_in_event_loop(eddy_channel_loop(ch));
            eddy_future_t *cf = NULL;
            if (on_loop && eddy_channel_is_open(ch)) {
                eddy__channel_set_close_hook(ch, &cl->hook);
            } else if (on_loop) {
                listener_closed(ch, cl); /* closed with its loop before we got here */
            } else {
                /* Run here as its loop refused us (shutting down): the hook is the loop's. */
                cf = eddy_channel_close_future(ch); /* NULL without memory */
            }
            if (!on_loop &&
                (cf == NULL || eddy_future_add_listener(cf, listener_close_future_done, cl) != 0)) {
                free(cl);
                err = EDDY_ENOMEM;
                eddy_channel_close(ch, NULL);
                server_release(s);
            } else {
                held = eddy_channel_retain(ch);
                err = attrs_apply(ch, s->attrs, s->nattrs);
                if (err == 0 && s->handler != NULL) {
                    err = s->handler(ch, s->handler_arg);
                }
            }
        }
    }
    eddy__fanout_opened(fo, slot->i, held, err);
}

/* The fan-out's open: listener i, on the boss group, or on worker loop i in REUSEPORT mode. */
static void start_listener(eddy__fanout_t *fo, size_t i)
{
    server_t *s = fo->owner;
    eddy_channel_config_t cfg = s->config;
    eddy_listen_options_t opts = {
        .child_init = child_init,
        .child_arg = s,
        .config = &cfg,
        .child_config = &s->child_config,
    };
    if (fo->reuseport) {
        opts.loop = eddy_loop_group_loop(s->workers, i);
        eddy_channel_config_set(&cfg, EDDY_SO_REUSEPORT, 1);
    } else {
        opts.loop = eddy_loop_group_next(s->boss);
        opts.children = s->workers;
    }
    server_retain(s); /* the listener's */
    eddy_future_t *f = eddy_channel_listen(&fo->addr, &opts);
    if (f == NULL || eddy_future_add_listener(f, listener_bound, &fo->slot[i]) != 0) {
        /* Without memory. A listener that still comes up is left to its loop, with the
         * state referenced for good: its children need it. */
        if (f == NULL) {
            server_release(s);
        }
        eddy_future_release(f);
        eddy__fanout_opened(fo, i, NULL, EDDY_ENOMEM);
    }
}

static eddy_future_t *server_bind(eddy_server_bootstrap_t *b, const char *host, uint16_t port,
                                  const eddy_addr_t *unix_addr)
{
    server_t *s = b->s;
    if (s->boss == NULL || s->child_init == NULL) {
        eddy__log(EDDY_LOG_ERROR, "server bootstrap bind: no %s (call eddy_server_bootstrap_%s)",
                  s->boss == NULL ? "group" : "child_init",
                  s->boss == NULL ? "group" : "child_init");
        return eddy__future_new_done(EDDY_EINVAL, NULL, NULL);
    }
    bool reuseport = s->reuseport && unix_addr == NULL;
    size_t want = reuseport ? eddy_loop_group_size(s->workers) : 1;
    eddy_loop_t *owner = reuseport ? eddy_loop_group_loop(s->workers, 0) : NULL;
    server_retain(s); /* the bind's */
    eddy__fanout_t *fo = eddy__fanout_new(want, reuseport, owner, s, start_listener, release_task);
    if (fo == NULL) {
        return eddy__future_new_done(EDDY_ENOMEM, NULL, NULL);
    }
    /* A name is looked up on the loop the first listener goes to. */
    eddy_loop_t *loop = reuseport ? owner : eddy_loop_group_loop(s->boss, 0);
    return eddy__fanout_start(fo, loop, host, port, unix_addr);
}

/* ---------------------------------------------------------------------------------------
 * Public
 */

eddy_server_bootstrap_t *eddy_server_bootstrap_new(void)
{
    eddy_server_bootstrap_t *b = calloc(1, sizeof(*b));
    server_t *s = calloc(1, sizeof(*s));
    if (b == NULL || s == NULL) {
        free(b);
        free(s);
        return NULL;
    }
    atomic_init(&s->refcnt, 1);
    s->child_hook = (eddy__close_hook_t){child_closed, s};
    eddy_channel_config_init(&s->config);
    eddy_channel_config_init(&s->child_config);
    b->s = s;
    return b;
}

void eddy_server_bootstrap_free(eddy_server_bootstrap_t *b)
{
    if (b == NULL) {
        return;
    }
    eddy_promise_t *p = atomic_exchange(&b->s->shutdown, NULL);
    if (p != NULL) { /* freed before its children were gone */
        eddy_promise_fail(p, EDDY_ECANCELED);
        eddy_future_release(p);
    }
    server_release(b->s);
    free(b);
}

/* ---------------------------------------------------------------------------------------
 * Closing the children gracefully
 */

static void close_child(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    eddy_channel_close(ch, NULL); /* from the tail: each handler's close op takes part */
}

static void close_children_task(void *arg)
{
    server_t *s = arg;
    for (size_t i = 0; i < eddy_loop_group_size(s->workers); i++) {
        eddy_loop_t *loop = eddy_loop_group_loop(s->workers, i);
        if (eddy_loop_in_event_loop(loop)) {
            eddy__loop_each_hooked(loop, &s->child_hook, close_child, NULL);
        }
    }
    server_release(s);
}

eddy_future_t *eddy_server_bootstrap_shutdown(eddy_server_bootstrap_t *b)
{
    server_t *s = b->s;
    eddy_promise_t *p = eddy_promise_new(NULL);
    if (p == NULL) {
        return NULL;
    }
    eddy_promise_t *expected = NULL;
    if (!atomic_compare_exchange_strong(&s->shutdown, &expected, eddy_future_retain(p))) {
        eddy_future_release(p); /* the one s would have held */
        eddy_promise_fail(p, EDDY_EALREADY);
        return p;
    }
    for (size_t i = 0; s->workers != NULL && i < eddy_loop_group_size(s->workers); i++) {
        server_retain(s);
        if (eddy_loop_execute(eddy_loop_group_loop(s->workers, i), close_children_task, s) != 0) {
            server_release(s); /* shutting down already: its loop closes them */
        }
    }
    shutdown_check(s);
    return p;
}

int eddy_server_bootstrap_group(eddy_server_bootstrap_t *b, eddy_loop_group_t *boss,
                                eddy_loop_group_t *workers)
{
    if (boss == NULL) {
        return EDDY_EINVAL;
    }
    b->s->boss = boss;
    b->s->workers = workers != NULL ? workers : boss;
    return 0;
}

int eddy_server_bootstrap_option(eddy_server_bootstrap_t *b, eddy_option_t opt, int64_t value)
{
    return eddy_channel_config_set(&b->s->config, opt, value);
}

int eddy_server_bootstrap_child_option(eddy_server_bootstrap_t *b, eddy_option_t opt, int64_t value)
{
    return eddy_channel_config_set(&b->s->child_config, opt, value);
}

int eddy_server_bootstrap_attr(eddy_server_bootstrap_t *b, const void *key, void *value)
{
    return attrs_put(&b->s->attrs, &b->s->nattrs, key, value);
}

int eddy_server_bootstrap_child_attr(eddy_server_bootstrap_t *b, const void *key, void *value)
{
    return attrs_put(&b->s->child_attrs, &b->s->nchild_attrs, key, value);
}

void eddy_server_bootstrap_init(eddy_server_bootstrap_t *b, eddy_channel_init_cb init, void *arg)
{
    b->s->handler = init;
    b->s->handler_arg = arg;
}

void eddy_server_bootstrap_child_init(eddy_server_bootstrap_t *b, eddy_channel_init_cb init,
                                      void *arg)
{
    b->s->child_init = init;
    b->s->child_arg = arg;
}

int eddy_server_bootstrap_reuseport(eddy_server_bootstrap_t *b, bool on)
{
#ifndef SO_REUSEPORT
    if (on) {
        return EDDY_ENOTSUP;
    }
#endif
    b->s->reuseport = on;
    return 0;
}

void eddy_server_bootstrap_limits(eddy_server_bootstrap_t *b, uint64_t max_connections,
                                  uint64_t accepts_per_second)
{
    b->s->max_connections = max_connections;
    b->s->accepts_per_second = accepts_per_second;
}

void eddy_server_bootstrap_counters(const eddy_server_bootstrap_t *b, eddy_server_counters_t *c)
{
    const server_t *s = b->s;
    c->accepted = atomic_load_explicit(&s->accepted, memory_order_relaxed);
    c->active = atomic_load_explicit(&s->active, memory_order_relaxed);
    c->rejected_max = atomic_load_explicit(&s->rejected_max, memory_order_relaxed);
    c->rejected_rate = atomic_load_explicit(&s->rejected_rate, memory_order_relaxed);
}

eddy_future_t *eddy_server_bootstrap_bind(eddy_server_bootstrap_t *b, const char *host,
                                          uint16_t port)
{
    return server_bind(b, host, port, NULL);
}

eddy_future_t *eddy_server_bootstrap_bind_unix(eddy_server_bootstrap_t *b, const char *path)
{
    eddy_addr_t a;
    if (path == NULL || eddy_addr_unix(&a, path) != 0) {
        return eddy__future_new_done(EDDY_EINVAL, NULL, NULL);
    }
    return server_bind(b, NULL, 0, &a);
}
