/*
 * pipeline/tls/internal.h: what the TLS context (tls_context.c) and handler (tls_handler.c)
 * share. Not installed.
 */
#ifndef EDDY_PIPELINE_TLS_INTERNAL_H
#define EDDY_PIPELINE_TLS_INTERNAL_H

#include <eddy/tls.h>

#include <openssl/ssl.h>

#include <pthread.h>
#include <stdatomic.h>

/* Client sessions kept per context for resumption: the last one per server, this many
 * servers at most (oldest replaced first). */
#define EDDY__TLS_SESSION_SLOTS 64
#define EDDY__TLS_KEY_MAX 400

typedef struct eddy__tls_session_s {
    char key[EDDY__TLS_KEY_MAX]; /* "server_name|address" */
    SSL_SESSION *sess;           /* a reference, or NULL */
    uint64_t stamp;              /* for replacing the oldest */
} eddy__tls_session_t;

typedef struct eddy__tls_sni_s {
    struct eddy__tls_sni_s *next;
    char *name;
    eddy_tls_context_t *ctx; /* a reference */
} eddy__tls_sni_t;

struct eddy_tls_context_s {
    _Atomic uint32_t refs;
    eddy_tls_mode_t mode;
    SSL_CTX *ssl_ctx;
    eddy__tls_sni_t *sni;
    unsigned char *alpn; /* ALPN protocols in wire format, or NULL */
    unsigned alpn_len;
    bool trust_set;       /* CAs given: the system's are not loaded */
    bool resumption;      /* clients: use the session cache below */
    atomic_bool used;     /* a handler was made: setters refuse */
    pthread_mutex_t lock; /* the first use, and the session cache */
    bool built;
    eddy__tls_session_t sessions[EDDY__TLS_SESSION_SLOTS];
    uint64_t session_stamp;
    char error[256];
};

/* The index of the handler in SSL ex_data (SSL_get_ex_data): set once per process. */
int eddy__tls_ssl_index(void);
/* Freeze c (first use: load the system's CAs for a client that named none): 0 or EDDY_ETLS. */
int eddy__tls_context_build(eddy_tls_context_t *c);
/* Clients: the session kept for key, with a reference for the caller, or NULL. */
SSL_SESSION *eddy__tls_session_get(eddy_tls_context_t *c, const char *key);
/* Clients: the session cache key of the SSL's handler (tls_handler.c), or NULL. */
const char *eddy__tls_handler_session_key(SSL *ssl);
/* OpenSSL's error queue (and, when set, the verify result of ssl) as text into out; the
 * queue is emptied. */
void eddy__tls_error_text(SSL *ssl, char *out, size_t n);

/* True when s is a numeric IPv4 or IPv6 address. */
bool eddy__tls_is_ip(const char *s);

/* What the handler's two memory BIOs hold allocated, read plus write (the loop's thread);
 * for tests of the trim. */
size_t eddy__tls_handler_bio_capacity(eddy_tls_handler_t *h);

#endif /* EDDY_PIPELINE_TLS_INTERNAL_H */
