/*
 * The gRPC client's channel (eddy_grpc_channel_t): a target on one loop and the HTTP/2
 * connections its calls travel on, o.connections of them, each in a slot. A slot's
 * connection is made when a call needs one: the host looked up on the loop, its addresses
 * tried in turn, TLS (its ALPN must choose "h2") or HTTP/2 by prior knowledge, then the
 * "grpc-client" handler after the HTTP/2 connection handler takes the streams' messages.
 *
 * Calls go round robin over the ready connections; with none ready, over the slots, each
 * waiting for its slot's connection to be made (a slot without one gets a new one), so a
 * burst at the start spreads over all of them. A connect that fails ends the calls waiting
 * for it UNAVAILABLE with its error; the next call makes a new one. The server's GOAWAY takes
 * a connection out of its slot: its calls finish there, new ones go elsewhere.
 *
 * Lifetimes: a connection is counted (refs) by its being alive (until dead), by the lookup
 * or connect waited for (its listener), and by the handler state of each channel that holds
 * its handler (freed by the pipeline once no callback of it runs), so a callback never finds
 * it freed. The channel is freed once it is closing, no connection is left and no task of
 * it is queued (eddy_grpc_unary's, close's).
 */
#include "client.h"

#include "buffer/layer.h"
#include "codec/http2/layer.h"
#include "pipeline/layer.h"
#include "reactor/layer.h"

#include <eddy/resolver.h>
#include <eddy/tls.h>

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS INT64_C(1000000)
#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_KEEPALIVE_TIMEOUT_MS 20000
#define DEFAULT_IDLE_TIMEOUT_MS (30 * 60 * 1000) /* gRPC's channel idleness */

static void conn_start(eddy__grpc_conn_t *conn);
static void conn_dead(eddy__grpc_conn_t *conn, const char *why, uint32_t h2_code);
static void channel_check(eddy_grpc_channel_t *c);

static eddy__grpc_ccall_t *ccall(eddy_grpc_call_t *call)
{
    return (eddy__grpc_ccall_t *)call;
}

/* ---------------------------------------------------------------------------------------
 * Targets and options
 */

/* "host:port" or "[v6]:port" into *host (malloc'd) and *port: 0, EDDY_EINVAL, EDDY_ENOMEM. */
static int target_parse(const char *t, char **host, uint16_t *port)
{
    const char *h = t, *end, *colon;
    if (t[0] == '[') {
        h = t + 1;
        end = strchr(h, ']');
        colon = end != NULL ? end + 1 : NULL;
    } else {
        end = colon = strchr(t, ':');
    }
    if (end == NULL || end == h || colon == NULL || colon[0] != ':' ||
        colon[1] < '0' || colon[1] > '9' || strchr(colon + 1, ':') != NULL) {
        return EDDY_EINVAL;
    }
    char *stop;
    unsigned long v = strtoul(colon + 1, &stop, 10);
    if (*stop != '\0' || v == 0 || v > 65535) {
        return EDDY_EINVAL;
    }
    *host = strndup(h, (size_t)(end - h));
    *port = (uint16_t)v;
    return *host != NULL ? 0 : EDDY_ENOMEM;
}

static void options_default(eddy_grpc_channel_options_t *o)
{
    o->connections = o->connections != 0 ? o->connections : 1;
    o->max_recv_message = o->max_recv_message != 0 ? o->max_recv_message : EDDY_GRPC_MAX_MESSAGE;
    o->max_send_message = o->max_send_message != 0 ? o->max_send_message : EDDY_GRPC_MAX_MESSAGE;
    o->connect_timeout_ms =
        o->connect_timeout_ms > 0 ? o->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
    o->keepalive_timeout_ms =
        o->keepalive_timeout_ms > 0 ? o->keepalive_timeout_ms : DEFAULT_KEEPALIVE_TIMEOUT_MS;
    eddy_h2_options_t *h = &o->h2;
    h->initial_window_size = h->initial_window_size != 0 ? h->initial_window_size : 1u << 20;
    /* A stream's queue takes two of the largest requests: one always fits once the call is
     * writable (below half of it), the prefix counted. */
    size_t two = 2 * (o->max_send_message + 5);
    h->max_stream_pending = h->max_stream_pending != 0 ? h->max_stream_pending
                            : two > (1u << 20)         ? two
                                                       : 1u << 20;
    h->max_queued_streams = h->max_queued_streams != 0 ? h->max_queued_streams : UINT32_MAX;
    h->max_resets_sent = h->max_resets_sent != 0 ? h->max_resets_sent : UINT32_MAX;
    h->idle_timeout_ms = h->idle_timeout_ms != 0 ? h->idle_timeout_ms : DEFAULT_IDLE_TIMEOUT_MS;
}

/* The host of an authority ("name:port", "[v6]:port", or a name alone), for SNI. */
static char *authority_host(const char *a)
{
    char *host = NULL;
    uint16_t port;
    if (target_parse(a, &host, &port) == 0) {
        return host;
    }
    return strdup(a);
}

static void channel_free(eddy_grpc_channel_t *c)
{
    eddy_tls_context_release(c->o.tls);
    free(c->authority);
    free(c->target);
    free(c->host);
    free(c->server_name);
    free(c->slots);
    free(c);
}

/* The names and settings c keeps from target and o (c->o holds o's copy). */
static int channel_setup(eddy_grpc_channel_t *c, const char *target,
                         const eddy_grpc_channel_options_t *o)
{
    const char *authority = o != NULL && o->authority != NULL ? o->authority : target;
    c->o.authority = c->authority = strdup(authority);
    c->target = strdup(target);
    c->server_name = authority_host(authority);
    c->slots = calloc(c->o.connections, sizeof(*c->slots));
    if (c->o.authority == NULL || c->target == NULL || c->server_name == NULL ||
        c->slots == NULL) {
        return EDDY_ENOMEM;
    }
    int err = target_parse(target, &c->host, &c->port);
    if (err != 0) {
        return err;
    }
    snprintf(c->user_agent, sizeof(c->user_agent), "eddy-grpc/%s", eddy_version());
    eddy_channel_config_init(&c->config);
    eddy_channel_config_set(&c->config, EDDY_CONNECT_TIMEOUT_MS, c->o.connect_timeout_ms);
    eddy_channel_config_set(&c->config, EDDY_TCP_NODELAY, 1);
    c->keepalive_ms = c->o.keepalive_ms > 0 ? c->o.keepalive_ms : 0;
    if (c->keepalive_ms > 0) { /* what the kernel holds unacknowledged fails as a PING does */
        eddy_channel_config_set(&c->config, EDDY_TCP_USER_TIMEOUT, c->o.keepalive_timeout_ms);
    }
    return 0;
}

eddy_grpc_channel_t *eddy_grpc_channel_new(eddy_loop_t *loop, const char *target,
                                           const eddy_grpc_channel_options_t *o)
{
    eddy_grpc_channel_t *c = loop != NULL && target != NULL ? calloc(1, sizeof(*c)) : NULL;
    if (c == NULL) {
        return NULL;
    }
    c->loop = loop;
    c->o = o != NULL ? *o : (eddy_grpc_channel_options_t){0};
    c->o.tls = NULL;
    c->o.authority = NULL;
    options_default(&c->o);
    atomic_init(&c->tasks, 0);
    atomic_init(&c->close_called, false);
    if (channel_setup(c, target, o) != 0) {
        channel_free(c);
        return NULL;
    }
    c->o.tls = o != NULL && o->tls != NULL ? eddy_tls_context_retain(o->tls) : NULL;
    return c;
}

/* ---------------------------------------------------------------------------------------
 * The close
 */

/* Free c once it is closing, its last connection gone and no task of it queued. */
static void channel_check(eddy_grpc_channel_t *c)
{
    if (!c->closing || c->nconns > 0 || atomic_load(&c->tasks) > 0) {
        return;
    }
    eddy_promise_t *p = c->closed;
    channel_free(c);
    if (p != NULL) {
        eddy_promise_succeed(p, NULL);
        eddy_future_release(p);
    }
}

void eddy__grpc_channel_task_done(eddy_grpc_channel_t *c)
{
    uint32_t old = atomic_fetch_sub(&c->tasks, 1);
    assert(old > 0);
    (void)old;
    channel_check(c);
}

static void close_task(void *arg)
{
    eddy_grpc_channel_t *c = arg;
    c->closing = true;
    for (size_t i = 0; i < c->o.connections; i++) {
        if (c->slots[i] != NULL) {
            conn_dead(c->slots[i], "channel closed", EDDY_H2_CANCEL);
        }
    }
    while (c->others != NULL) {
        conn_dead(c->others, "channel closed", EDDY_H2_CANCEL);
    }
    eddy__grpc_channel_task_done(c);
}

eddy_future_t *eddy_grpc_channel_close(eddy_grpc_channel_t *c)
{
    if (atomic_exchange(&c->close_called, true)) {
        return eddy__future_new_done(EDDY_EALREADY, NULL, NULL);
    }
    eddy_promise_t *p = eddy_promise_new(c->loop);
    c->closed = p != NULL ? eddy_future_retain(p) : NULL; /* none: the close goes on unheard */
    atomic_fetch_add(&c->tasks, 1);
    if (eddy_loop_execute(c->loop, close_task, c) != 0) {
        atomic_fetch_sub(&c->tasks, 1);
        eddy__log(EDDY_LOG_ERROR, "grpc: channel %s: not closed: its loop is shutting down",
                  c->target);
        if (c->closed != NULL) {
            eddy_promise_fail(c->closed, EDDY_ESHUTDOWN);
            eddy_future_release(c->closed);
        }
    }
    return p;
}

/* ---------------------------------------------------------------------------------------
 * Connections: references, lists
 */

static eddy__grpc_conn_t *conn_new(eddy_grpc_channel_t *c, size_t slot)
{
    eddy__grpc_conn_t *conn = calloc(1, sizeof(*conn));
    if (conn == NULL) {
        return NULL;
    }
    conn->chan = c;
    conn->refs = 1; /* alive */
    conn->state = EDDY__GRPC_CONN_NEW;
    conn->slot = slot;
    c->slots[slot] = conn;
    c->nconns++;
    return conn;
}

static void conn_ref(eddy__grpc_conn_t *conn)
{
    conn->refs++;
}

static void conn_unref(eddy__grpc_conn_t *conn)
{
    assert(conn->refs > 0);
    if (--conn->refs > 0) {
        return;
    }
    assert(conn->state == EDDY__GRPC_CONN_DEAD && conn->pending == NULL);
    assert(conn->waiting == NULL && conn->live == NULL);
    eddy_grpc_channel_t *c = conn->chan;
    free(conn->addrs);
    free(conn);
    c->nconns--;
    channel_check(c);
}

/* Out of its slot, or of the channel's others. */
static void conn_unslot(eddy__grpc_conn_t *conn)
{
    eddy_grpc_channel_t *c = conn->chan;
    if (conn->slot != SIZE_MAX) {
        assert(c->slots[conn->slot] == conn);
        c->slots[conn->slot] = NULL;
        conn->slot = SIZE_MAX;
        return;
    }
    for (eddy__grpc_conn_t **at = &c->others; *at != NULL; at = &(*at)->next) {
        if (*at == conn) {
            *at = conn->next;
            conn->next = NULL;
            return;
        }
    }
}

static void waiting_append(eddy__grpc_conn_t *conn, eddy__grpc_ccall_t *cc)
{
    assert(cc->conn == NULL && cc->c.prev == NULL && cc->c.next == NULL);
    cc->conn = conn;
    cc->waiting = true;
    cc->c.prev = conn->waiting_tail != NULL ? &conn->waiting_tail->c : NULL;
    if (conn->waiting_tail != NULL) {
        conn->waiting_tail->c.next = &cc->c;
    } else {
        conn->waiting = cc;
    }
    conn->waiting_tail = cc;
}

static void waiting_unlink(eddy__grpc_conn_t *conn, eddy__grpc_ccall_t *cc)
{
    eddy__grpc_ccall_t *prev = ccall(cc->c.prev), *next = ccall(cc->c.next);
    if (prev != NULL) {
        prev->c.next = cc->c.next;
    } else {
        conn->waiting = next;
    }
    if (next != NULL) {
        next->c.prev = cc->c.prev;
    } else {
        conn->waiting_tail = prev;
    }
    cc->c.prev = cc->c.next = NULL;
    cc->waiting = false;
    cc->conn = NULL;
}

void eddy__grpc_conn_add_live(eddy__grpc_conn_t *conn, eddy__grpc_ccall_t *cc)
{
    assert(cc->conn == NULL && !cc->waiting);
    cc->conn = conn;
    cc->c.prev = NULL;
    cc->c.next = conn->live;
    if (conn->live != NULL) {
        conn->live->prev = &cc->c;
    }
    conn->live = &cc->c;
    conn->nlive++;
}

static void live_unlink(eddy__grpc_conn_t *conn, eddy__grpc_ccall_t *cc)
{
    if (cc->c.prev != NULL) {
        cc->c.prev->next = cc->c.next;
    } else {
        conn->live = cc->c.next;
    }
    if (cc->c.next != NULL) {
        cc->c.next->prev = cc->c.prev;
    }
    cc->c.prev = cc->c.next = NULL;
    cc->conn = NULL;
    conn->nlive--;
}

void eddy__grpc_conn_forget(eddy__grpc_ccall_t *cc)
{
    if (cc->conn == NULL) {
        return;
    }
    if (cc->waiting) {
        waiting_unlink(cc->conn, cc);
    } else {
        live_unlink(cc->conn, cc);
    }
}

/* ---------------------------------------------------------------------------------------
 * Connections: their states
 */

/* conn fails or closes: out of its slot, its calls ended UNAVAILABLE with why (those on
 * streams reset with h2_code unless it is UINT32_MAX), its channel closed, what it waits
 * for cancelled. */
static void conn_dead(eddy__grpc_conn_t *conn, const char *why, uint32_t h2_code)
{
    if (conn->state == EDDY__GRPC_CONN_DEAD) {
        return;
    }
    conn->state = EDDY__GRPC_CONN_DEAD;
    conn_unslot(conn);
    while (conn->waiting != NULL) {
        eddy__grpc_call_end(&conn->waiting->c, EDDY_GRPC_UNAVAILABLE, why, UINT32_MAX);
    }
    while (conn->live != NULL) {
        eddy__grpc_call_end(conn->live, EDDY_GRPC_UNAVAILABLE, why, h2_code);
    }
    if (conn->ctx != NULL) {
        eddy_channel_close(eddy_ctx_channel(conn->ctx), NULL);
    }
    if (conn->pending != NULL) {
        eddy_future_cancel(conn->pending); /* its listener drops its reference */
    }
    conn_unref(conn); /* alive */
}

/* conn could not be made: the calls waiting for it hear why. Logged unless they do. */
static void conn_fail(eddy__grpc_conn_t *conn, const char *what)
{
    eddy_grpc_channel_t *c = conn->chan;
    char why[sizeof(conn->why)];
    snprintf(why, sizeof(why), "failed to connect to %s: %s", c->target, what);
    memcpy(conn->why, why, sizeof(why));
    eddy__log(conn->waiting != NULL ? EDDY_LOG_DEBUG : EDDY_LOG_INFO, "grpc: channel %s: %s",
              c->target, conn->why);
    conn_dead(conn, conn->why, EDDY_H2_CANCEL);
}

/* Wait for f (NULL: none could be made) with cb, holding a reference for it. */
static void conn_wait(eddy__grpc_conn_t *conn, eddy_future_t *f, eddy_future_cb cb)
{
    conn_ref(conn);
    conn->pending = f;
    if (eddy_future_add_listener(f, cb, conn) == 0) {
        return; /* cb may have run already: conn is not ours to touch here */
    }
    conn->pending = NULL; /* no memory: cb never runs */
    eddy_future_cancel(f);
    eddy_future_release(f);
    conn_fail(conn, eddy_strerror(EDDY_ENOMEM));
    conn_unref(conn);
}

/* Keepalive (grpc doc/keepalive.md): a PING once nothing was read for keepalive_ms while
 * calls are open; unanswered (nothing read) within keepalive_timeout_ms, the connection
 * ends. */
static void keepalive_tick(eddy_ctx_t *ctx, void *arg)
{
    eddy__grpc_conn_t *conn = arg;
    eddy_grpc_channel_t *c = conn->chan;
    eddy_pipeline_t *p = eddy_ctx_pipeline(ctx);
    int64_t now = eddy_loop_now_ns(eddy_ctx_loop(ctx)), last = eddy__h2_last_read(p);
    if (conn->ping_at != 0 && last > conn->ping_at) {
        conn->ping_at = 0; /* answered */
    }
    if (conn->ping_at != 0 && now - conn->ping_at >= c->o.keepalive_timeout_ms * NS_PER_MS) {
        snprintf(conn->why, sizeof(conn->why), "keepalive timeout: %s did not answer a PING "
                 "within %lld ms", c->target, (long long)c->o.keepalive_timeout_ms);
        eddy__log(EDDY_LOG_INFO, "grpc: channel %s: %s", c->target, conn->why);
        conn_dead(conn, conn->why, EDDY_H2_CANCEL);
    } else if (conn->ping_at == 0 && conn->nlive > 0 &&
               now - last >= c->keepalive_ms * NS_PER_MS && eddy__h2_ping(p) == 0) {
        conn->ping_at = now;
    }
}

static void keepalive_start(eddy__grpc_conn_t *conn)
{
    eddy_grpc_channel_t *c = conn->chan;
    if (c->keepalive_ms <= 0) {
        return;
    }
    int64_t least = c->keepalive_ms < c->o.keepalive_timeout_ms ? c->keepalive_ms
                                                                : c->o.keepalive_timeout_ms;
    int64_t period = least / 4 < 10 ? 10 : least / 4 > 1000 ? 1000 : least / 4;
    conn->keepalive = eddy_ctx_schedule_at_fixed_rate(conn->ctx, period, period, keepalive_tick,
                                                      conn);
    if (conn->keepalive == 0) {
        eddy__log(EDDY_LOG_WARN, "grpc: channel %s: no keepalive on a connection (no memory)",
                  c->target);
    }
}

/* HTTP/2 is up on conn: the calls waiting for it open their streams. */
static void conn_ready(eddy__grpc_conn_t *conn)
{
    assert(conn->state == EDDY__GRPC_CONN_CONNECTING && conn->ctx != NULL);
    conn->state = EDDY__GRPC_CONN_READY;
    keepalive_start(conn);
    while (conn->state == EDDY__GRPC_CONN_READY && conn->waiting != NULL) {
        eddy__grpc_ccall_t *cc = conn->waiting;
        waiting_unlink(conn, cc);
        eddy__grpc_call_attach(cc, conn);
    }
}

void eddy__grpc_conn_going_away(eddy__grpc_conn_t *conn)
{
    if (conn->state != EDDY__GRPC_CONN_READY) {
        return;
    }
    eddy_grpc_channel_t *c = conn->chan;
    conn->state = EDDY__GRPC_CONN_DRAINING;
    conn_unslot(conn);
    conn->next = c->others;
    c->others = conn;
    while (conn->waiting != NULL) { /* the rest of conn_ready's: they go elsewhere */
        eddy__grpc_ccall_t *cc = conn->waiting;
        waiting_unlink(conn, cc);
        eddy__grpc_channel_dispatch(cc);
    }
}

/* The handler of conn's channel ctx is gone, or the channel closed. */
static void conn_lost(eddy__grpc_conn_t *conn, eddy_ctx_t *ctx)
{
    if (conn->ctx != ctx) {
        return; /* an earlier attempt's */
    }
    bool connected = conn->active;
    if (conn->keepalive != 0) {
        eddy_ctx_cancel(ctx, conn->keepalive);
        conn->keepalive = 0;
    }
    conn->ctx = NULL;
    conn->active = false;
    if (conn->state == EDDY__GRPC_CONN_READY || conn->state == EDDY__GRPC_CONN_DRAINING) {
        snprintf(conn->why, sizeof(conn->why), "the connection to %s closed%s%s",
                 conn->chan->target, conn->err != 0 ? ": " : "",
                 conn->err != 0 ? eddy_strerror(conn->err) : "");
        conn_dead(conn, conn->why, UINT32_MAX);
    } else if (conn->state == EDDY__GRPC_CONN_CONNECTING && connected) {
        conn_fail(conn, conn->err != 0 ? eddy_strerror(conn->err)
                                       : "the connection closed before HTTP/2 began");
    } /* else a connect that failed: its listener goes on */
}

/* ---------------------------------------------------------------------------------------
 * The "grpc-client" handler, last in each connection's pipeline
 */

typedef struct link_s {
    eddy__grpc_conn_t *conn; /* one reference */
} link_t;

static eddy__grpc_conn_t *conn_of(eddy_ctx_t *ctx)
{
    return ((link_t *)eddy_ctx_state(ctx))->conn;
}

static void link_added(eddy_ctx_t *ctx)
{
    eddy__grpc_conn_t *conn = conn_of(ctx);
    conn->ctx = ctx; /* the latest attempt's (an earlier one may not be removed yet) */
    conn->active = false;
}

static void link_removed(eddy_ctx_t *ctx)
{
    conn_lost(conn_of(ctx), ctx);
}

static void link_active(eddy_ctx_t *ctx)
{
    eddy__grpc_conn_t *conn = conn_of(ctx);
    eddy_ctx_fire_channel_active(ctx);
    if (conn->ctx != ctx) {
        return;
    }
    conn->active = true;
    if (conn->state != EDDY__GRPC_CONN_CONNECTING) {
        eddy_channel_close(eddy_ctx_channel(ctx), NULL); /* it connected too late */
    } else if (conn->chan->o.tls == NULL) {
        conn_ready(conn); /* prior knowledge: the connection handler started before us */
    }
}

static void link_inactive(eddy_ctx_t *ctx)
{
    conn_lost(conn_of(ctx), ctx);
    eddy_ctx_fire_channel_inactive(ctx);
}

/* The TLS handshake ended: HTTP/2 goes before us if ALPN chose it. */
static void tls_done(eddy__grpc_conn_t *conn, eddy_ctx_t *ctx, const eddy_tls_handshake_event_t *hs)
{
    if (conn->ctx != ctx || conn->state != EDDY__GRPC_CONN_CONNECTING) {
        return;
    }
    if (hs->error != 0) {
        conn->err = hs->error;
        conn_fail(conn, hs->reason[0] != '\0' ? hs->reason : eddy_strerror(hs->error));
        return;
    }
    if (strcmp(hs->alpn, "h2") != 0) {
        conn_fail(conn, "the server did not choose \"h2\" by ALPN");
        return;
    }
    eddy_handler_t h = eddy_h2_client_connection(&conn->chan->o.h2);
    int err = h.ops == NULL ? h.error
                            : eddy_pipeline_add_before(eddy_ctx_pipeline(ctx), eddy_ctx_name(ctx),
                                                       h.name, h.ops, h.state, h.free_state);
    if (err != 0) {
        conn_fail(conn, eddy_strerror(err));
        return;
    }
    conn_ready(conn);
}

static void goaway(eddy__grpc_conn_t *conn, const eddy_h2_goaway_t *g)
{
    eddy_grpc_channel_t *c = conn->chan;
    eddy__log(EDDY_LOG_DEBUG, "grpc: channel %s: GOAWAY (code %u, last stream %u)", c->target,
              g->error_code, g->last_stream_id);
    if (g->error_code == EDDY_H2_ENHANCE_YOUR_CALM && c->keepalive_ms > 0 &&
        c->keepalive_ms < INT64_MAX / 2) {
        c->keepalive_ms *= 2; /* "too_many_pings" (grpc doc/keepalive.md): ping less */
        eddy__log(EDDY_LOG_WARN, "grpc: channel %s: GOAWAY ENHANCE_YOUR_CALM: keepalive "
                  "pings every %lld ms from now", c->target, (long long)c->keepalive_ms);
    }
    eddy__grpc_conn_going_away(conn);
}

static void link_event(eddy_ctx_t *ctx, int event, void *data)
{
    eddy__grpc_conn_t *conn = conn_of(ctx);
    if (event == EDDY_EVENT_TLS_HANDSHAKE) {
        tls_done(conn, ctx, data);
    } else if (event == EDDY_EVENT_H2_STREAM_WRITABLE) {
        eddy__grpc_call_writable(data);
    } else if (event == EDDY_EVENT_H2_GOAWAY && conn->ctx == ctx) {
        goaway(conn, data);
    }
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_fire_user_event(ctx, event, data);
    }
}

static void link_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    if (msg->type != EDDY_MSG_H2_HEADERS && msg->type != EDDY_MSG_H2_DATA &&
        msg->type != EDDY_MSG_H2_RESET) {
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    eddy__grpc_client_read(msg, conn_of(ctx));
    eddy_msg_release(msg);
}

/* Errors end here (the calls hear of them as the connection closes). */
static void link_exception(eddy_ctx_t *ctx, int err)
{
    eddy__grpc_conn_t *conn = conn_of(ctx);
    if (conn->ctx == ctx) {
        conn->err = err;
    }
    eddy__log(EDDY_LOG_DEBUG, "grpc: channel %s: connection error: %s", conn->chan->target,
              eddy_strerror(err));
}

static void link_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOTSUP); /* calls send through their functions */
}

static void link_free(void *state)
{
    link_t *l = state;
    conn_unref(l->conn);
    free(l);
}

static const eddy_handler_ops_t link_ops = {
    .name = "grpc-client",
    .handler_added = link_added,
    .handler_removed = link_removed,
    .channel_active = link_active,
    .channel_inactive = link_inactive,
    .channel_read = link_read,
    .user_event_triggered = link_event,
    .exception_caught = link_exception,
    .write = link_write,
};

static eddy_handler_t link_handler(eddy__grpc_conn_t *conn)
{
    link_t *l = malloc(sizeof(*l));
    if (l != NULL) {
        conn_ref(conn);
        l->conn = conn;
    }
    return eddy_handler("grpc-client", &link_ops, l, link_free);
}

/* ---------------------------------------------------------------------------------------
 * Connecting
 */

static int conn_init(eddy_channel_t *ch, void *arg)
{
    eddy__grpc_conn_t *conn = arg;
    eddy_grpc_channel_t *c = conn->chan;
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    if (c->o.tls == NULL) {
        return EDDY_PIPELINE_ADD_LAST(p, eddy_h2_client_connection(&c->o.h2), link_handler(conn));
    }
    eddy_tls_handler_options_t to = {.server_name = c->server_name};
    int err = eddy_tls_add(ch, c->o.tls, &to, NULL);
    return err != 0 ? err : EDDY_PIPELINE_ADD_LAST(p, link_handler(conn));
}

static void conn_try(eddy__grpc_conn_t *conn);

static void connected(eddy_future_t *f, void *arg)
{
    eddy__grpc_conn_t *conn = arg;
    int err = eddy_future_error(f);
    conn->pending = NULL;
    if (err != 0 && conn->state == EDDY__GRPC_CONN_CONNECTING) {
        conn->err = err;
        conn_try(conn);
    } else if (err == 0 && conn->state == EDDY__GRPC_CONN_DEAD) {
        eddy_channel_close(eddy_future_channel(f), NULL);
    }
    eddy_future_release(f);
    conn_unref(conn);
}

/* Connect to the next address, or fail with the last one's error. */
static void conn_try(eddy__grpc_conn_t *conn)
{
    eddy_grpc_channel_t *c = conn->chan;
    if (conn->next_addr == conn->naddrs) {
        conn_fail(conn, eddy_strerror(conn->err));
        return;
    }
    const eddy_addr_t *a = &conn->addrs[conn->next_addr++];
    conn_wait(conn, eddy_channel_connect(c->loop, a, &c->config, conn_init, conn), connected);
}

static void resolved(eddy_future_t *f, void *arg)
{
    eddy__grpc_conn_t *conn = arg;
    conn->pending = NULL;
    const eddy_addr_list_t *l = eddy_resolve_result(f);
    if (conn->state != EDDY__GRPC_CONN_RESOLVING) {
        /* closed meanwhile */
    } else if (l == NULL) {
        char what[128];
        snprintf(what, sizeof(what), "resolving %s: %s", conn->chan->host,
                 eddy_strerror(eddy_future_error(f)));
        conn_fail(conn, what);
    } else if ((conn->addrs = malloc(l->count * sizeof(*conn->addrs))) == NULL) {
        conn_fail(conn, eddy_strerror(EDDY_ENOMEM));
    } else {
        memcpy(conn->addrs, l->addrs, l->count * sizeof(*conn->addrs));
        conn->naddrs = l->count;
        conn->state = EDDY__GRPC_CONN_CONNECTING;
        conn_try(conn);
    }
    eddy_future_release(f);
    conn_unref(conn);
}

static void conn_start(eddy__grpc_conn_t *conn)
{
    eddy_grpc_channel_t *c = conn->chan;
    assert(conn->state == EDDY__GRPC_CONN_NEW);
    conn->state = EDDY__GRPC_CONN_RESOLVING;
    eddy_resolve_options_t ro = {.timeout_ms = c->o.connect_timeout_ms};
    conn_wait(conn, eddy_resolve(c->loop, c->host, c->port, &ro), resolved);
}

/* ---------------------------------------------------------------------------------------
 * Round robin
 */

static eddy__grpc_conn_t *ready_next(eddy_grpc_channel_t *c)
{
    size_t n = c->o.connections;
    for (size_t i = 0; i < n; i++) {
        size_t k = (c->rr + i) % n;
        if (c->slots[k] != NULL && c->slots[k]->state == EDDY__GRPC_CONN_READY) {
            c->rr = k + 1;
            return c->slots[k];
        }
    }
    return NULL;
}

/* The next slot's connection being made, or a new one in an empty slot; NULL without
 * memory. */
static eddy__grpc_conn_t *pending_next(eddy_grpc_channel_t *c)
{
    size_t n = c->o.connections;
    for (size_t i = 0; i < n; i++) {
        size_t k = (c->rr + i) % n;
        eddy__grpc_conn_t *conn = c->slots[k] != NULL ? c->slots[k] : conn_new(c, k);
        if (conn != NULL) {
            c->rr = k + 1;
            return conn;
        }
    }
    return NULL;
}

/* An empty slot gets a connection, for the calls to come. */
static void spare_start(eddy_grpc_channel_t *c)
{
    for (size_t k = 0; k < c->o.connections; k++) {
        if (c->slots[k] == NULL) {
            eddy__grpc_conn_t *conn = conn_new(c, k);
            if (conn != NULL) {
                conn_start(conn);
            }
            return;
        }
    }
}

void eddy__grpc_channel_dispatch(eddy__grpc_ccall_t *cc)
{
    eddy_grpc_channel_t *c = cc->chan;
    assert(cc->conn == NULL && !cc->c.ended);
    if (c->closing) {
        eddy__grpc_call_end(&cc->c, EDDY_GRPC_UNAVAILABLE, "channel closed", UINT32_MAX);
        return;
    }
    eddy__grpc_conn_t *conn = ready_next(c);
    if (conn != NULL) {
        eddy__grpc_call_attach(cc, conn);
        spare_start(c);
        return;
    }
    conn = pending_next(c);
    if (conn == NULL) {
        eddy__grpc_call_end(&cc->c, EDDY_GRPC_UNAVAILABLE, eddy_strerror(EDDY_ENOMEM),
                            UINT32_MAX);
        return;
    }
    waiting_append(conn, cc);
    if (conn->state == EDDY__GRPC_CONN_NEW) {
        conn_start(conn);
    }
}
