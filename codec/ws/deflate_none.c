/*
 * permessage-deflate in a build without zlib (EDDY_WITH_ZLIB=OFF): never offered, never
 * agreed. A server declines every offer (the handshake goes on uncompressed, as RFC 7692
 * allows); a client offers nothing, so an answer that names the extension fails its handshake.
 */
#include "codec/ws/internal.h"

int eddy__ws_deflate_negotiate_server(const char *params, size_t n, const eddy_ws_config_t *c,
                                      eddy__ws_deflate_params_t *out, char *answer, size_t cap)
{
    (void)params, (void)n, (void)c, (void)out, (void)answer, (void)cap;
    return EDDY_EINVAL;
}

int eddy__ws_deflate_accept_client(const char *params, size_t n, const eddy_ws_config_t *c,
                                   eddy__ws_deflate_params_t *out)
{
    (void)params, (void)n, (void)c, (void)out;
    return EDDY_EINVAL;
}

void eddy__ws_deflate_offer(const eddy_ws_config_t *c, char *out, size_t cap)
{
    (void)c;
    if (cap > 0) {
        out[0] = '\0';
    }
}

eddy_handler_t eddy__ws_deflate_handler(const eddy__ws_deflate_params_t *p,
                                        const eddy_ws_config_t *c)
{
    (void)p, (void)c;
    return (eddy_handler_t){.error = EDDY_ENOTSUP};
}

eddy_handler_t eddy_ws_deflate_handler(bool client, const char *params,
                                       const eddy_ws_config_t *config)
{
    (void)client, (void)params, (void)config;
    return (eddy_handler_t){.name = "ws_deflate", .error = EDDY_ENOTSUP};
}
