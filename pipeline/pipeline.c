/*
 * The pipeline: a doubly linked list of handler contexts between a head and a tail (Netty's
 * DefaultChannelPipeline). Inbound events walk from a context to the next one whose mask
 * has the event; outbound operations walk the other way to the head, which hands them to the
 * channel. Removed contexts keep their links, so an event walking through one goes on, and
 * are freed only when no event can be inside them (the outermost entry into the pipeline
 * left, and no offloaded event is in flight).
 *
 * The head and the tail are one context, `end`, and the list a ring through it: the head
 * implements only outbound operations and the tail only inbound events, so one mask serves
 * both, an inbound walk stops there as at the tail and an outbound walk as at the head. One
 * context less per channel (72 B).
 */
#include "pipeline/internal.h"

#include <eddy/carrier.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static_assert(sizeof(eddy__ctx_call_fn) == sizeof(void *), "a call travels as the event's data");

void eddy_free_state(void *state)
{
    free(state);
}

static unsigned mask_of(const eddy_handler_ops_t *o)
{
    unsigned m = 0;
    m |= o->channel_registered ? EDDY__EV_REGISTERED : 0;
    m |= o->channel_unregistered ? EDDY__EV_UNREGISTERED : 0;
    m |= o->channel_active ? EDDY__EV_ACTIVE : 0;
    m |= o->channel_inactive ? EDDY__EV_INACTIVE : 0;
    m |= o->channel_read ? EDDY__EV_READ : 0;
    m |= o->channel_read_complete ? EDDY__EV_READ_COMPLETE : 0;
    m |= o->user_event_triggered ? EDDY__EV_USER_EVENT : 0;
    m |= o->channel_writability_changed ? EDDY__EV_WRITABILITY : 0;
    m |= o->exception_caught ? EDDY__EV_EXCEPTION : 0;
    m |= o->bind ? EDDY__EV_BIND : 0;
    m |= o->connect ? EDDY__EV_CONNECT : 0;
    m |= o->disconnect ? EDDY__EV_DISCONNECT : 0;
    m |= o->close ? EDDY__EV_CLOSE : 0;
    m |= o->deregister ? EDDY__EV_DEREGISTER : 0;
    m |= o->read ? EDDY__EV_OP_READ : 0;
    m |= o->write ? EDDY__EV_WRITE : 0;
    m |= o->flush ? EDDY__EV_FLUSH : 0;
    return m;
}

/* Every inbound event: what an offloaded context's mask holds. */
#define INBOUND_EVENTS                                                                        \
    (EDDY__EV_REGISTERED | EDDY__EV_UNREGISTERED | EDDY__EV_ACTIVE | EDDY__EV_INACTIVE |      \
     EDDY__EV_READ | EDDY__EV_READ_COMPLETE | EDDY__EV_USER_EVENT | EDDY__EV_WRITABILITY |    \
     EDDY__EV_EXCEPTION)

/* ---------------------------------------------------------------------------------------
 * Head and tail
 */

static void head_bind(eddy_ctx_t *ctx, const eddy_addr_t *local, eddy_promise_t *p)
{
    eddy_channel_t *ch = eddy__pipeline_channel(ctx->pipeline);
    if (ch->ops->bind == NULL) {
        eddy__promise_done(p, EDDY_ENOTSUP);
        return;
    }
    ch->ops->bind(ch, local, p);
}

static void head_connect(eddy_ctx_t *ctx, const eddy_addr_t *remote, const eddy_addr_t *local,
                         eddy_promise_t *p)
{
    eddy_channel_t *ch = eddy__pipeline_channel(ctx->pipeline);
    if (ch->ops->connect == NULL) {
        eddy__promise_done(p, EDDY_ENOTSUP);
        return;
    }
    ch->ops->connect(ch, remote, local, p);
}

static void head_close(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    eddy_channel_t *ch = eddy__pipeline_channel(ctx->pipeline);
    if ((ch->flags & EDDY__CH_CLOSE_GRACEFUL) && ch->ops->close_after_flush != NULL &&
        !(ch->flags & EDDY__CH_CLOSED)) {
        ch->ops->close_after_flush(ch, p);
        return;
    }
    eddy__channel_do_close(ch, 0, p);
}

static void head_read(eddy_ctx_t *ctx)
{
    eddy_channel_t *ch = eddy__pipeline_channel(ctx->pipeline);
    if (ch->ops->begin_read != NULL && !(ch->flags & EDDY__CH_CLOSED)) {
        ch->ops->begin_read(ch);
    }
}

static void head_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy__outbound_add(eddy__pipeline_channel(ctx->pipeline), msg, p);
}

static void head_flush(eddy_ctx_t *ctx)
{
    eddy_channel_t *ch = eddy__pipeline_channel(ctx->pipeline);
    eddy__outbound_mark_flushed(ch);
    if (!(ch->flags & EDDY__CH_CLOSED)) {
        ch->ops->flush(ch);
    }
}

static void tail_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_channel_t *ch = eddy__pipeline_channel(ctx->pipeline);
    if (ch->flags & EDDY__CH_EMBEDDED) {
        /* The embedded channel keeps what comes out for eddy_embedded_read_inbound(). */
        eddy__embedded_inbound(ch, msg);
        return;
    }
    eddy__log(EDDY_LOG_DEBUG, "channel %llu: a message (type %u) reached the tail unhandled; "
                              "released",
              (unsigned long long)ch->id, msg->type);
    eddy_msg_release(msg);
}

static void tail_user_event(eddy_ctx_t *ctx, int event, void *data)
{
    (void)data;
    eddy_channel_t *ch = eddy__pipeline_channel(ctx->pipeline);
    if (ch->flags & EDDY__CH_EMBEDDED) {
        eddy__embedded_t *e = ch->embedded;
        if (e->nevents < sizeof(e->events) / sizeof(e->events[0])) {
            e->events[e->nevents++] = event;
        }
    }
}

static void tail_exception(eddy_ctx_t *ctx, int err)
{
    eddy_channel_t *ch = eddy__pipeline_channel(ctx->pipeline);
    if (ch->flags & EDDY__CH_EMBEDDED) {
        ch->embedded->last_error = err;
        return;
    }
    eddy__pipeline_tail_exception(ch, err); /* fault.c: logged once per channel */
}

/* The end of the line for events nobody consumed: nothing to do. */
static void tail_nothing(eddy_ctx_t *ctx)
{
    (void)ctx;
}

/* The head's outbound operations and the tail's inbound events. */
static const eddy_handler_ops_t end_ops = {
    .name = "end",
    .channel_registered = tail_nothing,
    .channel_unregistered = tail_nothing,
    .channel_active = tail_nothing,
    .channel_inactive = tail_nothing,
    .channel_read_complete = tail_nothing,
    .channel_writability_changed = tail_nothing,
    .channel_read = tail_read,
    .user_event_triggered = tail_user_event,
    .exception_caught = tail_exception,
    .bind = head_bind,
    .connect = head_connect,
    .disconnect = head_close,
    .close = head_close,
    .deregister = head_close,
    .read = head_read,
    .write = head_write,
    .flush = head_flush,
};

void eddy__pipeline_init(eddy_pipeline_t *p)
{
    memset(p, 0, sizeof(*p));
    p->end.pipeline = p;
    p->end.ops = &end_ops;
    p->end.mask = mask_of(&end_ops);
    p->end.next = &p->end;
    p->end.prev = &p->end;
    atomic_init(&p->offloaded, 0);
}

/* ---------------------------------------------------------------------------------------
 * Lifetime of contexts
 */

static eddy_carrier_t *ctx_carrier(eddy_ctx_t *ctx)
{
    return eddy__ctx_offload(ctx)->carrier;
}

static const char *ctx_name(const eddy_ctx_t *ctx)
{
    if (ctx->ops == &end_ops) {
        return ctx->ops->name;
    }
    return (const char *)(ctx + 1) + (ctx->on_carrier ? sizeof(eddy__ctx_offload_t) : 0);
}

static void ctx_free(eddy_ctx_t *ctx)
{
    assert(ctx->ops != &end_ops && ctx->mask == 0); /* unlinked, and never the end */
    if (ctx->free_state != NULL && ctx->state != NULL) {
        ctx->free_state(ctx->state);
    }
    free(ctx);
}

/* An event record on its way to a carrier or to the loop keeps its context unburied. */
static inline void in_flight_add(eddy_pipeline_t *p)
{
    atomic_fetch_add_explicit(&p->offloaded, 1, memory_order_relaxed);
}

/* The record's use of its context is over. Release: pairs with the acquire in bury_dead(). */
static inline void in_flight_done(eddy_pipeline_t *p)
{
    unsigned was = atomic_fetch_sub_explicit(&p->offloaded, 1, memory_order_release);
    assert(was > 0);
    (void)was;
}

static void bury_dead(eddy_pipeline_t *p)
{
    if (p->depth != 0 || atomic_load_explicit(&p->offloaded, memory_order_acquire) != 0) {
        return;
    }
    while (p->end.grave_next != NULL) {
        eddy_ctx_t *ctx = p->end.grave_next;
        p->end.grave_next = ctx->grave_next;
        ctx_free(ctx);
    }
}

void eddy__pipeline_free(eddy_pipeline_t *p)
{
    assert(p->depth == 0 && atomic_load_explicit(&p->offloaded, memory_order_acquire) == 0);
    while (p->end.grave_next != NULL) {
        eddy_ctx_t *ctx = p->end.grave_next;
        p->end.grave_next = ctx->grave_next;
        ctx_free(ctx);
    }
}

void eddy__pipeline_enter(eddy_pipeline_t *p)
{
    eddy__assert_on_loop(eddy__loop_of(eddy__pipeline_channel(p)));
    p->depth++;
}

void eddy__pipeline_leave(eddy_pipeline_t *p)
{
    eddy__assert_on_loop(eddy__loop_of(eddy__pipeline_channel(p)));
    assert(p->depth > 0);
    if (--p->depth == 0 && p->end.grave_next != NULL) {
        bury_dead(p);
    }
}

static bool offload_removal(eddy_ctx_t *ctx);

/* Unlink ctx (its own links stay), call handler_removed, and bury it. Returns false when the
 * removal of an offloaded ctx went to its carrier, where it runs behind the queued events. */
static bool unlink_ctx(eddy_pipeline_t *p, eddy_ctx_t *ctx)
{
    assert(ctx != &p->end && ctx->prev->next == ctx && ctx->next->prev == ctx); /* linked */
    ctx->prev->next = ctx->next;
    ctx->next->prev = ctx->prev;
    ctx->mask = 0; /* out of the list: walks from an earlier removed context pass over it */
    if (!ctx->on_carrier) {
        /* No scoped timer of its runs from here on; its list must be empty before the
         * graveyard link takes its word. An offloaded one's are its carrier's. */
        ctx->removed = true;
        eddy__ctx_jobs_cancel(ctx);
    }
    ctx->grave_next = p->end.grave_next;
    p->end.grave_next = ctx;
    if (ctx->on_carrier) {
        /* An offloaded handler is removed on its carrier, after the events already sent
         * there (channel_inactive at close among them): Netty runs handlerRemoved on the
         * handler's executor too. The context stays unburied until that ran. */
        return !offload_removal(ctx);
    }
    p->depth++;
    if (ctx->ops->handler_removed != NULL) {
        ctx->ops->handler_removed(ctx);
    }
    /* The state goes with the context, once no event can be inside the handler: a handler
     * that removed itself from inside one of its callbacks may still use it on the way out. */
    p->depth--;
    bury_dead(p);
    return true;
}

/*
 * At close, handlers are removed from the head on. An offloaded one still has events queued
 * on its carrier, channel_inactive and channel_unregistered last, and what it passes on from
 * them must reach the handlers after it in order, before their handler_removed. So removal
 * stops behind it, and its carrier, once it ran the removal, sends the rest of the removal
 * back to the loop (offload_run), behind what the handler passed on.
 */
void eddy__pipeline_destroy(eddy_pipeline_t *p)
{
    eddy__pipeline_enter(p);
    while (p->end.next != &p->end && unlink_ctx(p, p->end.next)) {
    }
    eddy__pipeline_leave(p);
}

static void destroy_rest(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    eddy__pipeline_destroy(&ch->pipeline);
}

/* ---------------------------------------------------------------------------------------
 * Changing the pipeline
 */

static eddy_ctx_t *find_name(eddy_pipeline_t *p, const char *name)
{
    for (eddy_ctx_t *c = p->end.next; c != &p->end; c = c->next) {
        if (strcmp(ctx_name(c), name) == 0) {
            return c;
        }
    }
    return NULL;
}

static eddy_ctx_t *find_ops(eddy_pipeline_t *p, const eddy_handler_ops_t *ops)
{
    for (eddy_ctx_t *c = p->end.next; c != &p->end; c = c->next) {
        if (c->ops == ops) {
            return c;
        }
    }
    return NULL;
}

enum { WHERE_FIRST, WHERE_LAST, WHERE_BEFORE, WHERE_AFTER, WHERE_REPLACE };

typedef struct change_s {
    eddy_pipeline_t *p;
    int where;
    const char *base;
    const char *name;
    char *owned[2]; /* copies of base and name, for a change that travels as a task */
    const eddy_handler_ops_t *ops;
    void *state;
    eddy_state_free_cb free_state;
    eddy_carrier_t *carrier;
    bool remove;      /* a removal of base (by name) or of ops */
    eddy_ctx_t *made; /* an add's new context, once added */
} change_t;

static int apply_add(change_t *c)
{
    eddy_pipeline_t *p = c->p;
    eddy__assert_on_loop(eddy__loop_of(eddy__pipeline_channel(p)));
    int err = 0;
    eddy_ctx_t *base = NULL;
    char gen[32];
    const char *name = c->name;
    if (eddy__pipeline_channel(p)->flags & EDDY__CH_CLOSED) {
        err = EDDY_ECLOSED;
    } else if (c->ops == NULL) {
        err = EDDY_EINVAL;
    } else if (c->where == WHERE_BEFORE || c->where == WHERE_AFTER || c->where == WHERE_REPLACE) {
        base = c->base != NULL ? find_name(p, c->base) : NULL;
        if (base == NULL) {
            err = EDDY_ENOENT;
        }
    }
    if (err == 0 && name == NULL) {
        snprintf(gen, sizeof(gen), "%s#%u", c->ops->name ? c->ops->name : "handler",
                 p->names++);
        name = gen;
    }
    if (err == 0 && find_name(p, name) != NULL &&
        !(base != NULL && c->where == WHERE_REPLACE && strcmp(ctx_name(base), name) == 0)) {
        err = EDDY_EEXIST;
    }
    if (err == 0 && !c->ops->sharable && c->state != NULL) {
        /* A handler instance is its ops and its state: a non-sharable one (per-channel state)
         * may not sit twice in a pipeline. Several instances of one ops table are fine. */
        for (eddy_ctx_t *x = p->end.next; x != &p->end; x = x->next) {
            if (x->ops == c->ops && x->state == c->state &&
                !(c->where == WHERE_REPLACE && x == base)) {
                err = EDDY_EINVAL;
            }
        }
    }
    eddy_ctx_t *ctx = NULL;
    if (err == 0) {
        /* One allocation with the carrier and the name after the context: an idle
         * connection's handlers cost one malloc chunk each. */
        size_t n = strlen(name) + 1;
        size_t extra = c->carrier != NULL ? sizeof(eddy__ctx_offload_t) : 0;
        ctx = calloc(1, sizeof(*ctx) + extra + n);
        if (ctx == NULL) {
            err = EDDY_ENOMEM;
        } else {
            ctx->on_carrier = c->carrier != NULL;
            if (c->carrier != NULL) {
                eddy__ctx_offload(ctx)->carrier = c->carrier;
            }
            memcpy((char *)(ctx + 1) + extra, name, n);
        }
    }
    if (err != 0) {
        if (c->free_state != NULL && c->state != NULL) {
            c->free_state(c->state);
        }
        return err;
    }
    ctx->pipeline = p;
    ctx->ops = c->ops;
    ctx->state = c->state;
    ctx->free_state = c->free_state;
    ctx->mask = mask_of(c->ops) | (ctx->on_carrier ? INBOUND_EVENTS : 0);
    eddy_ctx_t *prev;
    switch (c->where) {
    case WHERE_FIRST:
        prev = &p->end;
        break;
    case WHERE_LAST:
        prev = p->end.prev;
        break;
    case WHERE_BEFORE:
        prev = base->prev;
        break;
    default: /* after, replace */
        prev = base;
        break;
    }
    assert(prev->pipeline == p && prev->next->prev == prev);
    ctx->prev = prev;
    ctx->next = prev->next;
    prev->next->prev = ctx;
    prev->next = ctx;
    eddy__pipeline_enter(p);
    if (c->where == WHERE_REPLACE) {
        unlink_ctx(p, base);
    }
    if (ctx->ops->handler_added != NULL && !ctx->removed) {
        ctx->ops->handler_added(ctx);
    }
    c->made = ctx;
    eddy__pipeline_leave(p);
    return 0;
}

static int apply_remove(change_t *c)
{
    eddy_pipeline_t *p = c->p;
    eddy_ctx_t *ctx = c->base != NULL ? find_name(p, c->base) : find_ops(p, c->ops);
    if (ctx == NULL) {
        return EDDY_ENOENT;
    }
    unlink_ctx(p, ctx);
    return 0;
}

static void change_free(change_t *c)
{
    free(c->owned[0]);
    free(c->owned[1]);
    free(c);
}

static void change_on_loop(eddy_channel_t *ch, void *arg)
{
    (void)ch;
    change_t *c = arg;
    assert(c->p == &ch->pipeline);
    int err = c->remove ? apply_remove(c) : apply_add(c);
    if (err != 0) {
        eddy__log(EDDY_LOG_DEBUG, "pipeline change from another thread failed: %s",
                  eddy_strerror(err));
    }
    change_free(c);
}

static int change(eddy_pipeline_t *p, int where, const char *base, const char *name,
                  const eddy_handler_ops_t *ops, void *state, eddy_state_free_cb free_state,
                  eddy_carrier_t *carrier, bool remove)
{
    change_t local = {p,          where,   base,   name, {NULL, NULL}, ops, state,
                      free_state, carrier, remove, NULL};
    eddy_channel_t *ch = eddy__pipeline_channel(p);
    if (eddy_loop_in_event_loop(eddy__loop_of(ch))) {
        return remove ? apply_remove(&local) : apply_add(&local);
    }
    change_t *c = calloc(1, sizeof(*c));
    if (c == NULL || (base != NULL && (c->owned[0] = strdup(base)) == NULL) ||
        (name != NULL && (c->owned[1] = strdup(name)) == NULL)) {
        if (c != NULL) {
            change_free(c);
        }
        if (!remove && free_state != NULL && state != NULL) {
            free_state(state);
        }
        return EDDY_ENOMEM;
    }
    c->p = p;
    c->where = where;
    c->base = c->owned[0];
    c->name = c->owned[1];
    c->ops = ops;
    c->state = state;
    c->free_state = free_state;
    c->carrier = carrier;
    c->remove = remove;
    eddy__channel_on_loop(ch, change_on_loop, c);
    return 0;
}

int eddy_pipeline_add_first(eddy_pipeline_t *p, const char *name, const eddy_handler_ops_t *ops,
                            void *state, eddy_state_free_cb free_state)
{
    return change(p, WHERE_FIRST, NULL, name, ops, state, free_state, NULL, false);
}

int eddy_pipeline_add_last(eddy_pipeline_t *p, const char *name, const eddy_handler_ops_t *ops,
                           void *state, eddy_state_free_cb free_state)
{
    return change(p, WHERE_LAST, NULL, name, ops, state, free_state, NULL, false);
}

int eddy_pipeline_add_before(eddy_pipeline_t *p, const char *base, const char *name,
                             const eddy_handler_ops_t *ops, void *state,
                             eddy_state_free_cb free_state)
{
    return change(p, WHERE_BEFORE, base, name, ops, state, free_state, NULL, false);
}

int eddy_pipeline_add_after(eddy_pipeline_t *p, const char *base, const char *name,
                            const eddy_handler_ops_t *ops, void *state,
                            eddy_state_free_cb free_state)
{
    return change(p, WHERE_AFTER, base, name, ops, state, free_state, NULL, false);
}

int eddy_pipeline_add_last_on(eddy_pipeline_t *p, eddy_carrier_t *c, const char *name,
                              const eddy_handler_ops_t *ops, void *state,
                              eddy_state_free_cb free_state)
{
    if (c == NULL) {
        if (free_state != NULL && state != NULL) {
            free_state(state);
        }
        return EDDY_EINVAL;
    }
    return change(p, WHERE_LAST, NULL, name, ops, state, free_state, c, false);
}

eddy_handler_t eddy_handler(const char *name, const eddy_handler_ops_t *ops, void *state,
                            eddy_state_free_cb free_state)
{
    if (ops == NULL || (state == NULL && free_state != NULL)) {
        /* No ops, or a state to free that is not there: its allocation failed. */
        return (eddy_handler_t){.state = state,
                                .free_state = free_state,
                                .error = ops == NULL ? EDDY_EINVAL : EDDY_ENOMEM};
    }
    return (eddy_handler_t){.name = name, .ops = ops, .state = state, .free_state = free_state};
}

eddy_handler_t eddy_handler_named(eddy_handler_t h, const char *name)
{
    h.name = name;
    return h;
}


static void handler_drop(const eddy_handler_t *h)
{
    if (h->free_state != NULL && h->state != NULL) {
        h->free_state(h->state);
    }
}

int eddy_pipeline_add_handlers(eddy_pipeline_t *p, const eddy_handler_t *hs, size_t n)
{
    int err = 0;
    for (size_t i = 0; i < n && err == 0; i++) {
        if (hs[i].ops == NULL) {
            err = hs[i].error != 0 ? hs[i].error : EDDY_EINVAL; /* its constructor failed */
        }
    }
    if (err != 0) {
        /* None is added, so the pipeline is not touched: this may be another thread than the
         * channel's loop, whose pipeline it is. */
        for (size_t i = 0; i < n; i++) {
            handler_drop(&hs[i]);
        }
        return err;
    }
    eddy_channel_t *ch = eddy__pipeline_channel(p);
    if (!eddy_loop_in_event_loop(eddy__loop_of(ch))) {
        /* From another thread: each travels as a task, in order. */
        for (size_t i = 0; i < n; i++) {
            int e = eddy_pipeline_add_last(p, hs[i].name, hs[i].ops, hs[i].state,
                                           hs[i].free_state);
            err = err != 0 ? err : e;
        }
        return err;
    }
    size_t added = 0;
    bool add_failed = false; /* apply_add failed at hs[added], and freed its state */
    eddy_ctx_t *made[16];
    eddy_ctx_t **ctxs = n <= 16 ? made : calloc(n, sizeof(*ctxs));
    if (ctxs == NULL) {
        err = EDDY_ENOMEM;
    }
    /* Held: a handler_added that removes another of these must not free it under us. */
    eddy__pipeline_enter(p);
    while (err == 0 && added < n) {
        const eddy_handler_t *h = &hs[added];
        change_t c = {.p = p,
                      .where = WHERE_LAST,
                      .name = h->name,
                      .ops = h->ops,
                      .state = h->state,
                      .free_state = h->free_state};
        err = apply_add(&c); /* frees the state when it fails */
        if (err == 0) {
            ctxs[added++] = c.made;
        } else {
            add_failed = true;
        }
    }
    if (err != 0) {
        /* All or none: the ones added go again (handler_removed, state freed), the ones not
         * reached are freed. */
        for (size_t i = added; i-- > 0;) {
            if (!ctxs[i]->removed) {
                unlink_ctx(p, ctxs[i]);
            }
        }
        for (size_t i = added + (add_failed ? 1 : 0); i < n; i++) {
            handler_drop(&hs[i]);
        }
    }
    eddy__pipeline_leave(p);
    if (ctxs != made) {
        free(ctxs);
    }
    return err;
}

int eddy_pipeline_remove(eddy_pipeline_t *p, const char *name)
{
    if (name == NULL) {
        return EDDY_EINVAL;
    }
    return change(p, 0, name, NULL, NULL, NULL, NULL, NULL, true);
}

int eddy_pipeline_remove_ops(eddy_pipeline_t *p, const eddy_handler_ops_t *ops)
{
    if (ops == NULL) {
        return EDDY_EINVAL;
    }
    return change(p, 0, NULL, NULL, ops, NULL, NULL, NULL, true);
}

int eddy_pipeline_replace(eddy_pipeline_t *p, const char *old_name, const char *name,
                          const eddy_handler_ops_t *ops, void *state,
                          eddy_state_free_cb free_state)
{
    return change(p, WHERE_REPLACE, old_name, name, ops, state, free_state, NULL, false);
}

eddy_ctx_t *eddy_pipeline_context(eddy_pipeline_t *p, const char *name)
{
    return name != NULL ? find_name(p, name) : NULL;
}

eddy_ctx_t *eddy_pipeline_context_ops(eddy_pipeline_t *p, const eddy_handler_ops_t *ops)
{
    return find_ops(p, ops);
}

size_t eddy_pipeline_names(eddy_pipeline_t *p, const char **names, size_t n)
{
    size_t i = 0;
    for (eddy_ctx_t *c = p->end.next; c != &p->end; c = c->next, i++) {
        if (i < n) {
            names[i] = ctx_name(c);
        }
    }
    return i;
}

eddy_channel_t *eddy_pipeline_channel(eddy_pipeline_t *p)
{
    return eddy__pipeline_channel(p);
}

/* ---------------------------------------------------------------------------------------
 * Offloaded handlers: an event for a context with a carrier becomes a carrier task on the
 * channel's partition; what the handler then fires or writes hops back to the loop (the
 * eddy_ctx_* functions below check the thread).
 */

typedef enum {
    OFF_REGISTERED,
    OFF_UNREGISTERED,
    OFF_ACTIVE,
    OFF_INACTIVE,
    OFF_READ,
    OFF_READ_COMPLETE,
    OFF_USER_EVENT,
    OFF_WRITABILITY,
    OFF_EXCEPTION,
    OFF_REMOVED, /* handler_removed, then the state freed: the last task for the context */
    OFF_CALL,    /* a call in the context's order (eddy__ctx_offload_call): data is the fn */
} off_kind_t;

typedef struct offload_s {
    eddy_ctx_t *ctx;
    off_kind_t kind;
    eddy_msg_t *msg;
    int event;
    void *data;
    int err;
    void *arg; /* OFF_CALL's */
} offload_t;

/* The offloaded context is gone for its handler: no call after this one. Its thread. */
static void offloaded_removed(eddy_ctx_t *ctx)
{
    ctx->removed = true;
    eddy__ctx_jobs_cancel(ctx);
    if (ctx->ops->handler_removed != NULL) {
        ctx->ops->handler_removed(ctx);
    }
}

/* What an event record holds beyond the context, let go of when the event does not run. */
static void offload_drop(offload_t *o)
{
    if (o->msg != NULL) {
        eddy_msg_release(o->msg);
    }
    if (o->kind == OFF_CALL) {
        eddy__ctx_call_fn fn;
        memcpy(&fn, &o->data, sizeof(fn));
        fn(o->ctx, o->arg, false);
    }
}

static void call_or_pass_inbound(eddy_ctx_t *ctx, off_kind_t kind, eddy_msg_t *msg, int event,
                                 void *data, int err);

static int offload_run(void *arg, void **result)
{
    offload_t *o = arg;
    eddy_ctx_t *ctx = o->ctx;
    assert(ctx->on_carrier);
    eddy_pipeline_t *p = ctx->pipeline;
    eddy_channel_t *ch = eddy__pipeline_channel(p);
    if (o->kind == OFF_REMOVED) {
        offloaded_removed(ctx);
        if (!eddy_channel_is_open(ch)) {
            eddy__channel_on_loop(ch, destroy_rest, NULL); /* the channel's close goes on */
        }
    } else if (ctx->removed) {
        offload_drop(o);
    } else if (o->kind == OFF_CALL) {
        eddy__ctx_call_fn fn;
        memcpy(&fn, &o->data, sizeof(fn));
        fn(ctx, o->arg, true);
    } else {
        call_or_pass_inbound(ctx, o->kind, o->msg, o->event, o->data, o->err);
    }
    free(o);
    *result = NULL;
    /* Release: pairs with the acquire in bury_dead(): our use of ctx is over. */
    in_flight_done(p);
    eddy_channel_release(ch);
    return 0;
}

/* Returns whether the carrier took the event (else it was dropped, or run here for a
 * removal). */
static bool offload(eddy_ctx_t *ctx, off_kind_t kind, eddy_msg_t *msg, int event, void *data,
                    int err, void *arg)
{
    eddy_pipeline_t *p = ctx->pipeline;
    eddy_channel_t *ch = eddy__pipeline_channel(p);
    assert(ctx->on_carrier);
    offload_t *o = malloc(sizeof(*o));
    if (o == NULL) {
        offload_t lost = {ctx, kind, msg, event, data, err, arg};
        if (kind == OFF_REMOVED) {
            offloaded_removed(ctx);
        }
        offload_drop(&lost);
        return false;
    }
    *o = (offload_t){ctx, kind, msg, event, data, err, arg};
    in_flight_add(p);
    eddy_channel_retain(ch);
    eddy_future_t *f = eddy_carrier_execute(ctx_carrier(ctx), ch->id, offload_run, o);
    if (f == NULL || (eddy_future_is_done(f) && eddy_future_error(f) != 0)) {
        /* Refused (the carrier closed): offload_run will not run; the event is lost to this
         * handler, and we say so. A removal runs here instead, so the state is freed. */
        if (kind == OFF_REMOVED) {
            offloaded_removed(ctx);
        }
        offload_drop(o);
        free(o);
        in_flight_done(p);
        eddy_channel_release(ch);
        eddy__log(EDDY_LOG_ERROR, "channel %llu: handler %s: its carrier refused an event",
                  (unsigned long long)ch->id, ctx_name(ctx));
        eddy_future_release(f);
        return false;
    }
    eddy_future_release(f);
    return true;
}

static bool offload_removal(eddy_ctx_t *ctx)
{
    return offload(ctx, OFF_REMOVED, NULL, 0, NULL, 0, NULL);
}

void eddy__ctx_offload_call(eddy_ctx_t *ctx, eddy__ctx_call_fn fn, void *arg)
{
    void *data;
    memcpy(&data, &fn, sizeof(fn)); /* a function pointer does not convert to void * */
    offload(ctx, OFF_CALL, NULL, 0, data, 0, arg);
}

/* ---------------------------------------------------------------------------------------
 * Inbound events
 */

static const unsigned kind_bit[] = {
    [OFF_REGISTERED] = EDDY__EV_REGISTERED,   [OFF_UNREGISTERED] = EDDY__EV_UNREGISTERED,
    [OFF_ACTIVE] = EDDY__EV_ACTIVE,           [OFF_INACTIVE] = EDDY__EV_INACTIVE,
    [OFF_READ] = EDDY__EV_READ,               [OFF_READ_COMPLETE] = EDDY__EV_READ_COMPLETE,
    [OFF_USER_EVENT] = EDDY__EV_USER_EVENT,   [OFF_WRITABILITY] = EDDY__EV_WRITABILITY,
    [OFF_EXCEPTION] = EDDY__EV_EXCEPTION,     [OFF_REMOVED] = 0,
    [OFF_CALL] = 0,
};

/* Call the handler's slot for an inbound event: a context is only reached for the slots it
 * has (on the loop its mask says so; on a carrier, call_or_pass_inbound checks). */
static void call_inbound(eddy_ctx_t *ctx, off_kind_t kind, eddy_msg_t *msg, int event,
                         void *data, int err)
{
    const eddy_handler_ops_t *o = ctx->ops;
    assert(!ctx->removed && (mask_of(o) & kind_bit[kind]) != 0);
    switch (kind) {
    case OFF_REGISTERED:
        o->channel_registered(ctx);
        break;
    case OFF_UNREGISTERED:
        o->channel_unregistered(ctx);
        break;
    case OFF_ACTIVE:
        o->channel_active(ctx);
        break;
    case OFF_INACTIVE:
        o->channel_inactive(ctx);
        break;
    case OFF_READ:
        o->channel_read(ctx, msg);
        break;
    case OFF_READ_COMPLETE:
        o->channel_read_complete(ctx);
        break;
    case OFF_USER_EVENT:
        o->user_event_triggered(ctx, event, data);
        break;
    case OFF_WRITABILITY:
        o->channel_writability_changed(ctx);
        break;
    case OFF_EXCEPTION:
        o->exception_caught(ctx, err);
        break;
    case OFF_REMOVED:
    case OFF_CALL:
        break; /* offload_run() handles them */
    }
}

static void fire(eddy_ctx_t *ctx, off_kind_t kind, eddy_msg_t *msg, int event, void *data,
                 int err);

/* The same on an offloaded context's carrier, which receives every inbound event, so that
 * what it passes on keeps its order with what it emits (a read_complete must not overtake the
 * reads still queued there): a slot it leaves NULL passes the event on from there. The mask
 * of its own slots is worked out here, not kept: a carrier's hop costs far more. */
static void call_or_pass_inbound(eddy_ctx_t *ctx, off_kind_t kind, eddy_msg_t *msg, int event,
                                 void *data, int err)
{
    if (mask_of(ctx->ops) & kind_bit[kind]) {
        call_inbound(ctx, kind, msg, event, data, err);
    } else {
        fire(ctx, kind, msg, event, data, err);
    }
}

/* The loop's watchdog names the handler it finds running (reactor/watchdog.c): set around
 * every handler's call, the end's (the channel's own work) as none. */
static inline eddy__running_t handler_enter(const eddy_ctx_t *ctx)
{
    eddy_channel_t *ch = eddy__pipeline_channel(ctx->pipeline);
    return eddy__loop_handler_enter(eddy__loop_of(ch),
                                    ctx == &ctx->pipeline->end ? NULL : ctx->ops->name, ch->id);
}

static inline void handler_leave(const eddy_ctx_t *ctx, eddy__running_t was)
{
    eddy__loop_handler_leave(eddy__loop_of(eddy__pipeline_channel(ctx->pipeline)), was);
}

/* A handler's call is over: the watchdog's mark given back, the pipeline left at the depth
 * it was entered with, and the removed contexts buried when this was the outermost entry. */
static inline void handler_done(const eddy_ctx_t *ctx, eddy__running_t was, unsigned depth)
{
    eddy_pipeline_t *p = ctx->pipeline;
    handler_leave(ctx, was);
    assert(p->depth == depth); /* balanced: every entry inside the handler has left */
    (void)depth;               /* read by the assert only */
    if (--p->depth == 0 && p->end.grave_next != NULL) {
        bury_dead(p);
    }
}

/* Hand an inbound event to the first context after `from` that implements it (the loop's
 * thread). */
static void fire_from(eddy_ctx_t *from, off_kind_t kind, eddy_msg_t *msg, int event, void *data,
                      int err)
{
    eddy__assert_on_loop(eddy__loop_of(eddy__pipeline_channel(from->pipeline)));
    unsigned bit = kind_bit[kind];
    assert(bit != 0); /* removals and calls go to carriers only */
    eddy_ctx_t *ctx = from->next;
    while (!(ctx->mask & bit)) {
        ctx = ctx->next;
    }
    eddy_pipeline_t *p = ctx->pipeline;
    if (ctx->on_carrier) {
        offload(ctx, kind, msg, event, data, err, NULL);
        return;
    }
    unsigned depth = ++p->depth;
    eddy__running_t was = handler_enter(ctx);
    call_inbound(ctx, kind, msg, event, data, err);
    handler_done(ctx, was, depth);
}

static void hop_inbound(eddy_channel_t *ch, void *arg)
{
    (void)ch;
    offload_t *h = arg; /* the same event record the carrier path uses */
    fire_from(h->ctx, h->kind, h->msg, h->event, h->data, h->err);
    in_flight_done(h->ctx->pipeline);
    free(h);
}

/* From a context: on the loop, at once; from a carrier thread, as a loop task. */
static void fire(eddy_ctx_t *ctx, off_kind_t kind, eddy_msg_t *msg, int event, void *data,
                 int err)
{
    eddy_pipeline_t *p = ctx->pipeline;
    eddy_channel_t *ch = eddy__pipeline_channel(p);
    if (eddy_loop_in_event_loop(eddy__loop_of(ch))) {
        fire_from(ctx, kind, msg, event, data, err);
        return;
    }
    offload_t *h = malloc(sizeof(*h));
    if (h == NULL) {
        if (msg != NULL) {
            eddy_msg_release(msg);
        }
        return;
    }
    *h = (offload_t){ctx, kind, msg, event, data, err, NULL};
    /* The context stays (not buried) until the hop ran. */
    in_flight_add(p);
    eddy__channel_on_loop(ch, hop_inbound, h);
}

void eddy_ctx_fire_channel_registered(eddy_ctx_t *ctx)
{
    fire(ctx, OFF_REGISTERED, NULL, 0, NULL, 0);
}

void eddy_ctx_fire_channel_unregistered(eddy_ctx_t *ctx)
{
    fire(ctx, OFF_UNREGISTERED, NULL, 0, NULL, 0);
}

void eddy_ctx_fire_channel_active(eddy_ctx_t *ctx)
{
    fire(ctx, OFF_ACTIVE, NULL, 0, NULL, 0);
}

void eddy_ctx_fire_channel_inactive(eddy_ctx_t *ctx)
{
    fire(ctx, OFF_INACTIVE, NULL, 0, NULL, 0);
}

void eddy_ctx_fire_channel_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    fire(ctx, OFF_READ, msg, 0, NULL, 0);
}

void eddy_ctx_fire_channel_read_complete(eddy_ctx_t *ctx)
{
    fire(ctx, OFF_READ_COMPLETE, NULL, 0, NULL, 0);
}

void eddy_ctx_fire_user_event(eddy_ctx_t *ctx, int event, void *data)
{
    fire(ctx, OFF_USER_EVENT, NULL, event, data, 0);
}

void eddy_ctx_fire_channel_writability_changed(eddy_ctx_t *ctx)
{
    fire(ctx, OFF_WRITABILITY, NULL, 0, NULL, 0);
}

void eddy_ctx_fire_exception(eddy_ctx_t *ctx, int err)
{
    fire(ctx, OFF_EXCEPTION, NULL, 0, NULL, err);
}

void eddy__pipeline_fire_registered(eddy_pipeline_t *p)
{
    fire_from(&p->end, OFF_REGISTERED, NULL, 0, NULL, 0);
}

void eddy__pipeline_fire_unregistered(eddy_pipeline_t *p)
{
    fire_from(&p->end, OFF_UNREGISTERED, NULL, 0, NULL, 0);
}

void eddy__pipeline_fire_active(eddy_pipeline_t *p)
{
    fire_from(&p->end, OFF_ACTIVE, NULL, 0, NULL, 0);
}

void eddy__pipeline_fire_inactive(eddy_pipeline_t *p)
{
    fire_from(&p->end, OFF_INACTIVE, NULL, 0, NULL, 0);
}

void eddy__pipeline_fire_writability(eddy_pipeline_t *p)
{
    fire_from(&p->end, OFF_WRITABILITY, NULL, 0, NULL, 0);
}

void eddy_pipeline_fire_channel_read(eddy_pipeline_t *p, eddy_msg_t *msg)
{
    fire_from(&p->end, OFF_READ, msg, 0, NULL, 0);
}

void eddy_pipeline_fire_channel_read_complete(eddy_pipeline_t *p)
{
    fire_from(&p->end, OFF_READ_COMPLETE, NULL, 0, NULL, 0);
}

void eddy_pipeline_fire_user_event(eddy_pipeline_t *p, int event, void *data)
{
    fire_from(&p->end, OFF_USER_EVENT, NULL, event, data, 0);
}

void eddy_pipeline_fire_exception(eddy_pipeline_t *p, int err)
{
    fire_from(&p->end, OFF_EXCEPTION, NULL, 0, NULL, err);
}

/* ---------------------------------------------------------------------------------------
 * Outbound operations
 */

typedef enum {
    OUT_BIND,
    OUT_CONNECT,
    OUT_DISCONNECT,
    OUT_CLOSE,
    OUT_DEREGISTER,
    OUT_READ,
    OUT_WRITE,
    OUT_FLUSH,
    OUT_WRITE_FLUSH,
    OUT_CLOSE_AFTER_FLUSH,
} out_kind_t;

static const unsigned out_bit[] = {
    [OUT_BIND] = EDDY__EV_BIND,         [OUT_CONNECT] = EDDY__EV_CONNECT,
    [OUT_DISCONNECT] = EDDY__EV_DISCONNECT, [OUT_CLOSE] = EDDY__EV_CLOSE,
    [OUT_DEREGISTER] = EDDY__EV_DEREGISTER, [OUT_READ] = EDDY__EV_OP_READ,
    [OUT_WRITE] = EDDY__EV_WRITE,       [OUT_FLUSH] = EDDY__EV_FLUSH,
    [OUT_WRITE_FLUSH] = EDDY__EV_WRITE, [OUT_CLOSE_AFTER_FLUSH] = EDDY__EV_CLOSE,
};

typedef struct out_s {
    eddy_ctx_t *ctx;
    out_kind_t kind;
    eddy_msg_t *msg;
    eddy_promise_t *p;
    eddy_addr_t a, b;
    bool has_b;
} out_t;

static eddy_ctx_t *prev_with(eddy_ctx_t *from, unsigned bit)
{
    eddy_ctx_t *ctx = from->prev;
    while (!(ctx->mask & bit)) {
        ctx = ctx->prev;
    }
    return ctx;
}

static void out_from(eddy_ctx_t *from, out_kind_t kind, eddy_msg_t *msg, eddy_promise_t *pr,
                     const eddy_addr_t *a, const eddy_addr_t *b);

/* The context whose write is being carried toward the head on this thread, for naming the
 * handler that wrote when the write fails with nobody to tell (fault.c). */
static __attribute__((tls_model("initial-exec"))) _Thread_local eddy_ctx_t *writing;

eddy_ctx_t *eddy__pipeline_writer(void)
{
    return writing;
}

/* ctx's write of msg, written by `from`: kept in `writing` meanwhile (nested writes, an
 * encoder's, keep their own and give it back). */
static inline void call_write(eddy_ctx_t *ctx, eddy_ctx_t *from, eddy_msg_t *msg,
                              eddy_promise_t *pr)
{
    eddy_ctx_t *was = writing;
    writing = from;
    ctx->ops->write(ctx, msg, pr);
    writing = was;
}

/* A flush from `from`, then a close walking the handlers with the channel marked graceful,
 * so that the head closes after the flush (a handler that delays the close, as TLS does for
 * its close_notify, reads the mark and keeps it for later). */
static void close_after_flush_from(eddy_ctx_t *from, eddy_promise_t *pr)
{
    eddy_channel_t *ch = eddy__pipeline_channel(from->pipeline);
    out_from(from, OUT_FLUSH, NULL, NULL, NULL, NULL);
    unsigned was = ch->flags & EDDY__CH_CLOSE_GRACEFUL;
    ch->flags |= EDDY__CH_CLOSE_GRACEFUL;
    out_from(from, OUT_CLOSE, NULL, pr, NULL, NULL);
    ch->flags = (ch->flags & ~EDDY__CH_CLOSE_GRACEFUL) | was;
}

/* Run an outbound operation from `from` toward the head (the loop's thread). */
static void out_from(eddy_ctx_t *from, out_kind_t kind, eddy_msg_t *msg, eddy_promise_t *pr,
                     const eddy_addr_t *a, const eddy_addr_t *b)
{
    eddy_pipeline_t *p = from->pipeline;
    eddy__assert_on_loop(eddy__loop_of(eddy__pipeline_channel(p)));
    eddy_ctx_t *ctx = prev_with(from, out_bit[kind]);
    assert(!ctx->removed); /* a removed context's mask is 0: no walk stops there */
    const eddy_handler_ops_t *o = ctx->ops;
    unsigned depth = ++p->depth;
    eddy__running_t was = handler_enter(ctx);
    switch (kind) {
    case OUT_BIND:
        o->bind(ctx, a, pr);
        break;
    case OUT_CONNECT:
        o->connect(ctx, a, b, pr);
        break;
    case OUT_DISCONNECT:
        o->disconnect(ctx, pr);
        break;
    case OUT_CLOSE:
        o->close(ctx, pr);
        break;
    case OUT_DEREGISTER:
        o->deregister(ctx, pr);
        break;
    case OUT_READ:
        o->read(ctx);
        break;
    case OUT_WRITE:
        call_write(ctx, from, msg, pr);
        break;
    case OUT_FLUSH:
        o->flush(ctx);
        break;
    case OUT_WRITE_FLUSH:
        call_write(ctx, from, msg, pr);
        /* The flush starts again from the caller's context: a handler between may have
         * queued the message rather than passed it on. */
        out_from(from, OUT_FLUSH, NULL, NULL, NULL, NULL);
        break;
    case OUT_CLOSE_AFTER_FLUSH:
        /* In the switch, not a test before it: the hot operations pay nothing for it. */
        close_after_flush_from(from, pr);
        break;
    }
    handler_done(ctx, was, depth);
}

static void out_hop(eddy_channel_t *ch, void *arg)
{
    (void)ch;
    out_t *h = arg;
    out_from(h->ctx, h->kind, h->msg, h->p, &h->a, h->has_b ? &h->b : NULL);
    eddy_future_release(h->p);
    in_flight_done(h->ctx->pipeline);
    free(h);
}

static void out(eddy_ctx_t *ctx, out_kind_t kind, eddy_msg_t *msg, eddy_promise_t *pr,
                const eddy_addr_t *a, const eddy_addr_t *b)
{
    eddy_pipeline_t *p = ctx->pipeline;
    eddy_channel_t *ch = eddy__pipeline_channel(p);
    if (eddy_loop_in_event_loop(eddy__loop_of(ch))) {
        if (p->depth != 0) {
            out_from(ctx, kind, msg, pr, a, b); /* in an event: its caller holds the channel */
            return;
        }
        /* Outside any event (a task or a timer of the application's): the operation may close
         * the channel and drop its last reference, so hold one until out_from is done. */
        eddy_channel_retain(ch);
        out_from(ctx, kind, msg, pr, a, b);
        eddy_channel_release(ch);
        return;
    }
    out_t *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        if (msg != NULL) {
            eddy_msg_release(msg);
        }
        if (pr == NULL && kind != OUT_READ && kind != OUT_FLUSH) {
            /* Nobody to tell, and no memory to carry the failure to the loop either. */
            eddy__log(EDDY_LOG_ERROR, "channel %llu: out of memory carrying an operation from "
                      "another thread to its loop; dropped", (unsigned long long)ch->id);
        }
        eddy__promise_done(pr, EDDY_ENOMEM);
        return;
    }
    h->ctx = ctx;
    h->kind = kind;
    h->msg = msg;
    h->p = pr != NULL ? eddy_future_retain(pr) : NULL;
    if (a != NULL) {
        h->a = *a;
    }
    if (b != NULL) {
        h->b = *b;
        h->has_b = true;
    }
    in_flight_add(p);
    eddy__channel_on_loop(ch, out_hop, h);
}

void eddy_ctx_bind(eddy_ctx_t *ctx, const eddy_addr_t *local, eddy_promise_t *p)
{
    out(ctx, OUT_BIND, NULL, p, local, NULL);
}

void eddy_ctx_connect(eddy_ctx_t *ctx, const eddy_addr_t *remote, const eddy_addr_t *local,
                      eddy_promise_t *p)
{
    out(ctx, OUT_CONNECT, NULL, p, remote, local);
}

void eddy_ctx_disconnect(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    out(ctx, OUT_DISCONNECT, NULL, p, NULL, NULL);
}

void eddy_ctx_close(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    out(ctx, OUT_CLOSE, NULL, p, NULL, NULL);
}

void eddy_ctx_close_after_flush(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    out(ctx, OUT_CLOSE_AFTER_FLUSH, NULL, p, NULL, NULL);
}

void eddy_ctx_deregister(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    out(ctx, OUT_DEREGISTER, NULL, p, NULL, NULL);
}

void eddy_ctx_read(eddy_ctx_t *ctx)
{
    out(ctx, OUT_READ, NULL, NULL, NULL, NULL);
}

/* A write from ctx, and a flush after it if flush: every write call's, a NULL message failing
 * p at once. */
static void write_from(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p, bool flush)
{
    if (msg == NULL) {
        eddy__promise_done(p, EDDY_EINVAL);
        return;
    }
    out(ctx, flush ? OUT_WRITE_FLUSH : OUT_WRITE, msg, p, NULL, NULL);
}

void eddy_ctx_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    write_from(ctx, msg, p, false);
}

void eddy_ctx_flush(eddy_ctx_t *ctx)
{
    out(ctx, OUT_FLUSH, NULL, NULL, NULL, NULL);
}

void eddy_ctx_write_and_flush(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    write_from(ctx, msg, p, true);
}

void eddy__pipeline_write(eddy_pipeline_t *p, eddy_msg_t *msg, eddy_promise_t *pr, bool flush)
{
    write_from(&p->end, msg, pr, flush);
}

void eddy__pipeline_flush(eddy_pipeline_t *p)
{
    out(&p->end, OUT_FLUSH, NULL, NULL, NULL, NULL);
}

void eddy__pipeline_close(eddy_pipeline_t *p, eddy_promise_t *pr, bool graceful)
{
    out(&p->end, graceful ? OUT_CLOSE_AFTER_FLUSH : OUT_CLOSE, NULL, pr, NULL, NULL);
}

void eddy__pipeline_read(eddy_pipeline_t *p)
{
    out(&p->end, OUT_READ, NULL, NULL, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Context accessors
 */

void *eddy_ctx_state(const eddy_ctx_t *ctx)
{
    return ctx->state;
}

const char *eddy_ctx_name(const eddy_ctx_t *ctx)
{
    return ctx_name(ctx);
}

eddy_channel_t *eddy_ctx_channel(const eddy_ctx_t *ctx)
{
    return eddy__pipeline_channel(ctx->pipeline);
}

eddy_pipeline_t *eddy_ctx_pipeline(const eddy_ctx_t *ctx)
{
    return ctx->pipeline;
}

eddy_loop_t *eddy_ctx_loop(const eddy_ctx_t *ctx)
{
    return eddy__loop_of(eddy__pipeline_channel(ctx->pipeline));
}

void eddy__pipeline_each_state(eddy_pipeline_t *p, void (*read)(eddy_ctx_t *, eddy_msg_t *),
                               void (*fn)(void *state, void *arg), void *arg)
{
    eddy__assert_on_loop(eddy__loop_of(eddy__pipeline_channel(p)));
    for (eddy_ctx_t *c = p->end.next; c != &p->end; c = c->next) {
        if (c->ops->channel_read == read) {
            fn(c->state, arg);
        }
    }
}

eddy_allocator_t *eddy_ctx_alloc(const eddy_ctx_t *ctx)
{
    return eddy_allocator_default();
}

bool eddy_ctx_is_removed(const eddy_ctx_t *ctx)
{
    return ctx->removed;
}
