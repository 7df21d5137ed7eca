/*
 * gRPC in a build without nghttp2 (EDDY_WITH_NGHTTP2=OFF): there is no HTTP/2, so no server
 * and no channel can be made (eddy_grpc_server_new() and eddy_grpc_channel_new() return NULL,
 * the handler refuses with EDDY_ENOTSUP); no call ever exists, so the call functions are
 * never reached with one and refuse. The status names work (wire.c).
 */
#include <eddy/grpc.h>

#include <stddef.h>

eddy_grpc_server_t *eddy_grpc_server_new(const eddy_grpc_server_options_t *o)
{
    (void)o;
    return NULL;
}

void eddy_grpc_server_free(eddy_grpc_server_t *s)
{
    (void)s;
}

int eddy_grpc_server_add_method(eddy_grpc_server_t *s, const char *path, eddy_grpc_kind_t kind,
                                const eddy_grpc_method_ops_t *ops, void *arg)
{
    (void)s, (void)path, (void)kind, (void)ops, (void)arg;
    return EDDY_ENOTSUP;
}

int eddy_grpc_server_add_method_on(eddy_grpc_server_t *s, const char *path,
                                   eddy_grpc_kind_t kind, const eddy_grpc_method_ops_t *ops,
                                   void *arg, eddy_carrier_t *c)
{
    (void)s, (void)path, (void)kind, (void)ops, (void)arg, (void)c;
    return EDDY_ENOTSUP;
}

int eddy_grpc_server_add_health(eddy_grpc_server_t *s)
{
    (void)s;
    return EDDY_ENOTSUP;
}

int eddy_grpc_server_set_health(eddy_grpc_server_t *s, const char *service, bool serving)
{
    (void)s, (void)service, (void)serving;
    return EDDY_ENOTSUP;
}

eddy_handler_t eddy_grpc_server_handler(eddy_grpc_server_t *s)
{
    (void)s;
    return (eddy_handler_t){.error = EDDY_ENOTSUP};
}

int eddy_grpc_server_init_channel(eddy_channel_t *ch, eddy_grpc_server_t *s)
{
    (void)ch, (void)s;
    return EDDY_ENOTSUP;
}

const char *const *eddy_grpc_alpn_protocols(size_t *n)
{
    static const char *const protocols[] = {"h2"};
    *n = 1;
    return protocols;
}

eddy_grpc_call_t *eddy_grpc_call_retain(eddy_grpc_call_t *call)
{
    return call;
}

void eddy_grpc_call_release(eddy_grpc_call_t *call)
{
    (void)call;
}

int eddy_grpc_call_send(eddy_grpc_call_t *call, eddy_buf_t *msg, eddy_promise_t *p)
{
    (void)call, (void)p;
    if (msg != NULL) {
        eddy_buf_release(msg);
    }
    return EDDY_ENOTSUP;
}

bool eddy_grpc_call_is_writable(eddy_grpc_call_t *call)
{
    (void)call;
    return false;
}

int eddy_grpc_call_cancel(eddy_grpc_call_t *call)
{
    (void)call;
    return EDDY_ECLOSED;
}

const char *eddy_grpc_call_path(const eddy_grpc_call_t *call)
{
    (void)call;
    return "";
}

const eddy_http_header_t *eddy_grpc_call_metadata(const eddy_grpc_call_t *call, size_t *n)
{
    (void)call;
    *n = 0;
    return NULL;
}

const eddy_http_header_t *eddy_grpc_call_metadata_get(const eddy_grpc_call_t *call,
                                                      const char *name)
{
    (void)call, (void)name;
    return NULL;
}

int64_t eddy_grpc_call_time_left_ms(const eddy_grpc_call_t *call)
{
    (void)call;
    return -1;
}

bool eddy_grpc_call_is_done(const eddy_grpc_call_t *call)
{
    (void)call;
    return true;
}

void *eddy_grpc_call_arg(const eddy_grpc_call_t *call)
{
    (void)call;
    return NULL;
}

void *eddy_grpc_call_user_data(const eddy_grpc_call_t *call)
{
    (void)call;
    return NULL;
}

void eddy_grpc_call_set_user_data(eddy_grpc_call_t *call, void *data,
                                  void (*free_data)(void *data))
{
    (void)call;
    if (free_data != NULL && data != NULL) {
        free_data(data);
    }
}

eddy_channel_t *eddy_grpc_call_channel(const eddy_grpc_call_t *call)
{
    (void)call;
    return NULL;
}

uint64_t eddy_grpc_call_schedule(eddy_grpc_call_t *call, int64_t delay_ms,
                                 void (*cb)(eddy_grpc_call_t *call, void *arg), void *arg)
{
    (void)call, (void)delay_ms, (void)cb, (void)arg;
    return 0;
}

int eddy_grpc_call_cancel_timer(eddy_grpc_call_t *call, uint64_t id)
{
    (void)call, (void)id;
    return EDDY_EALREADY;
}

int eddy_grpc_call_send_headers(eddy_grpc_call_t *call, const eddy_http_header_t *md, size_t n)
{
    (void)call, (void)md, (void)n;
    return EDDY_ECLOSED;
}

int eddy_grpc_call_set_compression(eddy_grpc_call_t *call, const char *encoding)
{
    (void)call, (void)encoding;
    return EDDY_ENOTSUP;
}

int eddy_grpc_call_finish(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message,
                          const eddy_http_header_t *md, size_t n)
{
    (void)call, (void)status, (void)message, (void)md, (void)n;
    return EDDY_ECLOSED;
}

int eddy_grpc_call_reply(eddy_grpc_call_t *call, eddy_buf_t *response)
{
    return eddy_grpc_call_send(call, response, NULL);
}

eddy_grpc_channel_t *eddy_grpc_channel_new(eddy_loop_t *loop, const char *target,
                                           const eddy_grpc_channel_options_t *o)
{
    (void)loop, (void)target, (void)o;
    return NULL;
}

eddy_future_t *eddy_grpc_channel_close(eddy_grpc_channel_t *c)
{
    (void)c;
    return NULL;
}

eddy_grpc_call_t *eddy_grpc_call_start(eddy_grpc_channel_t *c, const char *path,
                                       const eddy_grpc_call_options_t *o,
                                       const eddy_grpc_client_ops_t *ops, void *arg, int *err)
{
    (void)c, (void)path, (void)o, (void)ops, (void)arg;
    if (err != NULL) {
        *err = EDDY_ENOTSUP;
    }
    return NULL;
}

int eddy_grpc_call_half_close(eddy_grpc_call_t *call)
{
    (void)call;
    return EDDY_ECLOSED;
}

const eddy_http_header_t *eddy_grpc_call_trailers(const eddy_grpc_call_t *call, size_t *n)
{
    (void)call;
    *n = 0;
    return NULL;
}

eddy_future_t *eddy_grpc_unary(eddy_grpc_channel_t *c, const char *path, eddy_buf_t *request,
                               const eddy_grpc_call_options_t *o)
{
    (void)c, (void)path, (void)o;
    if (request != NULL) {
        eddy_buf_release(request);
    }
    return NULL;
}

const eddy_grpc_reply_t *eddy_future_grpc_reply(const eddy_future_t *f)
{
    (void)f;
    return NULL;
}
