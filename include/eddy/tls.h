/*
 * eddy TLS: OpenSSL 3 in the pipeline (Netty's SslContext, SslHandler and
 * SelfSignedCertificate).
 *
 * A context holds what many connections share: mode (client or server), certificate and
 * key, trusted CAs and the verify mode, ALPN protocols, SNI contexts, versions, ciphers and
 * session resumption. It is refcounted; configure it on one thread, then share it: once a
 * handler was made from it, it is read-only and thread-safe.
 *
 * The handler sits first in the pipeline (nearest the head) and drives OpenSSL through
 * memory BIOs: ciphertext read from the socket goes into the read BIO, plaintext comes out of
 * SSL_read and goes on as buffers; plaintext written goes into SSL_write at flush, and the
 * records are taken from the write BIO in as few buffers as possible. The socket stays with
 * the loop; OpenSSL never blocks it.
 *
 *     eddy_tls_context_t *c = eddy_tls_context_new(EDDY_TLS_SERVER);
 *     eddy_tls_context_use_certificate_file(c, "cert.pem", "key.pem");
 *     ... in the child init:
 *     eddy_tls_add(ch, c, NULL, NULL);   (then the application's handlers, add_last)
 *
 * Errors: the functions that can fail return 0 or a negative EDDY_E* code; EDDY_ETLS means
 * OpenSSL refused, with its reason in eddy_tls_context_error() or the handshake event.
 *
 * Threads: a handler runs on its channel's loop, like every handler; the accessors that take
 * a handler are for the loop's thread (inside the pipeline's callbacks).
 */
#ifndef EDDY_TLS_H
#define EDDY_TLS_H

#include <eddy/common.h>
#include <eddy/loop.h>
#include <eddy/pipeline.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_tls_context_s eddy_tls_context_t;
typedef struct eddy_tls_handler_s eddy_tls_handler_t;
typedef struct eddy_tls_self_signed_s eddy_tls_self_signed_t;
struct ssl_ctx_st; /* OpenSSL's SSL_CTX */
struct ssl_st;     /* OpenSSL's SSL */

/* The TLS handler's user events, in eddy's own range (below EDDY_EVENT_USER). */
enum {
    EDDY_EVENT_TLS_HANDSHAKE = 64,    /* data: const eddy_tls_handshake_event_t * */
    EDDY_EVENT_TLS_CLOSE_NOTIFY = 65, /* the peer's close_notify arrived; data NULL */
};

/* The data of EDDY_EVENT_TLS_HANDSHAKE (Netty's SslHandshakeCompletionEvent): borrowed,
 * valid during the event. */
typedef struct eddy_tls_handshake_event_s {
    int error;            /* 0, or EDDY_ETLS, EDDY_ETIMEDOUT, EDDY_ECLOSED */
    const char *reason;   /* why it failed ("" on success) */
    const char *protocol; /* "TLSv1.3", "TLSv1.2" ("" on failure) */
    const char *cipher;   /* "TLS_AES_256_GCM_SHA384" ("" on failure) */
    const char *alpn;     /* the protocol ALPN chose, "" when none */
    bool resumed;         /* an earlier session was resumed */
} eddy_tls_handshake_event_t;

/* ---------------------------------------------------------------------------------------
 * Contexts
 */

typedef enum { EDDY_TLS_CLIENT = 1, EDDY_TLS_SERVER } eddy_tls_mode_t;

typedef enum {
    EDDY_TLS_VERIFY_NONE = 1, /* no peer certificate asked for or checked */
    EDDY_TLS_VERIFY_OPTIONAL, /* servers: ask for one, check it when given */
    EDDY_TLS_VERIFY_REQUIRE   /* a valid peer certificate is required */
} eddy_tls_verify_t;

/* Protocol versions, as on the wire (OpenSSL's TLS1_2_VERSION, TLS1_3_VERSION). */
enum { EDDY_TLS_1_2 = 0x0303, EDDY_TLS_1_3 = 0x0304 };

/**
 * Whether this build has TLS: eddy built with EDDY_WITH_TLS=OFF has no OpenSSL, and then
 * every constructor here returns NULL (or EDDY_ENOTSUP, eddy_tls_add and the setters), so a
 * program written for both builds links and says "no TLS here" at run time. Any thread.
 */
EDDY_EXTERN bool eddy_tls_available(void);

/**
 * A new context for mode: TLS 1.2 at least, session resumption on, verification REQUIRE
 * for clients (against the system's CAs unless trust is given) and NONE for servers. The
 * caller owns the one reference. NULL without memory, or without TLS (eddy_tls_available).
 */
EDDY_EXTERN eddy_tls_context_t *eddy_tls_context_new(eddy_tls_mode_t mode);
/** Take one more reference; returns c. Any thread. */
EDDY_EXTERN eddy_tls_context_t *eddy_tls_context_retain(eddy_tls_context_t *c);
/** Drop a reference; the last frees the context (handlers hold their own). NULL ignored. */
EDDY_EXTERN void eddy_tls_context_release(eddy_tls_context_t *c);
/** OpenSSL's reason for the last setter that returned EDDY_ETLS ("" if none). Borrowed. */
EDDY_EXTERN const char *eddy_tls_context_error(const eddy_tls_context_t *c);
/** The SSL_CTX behind c, for what this API does not cover. Borrowed; configure it before
 * the first handler, as the setters. */
EDDY_EXTERN struct ssl_ctx_st *eddy_tls_context_ssl_ctx(eddy_tls_context_t *c);

/*
 * Setters: before the first handler is made from c, on one thread. 0, EDDY_EINVAL (bad
 * argument, or the context is already in use), EDDY_ETLS (see eddy_tls_context_error).
 */

/** The certificate chain and private key from PEM files (the chain: leaf first). */
EDDY_EXTERN int eddy_tls_context_use_certificate_file(eddy_tls_context_t *c, const char *cert_file,
                                                      const char *key_file);
/** The same from PEM text in memory (copied; NUL-terminated or of the length given). */
EDDY_EXTERN int eddy_tls_context_use_certificate_pem(eddy_tls_context_t *c, const char *cert,
                                                     size_t cert_len, const char *key,
                                                     size_t key_len);
/** Trust the CA certificates of a PEM file (instead of the system's). Servers also name them
 * to clients as acceptable issuers. May be called several times. */
EDDY_EXTERN int eddy_tls_context_trust_file(eddy_tls_context_t *c, const char *ca_file);
/** Trust the CA certificates in PEM text (copied). */
EDDY_EXTERN int eddy_tls_context_trust_pem(eddy_tls_context_t *c, const char *pem, size_t len);
/** How the peer's certificate is checked. */
EDDY_EXTERN int eddy_tls_context_verify(eddy_tls_context_t *c, eddy_tls_verify_t mode);
/** Lowest and highest protocol versions (EDDY_TLS_1_2, EDDY_TLS_1_3; 0: no limit above). */
EDDY_EXTERN int eddy_tls_context_versions(eddy_tls_context_t *c, int min, int max);
/** OpenSSL cipher list for TLS 1.2 and below (SSL_CTX_set_cipher_list syntax). */
EDDY_EXTERN int eddy_tls_context_ciphers(eddy_tls_context_t *c, const char *list);
/** TLS 1.3 cipher suites ("TLS_AES_128_GCM_SHA256:..."). */
EDDY_EXTERN int eddy_tls_context_ciphersuites(eddy_tls_context_t *c, const char *list);
/** ALPN protocols, most preferred first (copied): clients offer them, servers choose the first
 * of theirs the client offered (none in common: no ALPN, the handshake goes on). */
EDDY_EXTERN int eddy_tls_context_alpn(eddy_tls_context_t *c, const char *const *protocols,
                                      size_t n);
/** Session resumption (default on). Servers: tickets and an internal cache; clients: a cache
 * of the last session per server name and address, kept in c. */
EDDY_EXTERN int eddy_tls_context_session_resumption(eddy_tls_context_t *c, bool on);
/** Servers: use sni (retained) for clients asking for server name name ("*.example.com"
 * matches one label); others get c. */
EDDY_EXTERN int eddy_tls_context_add_sni(eddy_tls_context_t *c, const char *name,
                                         eddy_tls_context_t *sni);

/* ---------------------------------------------------------------------------------------
 * The handler
 */

typedef struct eddy_tls_handler_options_s {
    const char *server_name;         /* clients: sent as SNI and verified against the
                                        certificate (a DNS name or an IP address); copied */
    int64_t handshake_timeout_ms;    /* 0: 10000; negative: none */
    int64_t close_notify_timeout_ms; /* how long a close waits for close_notify to be
                                        written; 0: 3000 */
    bool start_on_demand;            /* clients: wait for eddy_tls_handler_handshake() instead
                                        of starting when the channel is active */
} eddy_tls_handler_options_t;

/** The TLS handler's ops table (static, not sharable). Any thread. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_tls_handler_ops(void);

/**
 * A handler state for eddy_tls_handler_ops(), holding a reference to c, with opts (copied;
 * NULL: defaults). Add it with eddy_tls_handler_free as the free callback. NULL without
 * memory or when OpenSSL refuses. Any thread.
 */
EDDY_EXTERN eddy_tls_handler_t *eddy_tls_handler_new(eddy_tls_context_t *c,
                                                     const eddy_tls_handler_options_t *opts);
/** Free a handler state (an eddy_state_free_cb). The pipeline calls it. */
EDDY_EXTERN void eddy_tls_handler_free(void *state);
/** eddy_tls_handler_new() as one value (pipeline.h, eddy_handler_t), with its free
 * callback: add it first (nearest the head). */
EDDY_EXTERN eddy_handler_t eddy_tls_handler(eddy_tls_context_t *c,
                                            const eddy_tls_handler_options_t *opts);

/**
 * Make a handler and add it first in ch's pipeline as "tls". *handshake (may be NULL)
 * receives a reference to the handshake future (release it). 0, EDDY_ENOMEM, EDDY_ETLS, or
 * what eddy_pipeline_add_first returns. The channel's loop (inside an init callback) or
 * before the channel is registered.
 */
EDDY_EXTERN int eddy_tls_add(eddy_channel_t *ch, eddy_tls_context_t *c,
                             const eddy_tls_handler_options_t *opts, eddy_future_t **handshake);

/** The TLS handler of ch's pipeline, or NULL. The loop's thread. */
EDDY_EXTERN eddy_tls_handler_t *eddy_tls_handler_of(eddy_channel_t *ch);

/**
 * The handshake future, retained for the caller (release it; it outlives the handler):
 * completes with NULL once the handshake is done, or fails with EDDY_ETLS (OpenSSL refused:
 * the reason is in the handshake event and eddy_tls_handler_error), EDDY_ETIMEDOUT or
 * EDDY_ECLOSED. Any thread, while the handler is alive (before it is added, or on the loop).
 */
EDDY_EXTERN eddy_future_t *eddy_tls_handler_retain_handshake(eddy_tls_handler_t *h);
/** Start the handshake now (start_on_demand, or a renewed wish); nothing if started. */
EDDY_EXTERN void eddy_tls_handler_handshake(eddy_tls_handler_t *h);
/**
 * Send close_notify after what was flushed, keeping the channel open to read the peer's
 * rest (TLS half-close; Netty's closeOutbound). Later writes fail with EDDY_EPIPE. p (may be
 * NULL) completes once close_notify was written. The loop's thread.
 */
EDDY_EXTERN void eddy_tls_handler_close_outbound(eddy_tls_handler_t *h, eddy_promise_t *p);

/* What the handshake negotiated: borrowed strings, valid while h is, "" before it is done. The
 * loop's thread, like every accessor below. */

/** The protocol version, "TLSv1.3" or "TLSv1.2". */
EDDY_EXTERN const char *eddy_tls_handler_protocol(const eddy_tls_handler_t *h);
/** The cipher suite, OpenSSL's name ("TLS_AES_256_GCM_SHA384"). */
EDDY_EXTERN const char *eddy_tls_handler_cipher(const eddy_tls_handler_t *h);
/** The protocol ALPN chose ("" when none). */
EDDY_EXTERN const char *eddy_tls_handler_alpn(const eddy_tls_handler_t *h);
/** The server name the client asked for (SNI; NULL when none or after removal). */
EDDY_EXTERN const char *eddy_tls_handler_server_name(const eddy_tls_handler_t *h);
/** True when the handshake resumed an earlier session (false after removal). */
EDDY_EXTERN bool eddy_tls_handler_session_reused(const eddy_tls_handler_t *h);
/** True once the handshake completed successfully. */
EDDY_EXTERN bool eddy_tls_handler_is_handshake_done(const eddy_tls_handler_t *h);
/** The reason for the first failure of the handler (OpenSSL's, or eddy's: a timeout, a
 * truncation), "" if none. Borrowed: valid while h is, never changed once set. */
EDDY_EXTERN const char *eddy_tls_handler_error(const eddy_tls_handler_t *h);
/** The SSL object, for what this API does not cover. Borrowed. */
EDDY_EXTERN struct ssl_st *eddy_tls_handler_ssl(eddy_tls_handler_t *h);

/* ---------------------------------------------------------------------------------------
 * Self-signed certificates for tests and examples (Netty's SelfSignedCertificate): an EC
 * P-256 key and an X.509 certificate for a host name, made with OpenSSL at run time.
 */

/**
 * A new key and certificate for cn (NULL: "localhost"; also its subjectAltName, as an IP
 * address when cn is one, plus 127.0.0.1 for "localhost"), valid from now for days (0: 365;
 * negative: it expired -days days ago, for tests). *out owns it. 0, EDDY_ENOMEM, EDDY_ETLS.
 */
EDDY_EXTERN int eddy_tls_self_signed_new(const char *cn, int days, eddy_tls_self_signed_t **out);
/** Free s, wiping its key from memory. NULL is ignored. */
EDDY_EXTERN void eddy_tls_self_signed_free(eddy_tls_self_signed_t *s);
/** The certificate as PEM text (NUL-terminated). Borrowed, valid while s is. */
EDDY_EXTERN const char *eddy_tls_self_signed_cert_pem(const eddy_tls_self_signed_t *s);
/** The private key as unencrypted PKCS#8 PEM text. Borrowed, valid while s is. */
EDDY_EXTERN const char *eddy_tls_self_signed_key_pem(const eddy_tls_self_signed_t *s);
/** Write both to files (the key file mode 0600): 0 or a negative errno code. */
EDDY_EXTERN int eddy_tls_self_signed_write(const eddy_tls_self_signed_t *s, const char *cert_file,
                                           const char *key_file);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_TLS_H */
