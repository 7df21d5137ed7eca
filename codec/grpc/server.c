/*
 * The gRPC server: the registry of methods (eddy_grpc_server_t), and the handler after the
 * HTTP/2 connection handler that turns each stream into a call of one of them: the request's
 * head checked (POST, content-type, path, grpc-timeout, grpc-encoding, metadata), messages
 * read through the deframer, the method's callbacks, the response's head, messages and
 * trailers, and the keepalive ping policy.
 */
#include "internal.h"

#include "buffer/layer.h"
#include "codec/http2/layer.h"
#include "pipeline/layer.h"

#include <eddy/channel.h>
#include <eddy/loop.h>

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS INT64_C(1000000)

typedef struct method_s {
    char *path;
    size_t len;
    eddy_grpc_kind_t kind;
    const eddy_grpc_method_ops_t *ops;
    void *arg;
    eddy_carrier_t *carrier; /* where its callbacks run; NULL: the connection's loop */
} method_t;

typedef struct health_s {
    char *service;
    bool serving;
} health_t;

struct eddy_grpc_server_s {
    eddy_grpc_server_options_t o;
    method_t *methods;
    size_t nmethods, cap;
    pthread_mutex_t health_lock; /* the health table: set from any connection's loop */
    health_t *health;
    size_t nhealth;
};

/* A connection's handler state. */
typedef struct conn_s {
    eddy_grpc_server_t *server;
    eddy_ctx_t *ctx;
    eddy_grpc_call_t *calls;  /* live calls */
    size_t ncalls;
    int64_t last_ping;        /* loop ns of the last PING; 0: none yet */
    uint32_t strikes;
    bool sent_since_ping;     /* a head, message or status went since that PING */
} conn_t;

/* The server's side of a call. */
typedef struct server_call_s {
    eddy_grpc_call_t c;       /* first: the call is freed as this */
    const method_t *m;
    conn_t *conn;
    eddy_buf_t *request;      /* unary and server streaming: the request, until half-close */
    const eddy_http_header_t *head_md; /* metadata for the response headers (send_headers) */
    size_t nhead_md;
} server_call_t;

static server_call_t *server_call(eddy_grpc_call_t *call)
{
    return (server_call_t *)call;
}

/* ---------------------------------------------------------------------------------------
 * The registry
 */

eddy_grpc_server_t *eddy_grpc_server_new(const eddy_grpc_server_options_t *o)
{
    eddy_grpc_server_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->o = o != NULL ? *o : (eddy_grpc_server_options_t){0};
    eddy_h2_options_t *h = &s->o.h2;
    h->initial_window_size = h->initial_window_size != 0 ? h->initial_window_size : 1u << 20;
    h->reset_burst = h->reset_burst != 0 ? h->reset_burst : 10000;
    h->reset_rate = h->reset_rate != 0 ? h->reset_rate : 1000;
    h->max_resets_sent = h->max_resets_sent != 0 ? h->max_resets_sent : 10000;
    s->o.max_recv_message = s->o.max_recv_message != 0 ? s->o.max_recv_message
                                                       : EDDY_GRPC_MAX_MESSAGE;
    s->o.max_send_message = s->o.max_send_message != 0 ? s->o.max_send_message
                                                       : EDDY_GRPC_MAX_MESSAGE;
    s->o.min_ping_interval_ms =
        s->o.min_ping_interval_ms != 0 ? s->o.min_ping_interval_ms : 300000;
    s->o.max_ping_strikes = s->o.max_ping_strikes != 0 ? s->o.max_ping_strikes : 2;
    pthread_mutex_init(&s->health_lock, NULL);
    return s;
}

void eddy_grpc_server_free(eddy_grpc_server_t *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->nmethods; i++) {
        free(s->methods[i].path);
    }
    for (size_t i = 0; i < s->nhealth; i++) {
        free(s->health[i].service);
    }
    free(s->methods);
    free(s->health);
    pthread_mutex_destroy(&s->health_lock);
    free(s);
}

/* "/pkg.Service/Method": a slash, a service, a slash, a method, nothing else. */
static bool path_ok(const char *path)
{
    const char *second = path[0] == '/' ? strchr(path + 1, '/') : NULL;
    return second != NULL && second > path + 1 && second[1] != '\0' &&
           strchr(second + 1, '/') == NULL;
}

static bool ops_fit(eddy_grpc_kind_t kind, const eddy_grpc_method_ops_t *ops)
{
    if (ops == NULL) {
        return false;
    }
    if (kind == EDDY_GRPC_UNARY || kind == EDDY_GRPC_SERVER_STREAMING) {
        return ops->on_request != NULL;
    }
    return (kind == EDDY_GRPC_CLIENT_STREAMING || kind == EDDY_GRPC_BIDI_STREAMING) &&
           ops->on_message != NULL && ops->on_half_close != NULL;
}

static const method_t *method_find(const eddy_grpc_server_t *s, const char *p, size_t n)
{
    for (size_t i = 0; i < s->nmethods; i++) {
        if (s->methods[i].len == n && memcmp(s->methods[i].path, p, n) == 0) {
            return &s->methods[i];
        }
    }
    return NULL;
}

int eddy_grpc_server_add_method(eddy_grpc_server_t *s, const char *path, eddy_grpc_kind_t kind,
                                const eddy_grpc_method_ops_t *ops, void *arg)
{
    return eddy_grpc_server_add_method_on(s, path, kind, ops, arg, NULL);
}

int eddy_grpc_server_add_method_on(eddy_grpc_server_t *s, const char *path,
                                   eddy_grpc_kind_t kind, const eddy_grpc_method_ops_t *ops,
                                   void *arg, eddy_carrier_t *carrier)
{
    if (path == NULL || !path_ok(path) || !ops_fit(kind, ops)) {
        return EDDY_EINVAL;
    }
    if (method_find(s, path, strlen(path)) != NULL) {
        return EDDY_EEXIST;
    }
    if (s->nmethods == s->cap) {
        size_t cap = s->cap != 0 ? s->cap * 2 : 8;
        method_t *m = realloc(s->methods, cap * sizeof(*m));
        if (m == NULL) {
            return EDDY_ENOMEM;
        }
        s->methods = m;
        s->cap = cap;
    }
    char *copy = strdup(path);
    if (copy == NULL) {
        return EDDY_ENOMEM;
    }
    s->methods[s->nmethods++] =
        (method_t){.path = copy, .len = strlen(path), .kind = kind, .ops = ops, .arg = arg,
                   .carrier = carrier};
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Health (grpc.health.v1): the table; the service's methods are in health.c
 */

int eddy__grpc_health_status(eddy_grpc_server_t *s, const char *service, size_t n);

int eddy_grpc_server_set_health(eddy_grpc_server_t *s, const char *service, bool serving)
{
    pthread_mutex_lock(&s->health_lock);
    int err = 0;
    size_t i = 0;
    while (i < s->nhealth && strcmp(s->health[i].service, service) != 0) {
        i++;
    }
    if (i == s->nhealth) {
        health_t *h = realloc(s->health, (s->nhealth + 1) * sizeof(*h));
        char *copy = h != NULL ? strdup(service) : NULL;
        if (h != NULL) {
            s->health = h;
        }
        if (copy == NULL) {
            err = EDDY_ENOMEM;
        } else {
            s->health[s->nhealth++] = (health_t){copy, serving};
        }
    } else {
        s->health[i].serving = serving;
    }
    pthread_mutex_unlock(&s->health_lock);
    return err;
}

/* 1 SERVING, 2 NOT_SERVING, 3 SERVICE_UNKNOWN (the proto's ServingStatus). */
int eddy__grpc_health_status(eddy_grpc_server_t *s, const char *service, size_t n)
{
    int status = 3;
    pthread_mutex_lock(&s->health_lock);
    for (size_t i = 0; i < s->nhealth; i++) {
        if (strlen(s->health[i].service) == n && memcmp(s->health[i].service, service, n) == 0) {
            status = s->health[i].serving ? 1 : 2;
        }
    }
    pthread_mutex_unlock(&s->health_lock);
    if (status == 3 && n == 0) {
        return 1; /* the server itself */
    }
    for (size_t i = 0; status == 3 && i < s->nmethods; i++) {
        const char *p = s->methods[i].path + 1;
        const char *slash = strchr(p, '/');
        status = (size_t)(slash - p) == n && memcmp(p, service, n) == 0 ? 1 : 3;
    }
    return status;
}

/* ---------------------------------------------------------------------------------------
 * Sending: heads and statuses
 */

#define FIELD(n, v) ((eddy_http_header_t){{(n), sizeof(n) - 1}, {(v), strlen(v)}})

/* The response head's fields: :status 200, content-type, the encodings. */
static size_t head_fields(const eddy_grpc_call_t *call, eddy_http_header_t *f)
{
    size_t n = 0;
    f[n++] = FIELD(":status", "200");
    f[n++] = FIELD("content-type", "application/grpc");
    if (call->compress_out) {
        f[n++] = FIELD("grpc-encoding", "gzip");
    }
    if (eddy__grpc_has_gzip()) {
        f[n++] = FIELD("grpc-accept-encoding", "gzip");
    }
    return n;
}

/* Send fixed (nfixed) then md (n) as a header block on s. */
static int block_send(eddy_h2_stream_t *s, const eddy_http_header_t *fixed, size_t nfixed,
                      const eddy_http_header_t *md, size_t n, bool end_stream)
{
    eddy_http_header_t *fields;
    eddy_buf_t *store;
    int err = eddy__grpc_md_fields(fixed, nfixed, md, n, &fields, &store);
    if (err == 0) {
        err = eddy_h2_stream_send_headers(s, fields, nfixed + n, end_stream);
        free(fields);
        eddy_buf_release(store);
    }
    return err;
}

/* The status fields: grpc-status and, when there is one, grpc-message (percent-encoded into
 * text, room for 3 * strlen(message) + 1). */
static size_t status_fields(eddy_grpc_status_t status, const char *message, char code[4],
                            char *text, eddy_http_header_t *f)
{
    snprintf(code, 4, "%d", (int)status);
    size_t n = 0;
    f[n++] = FIELD("grpc-status", code);
    if (message != NULL && message[0] != '\0') {
        size_t len = eddy__grpc_percent_encode(message, strlen(message), text);
        f[n++] = (eddy_http_header_t){{"grpc-message", 12}, {text, len}};
    }
    return n;
}

/* An early answer on a stream that has no call (or whose call sent nothing yet): one block,
 * :status 200 and the status (trailers-only). */
static int trailers_only(eddy_h2_stream_t *s, const eddy_grpc_call_t *call,
                         eddy_grpc_status_t status, const char *message,
                         const eddy_http_header_t *md, size_t n)
{
    eddy_http_header_t f[8];
    size_t k = 0;
    if (call != NULL) {
        k = head_fields(call, f);
    } else {
        f[k++] = FIELD(":status", "200");
        f[k++] = FIELD("content-type", "application/grpc");
    }
    size_t mlen = message != NULL ? strlen(message) : 0;
    char code[4], *text = malloc(3 * mlen + 1);
    if (text == NULL) {
        return EDDY_ENOMEM;
    }
    k += status_fields(status, message, code, text, f + k);
    eddy__h2_stream_end_early(s);
    int err = block_send(s, f, k, md, n, true);
    free(text);
    return err;
}

/* An answer that is not gRPC's: an HTTP status alone. */
static void http_refuse(eddy_h2_stream_t *s, const char *status)
{
    eddy_http_header_t f[] = {FIELD(":status", status)};
    eddy__h2_stream_end_early(s);
    eddy_h2_stream_send_headers(s, f, 1, true);
}

static int call_head(eddy_grpc_call_t *call)
{
    server_call_t *sc = server_call(call);
    eddy_http_header_t f[4];
    size_t k = head_fields(call, f);
    int err = block_send(call->stream, f, k, sc->head_md, sc->nhead_md, false);
    call->headers_sent = err == 0;
    sc->conn->sent_since_ping = true;
    return err;
}

int eddy_grpc_call_send_headers(eddy_grpc_call_t *call, const eddy_http_header_t *md, size_t n)
{
    if (eddy__grpc_off_loop(call)) {
        return eddy__grpc_post(call, EDDY__GRPC_OP_HEADERS, NULL, NULL, 0, NULL, md, n);
    }
    if (call->ended || call->local_done) {
        return EDDY_ECLOSED;
    }
    if (call->headers_sent) {
        return EDDY_EALREADY;
    }
    server_call_t *sc = server_call(call);
    sc->head_md = md;
    sc->nhead_md = n;
    int err = call_head(call);
    sc->head_md = NULL;
    sc->nhead_md = 0;
    return err;
}

int eddy_grpc_call_set_compression(eddy_grpc_call_t *call, const char *encoding)
{
    if (eddy__grpc_off_loop(call)) {
        return eddy__grpc_post(call, EDDY__GRPC_OP_COMPRESS, NULL, NULL, 0, encoding, NULL, 0);
    }
    if (call->headers_sent || call->ended) {
        return call->ended ? EDDY_ECLOSED : EDDY_EALREADY;
    }
    if (strcmp(encoding, "identity") == 0) {
        call->compress_out = false;
        return 0;
    }
    if (strcmp(encoding, "gzip") != 0 || !eddy__grpc_has_gzip()) {
        return EDDY_ENOTSUP;
    }
    call->compress_out = call->peer_gzip;
    return 0;
}

/* The status on call's stream: trailers-only before the head, else trailers after what is
 * queued; a reset NO_ERROR follows if the client is still sending (end_early). 0 or an error
 * (EDDY_EINVAL: bad metadata, nothing went). */
static int status_send(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message,
                       const eddy_http_header_t *md, size_t n)
{
    /* Held: a write that meets the connection gone closes it at once, which ends the call
     * and lets go of its stream before the block_send returns. */
    eddy_h2_stream_t *s = eddy_h2_stream_retain(call->stream);
    int err;
    if (!call->headers_sent) {
        err = trailers_only(s, call, status, message, md, n);
    } else {
        size_t mlen = message != NULL ? strlen(message) : 0;
        char code[4], *text = malloc(3 * mlen + 1);
        eddy_http_header_t f[2];
        err = text != NULL ? 0 : EDDY_ENOMEM;
        if (err == 0) {
            size_t k = status_fields(status, message, code, text, f);
            eddy__h2_stream_end_early(s);
            err = block_send(s, f, k, md, n, true);
            free(text);
        }
    }
    eddy_h2_stream_release(s);
    if (err != EDDY_EINVAL) {
        server_call(call)->conn->sent_since_ping = true;
    }
    return err;
}

int eddy_grpc_call_finish(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message,
                          const eddy_http_header_t *md, size_t n)
{
    if (eddy__grpc_off_loop(call)) {
        return eddy__grpc_post(call, EDDY__GRPC_OP_FINISH, NULL, NULL, (int)status, message, md,
                               n);
    }
    if (call->ended || call->local_done) {
        return EDDY_ECLOSED;
    }
    if ((int)status < 0 || (int)status > 16) {
        return EDDY_EINVAL;
    }
    int err = status_send(call, status, message, md, n);
    if (err == EDDY_EINVAL) {
        return err; /* bad metadata: nothing went; the call goes on */
    }
    call->local_done = true;
    eddy__grpc_call_end(call, status, message, err == 0 ? UINT32_MAX : EDDY_H2_INTERNAL_ERROR);
    return err;
}

int eddy_grpc_call_reply(eddy_grpc_call_t *call, eddy_buf_t *response)
{
    if (eddy__grpc_off_loop(call)) {
        return eddy__grpc_post(call, EDDY__GRPC_OP_REPLY, response, NULL, 0, NULL, NULL, 0);
    }
    if (call->ended) {
        eddy__grpc_buf_drop(response);
        return EDDY_ECLOSED;
    }
    eddy_h2_stream_t *s = eddy_h2_stream_retain(call->stream);
    eddy__h2_stream_cork(s); /* head, message and trailers leave together */
    int err = eddy_grpc_call_send(call, response, NULL);
    int fin = eddy_grpc_call_finish(call, err == 0 ? EDDY_GRPC_OK : EDDY_GRPC_INTERNAL,
                                    err == 0 ? NULL : eddy_strerror(err), NULL, 0);
    eddy__h2_stream_uncork(s);
    eddy_h2_stream_release(s);
    return err != 0 ? err : fin;
}

/* ---------------------------------------------------------------------------------------
 * The call's side ops
 */

static void call_unlink(conn_t *conn, eddy_grpc_call_t *call)
{
    if (call->prev != NULL) {
        call->prev->next = call->next;
    } else {
        conn->calls = call->next;
    }
    if (call->next != NULL) {
        call->next->prev = call->prev;
    }
    call->prev = call->next = NULL;
    conn->ncalls--;
}

static void call_ended(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message)
{
    (void)message;
    server_call_t *sc = server_call(call);
    call_unlink(sc->conn, call);
    if (!call->local_done && sc->m->ops->on_cancel != NULL) {
        /* The method did not finish: it hears why. */
        eddy__grpc_dispatch(call, sc->m->ops, EDDY__GRPC_EV_CANCEL, NULL, (int)status);
    }
}

static void call_free(eddy_grpc_call_t *call)
{
    server_call_t *sc = server_call(call);
    if (sc->request != NULL) {
        eddy_buf_release(sc->request);
    }
}

static void call_writable(eddy_grpc_call_t *call)
{
    const eddy_grpc_method_ops_t *ops = server_call(call)->m->ops;
    if (ops->on_writable != NULL) {
        eddy__grpc_dispatch(call, ops, EDDY__GRPC_EV_WRITABLE, NULL, 0);
    }
}

static void call_fail(eddy_grpc_call_t *call, int status, const char *why);

static void call_too_big(eddy_grpc_call_t *call, const char *why)
{
    call_fail(call, EDDY_GRPC_RESOURCE_EXHAUSTED, why);
}

/* The deadline passed: the client hears DEADLINE_EXCEEDED as a status, as gRPC's own servers
 * say it (a reset CANCEL alone reads as CANCELLED to a client whose clock has not yet reached
 * its deadline), unless what the call queued still waits for the client's window: then the
 * reset CANCEL alone. The method hears it by its cancel callback. */
static void call_expired(eddy_grpc_call_t *call)
{
    static const char why[] = "Deadline Exceeded";
    int err = EDDY_EAGAIN;
    if (!call->headers_sent || eddy__h2_stream_pending(call->stream) == 0) {
        err = status_send(call, EDDY_GRPC_DEADLINE_EXCEEDED, why, NULL, 0);
    }
    eddy__grpc_call_end(call, EDDY_GRPC_DEADLINE_EXCEEDED, why,
                        err == 0 ? UINT32_MAX : EDDY_H2_CANCEL);
}

static const eddy__grpc_call_ops_t server_side = {
    .head = call_head,
    .ended = call_ended,
    .free = call_free,
    .writable = call_writable,
    .too_big = call_too_big,
    .expired = call_expired,
};

/* ---------------------------------------------------------------------------------------
 * Requests in
 */

/* What the request's head says, checked. */
typedef struct head_s {
    const eddy_http_header_t *method, *path, *content_type, *timeout, *encoding, *accept;
} head_t;

static bool name_is(const eddy_http_header_t *f, const char *name)
{
    size_t n = strlen(name);
    return f->name.len == n && memcmp(f->name.p, name, n) == 0;
}

static void head_read(const eddy_h2_headers_t *h, head_t *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < h->count; i++) {
        const eddy_http_header_t *f = &h->fields[i];
        const eddy_http_header_t **slot = name_is(f, ":method")                ? &out->method
                                          : name_is(f, ":path")                ? &out->path
                                          : name_is(f, "content-type")         ? &out->content_type
                                          : name_is(f, "grpc-timeout")         ? &out->timeout
                                          : name_is(f, "grpc-encoding")        ? &out->encoding
                                          : name_is(f, "grpc-accept-encoding") ? &out->accept
                                                                               : NULL;
        if (slot != NULL && *slot == NULL) {
            *slot = f;
        }
    }
}

static bool str_is(const eddy_http_header_t *f, const char *v)
{
    size_t n = strlen(v);
    return f != NULL && f->value.len == n && memcmp(f->value.p, v, n) == 0;
}

/* application/grpc, or application/grpc+proto, ;charset... */
static bool grpc_content_type(const eddy_http_header_t *f)
{
    if (f == NULL || f->value.len < 16 || memcmp(f->value.p, "application/grpc", 16) != 0) {
        return false;
    }
    return f->value.len == 16 || f->value.p[16] == '+' || f->value.p[16] == ';';
}

/* Whether a comma-separated list holds token. */
static bool list_has(const eddy_http_header_t *f, const char *token)
{
    size_t n = strlen(token);
    const char *p = f != NULL ? f->value.p : NULL;
    size_t len = f != NULL ? f->value.len : 0;
    for (size_t i = 0; i < len;) {
        while (i < len && (p[i] == ' ' || p[i] == ',')) {
            i++;
        }
        size_t j = i;
        while (j < len && p[j] != ',' && p[j] != ' ') {
            j++;
        }
        if (j - i == n && memcmp(p + i, token, n) == 0) {
            return true;
        }
        i = j;
    }
    return false;
}

/* The method for the head, or NULL after answering the stream (not gRPC, unknown path, an
 * encoding not had). */
static const method_t *head_check(conn_t *conn, eddy_h2_stream_t *s, const head_t *h)
{
    if (!str_is(h->method, "POST")) {
        http_refuse(s, "405");
        return NULL;
    }
    if (!grpc_content_type(h->content_type)) {
        http_refuse(s, "415");
        return NULL;
    }
    const method_t *m =
        h->path != NULL ? method_find(conn->server, h->path->value.p, h->path->value.len) : NULL;
    if (m == NULL) {
        trailers_only(s, NULL, EDDY_GRPC_UNIMPLEMENTED, "Method not found", NULL, 0);
        return NULL;
    }
    bool gzip = str_is(h->encoding, "gzip") && eddy__grpc_has_gzip();
    if (h->encoding != NULL && !gzip && !str_is(h->encoding, "identity")) {
        const char *have = eddy__grpc_has_gzip() ? "gzip,identity" : "identity";
        eddy_http_header_t f = FIELD("grpc-accept-encoding", have);
        eddy_http_header_t fixed[8];
        size_t k = 0;
        fixed[k++] = FIELD(":status", "200");
        fixed[k++] = FIELD("content-type", "application/grpc");
        fixed[k++] = FIELD("grpc-status", "12");
        fixed[k++] = FIELD("grpc-message", "Unsupported grpc-encoding");
        fixed[k++] = f;
        eddy__h2_stream_end_early(s);
        eddy_h2_stream_send_headers(s, fixed, k, true);
        return NULL;
    }
    return m;
}

static eddy_grpc_call_t *call_new(conn_t *conn, eddy_h2_stream_t *s, const method_t *m,
                                  const head_t *h)
{
    server_call_t *sc = calloc(1, sizeof(*sc));
    char *path = sc != NULL ? strdup(m->path) : NULL;
    if (path == NULL) {
        free(sc);
        return NULL;
    }
    eddy_grpc_call_t *call = &sc->c;
    eddy__grpc_call_init(call, &server_side, conn->ctx, s);
    sc->m = m;
    sc->conn = conn;
    call->sent_flag = &conn->sent_since_ping;
    call->path = path;
    call->arg = m->arg;
    if (m->carrier != NULL) {
        eddy__grpc_call_on_carrier(call, m->carrier);
    }
    call->kind = (uint8_t)m->kind;
    call->max_recv = conn->server->o.max_recv_message;
    call->max_send = conn->server->o.max_send_message;
    call->gzip_in = str_is(h->encoding, "gzip");
    call->peer_gzip = list_has(h->accept, "gzip") && eddy__grpc_has_gzip();
    call->next = conn->calls;
    if (conn->calls != NULL) {
        conn->calls->prev = call;
    }
    conn->calls = call;
    conn->ncalls++;
    return call;
}

/* grpc-timeout into the call's deadline (a malformed one is no deadline, as gRPC's own
 * servers read it, logged once per call at debug). */
static void deadline_set(eddy_grpc_call_t *call, const eddy_http_header_t *t)
{
    if (t == NULL) {
        return;
    }
    int64_t ns = eddy__grpc_timeout_parse(t->value.p, t->value.len);
    if (ns < 0) {
        eddy__grpc_call_log(call, EDDY_LOG_DEBUG, "malformed grpc-timeout ignored");
        return;
    }
    int64_t now = eddy_loop_now_ns(eddy_ctx_loop(call->ctx));
    call->deadline = ns < INT64_MAX - now ? now + ns : INT64_MAX;
    call->deadline = call->deadline != 0 ? call->deadline : 1;
    eddy__grpc_call_arm_deadline(call);
}

/* The method's own status for a call the library ends early (a limit, bad input). */
static void call_fail(eddy_grpc_call_t *call, int status, const char *why)
{
    eddy__grpc_call_log(call, EDDY_LOG_DEBUG, why);
    if (eddy_grpc_call_finish(call, (eddy_grpc_status_t)status, why, NULL, 0) != 0) {
        eddy__grpc_call_end(call, (eddy_grpc_status_t)status, why, EDDY_H2_INTERNAL_ERROR);
    }
}

static void half_close(eddy_grpc_call_t *call)
{
    server_call_t *sc = server_call(call);
    call->remote_done = true;
    if (sc->m->kind == EDDY_GRPC_UNARY || sc->m->kind == EDDY_GRPC_SERVER_STREAMING) {
        eddy_buf_t *req = sc->request;
        sc->request = NULL;
        if (req == NULL) {
            call_fail(call, EDDY_GRPC_INTERNAL, "Half-closed without a request");
            return;
        }
        eddy__grpc_dispatch(call, sc->m->ops, EDDY__GRPC_EV_REQUEST, req, 0);
        return;
    }
    eddy__grpc_dispatch(call, sc->m->ops, EDDY__GRPC_EV_HALF_CLOSE, NULL, 0);
}

static int on_message(void *arg, eddy_buf_t *msg, bool compressed)
{
    (void)compressed;
    eddy_grpc_call_t *call = arg;
    server_call_t *sc = server_call(call);
    if (sc->m->kind == EDDY_GRPC_UNARY || sc->m->kind == EDDY_GRPC_SERVER_STREAMING) {
        if (sc->request != NULL) {
            eddy_buf_release(msg);
            return EDDY_GRPC_INTERNAL; /* "more than one request" */
        }
        sc->request = msg;
        return 0;
    }
    if (call->local_done || call->ended) {
        eddy_buf_release(msg); /* finished already: what still comes is dropped */
        return 0;
    }
    eddy__grpc_dispatch(call, sc->m->ops, EDDY__GRPC_EV_MESSAGE, msg, 0);
    return 0;
}

static void call_start(conn_t *conn, eddy_h2_headers_t *h)
{
    head_t head;
    head_read(h, &head);
    const method_t *m = head_check(conn, h->stream, &head);
    eddy_grpc_call_t *call = m != NULL ? call_new(conn, h->stream, m, &head) : NULL;
    if (m != NULL && call == NULL) {
        eddy_h2_stream_reset(h->stream, EDDY_H2_INTERNAL_ERROR); /* no memory */
        return;
    }
    if (call == NULL) {
        return;
    }
    int err = eddy__grpc_md_take(h, &call->md, &call->nmd, &call->md_store);
    if (err != 0) {
        call_fail(call, EDDY_GRPC_INTERNAL, "Malformed -bin metadata");
        return;
    }
    deadline_set(call, head.timeout);
    eddy_grpc_call_retain(call); /* the callbacks below may end it */
    if ((m->kind == EDDY_GRPC_CLIENT_STREAMING || m->kind == EDDY_GRPC_BIDI_STREAMING) &&
        m->ops->on_start != NULL) {
        eddy__grpc_dispatch(call, m->ops, EDDY__GRPC_EV_START, NULL, 0);
    }
    if (h->end_stream && !call->ended) {
        half_close(call);
    }
    eddy_grpc_call_release(call);
}

static void on_data(eddy_h2_data_t *d)
{
    eddy_grpc_call_t *call = eddy__grpc_call_of(d->stream);
    if (call == NULL || call->ended) {
        eddy_h2_stream_consume(d->stream, eddy_buf_readable(d->data)); /* dropped */
        return;
    }
    eddy_grpc_call_retain(call);
    const char *why = NULL;
    int status = eddy__grpc_call_data(call, d, on_message, &why);
    if (status != 0 && !call->ended) {
        call_fail(call, status, why != NULL ? why : "Too many requests");
    } else if (d->end_stream && !call->ended && !call->remote_done) {
        half_close(call);
    }
    eddy_grpc_call_release(call);
}

static void on_headers(conn_t *conn, eddy_h2_headers_t *h)
{
    eddy_grpc_call_t *call = eddy__grpc_call_of(h->stream);
    if (!h->trailers) {
        call_start(conn, h);
    } else if (call != NULL && !call->ended && h->end_stream && !call->remote_done) {
        eddy_grpc_call_retain(call); /* the client's trailers: its side ends */
        if (eddy__grpc_deframer_partial(&call->in)) {
            call_fail(call, EDDY_GRPC_INTERNAL, "the stream ended inside a message");
        } else {
            half_close(call);
        }
        eddy_grpc_call_release(call);
    }
}

static void on_reset(eddy_h2_reset_t *r)
{
    eddy_grpc_call_t *call = eddy__grpc_call_of(r->stream);
    if (call == NULL) {
        return;
    }
    eddy_grpc_status_t st = r->by_peer ? eddy__grpc_status_of_reset(r->error_code)
                                       : EDDY_GRPC_UNAVAILABLE;
    if (r->by_peer && r->error_code == EDDY_H2_NO_ERROR) {
        st = EDDY_GRPC_CANCELLED;
    }
    eddy__grpc_call_end(call, st, "the stream was reset", UINT32_MAX);
}

/* ---------------------------------------------------------------------------------------
 * The handler
 */

static void server_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *conn = eddy_ctx_state(ctx);
    switch (msg->type) {
    case EDDY_MSG_H2_HEADERS:
        on_headers(conn, eddy_h2_headers_of(msg));
        break;
    case EDDY_MSG_H2_DATA:
        on_data(eddy_h2_data_of(msg));
        break;
    case EDDY_MSG_H2_RESET:
        on_reset(eddy_h2_reset_of(msg));
        break;
    default:
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    eddy_msg_release(msg);
}

static void server_user_event(eddy_ctx_t *ctx, int event, void *data)
{
    if (event == EDDY_EVENT_H2_STREAM_WRITABLE) {
        eddy__grpc_call_writable(data);
    }
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_fire_user_event(ctx, event, data);
    }
}

/* A PING from the client (grpc doc/keepalive.md): too many without our data between them
 * are strikes; past max_ping_strikes, GOAWAY ENHANCE_YOUR_CALM "too_many_pings". */
static void on_ping(void *arg)
{
    conn_t *conn = arg;
    const eddy_grpc_server_options_t *o = &conn->server->o;
    int64_t now = eddy_loop_now_ns(eddy_ctx_loop(conn->ctx));
    bool idle = conn->ncalls == 0 && !o->permit_pings_without_calls;
    int64_t least = (idle ? 7200000 : o->min_ping_interval_ms) * NS_PER_MS;
    if (conn->sent_since_ping) {
        conn->strikes = 0;
    } else if (conn->last_ping != 0 && now - conn->last_ping < least) {
        conn->strikes++;
    }
    conn->sent_since_ping = false;
    conn->last_ping = now;
    if (conn->strikes > o->max_ping_strikes) {
        eddy__h2_fail(eddy_ctx_pipeline(conn->ctx), EDDY_H2_ENHANCE_YOUR_CALM, "too_many_pings");
    }
}

static void server_added(eddy_ctx_t *ctx)
{
    conn_t *conn = eddy_ctx_state(ctx);
    conn->ctx = ctx;
    eddy__h2_on_ping(eddy_ctx_pipeline(ctx), on_ping, conn);
}

static void server_removed(eddy_ctx_t *ctx)
{
    conn_t *conn = eddy_ctx_state(ctx);
    eddy__h2_on_ping(eddy_ctx_pipeline(ctx), NULL, NULL);
    while (conn->calls != NULL) {
        eddy__grpc_call_end(conn->calls, EDDY_GRPC_UNAVAILABLE, "the connection closed",
                            UINT32_MAX);
    }
}

static void server_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOTSUP); /* calls send through their functions */
}

static const eddy_handler_ops_t server_ops = {
    .name = "grpc-server",
    .handler_added = server_added,
    .handler_removed = server_removed,
    .channel_read = server_read,
    .user_event_triggered = server_user_event,
    .write = server_write,
};

eddy_handler_t eddy_grpc_server_handler(eddy_grpc_server_t *s)
{
    conn_t *conn = calloc(1, sizeof(*conn));
    if (conn != NULL) {
        conn->server = s;
    }
    return eddy_handler("grpc-server", &server_ops, conn, eddy_free_state);
}

int eddy_grpc_server_init_channel(eddy_channel_t *ch, eddy_grpc_server_t *s)
{
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_h2_connection(&s->o.h2),
                                  eddy_grpc_server_handler(s));
}

const char *const *eddy_grpc_alpn_protocols(size_t *n)
{
    static const char *const protocols[] = {"h2"};
    *n = 1;
    return protocols;
}
