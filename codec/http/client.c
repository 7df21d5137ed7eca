/*
 * eddy_http_client_t (include/eddy/http_client.h): URLs over a keyed pool.
 *
 * A route is what the pool map's factory makes for a key (host, port, TLS): a client bootstrap
 * whose init adds TLS (with the host as SNI and the name verified), the client codec, the
 * aggregator and the exchange, and the channel pool on it. Routes live until the client is
 * closed: the pools borrow their bootstraps.
 *
 * A call is one request's way through: acquire a channel from its route's pool, send on it
 * with eddy_http_send(), hand the response to the caller's future, give the channel back. One
 * step is in flight at a time, so a call needs a lock only for cancelling: the caller may
 * cancel its future from any thread, and the step in flight is cancelled with it (an acquire
 * gives up its place; a send closes the connection, as nothing else skips a response).
 *
 * A request that fails because its connection went away is tried once more on another when
 * its method is idempotent (RFC 9110 section 9.2.2): a server may close a kept-alive
 * connection at any time, and the close can cross the request on the wire.
 *
 * HTTP/2 (http2.h): a route that may speak it (https offering "h2" by ALPN, or http:// with
 * prior knowledge) ends its pipelines with a small handler, the connection's "http-client",
 * which knows which protocol the connection speaks once the TLS handshake said so (at once
 * for prior knowledge), puts that protocol's handlers before itself, and completes the
 * connection's ready future. An HTTP/1.1 connection serves one call at a time from the pool,
 * as above. An HTTP/2 one becomes the route's mux: every call sends on it at once (the
 * connection handler queues streams above the server's limit), without a trip through the
 * pool, which only counts it as one connection held out until it closes. While a route does
 * not know yet what its origin speaks, or lost its mux, one call connects and the others wait
 * for it (curl's PIPEWAIT), so a burst of calls makes one connection, not one each. A mux
 * stops taking calls at the peer's GOAWAY, and closes once its streams ended; a stream the
 * server never processed (EDDY_ECONNABORTED) is sent again on another, whatever its method.
 */
#include <eddy/http2.h>
#include <eddy/http_client.h>
#include <eddy/http_coding.h>

#include "buffer/layer.h"
#include "codec/http/internal.h"
#include "pipeline/layer.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_CONNECTIONS 8
#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_RESPONSE_TIMEOUT_MS 30000
#define DEFAULT_IDLE_TIMEOUT_MS 60000

typedef struct conn_s conn_t;
typedef struct waiter_s waiter_t;

typedef struct route_s {
    struct route_s *next;
    eddy_http_client_t *client;
    eddy_bootstrap_t *b;
    char *host; /* the name TLS sends and verifies */
    uint16_t port;
    bool tls;
    bool h2;    /* it may speak HTTP/2: its connections end with the "http-client" handler */
    /* The rest under the client's lock. */
    int proto;          /* what its origin speaks: 0 not known yet, 1 HTTP/1.1, 2 HTTP/2 */
    conn_t *conns;      /* its connections' handler states (h2 only) */
    conn_t *mux;        /* the HTTP/2 connection its calls share, or NULL */
    bool probing;       /* a call is making the connection the others wait for */
    waiter_t *waiters;  /* ... those others */
} route_t;

/* A call waiting for its route's probe: the promise completes when the probe ended (0: try
 * again; an error: the connect's, to fail with). */
struct waiter_s {
    waiter_t *next;
    eddy_promise_t *p; /* one reference */
};

/* The "http-client" handler's state: one connection of an h2 route. */
struct conn_s {
    conn_t *prev, *next;    /* route->conns, under the client's lock */
    route_t *route;
    eddy_channel_t *ch;     /* the handler's channel: valid while the conn is linked */
    eddy_promise_t *ready;  /* done once the protocol is known (&speaks_h1 or &speaks_h2), or
                               failed with what ended the connection first */
    bool linked;            /* in route->conns (the client's lock) */
    bool going_away;        /* GOAWAY came or it closed: no new calls (the client's lock) */
    eddy_future_t *acquired; /* the client's lock: the pool's acquire, held while the
                                connection is (or was) its route's mux, until it closes */
    eddy_channel_pool_t *pool; /* ... and the pool to give it back to */
    eddy_h2_options_t h2;   /* for an HTTP/2 connection handler, made at the handshake */
    size_t max_content;
    int64_t response_timeout_ms;
};

/* The results of a conn's ready future. */
static char speaks_h1, speaks_h2;

typedef struct call_s call_t;

struct eddy_http_client_s {
    eddy_loop_group_t *group;
    eddy_http_client_options_t o; /* with the defaults filled in */
    eddy_tls_context_t *tls;       /* one reference */
    eddy_channel_pool_map_t *pools;
    pthread_mutex_t lock; /* guards the rest */
    route_t *routes;
    call_t *calls;       /* the calls not ended yet, to fail at close */
    bool closing;        /* eddy_http_client_close() was called */
    bool pools_closed;   /* and the pools' close completed */
    unsigned starting;   /* acquires being started: close waits for them (started, below) */
    pthread_cond_t started;
    eddy_promise_t *closed; /* close's future: completed once the client is freed */
};

/* ---------------------------------------------------------------------------------------
 * URLs
 */

static bool host_char_ok(unsigned char c)
{
    return c > ' ' && c < 0x7f && c != '/' && c != '\\' && c != '@';
}

static const char *scheme_end(const char *s, bool *tls)
{
    static const struct {
        const char *prefix;
        bool tls;
    } schemes[] = {{"http://", false}, {"https://", true}, {"ws://", false}, {"wss://", true}};
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        size_t n = strlen(schemes[i].prefix);
        if (strncmp(s, schemes[i].prefix, n) == 0) {
            *tls = schemes[i].tls;
            return s + n;
        }
    }
    return NULL;
}

int eddy_url_parse(const char *url, eddy_url_t *u)
{
    memset(u, 0, sizeof(*u));
    const char *s = url != NULL ? scheme_end(url, &u->tls) : NULL;
    if (s == NULL) {
        return EDDY_EINVAL;
    }
    size_t auth_len = strcspn(s, "/?#");
    const char *end = s + auth_len;
    bool v6 = *s == '[';
    const char *host = v6 ? s + 1 : s;
    const char *host_end = v6 ? memchr(host, ']', (size_t)(end - host)) : memchr(s, ':', auth_len);
    if (host_end == NULL) {
        if (v6) {
            return EDDY_EINVAL;
        }
        host_end = end;
    }
    const char *p = v6 ? host_end + 1 : host_end; /* the port's ':', or end */
    size_t host_len = (size_t)(host_end - host);
    if (host_len == 0 || host_len >= sizeof(u->host)) {
        return EDDY_EINVAL;
    }
    for (size_t i = 0; i < host_len; i++) {
        if (!host_char_ok((unsigned char)host[i]) || (!v6 && host[i] == ':')) {
            return EDDY_EINVAL;
        }
    }
    memcpy(u->host, host, host_len);
    unsigned long port = u->tls ? 443 : 80;
    if (p < end) {
        if (*p != ':' || p + 1 == end || end - (p + 1) > 5) {
            return EDDY_EINVAL;
        }
        port = 0;
        for (const char *d = p + 1; d < end; d++) {
            if (*d < '0' || *d > '9') {
                return EDDY_EINVAL;
            }
            port = port * 10 + (unsigned long)(*d - '0');
        }
        if (port == 0 || port > 65535) {
            return EDDY_EINVAL;
        }
    }
    u->port = (uint16_t)port;
    const char *open = v6 ? "[" : "", *close = v6 ? "]" : "";
    int n = port == (u->tls ? 443u : 80u)
                ? snprintf(u->authority, sizeof(u->authority), "%s%s%s", open, u->host, close)
                : snprintf(u->authority, sizeof(u->authority), "%s%s%s:%lu", open, u->host,
                           close, port);
    if (n < 0 || (size_t)n >= sizeof(u->authority)) {
        return EDDY_EINVAL;
    }
    u->path.p = end;
    u->path.len = *end == '#' ? 0 : strcspn(end, "#");
    return 0;
}

/* The target to send for u: its path and query; "/" when there is no path ("/?q" for a bare
 * query). A new string, or NULL without memory. */
static char *target_of(const eddy_url_t *u)
{
    size_t slash = u->path.len == 0 || u->path.p[0] == '?' ? 1 : 0;
    char *s = malloc(u->path.len + slash + 1);
    if (s == NULL) {
        return NULL;
    }
    s[0] = '/';
    memcpy(s + slash, u->path.p, u->path.len);
    s[u->path.len + slash] = '\0';
    return s;
}

/* ---------------------------------------------------------------------------------------
 * Connections of routes that may speak HTTP/2: the "http-client" handler
 */

/* The conn of ch among r's, or NULL (it closed). The client's lock. */
static conn_t *conn_find(route_t *r, const eddy_channel_t *ch)
{
    for (conn_t *k = r->conns; k != NULL; k = k->next) {
        if (k->ch == ch) {
            return k;
        }
    }
    return NULL;
}

/* k takes no more calls: it is no longer its route's mux. The client's lock. */
static void conn_retire(conn_t *k)
{
    k->going_away = true;
    if (k->route->mux == k) {
        k->route->mux = NULL;
    }
}

/* Add h before the handler base of p. */
static int add_before(eddy_pipeline_t *p, const char *base, eddy_handler_t h)
{
    if (h.ops == NULL) {
        return h.error;
    }
    return eddy_pipeline_add_before(p, base, h.name, h.ops, h.state, h.free_state);
}

/* Put the handlers of the protocol the handshake chose before ours, and say which. */
static void conn_install(eddy_ctx_t *ctx, conn_t *k, const char *alpn)
{
    eddy_pipeline_t *p = eddy_ctx_pipeline(ctx);
    const char *self = eddy_ctx_name(ctx);
    bool h2 = strcmp(alpn, "h2") == 0;
    int err;
    if (h2) {
        err = add_before(p, self, eddy_h2_client_connection(&k->h2));
        if (err == 0) {
            err = add_before(p, self,
                             eddy_h2_http_client_adapter(k->max_content, k->response_timeout_ms));
        }
    } else {
        err = add_before(p, self, eddy_http_client_codec(NULL));
        if (err == 0) {
            err = add_before(p, self, eddy_http_response_aggregator(k->max_content));
        }
        if (err == 0) {
            err = add_before(p, self, eddy_http_exchange(k->response_timeout_ms));
        }
    }
    if (err != 0) {
        eddy_promise_fail(k->ready, err);
        eddy_ctx_close(ctx, NULL);
        return;
    }
    eddy_promise_succeed(k->ready, h2 ? &speaks_h2 : &speaks_h1);
}

static void conn_added(eddy_ctx_t *ctx)
{
    conn_t *k = eddy_ctx_state(ctx);
    eddy_http_client_t *c = k->route->client;
    k->ch = eddy_ctx_channel(ctx);
    pthread_mutex_lock(&c->lock);
    k->linked = true;
    k->next = k->route->conns;
    if (k->next != NULL) {
        k->next->prev = k;
    }
    k->route->conns = k;
    pthread_mutex_unlock(&c->lock);
}

/* The connection ends (inactive, or its handler removed): out of the route, and the pool
 * gets back the slot it held as a mux. */
static void conn_end(conn_t *k)
{
    eddy_http_client_t *c = k->route->client;
    pthread_mutex_lock(&c->lock);
    eddy_future_t *acquired = k->acquired;
    k->acquired = NULL;
    if (k->linked) {
        conn_retire(k);
        k->linked = false;
        if (k->prev != NULL) {
            k->prev->next = k->next;
        } else {
            k->route->conns = k->next;
        }
        if (k->next != NULL) {
            k->next->prev = k->prev;
        }
        k->prev = k->next = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    eddy_promise_fail(k->ready, EDDY_ECLOSED); /* nothing when it is known already */
    if (acquired != NULL) {
        eddy_future_release(eddy_channel_pool_release(k->pool, eddy_future_channel(acquired)));
        eddy_future_release(acquired);
    }
}

static void conn_inactive(eddy_ctx_t *ctx)
{
    conn_end(eddy_ctx_state(ctx));
    eddy_ctx_fire_channel_inactive(ctx);
}

static void conn_removed(eddy_ctx_t *ctx)
{
    conn_end(eddy_ctx_state(ctx));
}

static void conn_event(eddy_ctx_t *ctx, int event, void *data)
{
    conn_t *k = eddy_ctx_state(ctx);
    if (event == EDDY_EVENT_TLS_HANDSHAKE && !eddy_future_is_done(k->ready)) {
        const eddy_tls_handshake_event_t *hs = data;
        if (hs->error != 0) {
            eddy_promise_fail(k->ready, hs->error);
        } else {
            conn_install(ctx, k, hs->alpn);
        }
    } else if (event == EDDY_EVENT_H2_GOAWAY) {
        eddy_http_client_t *c = k->route->client;
        pthread_mutex_lock(&c->lock);
        conn_retire(k);
        pthread_mutex_unlock(&c->lock);
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

/* Errors end here: before the protocol is known they fail the connection's ready future
 * (the calls waiting for it hear of them so); after, the protocol's handlers before this one
 * have failed what they concern. Either way nobody is left to tell. */
static void conn_exception(eddy_ctx_t *ctx, int err)
{
    conn_t *k = eddy_ctx_state(ctx);
    eddy_promise_fail(k->ready, err); /* nothing once it is known */
}

static void conn_free(void *state)
{
    conn_t *k = state;
    eddy_future_release(k->ready);
    free(k);
}

static const eddy_handler_ops_t conn_ops = {
    .name = "http-client",
    .handler_added = conn_added,
    .handler_removed = conn_removed,
    .user_event_triggered = conn_event,
    .exception_caught = conn_exception,
    .channel_inactive = conn_inactive,
};

/* ---------------------------------------------------------------------------------------
 * Routes: the pool map's factory
 */

static int route_init(eddy_channel_t *ch, void *arg)
{
    route_t *r = arg;
    eddy_http_client_t *c = r->client;
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    if (r->tls) {
        eddy_tls_handler_options_t to = {.server_name = r->host};
        int rc = c->tls != NULL ? eddy_tls_add(ch, c->tls, &to, NULL) : EDDY_ENOTSUP;
        if (rc != 0) {
            return rc;
        }
    }
    if (!r->h2) {
        return EDDY_PIPELINE_ADD_LAST(p, eddy_http_client_codec(NULL),
                                      eddy_http_response_aggregator(c->o.max_content_length),
                                      eddy_http_exchange(c->o.response_timeout_ms));
    }
    conn_t *k = calloc(1, sizeof(*k));
    if (k == NULL || (k->ready = eddy_promise_new(eddy_channel_loop(ch))) == NULL) {
        free(k);
        return EDDY_ENOMEM;
    }
    k->route = r;
    k->max_content = c->o.max_content_length;
    k->response_timeout_ms = c->o.response_timeout_ms;
    k->h2 = (eddy_h2_options_t){
        .idle_timeout_ms = c->o.idle_timeout_ms,
        .max_queued_streams = c->o.max_pending_acquires == 0 ? UINT32_MAX
                              : c->o.max_pending_acquires > UINT32_MAX
                                  ? UINT32_MAX
                                  : (uint32_t)c->o.max_pending_acquires,
    };
    if (r->tls) { /* the handshake's ALPN decides (conn_event) */
        return EDDY_PIPELINE_ADD_LAST(p, eddy_handler("http-client", &conn_ops, k, conn_free));
    }
    eddy_promise_succeed(k->ready, &speaks_h2); /* prior knowledge */
    return EDDY_PIPELINE_ADD_LAST(p, eddy_h2_client_connection(&k->h2),
                                  eddy_h2_http_client_adapter(k->max_content,
                                                              k->response_timeout_ms),
                                  eddy_handler("http-client", &conn_ops, k, conn_free));
}

static void route_free(route_t *r)
{
    if (r != NULL) {
        while (r->waiters != NULL) {
            waiter_t *w = r->waiters;
            r->waiters = w->next;
            eddy_promise_fail(w->p, EDDY_ECLOSED);
            eddy_future_release(w->p);
            free(w);
        }
        eddy_bootstrap_free(r->b);
        free(r->host);
        free(r);
    }
}

static eddy_channel_pool_t *make_pool(const eddy_channel_pool_key_t *key, void *arg)
{
    eddy_http_client_t *c = arg;
    route_t *r = calloc(1, sizeof(*r));
    if (r == NULL || (r->host = strdup(key->host)) == NULL ||
        (r->b = eddy_bootstrap_new()) == NULL) {
        route_free(r);
        return NULL;
    }
    r->client = c;
    r->port = key->port;
    r->tls = key->tls;
    if (key->tls) {
        r->h2 = c->tls != NULL && c->o.http_version != EDDY_HTTP_CLIENT_HTTP1;
    } else if (c->o.http_version == EDDY_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE) {
        r->h2 = true;
        r->proto = 2;
    }
    eddy_bootstrap_group(r->b, c->group);
    eddy_bootstrap_option(r->b, EDDY_CONNECT_TIMEOUT_MS, c->o.connect_timeout_ms);
    eddy_bootstrap_init(r->b, route_init, r);
    eddy_channel_pool_options_t po = {
        .max_connections = c->o.max_connections_per_host,
        .max_pending_acquires = c->o.max_pending_acquires,
        .acquire_timeout_ms = c->o.acquire_timeout_ms,
        .idle_timeout_ms = c->o.idle_timeout_ms,
    };
    eddy_channel_pool_t *pool = eddy_channel_pool_new(r->b, key->host, key->port, &po);
    if (pool == NULL) {
        route_free(r);
        return NULL;
    }
    pthread_mutex_lock(&c->lock);
    r->next = c->routes;
    c->routes = r;
    pthread_mutex_unlock(&c->lock);
    return pool;
}

/* ---------------------------------------------------------------------------------------
 * The client
 */

static void client_free(eddy_http_client_t *c)
{
    route_t *r = c->routes;
    while (r != NULL) {
        route_t *next = r->next;
        route_free(r);
        r = next;
    }
    pthread_cond_destroy(&c->started);
    pthread_mutex_destroy(&c->lock);
    eddy_tls_context_release(c->tls);
    free(c);
}

/* The client closed, its pools closed and its calls ended: free it, then say so. */
static void client_finish(eddy_http_client_t *c)
{
    eddy_promise_t *p = c->closed;
    client_free(c);
    eddy_promise_succeed(p, NULL);
    eddy_future_release(p);
}

eddy_http_client_t *eddy_http_client_new(eddy_loop_group_t *g, const eddy_http_client_options_t *o)
{
    if (g == NULL) {
        return NULL;
    }
    eddy_http_client_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->group = g;
    if (o != NULL) {
        c->o = *o;
    }
    if (c->o.max_connections_per_host == 0) {
        c->o.max_connections_per_host = DEFAULT_MAX_CONNECTIONS;
    }
    if (c->o.connect_timeout_ms <= 0) {
        c->o.connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
    }
    if (c->o.response_timeout_ms == 0) {
        c->o.response_timeout_ms = DEFAULT_RESPONSE_TIMEOUT_MS;
    }
    if (c->o.idle_timeout_ms == 0) {
        c->o.idle_timeout_ms = DEFAULT_IDLE_TIMEOUT_MS;
    }
    if (c->o.max_content_length == 0) {
        c->o.max_content_length = EDDY_HTTP_MAX_CONTENT_LENGTH;
    }
    c->o.tls = NULL;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return NULL;
    }
    if (pthread_cond_init(&c->started, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
    }
    if (o != NULL && o->tls != NULL) {
        c->tls = eddy_tls_context_retain(o->tls);
    } else if (!eddy_tls_available()) {
        c->tls = NULL; /* a build without TLS: https URLs fail with EDDY_ENOTSUP */
    } else if ((c->tls = eddy_tls_context_new(EDDY_TLS_CLIENT)) == NULL) {
        eddy__log(EDDY_LOG_ERROR, "http client: no default TLS context");
        client_free(c);
        return NULL;
    }
    if (c->tls != NULL && (o == NULL || o->tls == NULL) &&
        c->o.http_version != EDDY_HTTP_CLIENT_HTTP1) {
        /* Our own context offers h2 (when this build speaks it) and http/1.1 by ALPN. */
        size_t n;
        const char *const *alpn = eddy_h2_alpn_protocols(&n);
        if (eddy_tls_context_alpn(c->tls, alpn, n) != 0) {
            eddy__log(EDDY_LOG_ERROR, "http client: ALPN refused by the TLS context");
            client_free(c);
            return NULL;
        }
    }
    if (c->tls != NULL && c->o.insecure &&
        eddy_tls_context_verify(c->tls, EDDY_TLS_VERIFY_NONE) != 0) {
        /* A caller's context already in use cannot change: say so rather than verify
         * against the caller's wish or silently not. */
        eddy__log(EDDY_LOG_ERROR, "http client: insecure asked of a TLS context in use");
        client_free(c);
        return NULL;
    }
    if ((c->pools = eddy_channel_pool_map_new(make_pool, c)) == NULL) {
        client_free(c);
        return NULL;
    }
    return c;
}

/* ---------------------------------------------------------------------------------------
 * Calls
 */

struct call_s {
    eddy_http_client_t *client;
    call_t *prev, *next;             /* in client->calls, under client->lock */
    bool aborted;                    /* client->lock: the client's close failed it */
    eddy_channel_pool_t *pool;
    eddy_http_request_t *req; /* one reference, kept for a second try */
    eddy_promise_t *p;               /* the caller's future (one reference) */
    pthread_mutex_t lock;            /* guards step and cancelled */
    eddy_future_t *step;             /* the acquire or send in flight (one reference), or NULL */
    eddy_future_t *acquired;         /* while sending: the acquire's, holding the channel */
    route_t *route;
    eddy_channel_t *mux;             /* while sending on a route's HTTP/2 connection: it (a
                                        reference), which is not the call's to give back */
    bool probing;                    /* the call makes the connection its route waits for */
    bool cancelled;                  /* the caller's future completed before the call did */
    bool retried;
    _Atomic uint32_t refs; /* the call's way through, its future's listener, a close's hold */
};

static void call_put(call_t *call)
{
    if (atomic_fetch_sub_explicit(&call->refs, 1, memory_order_acq_rel) != 1) {
        return;
    }
    assert(call->step == NULL && call->acquired == NULL && call->mux == NULL && !call->probing);
    eddy_http_client_t *c = call->client;
    pthread_mutex_lock(&c->lock);
    if (call->prev != NULL) {
        call->prev->next = call->next;
    } else {
        c->calls = call->next;
    }
    if (call->next != NULL) {
        call->next->prev = call->prev;
    }
    bool last = c->pools_closed && c->calls == NULL;
    pthread_mutex_unlock(&c->lock);
    eddy_msg_release(eddy_http_request_msg(call->req));
    eddy_future_release(call->p);
    pthread_mutex_destroy(&call->lock);
    free(call);
    if (last) {
        client_finish(c);
    }
}

/* Make f (taken) the step in flight; when the caller's future completed already (cancelled,
 * or failed by the client's close), cancel it at once. */
static void call_step(call_t *call, eddy_future_t *f)
{
    pthread_mutex_lock(&call->lock);
    bool cancelled = call->cancelled;
    eddy_future_t *old = call->step;
    call->step = f;
    pthread_mutex_unlock(&call->lock);
    eddy_future_release(old);
    if (cancelled && f != NULL) {
        eddy_future_cancel(f);
    }
}

/* The call ends with its promise completed: drop the step and the way's reference. */
static void call_done(call_t *call)
{
    call_step(call, NULL);
    call_put(call);
}

static void call_fail(call_t *call, int err)
{
    eddy_promise_fail(call->p, err);
    call_done(call);
}

/* The caller's future completed. When the call did not complete it (the caller cancelled it,
 * or the client's close failed it), the step in flight is cancelled: an acquire gives up its
 * place, a send closes its connection. */
static void caller_done(eddy_future_t *f, void *arg)
{
    call_t *call = arg;
    if (eddy_future_error(f) != 0) {
        pthread_mutex_lock(&call->lock);
        call->cancelled = true;
        eddy_future_t *step = eddy_future_retain(call->step);
        pthread_mutex_unlock(&call->lock);
        if (step != NULL) {
            eddy_future_cancel(step);
            eddy_future_release(step);
        }
    }
    call_put(call);
}

/* A hold on a call found in the client's list, unless its last reference is gone already:
 * then it is on its way out (waiting for the lock to leave the list) and must not be held. */
static bool call_hold_if_live(call_t *call)
{
    uint32_t n = atomic_load_explicit(&call->refs, memory_order_relaxed);
    while (n != 0) {
        if (atomic_compare_exchange_weak_explicit(&call->refs, &n, n + 1, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            return true;
        }
    }
    return false;
}

/* Fail a call from outside its way (the client's close), dropping a hold on it. */
static void call_abort(call_t *call, int err)
{
    eddy_promise_fail(call->p, err); /* caller_done cancels the step */
    call_put(call);
}

static bool idempotent(eddy_http_method_t m)
{
    return m == EDDY_HTTP_GET || m == EDDY_HTTP_HEAD || m == EDDY_HTTP_PUT ||
           m == EDDY_HTTP_DELETE || m == EDDY_HTTP_OPTIONS || m == EDDY_HTTP_TRACE;
}

/* Errors that say the connection went away under the request, not that the server answered
 * badly: worth one more try on a fresh connection. */
static bool connection_lost(int err)
{
    return err == EDDY_EOF || err == EDDY_ECLOSED || err == EDDY_ECONNRESET || err == EDDY_EPIPE;
}

static void release_response(void *r)
{
    eddy_msg_release(&((eddy_http_response_t *)r)->_msg);
}

/* Give the channel the call holds back to the pool (which drops it when it closed). */
static void give_back(call_t *call)
{
    eddy_future_t *acquired = call->acquired;
    call->acquired = NULL;
    if (acquired != NULL) {
        eddy_future_release(eddy_channel_pool_release(call->pool, eddy_future_channel(acquired)));
        eddy_future_release(acquired);
    }
}

static void call_acquire(call_t *call);

/* The end of starting an acquire (a send's first, or a retry): the client's close may go on. */
static void started(eddy_http_client_t *c)
{
    pthread_mutex_lock(&c->lock);
    if (--c->starting == 0 && c->closing) {
        pthread_cond_broadcast(&c->started);
    }
    pthread_mutex_unlock(&c->lock);
}

/* A second try, unless the client is closing (its pools may be gone then). */
static bool call_retry(call_t *call)
{
    eddy_http_client_t *c = call->client;
    pthread_mutex_lock(&c->lock);
    bool closing = c->closing;
    if (!closing) {
        c->starting++;
    }
    pthread_mutex_unlock(&c->lock);
    if (closing) {
        return false;
    }
    call_acquire(call);
    started(c);
    return true;
}

/* A stream on mux the server never processed, or a mux that closed: it is going away (its
 * GOAWAY or its close may not have been seen yet), and the call goes elsewhere. */
static void mux_retire(call_t *call)
{
    eddy_http_client_t *c = call->client;
    pthread_mutex_lock(&c->lock);
    conn_t *k = conn_find(call->route, call->mux);
    if (k != NULL) {
        conn_retire(k);
    }
    pthread_mutex_unlock(&c->lock);
}

static void on_response(eddy_future_t *sent, void *arg)
{
    call_t *call = arg;
    int err = eddy_future_error(sent);
    eddy_http_response_t *resp = eddy_future_http_response(sent);
    if (call->mux != NULL) {
        /* HTTP/2: the connection goes on for the other streams; it is not ours to give back. */
        if (err == EDDY_ECONNABORTED || connection_lost(err)) {
            mux_retire(call);
        }
        eddy_channel_release(call->mux);
        call->mux = NULL;
    } else {
        if (err != 0 || !resp->keep_alive) {
            /* The exchange closes it as well (after an error, or a response that does not
             * keep alive); closing first keeps the pool from handing out a channel about to
             * close. */
            eddy_channel_close(eddy_future_channel(call->acquired), NULL);
        }
        give_back(call);
    }
    bool cancelled;
    pthread_mutex_lock(&call->lock);
    cancelled = call->cancelled;
    pthread_mutex_unlock(&call->lock);
    if (err == 0 && call->client->o.decompress) {
        /* The connection is fine either way: only this answer is refused. */
        int derr = eddy_http_response_decompress(resp, call->client->o.max_content_length);
        if (derr != 0) {
            call_fail(call, derr);
            return;
        }
    }
    if (err == 0) {
        eddy_msg_retain(&resp->_msg);
        eddy__promise_succeed_owned(call->p, resp, release_response);
        call_done(call);
    } else if (!cancelled && !call->retried &&
               (err == EDDY_ECONNABORTED ||
                (connection_lost(err) && idempotent(call->req->method)))) {
        call->retried = true; /* before the second try: its answer may come on another thread */
        if (!call_retry(call)) {
            call_fail(call, err);
        }
    } else {
        call_fail(call, err);
    }
}

/* Send the call's request on ch: the channel it acquired (call->acquired), or its route's
 * mux (call->mux). The request is kept, for a second try. The response may come on another
 * thread before this returns, so everything on_response reads is set before the send. */
static void call_send(call_t *call, eddy_channel_t *ch)
{
    eddy_msg_retain(eddy_http_request_msg(call->req));
    eddy_future_t *sent = eddy_http_send(ch, call->req);
    if (sent == NULL) {
        give_back(call);
        eddy_channel_release(call->mux);
        call->mux = NULL;
        call_fail(call, EDDY_ENOMEM);
        return;
    }
    call_step(call, eddy_future_retain(sent));
    if (eddy_future_add_listener(sent, on_response, call) != 0) {
        /* Nobody would wait for it: cancel it (HTTP/1.1 closes the connection under it,
         * HTTP/2 resets its stream) and end the call here. */
        eddy_future_cancel(sent);
        give_back(call);
        eddy_channel_release(call->mux);
        call->mux = NULL;
        call_fail(call, EDDY_ENOMEM);
    }
    eddy_future_release(sent);
}

/* The end of the probe the call made: its route's waiting calls go on, to its mux or the
 * pool (err 0, or an error that was the call's own: cancelled, the connection lost), or fail
 * with the connect's err. */
static void probe_end(call_t *call, int err)
{
    if (!call->probing) {
        return;
    }
    call->probing = false;
    eddy_http_client_t *c = call->client;
    pthread_mutex_lock(&c->lock);
    route_t *r = call->route;
    r->probing = false;
    waiter_t *w = r->waiters;
    r->waiters = NULL;
    pthread_mutex_unlock(&c->lock);
    bool again = err == 0 || err == EDDY_ECANCELED || connection_lost(err);
    while (w != NULL) {
        waiter_t *next = w->next;
        if (again) {
            eddy_promise_succeed(w->p, NULL);
        } else {
            eddy_promise_fail(w->p, err);
        }
        eddy_future_release(w->p);
        free(w);
        w = next;
    }
}

/* The call's connection failed before its protocol was known, or closed before its request
 * went: give it back, then fail (or try once more, as on_response would). */
static void call_lost(call_t *call, int err)
{
    give_back(call);
    probe_end(call, err);
    if (!call->retried && connection_lost(err) && idempotent(call->req->method)) {
        call->retried = true;
        if (call_retry(call)) {
            return;
        }
    }
    call_fail(call, err);
}

/* The connection the call acquired knows its protocol (ready, arg the call). */
static void on_ready(eddy_future_t *ready, void *arg)
{
    call_t *call = arg;
    eddy_http_client_t *c = call->client;
    route_t *r = call->route;
    int err = eddy_future_error(ready);
    pthread_mutex_lock(&call->lock);
    bool cancelled = call->cancelled;
    pthread_mutex_unlock(&call->lock);
    eddy_future_release(ready);
    if (cancelled || err != 0) {
        call_lost(call, cancelled ? EDDY_ECANCELED : err);
        return;
    }
    eddy_channel_t *ch = eddy_future_channel(call->acquired);
    if (eddy_future_result(ready) != &speaks_h2) {
        pthread_mutex_lock(&c->lock);
        r->proto = 1;
        pthread_mutex_unlock(&c->lock);
        probe_end(call, 0);
        call_send(call, ch);
        return;
    }
    /* HTTP/2: the connection becomes the route's mux, unless another got there first
     * (then this one is one too many: closed). */
    pthread_mutex_lock(&c->lock);
    conn_t *k = conn_find(r, ch);
    conn_t *mux = r->mux;
    bool extra = mux != NULL && mux != k;
    if (k != NULL && mux == NULL && !k->going_away) {
        r->mux = mux = k;
        k->acquired = call->acquired;
        k->pool = call->pool;
        call->acquired = NULL;
    }
    if (mux != NULL) {
        r->proto = 2;
        call->mux = eddy_channel_retain(mux->ch);
    }
    pthread_mutex_unlock(&c->lock);
    if (mux == NULL) {
        call_lost(call, EDDY_ECLOSED); /* it closed or went away meanwhile */
        return;
    }
    if (extra) {
        eddy_channel_close(ch, NULL);
        give_back(call);
    }
    probe_end(call, 0);
    call_send(call, call->mux);
}

static void on_acquired(eddy_future_t *f, void *arg)
{
    call_t *call = arg;
    int err = eddy_future_error(f);
    if (err != 0) {
        probe_end(call, err);
        call_fail(call, err);
        return;
    }
    /* The acquire's future is kept until the response is in: it holds the channel. */
    call->acquired = eddy_future_retain(f);
    eddy_channel_t *ch = eddy_future_channel(f);
    if (!call->route->h2) {
        call_send(call, ch);
        return;
    }
    /* Which protocol it speaks is known once its "http-client" handler says so. */
    eddy_http_client_t *c = call->client;
    pthread_mutex_lock(&c->lock);
    conn_t *k = conn_find(call->route, ch);
    eddy_future_t *ready = k != NULL ? eddy_future_retain(k->ready) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (ready == NULL) {
        call_lost(call, EDDY_ECLOSED);
    } else if (eddy_future_is_done(ready)) {
        on_ready(ready, call);
    } else if (eddy_future_add_listener(ready, on_ready, call) != 0) {
        eddy_future_release(ready);
        call_lost(call, EDDY_ENOMEM);
    }
}

/* The probe the call waited for ended (wait, arg the call). */
static void on_waited(eddy_future_t *wait, void *arg)
{
    call_t *call = arg;
    int err = eddy_future_error(wait);
    if (err != 0) {
        call_fail(call, err); /* the connect's error, or the caller cancelled */
    } else if (!call_retry(call)) {
        call_fail(call, EDDY_ECLOSED);
    }
}

/* Where a call of an h2 route goes: its route's mux (*mux, a reference), to wait for the probe
 * (*wait, a reference), or to the pool (neither: maybe as the probe). The client's lock. */
static int route_dispatch(call_t *call, eddy_channel_t **mux, eddy_promise_t **wait)
{
    route_t *r = call->route;
    if (r->mux != NULL) {
        *mux = eddy_channel_retain(r->mux->ch);
        return 0;
    }
    if (r->proto == 1) {
        return 0;
    }
    if (!r->probing) {
        r->probing = true;
        call->probing = true;
        return 0;
    }
    waiter_t *w = malloc(sizeof(*w));
    eddy_promise_t *p = w != NULL ? eddy_promise_new(NULL) : NULL;
    if (p == NULL) {
        free(w);
        return EDDY_ENOMEM;
    }
    *w = (waiter_t){.next = r->waiters, .p = eddy_future_retain(p)};
    r->waiters = w;
    *wait = p;
    return 0;
}

static void call_acquire(call_t *call)
{
    if (call->route->h2) {
        eddy_channel_t *mux = NULL;
        eddy_promise_t *wait = NULL;
        pthread_mutex_lock(&call->client->lock);
        int err = route_dispatch(call, &mux, &wait);
        pthread_mutex_unlock(&call->client->lock);
        if (err != 0) {
            call_fail(call, err);
            return;
        }
        if (mux != NULL) {
            call->mux = mux;
            call_send(call, mux);
            return;
        }
        if (wait != NULL) {
            call_step(call, eddy_future_retain(wait));
            if (eddy_future_add_listener(wait, on_waited, call) != 0) {
                eddy_future_cancel(wait);
                call_fail(call, EDDY_ENOMEM);
            }
            eddy_future_release(wait);
            return;
        }
    }
    eddy_future_t *f = eddy_channel_pool_acquire(call->pool);
    if (f == NULL) {
        probe_end(call, EDDY_ENOMEM);
        call_fail(call, EDDY_ENOMEM);
        return;
    }
    call_step(call, eddy_future_retain(f));
    if (eddy_future_add_listener(f, on_acquired, call) != 0) {
        eddy_future_cancel(f);
        probe_end(call, EDDY_ENOMEM);
        call_fail(call, EDDY_ENOMEM);
    }
    eddy_future_release(f);
}

static void pools_closed(eddy_future_t *f, void *arg)
{
    (void)f;
    eddy_http_client_t *c = arg;
    pthread_mutex_lock(&c->lock);
    c->pools_closed = true;
    bool last = c->calls == NULL;
    pthread_mutex_unlock(&c->lock);
    if (last) {
        client_finish(c);
    }
}

eddy_future_t *eddy_http_client_close(eddy_http_client_t *c)
{
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_future_t *result = eddy_future_retain(p);
    pthread_mutex_lock(&c->lock);
    assert(!c->closing);
    c->closing = true;
    c->closed = p; /* NULL without memory: the client is freed all the same */
    /* An acquire being started holds its pool: the pools close once none is (no new one
     * starts now), so none reaches a pool after its close. */
    while (c->starting > 0) {
        pthread_cond_wait(&c->started, &c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    /* Calls end with EDDY_ECLOSED; a call's end removes it from the list, so take the first
     * until none is left (a call taken is held while it is failed). */
    for (;;) {
        pthread_mutex_lock(&c->lock);
        call_t *call = c->calls;
        while (call != NULL && call->aborted) {
            call = call->next;
        }
        bool held = false;
        if (call != NULL) {
            call->aborted = true;
            held = call_hold_if_live(call);
        }
        pthread_mutex_unlock(&c->lock);
        if (call == NULL) {
            break;
        }
        if (held) {
            call_abort(call, EDDY_ECLOSED);
        }
    }
    /* The HTTP/2 connections are held out of their pools until they close: close them. */
    for (;;) {
        eddy_channel_t *ch = NULL;
        pthread_mutex_lock(&c->lock);
        for (route_t *r = c->routes; r != NULL && ch == NULL; r = r->next) {
            for (conn_t *k = r->conns; k != NULL && ch == NULL; k = k->next) {
                if (!k->going_away) {
                    conn_retire(k);
                    ch = eddy_channel_retain(k->ch);
                }
            }
        }
        pthread_mutex_unlock(&c->lock);
        if (ch == NULL) {
            break;
        }
        eddy_channel_close(ch, NULL);
        eddy_channel_release(ch);
    }
    eddy_future_t *f = eddy_channel_pool_map_close(c->pools);
    if (f == NULL || eddy_future_add_listener(f, pools_closed, c) != 0) {
        /* Without memory nobody can tell when the pools are closed: the client stays. */
        eddy_future_release(f);
        eddy_future_release(result);
        return NULL;
    }
    eddy_future_release(f);
    return result;
}

static eddy_future_t *failed(int err)
{
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_promise_fail(p, err);
    return p;
}

/* The route the factory made for key (its pool is in the map). */
static route_t *route_of(eddy_http_client_t *c, const eddy_channel_pool_key_t *key)
{
    pthread_mutex_lock(&c->lock);
    route_t *r = c->routes;
    while (r != NULL && (r->port != key->port || r->tls != key->tls ||
                         strcmp(r->host, key->host) != 0)) {
        r = r->next;
    }
    pthread_mutex_unlock(&c->lock);
    return r;
}

/* Point req at u: its target and Host header. */
static int route_request(eddy_http_request_t *req, const eddy_url_t *u)
{
    char *target = target_of(u);
    if (target == NULL) {
        return EDDY_ENOMEM;
    }
    int rc = eddy__http_client_request_route(req, target, u->authority);
    free(target);
    return rc;
}

eddy_future_t *eddy_http_client_send(eddy_http_client_t *c, const char *url,
                                     eddy_http_request_t *req)
{
    if (req == NULL) {
        return failed(EDDY_EINVAL);
    }
    eddy_url_t u;
    int rc = eddy_url_parse(url, &u);
    if (rc == 0) {
        rc = route_request(req, &u);
    }
    if (rc == 0 && c->o.decompress && eddy_http_codings()[0] != '\0' &&
        eddy_http_request_header(req, "accept-encoding") == NULL) {
        rc = eddy_http_request_add_header(req, "Accept-Encoding", eddy_http_codings());
    }
    eddy_channel_pool_t *pool = NULL;
    route_t *route = NULL;
    if (rc == 0) {
        eddy_channel_pool_key_t key = {.host = u.host, .port = u.port, .tls = u.tls};
        if ((pool = eddy_channel_pool_map_get(c->pools, &key)) == NULL ||
            (route = route_of(c, &key)) == NULL) {
            rc = EDDY_ECLOSED; /* closed, or the route could not be made (out of memory) */
        }
    }
    call_t *call = rc == 0 ? calloc(1, sizeof(*call)) : NULL;
    if (rc == 0 && (call == NULL || pthread_mutex_init(&call->lock, NULL) != 0)) {
        free(call);
        rc = EDDY_ENOMEM;
    }
    if (rc == 0 && (call->p = eddy_promise_new(eddy_loop_group_next(c->group))) == NULL) {
        pthread_mutex_destroy(&call->lock);
        free(call);
        rc = EDDY_ENOMEM;
    }
    if (rc != 0) {
        eddy_msg_release(eddy_http_request_msg(req));
        return failed(rc);
    }
    call->client = c;
    call->pool = pool;
    call->route = route;
    call->req = req;
    atomic_init(&call->refs, 2);
    pthread_mutex_lock(&c->lock);
    bool closing = c->closing;
    if (!closing) {
        call->next = c->calls;
        if (c->calls != NULL) {
            c->calls->prev = call;
        }
        c->calls = call;
        c->starting++;
    }
    pthread_mutex_unlock(&c->lock);
    if (closing) {
        eddy_msg_release(eddy_http_request_msg(req));
        eddy_future_release(call->p);
        pthread_mutex_destroy(&call->lock);
        free(call);
        return failed(EDDY_ECLOSED);
    }
    eddy_future_t *result = eddy_future_retain(call->p);
    if (eddy_future_add_listener(call->p, caller_done, call) != 0) {
        call_put(call); /* no cancel listener: cancelling the future then only fails it */
    }
    call_acquire(call);
    started(c);
    return result;
}

eddy_future_t *eddy_http_client_get(eddy_http_client_t *c, const char *url)
{
    eddy_http_request_t *req = eddy_http_request_new("GET", "/");
    if (req == NULL) {
        return NULL;
    }
    return eddy_http_client_send(c, url, req);
}
