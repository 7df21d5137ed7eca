/*
 * TLS in a build without OpenSSL (EDDY_WITH_TLS=OFF): the API of include/eddy/tls.h, every
 * constructor refusing, so that programs written for both builds link and learn at run time
 * (eddy_tls_available()) that there is no TLS here. No context or handler can exist, so the
 * functions that take one are never reached with a valid one: they do nothing.
 */
#include <eddy/tls.h>

#include <stddef.h>

bool eddy_tls_available(void)
{
    return false;
}

eddy_tls_context_t *eddy_tls_context_new(eddy_tls_mode_t mode)
{
    (void)mode;
    return NULL;
}

eddy_tls_context_t *eddy_tls_context_retain(eddy_tls_context_t *c)
{
    return c;
}

void eddy_tls_context_release(eddy_tls_context_t *c)
{
    (void)c;
}

const char *eddy_tls_context_error(const eddy_tls_context_t *c)
{
    (void)c;
    return "eddy was built without TLS (EDDY_WITH_TLS=OFF)";
}

struct ssl_ctx_st *eddy_tls_context_ssl_ctx(eddy_tls_context_t *c)
{
    (void)c;
    return NULL;
}

/* Every setter: there is no context to set. */
static int none(void)
{
    return EDDY_ENOTSUP;
}

int eddy_tls_context_use_certificate_file(eddy_tls_context_t *c, const char *cert_file,
                                          const char *key_file)
{
    (void)c, (void)cert_file, (void)key_file;
    return none();
}

int eddy_tls_context_use_certificate_pem(eddy_tls_context_t *c, const char *cert,
                                         size_t cert_len, const char *key, size_t key_len)
{
    (void)c, (void)cert, (void)cert_len, (void)key, (void)key_len;
    return none();
}

int eddy_tls_context_trust_file(eddy_tls_context_t *c, const char *ca_file)
{
    (void)c, (void)ca_file;
    return none();
}

int eddy_tls_context_trust_pem(eddy_tls_context_t *c, const char *pem, size_t len)
{
    (void)c, (void)pem, (void)len;
    return none();
}

int eddy_tls_context_verify(eddy_tls_context_t *c, eddy_tls_verify_t mode)
{
    (void)c, (void)mode;
    return none();
}

int eddy_tls_context_versions(eddy_tls_context_t *c, int min, int max)
{
    (void)c, (void)min, (void)max;
    return none();
}

int eddy_tls_context_ciphers(eddy_tls_context_t *c, const char *list)
{
    (void)c, (void)list;
    return none();
}

int eddy_tls_context_ciphersuites(eddy_tls_context_t *c, const char *list)
{
    (void)c, (void)list;
    return none();
}

int eddy_tls_context_alpn(eddy_tls_context_t *c, const char *const *protocols, size_t n)
{
    (void)c, (void)protocols, (void)n;
    return none();
}

int eddy_tls_context_session_resumption(eddy_tls_context_t *c, bool on)
{
    (void)c, (void)on;
    return none();
}

int eddy_tls_context_add_sni(eddy_tls_context_t *c, const char *name, eddy_tls_context_t *sni)
{
    (void)c, (void)name, (void)sni;
    return none();
}

static const eddy_handler_ops_t no_tls_ops = {.name = "tls"};

const eddy_handler_ops_t *eddy_tls_handler_ops(void)
{
    return &no_tls_ops;
}

eddy_tls_handler_t *eddy_tls_handler_new(eddy_tls_context_t *c,
                                         const eddy_tls_handler_options_t *opts)
{
    (void)c, (void)opts;
    return NULL;
}

void eddy_tls_handler_free(void *state)
{
    (void)state;
}

eddy_handler_t eddy_tls_handler(eddy_tls_context_t *c, const eddy_tls_handler_options_t *opts)
{
    (void)c, (void)opts;
    return (eddy_handler_t){.error = EDDY_ENOTSUP};
}

int eddy_tls_add(eddy_channel_t *ch, eddy_tls_context_t *c, const eddy_tls_handler_options_t *opts,
                 eddy_future_t **handshake)
{
    (void)ch, (void)c, (void)opts;
    if (handshake != NULL) {
        *handshake = NULL;
    }
    return none();
}

eddy_tls_handler_t *eddy_tls_handler_of(eddy_channel_t *ch)
{
    (void)ch;
    return NULL;
}

eddy_future_t *eddy_tls_handler_retain_handshake(eddy_tls_handler_t *h)
{
    (void)h;
    return NULL;
}

void eddy_tls_handler_handshake(eddy_tls_handler_t *h)
{
    (void)h;
}

void eddy_tls_handler_close_outbound(eddy_tls_handler_t *h, eddy_promise_t *p)
{
    (void)h;
    if (p != NULL) {
        eddy_promise_fail(p, EDDY_ENOTSUP);
    }
}

/* Every accessor: what a handler before its handshake says. */
static const char *empty(const eddy_tls_handler_t *h)
{
    (void)h;
    return "";
}

const char *eddy_tls_handler_protocol(const eddy_tls_handler_t *h)
{
    return empty(h);
}

const char *eddy_tls_handler_cipher(const eddy_tls_handler_t *h)
{
    return empty(h);
}

const char *eddy_tls_handler_alpn(const eddy_tls_handler_t *h)
{
    return empty(h);
}

const char *eddy_tls_handler_server_name(const eddy_tls_handler_t *h)
{
    (void)h;
    return NULL;
}

bool eddy_tls_handler_session_reused(const eddy_tls_handler_t *h)
{
    (void)h;
    return false;
}

bool eddy_tls_handler_is_handshake_done(const eddy_tls_handler_t *h)
{
    (void)h;
    return false;
}

const char *eddy_tls_handler_error(const eddy_tls_handler_t *h)
{
    return empty(h);
}

struct ssl_st *eddy_tls_handler_ssl(eddy_tls_handler_t *h)
{
    (void)h;
    return NULL;
}

int eddy_tls_self_signed_new(const char *cn, int days, eddy_tls_self_signed_t **out)
{
    (void)cn, (void)days;
    *out = NULL;
    return none();
}

void eddy_tls_self_signed_free(eddy_tls_self_signed_t *s)
{
    (void)s;
}

const char *eddy_tls_self_signed_cert_pem(const eddy_tls_self_signed_t *s)
{
    (void)s;
    return "";
}

const char *eddy_tls_self_signed_key_pem(const eddy_tls_self_signed_t *s)
{
    (void)s;
    return "";
}

int eddy_tls_self_signed_write(const eddy_tls_self_signed_t *s, const char *cert_file,
                               const char *key_file)
{
    (void)s, (void)cert_file, (void)key_file;
    return none();
}
