/*
 * Channel pools (include/eddy/channel_pool.h; Netty's SimpleChannelPool and FixedChannelPool).
 *
 * Everything the pool knows sits under one lock: a node per channel it made (out or idle), the
 * idle ones as a stack (the top is the most recently released), the waiting acquires as a FIFO
 * list, and the counts the limit reads. Nothing that can call back runs under the lock:
 * completing an acquire's future runs its listeners on this thread, and closing a channel on
 * its loop runs its close listener (which takes the lock) at once, so both wait until the lock
 * is dropped. Timers are the exception: scheduling and cancelling never call back.
 *
 * Lifetimes are references. The pool has the owner's (until close), one per node, waiter and
 * connect under way, and frees itself with the last, completing the close future. A node has
 * the pool's record of it, its channel's close listener, and its idle timer while one is
 * pending. A timer's callback and a cancel race through the timer's state: a cancel that
 * returns 0 means the callback never runs, so the canceller drops the timer's reference;
 * otherwise the callback runs (or ran) and drops it itself.
 */
#include <eddy/channel_pool.h>

#include "pipeline/layer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* bootstrap.c: the group a client bootstrap connects on (no internal header of its own). */
eddy_loop_group_t *eddy__bootstrap_loop_group(eddy_bootstrap_t *b);

typedef enum { NODE_OUT, NODE_IDLE, NODE_GONE } node_state_t;

typedef struct node_s {
    eddy_channel_pool_t *pool; /* one reference */
    eddy_channel_t *ch;        /* retained while recorded (state OUT or IDLE) */
    _Atomic uint32_t refs;     /* the record, the close listener, a pending idle timer */
    node_state_t state;        /* the rest under pool->lock */
    bool open;                 /* counted in pool->open: its close listener has not run */
    size_t index;              /* in pool->nodes, while recorded */
    eddy_timer_t *timer;       /* the idle timer while idle, or NULL */
} node_t;

typedef struct waiter_s {
    eddy_channel_pool_t *pool; /* one reference */
    eddy_promise_t *p;         /* the acquire's (one reference) while queued */
    eddy_timer_t *timer;       /* the acquire timeout, or NULL */
    struct waiter_s *next;
    bool queued;
} waiter_t;

/* A connect under way for the acquire p. */
typedef struct connect_s {
    eddy_channel_pool_t *pool; /* one reference */
    eddy_promise_t *p;         /* one reference */
} connect_t;

struct eddy_channel_pool_s {
    _Atomic uint32_t refs; /* the owner's until close; one per node, waiter and connect */
    pthread_mutex_t lock;  /* guards all below but the constants */
    eddy_bootstrap_t *b;
    eddy_loop_group_t *group; /* for the acquire timeouts */
    char *host;
    uint16_t port;
    eddy_channel_pool_options_t o;
    node_t **nodes; /* every recorded node */
    node_t **idle;  /* the idle ones, oldest first; room for every node */
    size_t n, nidle, cap;
    size_t out;        /* nodes out */
    size_t open;       /* recorded or not, nodes whose channel has not closed yet */
    size_t connecting; /* connects under way */
    waiter_t *head, *tail;
    size_t pending;
    bool closing;
    uint64_t created, closed;
    eddy_promise_t *closed_p; /* close's future, completed when the pool is freed */
    /* What every release answers, made once: a release hands out a reference to one of them
     * instead of allocating a future that says the same. */
    eddy_future_t *released[2]; /* 0, EDDY_EINVAL */
};

static bool active_check(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return eddy_channel_is_active(ch);
}

static void pool_retain(eddy_channel_pool_t *pool)
{
    eddy__refcnt_add(&pool->refs);
}

static void pool_release(eddy_channel_pool_t *pool)
{
    /* acq_rel: the last releaser sees every other thread's writes to the pool. */
    if (!eddy__refcnt_sub(&pool->refs, 1)) {
        return;
    }
    assert(pool->n == 0 && pool->head == NULL && pool->connecting == 0);
    eddy_promise_t *p = pool->closed_p;
    pthread_mutex_destroy(&pool->lock);
    free(pool->nodes);
    free(pool->idle);
    free(pool->host);
    eddy_future_release(pool->released[0]);
    eddy_future_release(pool->released[1]);
    free(pool);
    if (p != NULL) {
        eddy_promise_succeed(p, NULL);
        eddy_future_release(p);
    }
}

/* Drop n references to node; the last frees it. Never under the lock (it may free the pool). */
static void node_put(node_t *node, uint32_t n)
{
    if (n == 0) {
        return;
    }
    /* acq_rel: as pool_release. */
    if (eddy__refcnt_sub(&node->refs, n)) {
        eddy_channel_pool_t *pool = node->pool;
        free(node);
        pool_release(pool);
    }
}

eddy_channel_pool_t *eddy_channel_pool_new(eddy_bootstrap_t *b, const char *host, uint16_t port,
                                           const eddy_channel_pool_options_t *o)
{
    eddy_loop_group_t *group = eddy__bootstrap_loop_group(b);
    if (group == NULL) {
        eddy__log(EDDY_LOG_ERROR, "channel pool: the bootstrap has no group");
        return NULL;
    }
    eddy_channel_pool_t *pool = calloc(1, sizeof(*pool));
    if (pool == NULL || (pool->host = strdup(host != NULL ? host : "")) == NULL ||
        (pool->released[0] = eddy__future_new_done(0, NULL, NULL)) == NULL ||
        (pool->released[1] = eddy__future_new_done(EDDY_EINVAL, NULL, NULL)) == NULL ||
        pthread_mutex_init(&pool->lock, NULL) != 0) {
        if (pool != NULL) {
            free(pool->host);
            eddy_future_release(pool->released[0]);
            eddy_future_release(pool->released[1]);
        }
        free(pool);
        return NULL;
    }
    atomic_init(&pool->refs, 1);
    pool->b = b;
    pool->group = group;
    pool->port = port;
    if (o != NULL) {
        pool->o = *o;
    }
    if (pool->o.acquire_check == NULL) {
        pool->o.acquire_check = active_check;
    }
    if (pool->o.release_check == NULL) {
        pool->o.release_check = active_check;
    }
    return pool;
}

/* ---------------------------------------------------------------------------------------
 * Nodes, under the lock
 */

/* Room to record one more node (and to make it idle): 0 or EDDY_ENOMEM. */
static int reserve(eddy_channel_pool_t *pool)
{
    if (pool->n < pool->cap) {
        return 0;
    }
    size_t cap = pool->cap ? pool->cap * 2 : 8;
    node_t **nodes = realloc(pool->nodes, cap * sizeof(*nodes));
    if (nodes == NULL) {
        return EDDY_ENOMEM;
    }
    pool->nodes = nodes;
    node_t **idle = realloc(pool->idle, cap * sizeof(*idle));
    if (idle == NULL) {
        return EDDY_ENOMEM;
    }
    pool->idle = idle;
    pool->cap = cap;
    return 0;
}

/* Stop node's idle timer: the references to drop after the lock (the timer's when this
 * cancel won against its firing). */
static uint32_t stop_timer(node_t *node)
{
    eddy_timer_t *t = node->timer;
    if (t == NULL) {
        return 0;
    }
    node->timer = NULL;
    uint32_t drops = eddy_timer_cancel(t) == 0 ? 1 : 0;
    eddy_timer_release(t);
    return drops;
}

static void idle_remove(eddy_channel_pool_t *pool, node_t *node)
{
    for (size_t i = pool->nidle; i-- > 0;) {
        if (pool->idle[i] == node) {
            memmove(&pool->idle[i], &pool->idle[i + 1], (pool->nidle - i - 1) * sizeof(node));
            pool->nidle--;
            return;
        }
    }
    assert(!"an idle node is on the idle stack");
}

/* Forget node (out or idle). Returns the node references to drop after the lock, the
 * record's among them; the caller also releases node->ch (the record's), closing it first. */
static uint32_t unlink_node(eddy_channel_pool_t *pool, node_t *node)
{
    assert(node->state != NODE_GONE && pool->nodes[node->index] == node);
    uint32_t drops = 1 + stop_timer(node);
    if (node->state == NODE_IDLE) {
        idle_remove(pool, node);
    } else {
        assert(pool->out > 0);
        pool->out--;
    }
    node_t *last = pool->nodes[--pool->n];
    pool->nodes[node->index] = last;
    last->index = node->index;
    node->state = NODE_GONE;
    return drops;
}

/* After unlink_node, the lock dropped: close the channel (when asked), drop the record. */
static void finish_unlinked(node_t *node, uint32_t drops, bool close)
{
    if (close) {
        eddy_channel_close(node->ch, NULL);
    }
    eddy_channel_release(node->ch);
    node_put(node, drops);
}

static void idle_expired(eddy_timer_t *t, void *arg);

/* Put node on top of the idle stack, its idle timer started. */
static void push_idle(eddy_channel_pool_t *pool, node_t *node)
{
    assert(node->state == NODE_OUT && node->timer == NULL);
    assert(pool->out > 0 && pool->nidle < pool->n); /* the idle stack has room for all */
    node->state = NODE_IDLE;
    pool->out--;
    pool->idle[pool->nidle++] = node;
    if (pool->o.idle_timeout_ms > 0) {
        eddy__refcnt_add(&node->refs);
        node->timer = eddy_loop_schedule(eddy_channel_loop(node->ch), pool->o.idle_timeout_ms,
                                         idle_expired, node);
        if (node->timer == NULL) {
            /* The loop is going away (or no memory): the node stays idle without a deadline,
             * and its channel will close with its loop. */
            bool last = eddy__refcnt_sub(&node->refs, 1);
            assert(!last); /* the record's stays */
            (void)last;
        }
    }
}

/* Pop the top idle node. Out when it passes the acquire check (returned); else unlinked,
 * *bad set, *drops its references to drop (the caller closes it after the lock). */
static node_t *pop_idle(eddy_channel_pool_t *pool, node_t **bad, uint32_t *drops)
{
    assert(pool->nidle > 0);
    node_t *node = pool->idle[--pool->nidle];
    assert(node->state == NODE_IDLE && pool->nodes[node->index] == node);
    pool->idle[pool->nidle] = NULL;
    node->state = NODE_OUT;
    pool->out++;
    *drops = stop_timer(node);
    if (node->open && pool->o.acquire_check(node->ch, pool->o.check_arg)) {
        return node;
    }
    *drops += unlink_node(pool, node);
    *bad = node;
    return NULL;
}

static bool has_room(const eddy_channel_pool_t *pool)
{
    return pool->o.max_connections == 0 || pool->open + pool->connecting < pool->o.max_connections;
}

/* ---------------------------------------------------------------------------------------
 * Handing channels out
 */

static void start_connect(eddy_channel_pool_t *pool, eddy_promise_t *p);
static void serve(eddy_channel_pool_t *pool);

/* Complete p with node's channel; if the acquirer gave up meanwhile (its future cancelled),
 * the channel goes back. After the lock. */
static void give(eddy_channel_pool_t *pool, eddy_promise_t *p, eddy_channel_t *ch)
{
    if (eddy__promise_succeed_channel(p, ch) != 0) {
        eddy_future_release(eddy_channel_pool_release(pool, ch));
    }
}

/* A channel that closed: out of the idle ones, and its slot free. On its loop. */
static void node_closed(eddy_future_t *f, void *arg)
{
    (void)f;
    node_t *node = arg;
    eddy_channel_pool_t *pool = node->pool;
    pool_retain(pool); /* for serve(), should the node's references be the last */
    pthread_mutex_lock(&pool->lock);
    pool->closed++;
    if (node->open) {
        assert(pool->open > 0);
        node->open = false;
        pool->open--;
    }
    /* An idle channel leaves; an out one stays recorded until released. */
    uint32_t drops = node->state == NODE_IDLE ? unlink_node(pool, node) : 0;
    pthread_mutex_unlock(&pool->lock);
    if (drops > 0) {
        finish_unlinked(node, drops, false);
    }
    node_put(node, 1); /* this listener's */
    serve(pool);
    pool_release(pool);
}

/* A connect for the acquire c->p completed. On the channel's loop (or the caller's thread). */
static void connected(eddy_future_t *f, void *arg)
{
    connect_t *c = arg;
    eddy_channel_pool_t *pool = c->pool;
    eddy_promise_t *p = c->p;
    assert(eddy_future_is_done(f) && p != NULL);
    free(c);
    int err = eddy_future_error(f);
    eddy_channel_t *ch = err == 0 ? eddy_future_channel(f) : NULL;
    node_t *node = ch != NULL ? calloc(1, sizeof(*node)) : NULL;
    pthread_mutex_lock(&pool->lock);
    assert(pool->connecting > 0);
    pool->connecting--;
    if (ch != NULL) {
        pool->created++;
        if (pool->closing) {
            err = EDDY_ECLOSED;
        } else if (node == NULL || reserve(pool) != 0) {
            err = EDDY_ENOMEM;
        }
    }
    if (err == 0) {
        pool_retain(pool);
        node->pool = pool;
        node->ch = eddy_channel_retain(ch);
        atomic_init(&node->refs, 2); /* the record's and the close listener's */
        node->state = NODE_OUT;
        node->open = true;
        node->index = pool->n;
        pool->nodes[pool->n++] = node;
        pool->out++;
        pool->open++;
    } else if (ch != NULL) {
        pool->closed++;
    }
    pthread_mutex_unlock(&pool->lock);
    if (err == 0) {
        if (eddy_future_add_listener(eddy_channel_close_future(ch), node_closed, node) != 0) {
            /* Without a close listener the pool would never see it close: let it go. */
            pthread_mutex_lock(&pool->lock);
            uint32_t drops = unlink_node(pool, node);
            node->open = false;
            pool->open--;
            pool->closed++;
            pthread_mutex_unlock(&pool->lock);
            finish_unlinked(node, drops + 1, true); /* the listener's too: never added */
            eddy_promise_fail(p, EDDY_ENOMEM);
        } else {
            give(pool, p, ch);
        }
    } else {
        free(node);
        if (ch != NULL) {
            eddy_channel_close(ch, NULL);
        }
        eddy_promise_fail(p, err);
    }
    eddy_future_release(p);
    eddy_future_release(f);
    serve(pool); /* a failed connect freed its slot for a waiter */
    pool_release(pool);
}

/* Connect for the acquire p (one reference, taken over); pool->connecting counts it already. */
static void start_connect(eddy_channel_pool_t *pool, eddy_promise_t *p)
{
    connect_t *c = malloc(sizeof(*c));
    eddy_future_t *f = c != NULL ? eddy_bootstrap_connect(pool->b, pool->host, pool->port) : NULL;
    if (f == NULL) {
        free(c);
        pthread_mutex_lock(&pool->lock);
        pool->connecting--;
        pthread_mutex_unlock(&pool->lock);
        eddy_promise_fail(p, EDDY_ENOMEM);
        eddy_future_release(p);
        return;
    }
    pool_retain(pool);
    c->pool = pool;
    c->p = p;
    if (eddy_future_add_listener(f, connected, c) != 0) {
        /* Without memory for the listener: give up on the connect (its future, cancelled,
         * fails; one that completed already is taken as it is). */
        eddy_future_cancel(f);
        connected(f, c);
    }
}

/* Serve waiters while there are channels or slots for them. Not under the lock. */
static void serve(eddy_channel_pool_t *pool)
{
    for (;;) {
        node_t *node = NULL, *bad = NULL;
        uint32_t drops = 0;
        pthread_mutex_lock(&pool->lock);
        if (pool->closing || pool->head == NULL) {
            pthread_mutex_unlock(&pool->lock);
            return;
        }
        if (pool->nidle > 0) {
            node = pop_idle(pool, &bad, &drops);
        } else if (has_room(pool)) {
            pool->connecting++;
        } else {
            pthread_mutex_unlock(&pool->lock);
            return;
        }
        if (bad != NULL) {
            pthread_mutex_unlock(&pool->lock);
            finish_unlinked(bad, drops, true);
            continue;
        }
        waiter_t *w = pool->head;
        assert(w->queued && w->p != NULL && pool->pending > 0);
        pool->head = w->next;
        if (pool->head == NULL) {
            pool->tail = NULL;
        }
        pool->pending--;
        w->queued = false;
        eddy_promise_t *p = w->p;
        w->p = NULL;
        /* The timeout's callback frees w unless this cancel wins (header comment). */
        bool mine = w->timer == NULL || eddy_timer_cancel(w->timer) == 0;
        eddy_channel_t *ch = node != NULL ? node->ch : NULL;
        pthread_mutex_unlock(&pool->lock);
        node_put(node, drops);
        if (mine) {
            eddy_timer_release(w->timer);
            free(w);
            pool_release(pool); /* the waiter's; the caller holds another */
        }
        if (ch != NULL) {
            give(pool, p, ch);
            eddy_future_release(p);
        } else {
            start_connect(pool, p);
        }
    }
}

/* A waiting acquire's time is up. On a loop of the group. */
static void waiter_expired(eddy_timer_t *t, void *arg)
{
    (void)t;
    waiter_t *w = arg;
    eddy_channel_pool_t *pool = w->pool;
    eddy_promise_t *p = NULL;
    pthread_mutex_lock(&pool->lock);
    if (w->queued) {
        waiter_t **link = &pool->head;
        waiter_t *prev = NULL;
        while (*link != w) {
            prev = *link;
            link = &(*link)->next;
            assert(*link != NULL); /* a queued waiter is on the queue */
        }
        *link = w->next;
        if (pool->tail == w) {
            pool->tail = prev;
        }
        pool->pending--;
        w->queued = false;
        p = w->p;
        w->p = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    if (p != NULL) {
        eddy_promise_fail(p, EDDY_ETIMEDOUT);
        eddy_future_release(p);
    }
    eddy_timer_release(w->timer);
    free(w);
    pool_release(pool);
}

/* An idle channel's time is up: close it. On its loop. */
static void idle_expired(eddy_timer_t *t, void *arg)
{
    node_t *node = arg;
    eddy_channel_pool_t *pool = node->pool;
    uint32_t drops = 0;
    pthread_mutex_lock(&pool->lock);
    if (node->state == NODE_IDLE && node->timer == t) {
        node->timer = NULL;
        eddy_timer_release(t);
        drops = unlink_node(pool, node);
    }
    pthread_mutex_unlock(&pool->lock);
    if (drops > 0) {
        eddy__log(EDDY_LOG_DEBUG, "channel pool: channel %llu idle too long: closed",
                  (unsigned long long)eddy_channel_id(node->ch));
        finish_unlinked(node, drops, true);
    }
    node_put(node, 1); /* the timer's */
}

static void put_channel(void *ch)
{
    eddy_channel_release(ch);
}

/* The answer of an acquire or release known at once: a future born complete with ch (a
 * reference of the future's) or err. NULL without memory. */
static eddy_future_t *answer(eddy_channel_t *ch, int err)
{
    if (ch == NULL) {
        return eddy__future_new_done(err, NULL, NULL);
    }
    eddy_future_t *f = eddy__future_new_done(0, eddy_channel_retain(ch), put_channel);
    if (f == NULL) {
        eddy_channel_release(ch);
    }
    return f;
}

/* Put w (holding the acquire p) in line, its timeout started. Under the lock; 0, or
 * EDDY_ESHUTDOWN when the timeout cannot be scheduled (w is not queued then). */
static int enqueue(eddy_channel_pool_t *pool, waiter_t *w, eddy_promise_t *p)
{
    *w = (waiter_t){.pool = pool, .p = p, .queued = true};
    if (pool->o.acquire_timeout_ms > 0) {
        w->timer = eddy_loop_schedule(eddy_loop_group_next(pool->group), pool->o.acquire_timeout_ms,
                                      waiter_expired, w);
        if (w->timer == NULL) {
            return EDDY_ESHUTDOWN;
        }
    }
    pool_retain(pool);
    if (pool->tail != NULL) {
        pool->tail->next = w;
    } else {
        pool->head = w;
    }
    pool->tail = w;
    pool->pending++;
    return 0;
}

/*
 * The hot path is an acquire that finds an idle channel: one lock, and one allocation, the
 * future, made after the lock is dropped and born complete (eddy__future_new_done: no
 * stripe lock, as nobody can wait on it yet). A waiter and a pending promise are made only
 * when the acquire has to wait or connect.
 */
eddy_future_t *eddy_channel_pool_acquire(eddy_channel_pool_t *pool)
{
    waiter_t *w = NULL;
    eddy_promise_t *p = NULL; /* the pending future of a wait or a connect */
    for (;;) {
        node_t *node = NULL, *bad = NULL;
        uint32_t drops = 0;
        int err = 0;
        bool connect = false, need_p = false, need_w = false;
        pthread_mutex_lock(&pool->lock);
        if (pool->closing) {
            err = EDDY_ECLOSED;
        } else if (pool->nidle > 0) {
            node = pop_idle(pool, &bad, &drops);
        } else if (has_room(pool)) {
            need_p = p == NULL;
            if (!need_p) {
                pool->connecting++;
                connect = true;
            }
        } else if (pool->o.max_pending_acquires > 0 &&
                   pool->pending >= pool->o.max_pending_acquires) {
            err = EDDY_EBUSY;
        } else if (p == NULL || w == NULL) {
            need_p = p == NULL;
            need_w = w == NULL;
        } else {
            err = enqueue(pool, w, eddy_future_retain(p));
            if (err == 0) {
                pthread_mutex_unlock(&pool->lock);
                return p;
            }
            eddy_future_release(p); /* the waiter's, never queued */
        }
        eddy_channel_t *ch = node != NULL ? node->ch : NULL;
        pthread_mutex_unlock(&pool->lock);
        if (bad != NULL) {
            finish_unlinked(bad, drops, true);
            continue;
        }
        if (need_p || need_w) {
            /* Allocate what a wait or a connect needs without the lock, then look again: a
             * channel may have come back meanwhile. */
            p = need_p ? eddy_promise_new(NULL) : p;
            w = need_w ? malloc(sizeof(*w)) : w;
            if (p == NULL || (need_w && w == NULL)) {
                free(w);
                return p != NULL && eddy_promise_fail(p, EDDY_ENOMEM) == 0 ? p : NULL;
            }
            continue;
        }
        free(w);
        node_put(node, drops);
        if (connect) {
            start_connect(pool, eddy_future_retain(p));
            return p;
        }
        if (p != NULL) { /* made for a wait or a connect that was not needed after all */
            if (ch != NULL) {
                give(pool, p, ch);
            } else {
                eddy_promise_fail(p, err);
            }
            return p;
        }
        eddy_future_t *f = answer(ch, err);
        if (f == NULL && ch != NULL) {
            eddy_future_release(eddy_channel_pool_release(pool, ch)); /* no memory: back */
        }
        return f;
    }
}

eddy_future_t *eddy_channel_pool_release(eddy_channel_pool_t *pool, eddy_channel_t *ch)
{
    pthread_mutex_lock(&pool->lock);
    node_t *node = NULL;
    for (size_t i = 0; i < pool->n; i++) {
        if (pool->nodes[i]->ch == ch) {
            node = pool->nodes[i];
            break;
        }
    }
    int err = 0;
    uint32_t drops = 0;
    if (node == NULL || node->state != NODE_OUT) {
        err = EDDY_EINVAL;
    } else if (pool->closing || !node->open || !pool->o.release_check(ch, pool->o.check_arg) ||
               (pool->head == NULL && pool->o.max_idle > 0 && pool->nidle >= pool->o.max_idle)) {
        drops = unlink_node(pool, node);
    } else {
        push_idle(pool, node);
    }
    /* Only waiters there now need serving: an acquire after this lock finds the channel
     * itself. A reference keeps the pool for what follows the lock, should the node's
     * references be the last; the node's own keeps it alive until here. */
    bool waiters = pool->head != NULL && !pool->closing;
    bool hold = drops > 0 || waiters;
    if (hold) {
        pool_retain(pool);
    }
    eddy_future_t *f = eddy_future_retain(pool->released[err != 0]);
    pthread_mutex_unlock(&pool->lock);
    if (drops > 0) {
        finish_unlinked(node, drops, true);
    }
    if (waiters) {
        serve(pool);
    }
    if (hold) {
        pool_release(pool);
    }
    return f;
}

void eddy_channel_pool_counters(eddy_channel_pool_t *pool, eddy_channel_pool_counters_t *c)
{
    pthread_mutex_lock(&pool->lock);
    c->idle = pool->nidle;
    c->acquired = pool->out;
    c->pending = pool->pending;
    c->created = pool->created;
    c->closed = pool->closed;
    pthread_mutex_unlock(&pool->lock);
}

eddy_future_t *eddy_channel_pool_close(eddy_channel_pool_t *pool)
{
    eddy_promise_t *done = eddy_promise_new(NULL);
    pthread_mutex_lock(&pool->lock);
    assert(!pool->closing);
    pool->closing = true;
    pool->closed_p = eddy_future_retain(done); /* NULL without memory */
    /* Take the waiters whose timeout this cancel stops; those whose timeout is firing stay
     * queued for its callback, which fails them (with EDDY_ETIMEDOUT: it was their time). */
    waiter_t *mine = NULL, **link = &pool->head;
    pool->tail = NULL;
    while (*link != NULL) {
        waiter_t *w = *link;
        if (w->timer == NULL || eddy_timer_cancel(w->timer) == 0) {
            *link = w->next;
            w->next = mine;
            mine = w;
            w->queued = false;
            pool->pending--;
        } else {
            pool->tail = w;
            link = &w->next;
        }
    }
    pthread_mutex_unlock(&pool->lock);
    /* mine is newest first: fail them oldest first, as they came. */
    waiter_t *fifo = NULL;
    while (mine != NULL) {
        waiter_t *w = mine;
        mine = w->next;
        w->next = fifo;
        fifo = w;
    }
    for (waiter_t *w = fifo, *next; w != NULL; w = next) {
        next = w->next;
        eddy_promise_fail(w->p, EDDY_ECLOSED);
        eddy_future_release(w->p);
        eddy_timer_release(w->timer);
        free(w);
        pool_release(pool); /* the waiter's; the owner's is still held */
    }
    /* The idle channels, one at a time: each close may run the channel's close listener here,
     * which takes the lock. */
    for (;;) {
        pthread_mutex_lock(&pool->lock);
        if (pool->nidle == 0) {
            pthread_mutex_unlock(&pool->lock);
            break;
        }
        node_t *node = pool->idle[pool->nidle - 1];
        uint32_t drops = unlink_node(pool, node);
        pthread_mutex_unlock(&pool->lock);
        finish_unlinked(node, drops, true);
    }
    pool_release(pool); /* the owner's */
    return done;
}
