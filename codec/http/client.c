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
 */
#include <eddy/http_client.h>

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

typedef struct route_s {
    struct route_s *next;
    eddy_http_client_t *client;
    eddy_bootstrap_t *b;
    char *host; /* the name TLS sends and verifies */
    bool tls;
} route_t;

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
 * Routes: the pool map's factory
 */

static int route_init(eddy_channel_t *ch, void *arg)
{
    route_t *r = arg;
    eddy_http_client_t *c = r->client;
    if (r->tls) {
        eddy_tls_handler_options_t to = {.server_name = r->host};
        int rc = c->tls != NULL ? eddy_tls_add(ch, c->tls, &to, NULL) : EDDY_ENOTSUP;
        if (rc != 0) {
            return rc;
        }
    }
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_client_codec(NULL),
                                  eddy_http_response_aggregator(c->o.max_content_length),
                                  eddy_http_exchange(c->o.response_timeout_ms));
}

static void route_free(route_t *r)
{
    if (r != NULL) {
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
    r->tls = key->tls;
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
    bool cancelled;                  /* the caller's future completed before the call did */
    bool retried;
    _Atomic uint32_t refs; /* the call's way through, its future's listener, a close's hold */
};

static void call_put(call_t *call)
{
    if (atomic_fetch_sub_explicit(&call->refs, 1, memory_order_acq_rel) != 1) {
        return;
    }
    assert(call->step == NULL && call->acquired == NULL);
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
    eddy_future_release(eddy_channel_pool_release(call->pool, eddy_future_channel(acquired)));
    eddy_future_release(acquired);
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

static void on_response(eddy_future_t *sent, void *arg)
{
    call_t *call = arg;
    int err = eddy_future_error(sent);
    eddy_http_response_t *resp = eddy_future_http_response(sent);
    if (err != 0 || !resp->keep_alive) {
        /* The exchange closes it as well (after an error, or a response that does not keep
         * alive); closing first keeps the pool from handing out a channel about to close. */
        eddy_channel_close(eddy_future_channel(call->acquired), NULL);
    }
    give_back(call);
    bool cancelled;
    pthread_mutex_lock(&call->lock);
    cancelled = call->cancelled;
    pthread_mutex_unlock(&call->lock);
    if (err == 0) {
        eddy_msg_retain(&resp->_msg);
        eddy__promise_succeed_owned(call->p, resp, release_response);
        call_done(call);
    } else if (!cancelled && !call->retried && connection_lost(err) &&
               idempotent(call->req->method)) {
        call->retried = true; /* before the second try: its answer may come on another thread */
        if (!call_retry(call)) {
            call_fail(call, err);
        }
    } else {
        call_fail(call, err);
    }
}

static void on_acquired(eddy_future_t *f, void *arg)
{
    call_t *call = arg;
    int err = eddy_future_error(f);
    if (err != 0) {
        call_fail(call, err);
        return;
    }
    /* The acquire's future is kept until the response is in: it holds the channel. The
     * request is kept too, for a second try. The response may come on another thread before
     * this returns, so everything on_response reads is set before the send. */
    call->acquired = eddy_future_retain(f);
    eddy_msg_retain(eddy_http_request_msg(call->req));
    eddy_future_t *sent = eddy_http_send(eddy_future_channel(f), call->req);
    if (sent == NULL) {
        give_back(call);
        call_fail(call, EDDY_ENOMEM);
        return;
    }
    call_step(call, eddy_future_retain(sent));
    if (eddy_future_add_listener(sent, on_response, call) != 0) {
        /* Nobody would wait for it: close the connection under it and end the call here. */
        eddy_future_cancel(sent);
        give_back(call);
        call_fail(call, EDDY_ENOMEM);
    }
    eddy_future_release(sent);
}

static void call_acquire(call_t *call)
{
    eddy_future_t *f = eddy_channel_pool_acquire(call->pool);
    if (f == NULL) {
        call_fail(call, EDDY_ENOMEM);
        return;
    }
    call_step(call, eddy_future_retain(f));
    if (eddy_future_add_listener(f, on_acquired, call) != 0) {
        eddy_future_cancel(f);
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
    eddy_channel_pool_t *pool = NULL;
    if (rc == 0) {
        eddy_channel_pool_key_t key = {.host = u.host, .port = u.port, .tls = u.tls};
        if ((pool = eddy_channel_pool_map_get(c->pools, &key)) == NULL) {
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
