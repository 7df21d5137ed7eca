/*
 * HTTP/2 in a build without nghttp2 (EDDY_WITH_NGHTTP2=OFF): the handlers refuse to be made
 * (EDDY_ENOTSUP, so adding them fails), but eddy_h2_server_upgrade() is a handler that
 * removes itself once added, so a server that adds it speaks HTTP/1.1 only, unchanged. No stream or message ever exists.
 */
#include <eddy/http2.h>

#include <stddef.h>

static eddy_handler_t refused(void)
{
    return (eddy_handler_t){.error = EDDY_ENOTSUP};
}

eddy_handler_t eddy_h2_connection(const eddy_h2_options_t *o)
{
    (void)o;
    return refused();
}

eddy_handler_t eddy_h2_http_adapter(size_t max_content_length)
{
    (void)max_content_length;
    return refused();
}

static void step_aside(eddy_ctx_t *ctx)
{
    eddy_pipeline_remove(eddy_ctx_pipeline(ctx), eddy_ctx_name(ctx));
}

static const eddy_handler_ops_t step_aside_ops = {
    .name = "h2-negotiate",
    .sharable = true,
    .handler_added = step_aside,
};

eddy_handler_t eddy_h2_server_upgrade(const eddy_h2_options_t *o, size_t max_content_length)
{
    (void)o, (void)max_content_length;
    return eddy_handler("h2-negotiate", &step_aside_ops, NULL, NULL);
}

const char *const *eddy_h2_alpn_protocols(size_t *n)
{
    static const char *const protocols[] = {"http/1.1"};
    *n = 1;
    return protocols;
}

eddy_h2_headers_t *eddy_h2_headers_of(eddy_msg_t *msg)
{
    (void)msg;
    return NULL;
}

eddy_h2_data_t *eddy_h2_data_of(eddy_msg_t *msg)
{
    (void)msg;
    return NULL;
}

eddy_h2_reset_t *eddy_h2_reset_of(eddy_msg_t *msg)
{
    (void)msg;
    return NULL;
}

const eddy_http_header_t *eddy_h2_headers_get(const eddy_h2_headers_t *h, const char *name)
{
    (void)h, (void)name;
    return NULL;
}

/* No stream is ever made: these are never reached with a real one. */
eddy_h2_stream_t *eddy_h2_stream_retain(eddy_h2_stream_t *s) { return s; }
void eddy_h2_stream_release(eddy_h2_stream_t *s) { (void)s; }
uint32_t eddy_h2_stream_id(const eddy_h2_stream_t *s) { (void)s; return 0; }
bool eddy_h2_stream_is_closed(const eddy_h2_stream_t *s) { (void)s; return true; }
eddy_channel_t *eddy_h2_stream_channel(const eddy_h2_stream_t *s) { (void)s; return NULL; }
void *eddy_h2_stream_user_data(const eddy_h2_stream_t *s) { (void)s; return NULL; }
void eddy_h2_stream_set_user_data(eddy_h2_stream_t *s, void *data) { (void)s, (void)data; }
bool eddy_h2_stream_is_writable(const eddy_h2_stream_t *s) { (void)s; return false; }
void eddy_h2_stream_consume(eddy_h2_stream_t *s, size_t n) { (void)s, (void)n; }

int eddy_h2_stream_send_headers(eddy_h2_stream_t *s, const eddy_http_header_t *fields, size_t n,
                                bool end_stream)
{
    (void)s, (void)fields, (void)n, (void)end_stream;
    return EDDY_ENOTSUP;
}

int eddy_h2_stream_send_data(eddy_h2_stream_t *s, eddy_buf_t *data, bool end_stream,
                             eddy_promise_t *p)
{
    (void)s, (void)end_stream;
    if (data != NULL) {
        eddy_buf_release(data);
    }
    if (p != NULL) {
        eddy_promise_fail(p, EDDY_ENOTSUP);
    }
    return EDDY_ENOTSUP;
}

int eddy_h2_stream_reset(eddy_h2_stream_t *s, uint32_t error_code)
{
    (void)s, (void)error_code;
    return EDDY_ENOTSUP;
}

uint64_t eddy_h2_stream_schedule(eddy_h2_stream_t *s, int64_t delay_ms,
                                 void (*cb)(eddy_h2_stream_t *s, void *arg), void *arg)
{
    (void)s, (void)delay_ms, (void)cb, (void)arg;
    return 0;
}

int eddy_h2_stream_cancel(eddy_h2_stream_t *s, uint64_t id)
{
    (void)s, (void)id;
    return EDDY_EALREADY;
}

/* The client side refuses the same way. */
eddy_handler_t eddy_h2_client_connection(const eddy_h2_options_t *o)
{
    (void)o;
    return refused();
}

eddy_handler_t eddy_h2_http_client_adapter(size_t max_content_length, int64_t response_timeout_ms)
{
    (void)max_content_length, (void)response_timeout_ms;
    return refused();
}

eddy_h2_stream_t *eddy_h2_stream_open(eddy_channel_t *ch, const eddy_http_header_t *fields,
                                      size_t n, bool end_stream, int *err)
{
    (void)ch, (void)fields, (void)n, (void)end_stream;
    if (err != NULL) {
        *err = EDDY_ENOTSUP;
    }
    return NULL;
}
