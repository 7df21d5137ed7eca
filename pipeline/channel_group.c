/*
 * Channel groups (include/eddy/channel_group.h; Netty's DefaultChannelGroup).
 *
 * Members live in an array under the group's lock, each with a node that its channel's
 * close-future listener carries: the listener removes the member when the channel closes and
 * frees the node. A node outlives an explicit remove until that listener ran (a future's
 * listeners cannot be taken back), so nodes hold a reference to the group, and the group's
 * memory goes with the last of them. Operations take a snapshot of the members under the lock
 * and work on it outside, so a write never holds the lock across channel calls.
 */
#include "pipeline/internal.h"

#include <eddy/channel_group.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct member_s {
    eddy_channel_group_t *g; /* one reference */
    eddy_channel_t *ch;      /* retained while a member */
    size_t index;            /* in g->members, while a member */
    bool member;
} member_t;

struct eddy_channel_group_s {
    _Atomic uint32_t refs; /* the owner's, and one per node */
    pthread_mutex_t lock;  /* guards members, n, cap, policy */
    member_t **members;
    size_t n, cap;
    eddy_group_policy_t policy;
    _Atomic uint64_t written, skipped, closed;
    char name[32];
};

static void group_release(eddy_channel_group_t *g)
{
    /* acq_rel: the last releaser sees every other thread's writes to the group. */
    if (eddy__refcnt_sub(&g->refs, 1)) {
        assert(g->n == 0);
        pthread_mutex_destroy(&g->lock);
        free(g->members);
        free(g);
    }
}

eddy_channel_group_t *eddy_channel_group_new(const char *name)
{
    eddy_channel_group_t *g = calloc(1, sizeof(*g));
    if (g == NULL || pthread_mutex_init(&g->lock, NULL) != 0) {
        free(g);
        return NULL;
    }
    atomic_init(&g->refs, 1);
    snprintf(g->name, sizeof(g->name), "%s", name != NULL ? name : "group");
    return g;
}

/* Take m out of the array (the lock held); its channel reference is the caller's now. */
static eddy_channel_t *unlink_member(eddy_channel_group_t *g, member_t *m)
{
    assert(m->member && g->members[m->index] == m);
    member_t *last = g->members[--g->n];
    g->members[m->index] = last;
    last->index = m->index;
    m->member = false;
    eddy_channel_t *ch = m->ch;
    m->ch = NULL;
    return ch;
}

void eddy_channel_group_free(eddy_channel_group_t *g)
{
    if (g == NULL) {
        return;
    }
    pthread_mutex_lock(&g->lock);
    size_t n = g->n;
    eddy_channel_t **gone = malloc((n > 0 ? n : 1) * sizeof(*gone));
    for (size_t i = 0; gone != NULL && i < n; i++) {
        gone[i] = unlink_member(g, g->members[g->n - 1]);
    }
    if (gone == NULL) {
        /* Without memory for the list: release them one at a time under the lock (a release
         * never calls back into the group). */
        while (g->n > 0) {
            eddy_channel_release(unlink_member(g, g->members[g->n - 1]));
        }
        n = 0;
    }
    pthread_mutex_unlock(&g->lock);
    for (size_t i = 0; i < n; i++) {
        eddy_channel_release(gone[i]);
    }
    free(gone);
    group_release(g); /* the owner's; the nodes' references go as their channels close */
}

void eddy_channel_group_set_policy(eddy_channel_group_t *g, eddy_group_policy_t p)
{
    pthread_mutex_lock(&g->lock);
    g->policy = p;
    pthread_mutex_unlock(&g->lock);
}

/* A member's channel closed: forget it, and the node. On the channel's loop. */
static void member_closed(eddy_future_t *f, void *arg)
{
    (void)f;
    member_t *m = arg;
    eddy_channel_group_t *g = m->g;
    assert(eddy_future_is_done(f));
    eddy_channel_t *ch = NULL;
    pthread_mutex_lock(&g->lock);
    if (m->member) {
        ch = unlink_member(g, m);
    }
    pthread_mutex_unlock(&g->lock);
    eddy_channel_release(ch); /* NULL ignored */
    free(m);
    group_release(g);
}

static member_t *find(eddy_channel_group_t *g, const eddy_channel_t *ch)
{
    for (size_t i = 0; i < g->n; i++) {
        if (g->members[i]->ch == ch) {
            return g->members[i];
        }
    }
    return NULL;
}

int eddy_channel_group_add(eddy_channel_group_t *g, eddy_channel_t *ch)
{
    if (!eddy_channel_is_open(ch)) {
        return EDDY_ECLOSED;
    }
    eddy_future_t *cf = eddy_channel_close_future(ch);
    member_t *m = calloc(1, sizeof(*m));
    if (cf == NULL || m == NULL) {
        free(m);
        return EDDY_ENOMEM;
    }
    pthread_mutex_lock(&g->lock);
    if (find(g, ch) != NULL) {
        pthread_mutex_unlock(&g->lock);
        free(m);
        return EDDY_EEXIST;
    }
    if (g->n == g->cap) {
        member_t **grown = eddy__array_grow(g->members, &g->cap, sizeof(*grown), 16);
        if (grown == NULL) {
            pthread_mutex_unlock(&g->lock);
            free(m);
            return EDDY_ENOMEM;
        }
        g->members = grown;
    }
    m->g = g;
    m->ch = eddy_channel_retain(ch);
    m->index = g->n;
    m->member = true;
    g->members[g->n++] = m;
    eddy__refcnt_add(&g->refs);
    pthread_mutex_unlock(&g->lock);
    /* After the lock: a channel closed already runs the listener at once, which takes it. */
    if (eddy_future_add_listener(cf, member_closed, m) != 0) {
        /* Without memory for the listener: nothing would forget it at close, so it is not a
         * member after all; the node goes as the listener would have let it go. */
        member_closed(cf, m);
        return EDDY_ENOMEM;
    }
    return 0;
}

/* Remove ch; when it was a member and cut is set, cut its output first, under the lock, so
 * that a loop whose broadcast no longer finds ch sees the cut, and a channel another thread
 * removed first is neither cut nor closed here. */
static bool remove_member(eddy_channel_group_t *g, eddy_channel_t *ch, bool cut)
{
    pthread_mutex_lock(&g->lock);
    member_t *m = find(g, ch);
    if (m != NULL && cut) {
        eddy__channel_cut_output(ch);
    }
    eddy_channel_t *gone = m != NULL ? unlink_member(g, m) : NULL;
    pthread_mutex_unlock(&g->lock);
    eddy_channel_release(gone); /* the node waits for the close listener */
    return gone != NULL;
}

bool eddy_channel_group_remove(eddy_channel_group_t *g, eddy_channel_t *ch)
{
    return remove_member(g, ch, false);
}

bool eddy_channel_group_contains(eddy_channel_group_t *g, const eddy_channel_t *ch)
{
    pthread_mutex_lock(&g->lock);
    bool in = find(g, ch) != NULL;
    pthread_mutex_unlock(&g->lock);
    return in;
}

size_t eddy_channel_group_size(eddy_channel_group_t *g)
{
    pthread_mutex_lock(&g->lock);
    size_t n = g->n;
    pthread_mutex_unlock(&g->lock);
    return n;
}

void eddy_channel_group_counters(eddy_channel_group_t *g, eddy_group_counters_t *c)
{
    c->members = eddy_channel_group_size(g);
    c->written = atomic_load_explicit(&g->written, memory_order_relaxed);
    c->skipped = atomic_load_explicit(&g->skipped, memory_order_relaxed);
    c->closed = atomic_load_explicit(&g->closed, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------------------
 * Operations on every member
 */

/* The members at this moment (retained), and the policy: the caller releases them. */
typedef struct snapshot_s {
    eddy_channel_t **ch;
    size_t n;
    eddy_group_policy_t policy;
} snapshot_t;

/* 0, or EDDY_ENOMEM with no members (no memory for the list). */
static int snapshot_take(eddy_channel_group_t *g, snapshot_t *s)
{
    pthread_mutex_lock(&g->lock);
    s->n = g->n;
    s->policy = g->policy;
    s->ch = malloc((s->n > 0 ? s->n : 1) * sizeof(*s->ch));
    for (size_t i = 0; s->ch != NULL && i < s->n; i++) {
        s->ch[i] = eddy_channel_retain(g->members[i]->ch);
    }
    pthread_mutex_unlock(&g->lock);
    if (s->ch == NULL) {
        s->n = 0;
        return EDDY_ENOMEM;
    }
    return 0;
}

static void snapshot_drop(snapshot_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        eddy_channel_release(s->ch[i]);
    }
    free(s->ch);
}

/* One future for many operations: it completes when the last one did, failed with the first
 * error. The issuing thread holds one count until it has issued them all. */
typedef struct gather_s {
    eddy_promise_t *p; /* the caller's future, and our reference to it */
    _Atomic size_t left;
    _Atomic int err;
} gather_t;

static gather_t *gather_new(void)
{
    gather_t *a = malloc(sizeof(*a));
    eddy_promise_t *p = a != NULL ? eddy_promise_new(NULL) : NULL;
    if (p == NULL) {
        free(a);
        return NULL;
    }
    a->p = p;
    atomic_init(&a->left, 1);
    atomic_init(&a->err, 0);
    return a;
}

/* Remember err when it is the first error. */
static void gather_error(gather_t *a, int err)
{
    int none = 0;
    atomic_compare_exchange_strong_explicit(&a->err, &none, err, memory_order_relaxed,
                                            memory_order_relaxed);
}

/* One operation of a ended with err (0: success). */
static void gather_done(gather_t *a, int err)
{
    if (err != 0) {
        gather_error(a, err);
    }
    size_t left = atomic_fetch_sub_explicit(&a->left, 1, memory_order_acq_rel);
    assert(left > 0); /* one count per operation, and the issuer's */
    if (left == 1) {
        int first = atomic_load_explicit(&a->err, memory_order_relaxed);
        eddy__promise_done(a->p, first);
        eddy_future_release(a->p);
        free(a);
    }
}

static void gather_listener(eddy_future_t *f, void *arg)
{
    gather_done(arg, eddy_future_error(f));
}

/* A promise on ch's loop counted in a, or NULL (without memory: counted as failed). */
static eddy_promise_t *gather_promise(gather_t *a, eddy_channel_t *ch)
{
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    if (p == NULL) {
        return NULL;
    }
    atomic_fetch_add_explicit(&a->left, 1, memory_order_relaxed);
    if (eddy_future_add_listener(p, gather_listener, a) != 0) {
        atomic_fetch_sub_explicit(&a->left, 1, memory_order_relaxed);
        eddy_future_release(p);
        return NULL;
    }
    return p;
}

/* What member ch gets of msg: a retained duplicate of a buffer (its own indexes over the
 * same bytes), a reference to anything else. NULL without memory. */
static eddy_msg_t *share(eddy_msg_t *msg)
{
    eddy_buf_t *b = eddy_buf_of(msg);
    if (b != NULL) {
        eddy_buf_t *dup = eddy_buf_retained_duplicate(b);
        return dup != NULL ? eddy_buf_msg(dup) : NULL;
    }
    return eddy_msg_retain(msg);
}

/* Whether the policy keeps ch out of a write (closing it under EDDY_GROUP_CLOSE_UNWRITABLE). */
static bool held_back(eddy_channel_group_t *g, eddy_group_policy_t policy, eddy_channel_t *ch)
{
    if (policy == EDDY_GROUP_WRITE_ANYWAY || eddy_channel_is_writable(ch)) {
        return false;
    }
    if (policy == EDDY_GROUP_CLOSE_UNWRITABLE) {
        /* Its stream now has a hole: nothing may follow it, not even what its own loop
         * writes (a pong) before the close has run there, so its output is cut as it leaves.
         * Out of the group at once, so that the writes issued before its close has run on its
         * loop do not close (and count) it again. */
        if (remove_member(g, ch, true)) {
            eddy__log(EDDY_LOG_DEBUG, "%s: channel %llu does not keep up: closed", g->name,
                      (unsigned long long)eddy_channel_id(ch));
            eddy_channel_close(ch, NULL);
            atomic_fetch_add_explicit(&g->closed, 1, memory_order_relaxed);
        }
    } else {
        atomic_fetch_add_explicit(&g->skipped, 1, memory_order_relaxed);
    }
    return true;
}

typedef enum { OP_WRITE, OP_FLUSH, OP_CLOSE } op_t;

static const char *const op_names[] = {"write", "flush", "close"};

/* A member's share of a fire-and-forget write could not be made (no memory): its pipeline
 * raises the error, as for any write with no promise that fails, and a byte stream closes
 * after what was queued before it, since it cannot go on after the hole. On ch's loop. */
static void write_lost(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    eddy__channel_hold(ch);
    eddy_ctx_fail_write(&ch->pipeline.end, NULL, NULL, EDDY_ENOMEM);
    eddy__channel_unhold(ch);
}

/* Write ch its share of msg (borrowed), completing p (NULL: nobody waits). */
static void write_member(eddy_channel_group_t *g, eddy_channel_t *ch, eddy_msg_t *msg, bool flush,
                         eddy_promise_t *p)
{
    eddy_msg_t *m = share(msg);
    if (m == NULL && p != NULL) {
        eddy_promise_fail(p, EDDY_ENOMEM);
    } else if (m == NULL) {
        if (ch->ops->write_dropped == NULL) { /* a byte stream: its loop's writes meanwhile */
            eddy__channel_cut_output(ch);     /* must not follow the hole */
        }
        eddy__channel_on_loop(ch, write_lost, NULL);
    } else if (flush) {
        eddy_channel_write_and_flush(ch, m, p);
    } else {
        eddy_channel_write(ch, m, p);
    }
    atomic_fetch_add_explicit(&g->written, 1, memory_order_relaxed);
}

/* Do op on every member matcher accepts, each member's outcome counted in a, or, a NULL,
 * with no promise at all (fire-and-forget). Takes msg. 0, or EDDY_ENOMEM when the members
 * could not be listed: then nothing was done. */
static int for_members(eddy_channel_group_t *g, op_t op, eddy_msg_t *msg, bool flush,
                       eddy_channel_matcher_cb matcher, void *arg, gather_t *a)
{
    snapshot_t s;
    int err = snapshot_take(g, &s);
    for (size_t i = 0; i < s.n; i++) {
        eddy_channel_t *ch = s.ch[i];
        if (matcher != NULL && !matcher(ch, arg)) {
            continue;
        }
        if (op == OP_FLUSH) {
            eddy_channel_flush(ch);
            continue;
        }
        if (op == OP_WRITE && held_back(g, s.policy, ch)) {
            continue;
        }
        eddy_promise_t *p = NULL;
        if (a != NULL && (p = gather_promise(a, ch)) == NULL) {
            gather_error(a, EDDY_ENOMEM); /* this member is left out */
            continue;
        }
        if (op == OP_CLOSE) {
            eddy_channel_close(ch, p);
        } else {
            write_member(g, ch, msg, flush, p);
        }
        if (p != NULL) {
            eddy_future_release(p);
        }
    }
    snapshot_drop(&s);
    if (msg != NULL) {
        eddy_msg_release(msg);
    }
    return err;
}

/* op on the members, with one future for all of them. */
static eddy_future_t *gathered(eddy_channel_group_t *g, op_t op, eddy_msg_t *msg, bool flush,
                               eddy_channel_matcher_cb matcher, void *arg)
{
    gather_t *a = gather_new();
    if (a == NULL) {
        if (msg != NULL) {
            eddy_msg_release(msg);
        }
        return NULL;
    }
    eddy_future_t *f = eddy_future_retain(a->p);
    gather_done(a, for_members(g, op, msg, flush, matcher, arg, a)); /* the issuer's count */
    return f;
}

/* op on the members, with no future: each member's outcome is its own pipeline's. */
static void unwatched(eddy_channel_group_t *g, op_t op, eddy_msg_t *msg, bool flush,
                      eddy_channel_matcher_cb matcher, void *arg)
{
    if (for_members(g, op, msg, flush, matcher, arg, NULL) != 0) {
        /* Nobody to tell but the log, as for a task that cannot be queued (channel.c). */
        eddy__log(EDDY_LOG_ERROR, "%s: out of memory listing the members; the %s reached none",
                  g->name, op_names[op]);
    }
}

eddy_future_t *eddy_channel_group_write(eddy_channel_group_t *g, eddy_msg_t *msg,
                                        eddy_channel_matcher_cb matcher, void *arg, bool flush)
{
    return gathered(g, OP_WRITE, msg, flush, matcher, arg);
}

eddy_future_t *eddy_channel_group_flush(eddy_channel_group_t *g, eddy_channel_matcher_cb matcher,
                                        void *arg)
{
    return gathered(g, OP_FLUSH, NULL, false, matcher, arg);
}

eddy_future_t *eddy_channel_group_close(eddy_channel_group_t *g, eddy_channel_matcher_cb matcher,
                                        void *arg)
{
    return gathered(g, OP_CLOSE, NULL, false, matcher, arg);
}

void eddy_channel_group_write_void(eddy_channel_group_t *g, eddy_msg_t *msg,
                                   eddy_channel_matcher_cb matcher, void *arg, bool flush)
{
    unwatched(g, OP_WRITE, msg, flush, matcher, arg);
}

void eddy_channel_group_flush_void(eddy_channel_group_t *g, eddy_channel_matcher_cb matcher,
                                   void *arg)
{
    unwatched(g, OP_FLUSH, NULL, false, matcher, arg);
}

void eddy_channel_group_close_void(eddy_channel_group_t *g, eddy_channel_matcher_cb matcher,
                                   void *arg)
{
    unwatched(g, OP_CLOSE, NULL, false, matcher, arg);
}
