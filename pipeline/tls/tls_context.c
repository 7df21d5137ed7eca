/*
 * TLS contexts (Netty's SslContextBuilder): an SSL_CTX with eddy's defaults, setters that
 * wrap OpenSSL's, the server's SNI choice, the server's ALPN choice, and the client's
 * session cache.
 *
 * A context is configured on one thread and then shared: the first handler made from it
 * marks it used (setters then refuse with EDDY_EINVAL) and builds what was left to do (a
 * client that trusts nothing given loads the system's CAs). OpenSSL's SSL_CTX is thread-safe
 * for making SSL objects; our own shared state is the client session cache, under a mutex.
 */
#include "pipeline/tls/internal.h"
#include "buffer/layer.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The session id context servers set: required for resumption when client certificates are
 * asked for (OpenSSL refuses to resume otherwise). */
static const unsigned char session_id_context[] = "eddy";

static int ssl_index = -1;
static pthread_once_t ssl_index_once = PTHREAD_ONCE_INIT;

static void ssl_index_init(void)
{
    ssl_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

int eddy__tls_ssl_index(void)
{
    pthread_once(&ssl_index_once, ssl_index_init);
    return ssl_index;
}

void eddy__tls_error_text(SSL *ssl, char *out, size_t n)
{
    out[0] = '\0';
    size_t used = 0;
    long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    if (vr != X509_V_OK) {
        used = (size_t)snprintf(out, n, "certificate verify failed: %s",
                                X509_verify_cert_error_string(vr));
    }
    unsigned long e;
    while ((e = ERR_get_error()) != 0) {
        if (used + 3 >= n) {
            continue; /* keep emptying the queue */
        }
        char one[256];
        ERR_error_string_n(e, one, sizeof(one));
        int w = snprintf(out + used, n - used, "%s%s", used > 0 ? "; " : "", one);
        used = w > 0 && (size_t)w < n - used ? used + (size_t)w : n - 1;
    }
    if (out[0] == '\0') {
        snprintf(out, n, "TLS failure");
    }
}

bool eddy__tls_is_ip(const char *s)
{
    unsigned char addr[16];
    return inet_pton(AF_INET, s, addr) == 1 || inet_pton(AF_INET6, s, addr) == 1;
}

/* A setter's failure: OpenSSL's reason kept for eddy_tls_context_error(). */
static int failed(eddy_tls_context_t *c)
{
    eddy__tls_error_text(NULL, c->error, sizeof(c->error));
    return EDDY_ETLS;
}

static bool settable(const eddy_tls_context_t *c)
{
    return c != NULL && !atomic_load(&c->used);
}

/* Servers: SNI picks the context for the name the client asked for. */
static bool sni_matches(const char *pattern, const char *name)
{
    if (strncmp(pattern, "*.", 2) == 0) {
        const char *dot = strchr(name, '.');
        return dot != NULL && dot != name && strcasecmp(dot + 1, pattern + 2) == 0;
    }
    return strcasecmp(pattern, name) == 0;
}

static int servername_cb(SSL *ssl, int *alert, void *arg)
{
    (void)alert;
    eddy_tls_context_t *c = arg;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (name == NULL) {
        return SSL_TLSEXT_ERR_OK;
    }
    for (eddy__tls_sni_t *s = c->sni; s != NULL; s = s->next) {
        if (sni_matches(s->name, name)) {
            SSL_CTX *other = s->ctx->ssl_ctx;
            SSL_set_SSL_CTX(ssl, other);
            /* SSL_set_SSL_CTX takes the certificate; the verify settings are the SSL's own. */
            SSL_set_verify(ssl, SSL_CTX_get_verify_mode(other), SSL_CTX_get_verify_callback(other));
            break;
        }
    }
    return SSL_TLSEXT_ERR_OK;
}

/* Servers: the first of our protocols the client offered; none: no ALPN (Netty's
 * NO_ADVERTISE / ACCEPT behaviour), so a client without it still connects. The context is the
 * one SNI chose. */
static int alpn_select_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                          const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)arg;
    eddy_tls_context_t *c = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    if (c == NULL || c->alpn_len == 0) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    unsigned char *sel = NULL;
    unsigned char sel_len = 0;
    if (SSL_select_next_proto(&sel, &sel_len, c->alpn, c->alpn_len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    *out = sel;
    *outlen = sel_len;
    return SSL_TLSEXT_ERR_OK;
}

/* Clients: keep the new session under the handler's key (TLS 1.3 tickets arrive after the
 * handshake; this runs then). Returning 1 keeps OpenSSL's reference. */
static int new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
    eddy_tls_context_t *c = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    const char *key = eddy__tls_handler_session_key(ssl);
    if (c == NULL || key == NULL || key[0] == '\0' || !c->resumption) {
        return 0;
    }
    pthread_mutex_lock(&c->lock);
    eddy__tls_session_t *slot = NULL, *oldest = &c->sessions[0];
    for (size_t i = 0; i < EDDY__TLS_SESSION_SLOTS; i++) {
        eddy__tls_session_t *s = &c->sessions[i];
        if (s->sess != NULL && strcmp(s->key, key) == 0) {
            slot = s;
            break;
        }
        if (s->sess == NULL || s->stamp < oldest->stamp) {
            oldest = s; /* an empty slot has stamp 0: taken first */
        }
    }
    if (slot == NULL) {
        slot = oldest;
        snprintf(slot->key, sizeof(slot->key), "%s", key);
    }
    if (slot->sess != NULL) {
        SSL_SESSION_free(slot->sess);
    }
    slot->sess = sess;
    slot->stamp = ++c->session_stamp;
    pthread_mutex_unlock(&c->lock);
    return 1;
}

SSL_SESSION *eddy__tls_session_get(eddy_tls_context_t *c, const char *key)
{
    SSL_SESSION *found = NULL;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < EDDY__TLS_SESSION_SLOTS; i++) {
        eddy__tls_session_t *s = &c->sessions[i];
        if (s->sess != NULL && strcmp(s->key, key) == 0) {
            if (SSL_SESSION_is_resumable(s->sess)) {
                SSL_SESSION_up_ref(s->sess);
                found = s->sess;
            }
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return found;
}

bool eddy_tls_available(void)
{
    return true;
}

eddy_tls_context_t *eddy_tls_context_new(eddy_tls_mode_t mode)
{
    if (mode != EDDY_TLS_CLIENT && mode != EDDY_TLS_SERVER) {
        return NULL;
    }
    eddy_tls_context_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->ssl_ctx = SSL_CTX_new(mode == EDDY_TLS_CLIENT ? TLS_client_method() : TLS_server_method());
    if (c->ssl_ctx == NULL || pthread_mutex_init(&c->lock, NULL) != 0) {
        SSL_CTX_free(c->ssl_ctx);
        free(c);
        ERR_clear_error();
        return NULL;
    }
    atomic_init(&c->refs, 1);
    atomic_init(&c->used, false);
    c->mode = mode;
    c->resumption = true;
    SSL_CTX *ctx = c->ssl_ctx;
    SSL_CTX_set_app_data(ctx, c);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* Memory BIOs take all we write: partial writes would only add bookkeeping. A moving
     * buffer is allowed because our retries resend from the same plaintext anyway. Record
     * buffers (about 17 KiB each way) are freed whenever they are empty, as nginx has
     * OpenSSL do: an idle connection then holds no record buffer. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    if (mode == EDDY_TLS_CLIENT) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_session_cache_mode(ctx,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
        SSL_CTX_set_session_id_context(ctx, session_id_context, sizeof(session_id_context) - 1);
        SSL_CTX_set_tlsext_servername_callback(ctx, servername_cb);
        SSL_CTX_set_tlsext_servername_arg(ctx, c);
        SSL_CTX_set_alpn_select_cb(ctx, alpn_select_cb, NULL);
    }
    return c;
}

eddy_tls_context_t *eddy_tls_context_retain(eddy_tls_context_t *c)
{
    eddy__refcnt_add(&c->refs);
    return c;
}

void eddy_tls_context_release(eddy_tls_context_t *c)
{
    /* acq_rel: the last release sees every other holder's writes (the session cache). */
    if (c == NULL || !eddy__refcnt_sub(&c->refs, 1)) {
        return;
    }
    while (c->sni != NULL) {
        eddy__tls_sni_t *s = c->sni;
        c->sni = s->next;
        eddy_tls_context_release(s->ctx);
        free(s->name);
        free(s);
    }
    for (size_t i = 0; i < EDDY__TLS_SESSION_SLOTS; i++) {
        if (c->sessions[i].sess != NULL) {
            SSL_SESSION_free(c->sessions[i].sess);
        }
    }
    free(c->alpn);
    SSL_CTX_free(c->ssl_ctx);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const char *eddy_tls_context_error(const eddy_tls_context_t *c)
{
    return c->error;
}

struct ssl_ctx_st *eddy_tls_context_ssl_ctx(eddy_tls_context_t *c)
{
    return c->ssl_ctx;
}

int eddy__tls_context_build(eddy_tls_context_t *c)
{
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    atomic_store(&c->used, true);
    if (!c->built) {
        c->built = true;
        if (c->mode == EDDY_TLS_CLIENT && !c->trust_set &&
            SSL_CTX_set_default_verify_paths(c->ssl_ctx) != 1) {
            rc = failed(c);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int eddy_tls_context_use_certificate_file(eddy_tls_context_t *c, const char *cert_file,
                                          const char *key_file)
{
    if (!settable(c) || cert_file == NULL || key_file == NULL) {
        return EDDY_EINVAL;
    }
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(c->ssl_ctx, cert_file) != 1 ||
        SSL_CTX_use_PrivateKey_file(c->ssl_ctx, key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(c->ssl_ctx) != 1) {
        return failed(c);
    }
    return 0;
}

/* A memory BIO over len bytes of text (len 0: up to the NUL). */
static BIO *text_bio(const char *text, size_t len)
{
    return BIO_new_mem_buf(text, len > 0 ? (int)len : -1);
}

int eddy_tls_context_use_certificate_pem(eddy_tls_context_t *c, const char *cert, size_t cert_len,
                                         const char *key, size_t key_len)
{
    if (!settable(c) || cert == NULL || key == NULL || cert_len > INT32_MAX ||
        key_len > INT32_MAX) {
        return EDDY_EINVAL;
    }
    ERR_clear_error();
    int rc = 0;
    BIO *cb = text_bio(cert, cert_len), *kb = text_bio(key, key_len);
    X509 *leaf = cb != NULL ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *pkey = kb != NULL ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    if (leaf == NULL || pkey == NULL || SSL_CTX_use_certificate(c->ssl_ctx, leaf) != 1 ||
        SSL_CTX_use_PrivateKey(c->ssl_ctx, pkey) != 1 ||
        SSL_CTX_check_private_key(c->ssl_ctx) != 1) {
        rc = failed(c);
    } else {
        /* The rest of the chain, leaf first as in a file. */
        SSL_CTX_clear_chain_certs(c->ssl_ctx);
        X509 *extra;
        while ((extra = PEM_read_bio_X509(cb, NULL, NULL, NULL)) != NULL) {
            if (SSL_CTX_add0_chain_cert(c->ssl_ctx, extra) != 1) {
                X509_free(extra);
                rc = failed(c);
                break;
            }
        }
        ERR_clear_error(); /* the end of the PEM text */
    }
    X509_free(leaf);
    EVP_PKEY_free(pkey);
    BIO_free(cb);
    BIO_free(kb);
    return rc;
}

/* Servers: name the CAs of list to clients as acceptable issuers. */
static int add_client_cas(eddy_tls_context_t *c, const char *file, X509 *cert)
{
    if (c->mode != EDDY_TLS_SERVER) {
        return 0;
    }
    if (cert != NULL) {
        return SSL_CTX_add_client_CA(c->ssl_ctx, cert) == 1 ? 0 : -1;
    }
    STACK_OF(X509_NAME) *names = SSL_dup_CA_list(SSL_CTX_get_client_CA_list(c->ssl_ctx));
    if (names == NULL) {
        names = sk_X509_NAME_new_null();
    }
    if (names == NULL || SSL_add_file_cert_subjects_to_stack(names, file) != 1) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        return -1;
    }
    SSL_CTX_set_client_CA_list(c->ssl_ctx, names);
    return 0;
}

int eddy_tls_context_trust_file(eddy_tls_context_t *c, const char *ca_file)
{
    if (!settable(c) || ca_file == NULL) {
        return EDDY_EINVAL;
    }
    ERR_clear_error();
    if (SSL_CTX_load_verify_locations(c->ssl_ctx, ca_file, NULL) != 1 ||
        add_client_cas(c, ca_file, NULL) != 0) {
        return failed(c);
    }
    c->trust_set = true;
    return 0;
}

int eddy_tls_context_trust_pem(eddy_tls_context_t *c, const char *pem, size_t len)
{
    if (!settable(c) || pem == NULL || len > INT32_MAX) {
        return EDDY_EINVAL;
    }
    ERR_clear_error();
    BIO *b = text_bio(pem, len);
    if (b == NULL) {
        return EDDY_ENOMEM;
    }
    X509_STORE *store = SSL_CTX_get_cert_store(c->ssl_ctx);
    int added = 0, rc = 0;
    X509 *x;
    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
        if (X509_STORE_add_cert(store, x) != 1 || add_client_cas(c, NULL, x) != 0) {
            rc = -1;
        }
        X509_free(x);
        added++;
    }
    BIO_free(b);
    if (rc != 0 || added == 0) {
        return failed(c);
    }
    ERR_clear_error(); /* the end of the PEM text */
    c->trust_set = true;
    return 0;
}

int eddy_tls_context_verify(eddy_tls_context_t *c, eddy_tls_verify_t mode)
{
    if (!settable(c)) {
        return EDDY_EINVAL;
    }
    int flags;
    switch (mode) {
    case EDDY_TLS_VERIFY_NONE:
        flags = SSL_VERIFY_NONE;
        break;
    case EDDY_TLS_VERIFY_OPTIONAL:
        flags = SSL_VERIFY_PEER;
        break;
    case EDDY_TLS_VERIFY_REQUIRE:
        flags = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        break;
    default:
        return EDDY_EINVAL;
    }
    SSL_CTX_set_verify(c->ssl_ctx, flags, NULL);
    return 0;
}

int eddy_tls_context_versions(eddy_tls_context_t *c, int min, int max)
{
    if (!settable(c) || (min != 0 && min < TLS1_VERSION) || (max != 0 && max < min)) {
        return EDDY_EINVAL;
    }
    ERR_clear_error();
    if (SSL_CTX_set_min_proto_version(c->ssl_ctx, min) != 1 ||
        SSL_CTX_set_max_proto_version(c->ssl_ctx, max) != 1) {
        return failed(c);
    }
    return 0;
}

int eddy_tls_context_ciphers(eddy_tls_context_t *c, const char *list)
{
    if (!settable(c) || list == NULL) {
        return EDDY_EINVAL;
    }
    ERR_clear_error();
    return SSL_CTX_set_cipher_list(c->ssl_ctx, list) == 1 ? 0 : failed(c);
}

int eddy_tls_context_ciphersuites(eddy_tls_context_t *c, const char *list)
{
    if (!settable(c) || list == NULL) {
        return EDDY_EINVAL;
    }
    ERR_clear_error();
    return SSL_CTX_set_ciphersuites(c->ssl_ctx, list) == 1 ? 0 : failed(c);
}

int eddy_tls_context_alpn(eddy_tls_context_t *c, const char *const *protocols, size_t n)
{
    if (!settable(c) || (n > 0 && protocols == NULL)) {
        return EDDY_EINVAL;
    }
    /* The wire format: each protocol as a length byte and its bytes. */
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = protocols[i] != NULL ? strlen(protocols[i]) : 0;
        if (l == 0 || l > 255) {
            return EDDY_EINVAL;
        }
        len += 1 + l;
    }
    if (len > UINT16_MAX) {
        return EDDY_EINVAL;
    }
    unsigned char *wire = len > 0 ? malloc(len) : NULL;
    if (len > 0 && wire == NULL) {
        return EDDY_ENOMEM;
    }
    unsigned char *w = wire;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(protocols[i]);
        *w++ = (unsigned char)l;
        memcpy(w, protocols[i], l);
        w += l;
    }
    /* Clients offer the list; servers choose from it in alpn_select_cb. SSL_CTX_set_alpn_protos
     * returns 0 on success, unlike the rest of OpenSSL. */
    if (c->mode == EDDY_TLS_CLIENT && SSL_CTX_set_alpn_protos(c->ssl_ctx, wire, (unsigned)len)) {
        free(wire);
        return failed(c);
    }
    free(c->alpn);
    c->alpn = wire;
    c->alpn_len = (unsigned)len;
    return 0;
}

int eddy_tls_context_session_resumption(eddy_tls_context_t *c, bool on)
{
    if (!settable(c)) {
        return EDDY_EINVAL;
    }
    c->resumption = on;
    if (c->mode == EDDY_TLS_SERVER) {
        if (on) {
            SSL_CTX_clear_options(c->ssl_ctx, SSL_OP_NO_TICKET);
            SSL_CTX_set_session_cache_mode(c->ssl_ctx, SSL_SESS_CACHE_SERVER);
            SSL_CTX_set_num_tickets(c->ssl_ctx, 2);
        } else {
            SSL_CTX_set_options(c->ssl_ctx, SSL_OP_NO_TICKET);
            SSL_CTX_set_session_cache_mode(c->ssl_ctx, SSL_SESS_CACHE_OFF);
            SSL_CTX_set_num_tickets(c->ssl_ctx, 0);
        }
    }
    return 0;
}

int eddy_tls_context_add_sni(eddy_tls_context_t *c, const char *name, eddy_tls_context_t *sni)
{
    if (!settable(c) || c->mode != EDDY_TLS_SERVER || name == NULL || name[0] == '\0' ||
        sni == NULL || sni == c || sni->mode != EDDY_TLS_SERVER) {
        return EDDY_EINVAL;
    }
    eddy__tls_sni_t *s = calloc(1, sizeof(*s));
    char *copy = strdup(name);
    if (s == NULL || copy == NULL) {
        free(s);
        free(copy);
        return EDDY_ENOMEM;
    }
    /* Built with c: a handler is made from c, never from sni, so freeze sni here. */
    if (eddy__tls_context_build(sni) != 0) {
        free(s);
        free(copy);
        return EDDY_ETLS;
    }
    s->name = copy;
    s->ctx = eddy_tls_context_retain(sni);
    s->next = c->sni;
    c->sni = s;
    return 0;
}
