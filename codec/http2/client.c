/*
 * The client side of the connection handler: opening streams (a request's head, its body to
 * follow through the stream's functions), the queue above the peer's
 * SETTINGS_MAX_CONCURRENT_STREAMS, and what a GOAWAY does to the streams still in it.
 *
 * nghttp2 does the queueing: a request's stream id is reserved when it is submitted, and its
 * HEADERS wait in the session's queue of stream openings until the peer's limit lets them go,
 * in id order. eddy bounds that queue (max_queued_streams) and ends the streams in it at the
 * peer's GOAWAY, which nghttp2 would only do once a slot freed: they were never seen by the
 * peer, so they end REFUSED_STREAM and may be sent again on another connection (Netty's
 * StreamBufferingEncoder fails them the same way).
 */
#include "internal.h"

#include "pipeline/layer.h"

#include <stdlib.h>
#include <string.h>

/* Whether s's HEADERS went out: nghttp2 makes its stream only then. */
static bool stream_sent(const eddy__h2_conn_t *c, const eddy_h2_stream_t *s)
{
    return nghttp2_session_find_stream(c->session, s->id) != NULL;
}

/* Streams of ours waiting past the peer's limit. */
static size_t streams_waiting(const eddy__h2_conn_t *c)
{
    uint32_t limit =
        nghttp2_session_get_remote_settings(c->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    return c->streams_open > limit ? c->streams_open - limit : 0;
}

static bool name_is(const eddy_http_header_t *f, const char *lit)
{
    size_t n = strlen(lit);
    return f->name.len == n && memcmp(f->name.p, lit, n) == 0;
}

/* A request head as RFC 9113 section 8.3.1 wants it: pseudo-header fields first, :method
 * among them, and :path and :scheme unless it is CONNECT. */
static bool request_fields_ok(const eddy_http_header_t *f, size_t n)
{
    bool method = false, path = false, scheme = false, connect = false, regular = false;
    for (size_t i = 0; i < n; i++) {
        if (f[i].name.len == 0 || f[i].name.p[0] != ':') {
            regular = true;
            continue;
        }
        if (regular) {
            return false;
        }
        if (name_is(&f[i], ":method")) {
            method = true;
            connect = f[i].value.len == 7 && memcmp(f[i].value.p, "CONNECT", 7) == 0;
        } else if (name_is(&f[i], ":path")) {
            path = f[i].value.len > 0;
        } else if (name_is(&f[i], ":scheme")) {
            scheme = f[i].value.len > 0;
        } else if (!name_is(&f[i], ":authority")) {
            return false;
        }
    }
    return method && (connect || (path && scheme));
}

static int submit_error(int rv)
{
    switch (rv) {
    case NGHTTP2_ERR_NOMEM:
        return EDDY_ENOMEM;
    case NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE: /* ids ran out: another connection */
    case NGHTTP2_ERR_START_STREAM_NOT_ALLOWED:
        return EDDY_ECONNABORTED;
    default:
        return EDDY_EINVAL;
    }
}

eddy_h2_stream_t *eddy_h2_stream_open(eddy_channel_t *ch, const eddy_http_header_t *fields,
                                      size_t n, bool end_stream, int *err)
{
    int ignored;
    err = err != NULL ? err : &ignored;
    eddy__h2_conn_t *c = eddy__h2_conn_of(eddy_channel_pipeline(ch));
    if (c == NULL || c->server || !request_fields_ok(fields, n)) {
        *err = EDDY_EINVAL;
        return NULL;
    }
    if (c->closed || c->closing || c->fatal || c->goaway_sent || c->close_promise != NULL) {
        *err = EDDY_ECLOSED;
        return NULL;
    }
    if (c->session == NULL) {
        *err = EDDY_ENOTCONN;
        return NULL;
    }
    if (c->refused) {
        *err = EDDY_ECONNABORTED;
        return NULL;
    }
    if (streams_waiting(c) >= c->o.max_queued_streams) {
        *err = EDDY_EBUSY;
        return NULL;
    }
    eddy__h2_nvs_t v;
    *err = eddy__h2_nvs_fill(&v, fields, n);
    eddy_h2_stream_t *s = *err == 0 ? eddy__h2_stream_new(c, 0) : NULL;
    if (s == NULL) {
        *err = *err != 0 ? *err : EDDY_ENOMEM;
        eddy__h2_nvs_release(&v);
        return NULL;
    }
    nghttp2_data_provider dp = eddy__h2_stream_provider(s);
    int32_t id = nghttp2_submit_request(c->session, NULL, v.nv, n, end_stream ? NULL : &dp, s);
    eddy__h2_nvs_release(&v);
    if (id < 0) {
        *err = submit_error(id);
        eddy__h2_stream_closed(s, NGHTTP2_INTERNAL_ERROR); /* drops the session's reference */
        return NULL;
    }
    s->id = id;
    s->head_sent = true;
    s->provider_on = !end_stream;
    s->body_ended = end_stream;
    eddy_h2_stream_retain(s); /* the caller's */
    eddy__h2_conn_send(c);
    *err = 0;
    return s;
}

bool eddy__h2_client_interim(const eddy_h2_stream_t *s)
{
    if (s->hcount == 0 || s->hbuf == NULL) {
        return false;
    }
    const char *base = (const char *)eddy_buf_read_ptr(s->hbuf);
    const uint32_t *idx = s->hidx; /* the first field: name offset and length, value's */
    return idx[1] == 7 && memcmp(base + idx[0], ":status", 7) == 0 && idx[3] == 3 &&
           base[idx[2]] == '1';
}

/* End s, which never went out: the peer will not see it. */
static void stream_end_unsent(eddy__h2_conn_t *c, eddy_h2_stream_t *s, uint32_t code)
{
    /* nghttp2 still holds the HEADERS with s as their stream's data: forget it, so the
     * stream it makes of them, only to close it at once, does not name a freed one. */
    nghttp2_session_set_stream_user_data(c->session, s->id, NULL);
    eddy_msg_t *m = eddy__h2_reset_new(s, code, false);
    if (m != NULL) {
        eddy__h2_conn_emit(c, m);
    }
    eddy__h2_stream_closed(s, code);
}

void eddy__h2_client_goaway(eddy__h2_conn_t *c)
{
    c->refused = true;
    for (eddy_h2_stream_t *s = c->streams; s != NULL;) {
        eddy_h2_stream_t *next = s->next;
        if (!stream_sent(c, s)) {
            stream_end_unsent(c, s, NGHTTP2_REFUSED_STREAM);
        }
        s = next;
    }
}

bool eddy__h2_client_reset_queued(eddy_h2_stream_t *s, uint32_t error_code)
{
    eddy__h2_conn_t *c = s->conn;
    if (c->session == NULL || stream_sent(c, s)) {
        return false;
    }
    /* nghttp2 marks the waiting HEADERS cancelled: they never go out. */
    nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, s->id, error_code);
    stream_end_unsent(c, s, error_code);
    eddy__h2_conn_send(c);
    return true;
}
