/*
 * The TLS handler (Netty's SslHandler): OpenSSL driven through BIOs of memory (a memory BIO
 * in, one of ours out), so the socket stays with the loop and nothing ever blocks.
 *
 * Inbound: each ciphertext buffer goes into the read BIO (and is released); while the
 * handshake runs, SSL_do_handshake answers from it; afterwards SSL_read drains it into
 * plaintext buffers of up to READ_CHUNK bytes from the channel's allocator, fired on as they
 * fill. WANT_READ means "wait for the next buffer"; WANT_WRITE cannot last with our write BIO
 * (it takes every byte), so it means "hand on what it holds and go on".
 *
 * Outbound: writes queue plaintext with their promises; a flush (after the handshake; one
 * asked for before it is kept for then) feeds them to SSL_write, 16 KiB (one record) at a
 * time, and the write BIO (ours, not a memory BIO) appends the records to the buffer that
 * goes downstream: one per flush, or one per COALESCE_MAX bytes for big flushes, so a 16 MiB
 * write never sits twice in memory. The promises of one flush complete with its last
 * ciphertext buffer. A file region is read and sealed a piece at a time (REGION_STEP), each
 * piece once the one before was written; what was queued after it waits (no kTLS: the
 * library does not use it).
 *
 * Close: an outbound close after the handshake sends close_notify first, and closes once it
 * was written (or after close_notify_timeout_ms). The peer's close_notify is an event; a peer
 * that ends the TCP stream without one (channel_inactive or input shutdown first) is a
 * truncation: exception_caught with EDDY_ECONNABORTED, never a clean end of stream.
 *
 * Failures (OpenSSL's SSL_ERROR_SSL, the handshake timeout, a close during the handshake)
 * fail the handshake future, fire EDDY_EVENT_TLS_HANDSHAKE with OpenSSL's reason, then
 * exception_caught, then close the channel. handler_removed frees the SSL and fails what is
 * queued, whatever path led there.
 *
 * Lifetimes: every fire can reach a handler that closes the channel, which removes this
 * handler and frees the SSL (the state itself lives until the outermost event leaves the
 * pipeline). After each fire we ask eddy_ctx_is_removed() before going on.
 */
#include "pipeline/internal.h"
#include "pipeline/tls/internal.h"

#include <eddy/tls.h>

#include <openssl/buffer.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Plaintext buffers fired inbound: one TLS record's worth (RFC 8446, 2^14 bytes). */
#define READ_CHUNK 16384
/* Plaintext fed to SSL_write at once: one record, so records stay full-sized. */
#define WRITE_CHUNK 16384
/* Ciphertext held in the write BIO before it goes out as one buffer during a big flush:
 * large enough to make writev's batches long, small enough not to copy a 16 MiB write
 * twice. */
#define COALESCE_MAX ((size_t)256 << 10)

/*
 * A memory BIO never gives back what it grew to: after a bulk transfer an idle connection
 * would keep a read BIO the size of its largest read and a write BIO the size of its largest
 * flush (up to COALESCE_MAX), about 250 KB after echoing 1 MiB. Once a BIO grew past
 * BIO_KEEP, a timer looks again after BIO_TRIM_DELAY_MS and swaps each empty BIO for a new
 * one; a streaming connection pays one regrowth per delay, an idle one keeps nothing.
 */
#define BIO_KEEP ((size_t)32 << 10)
#define BIO_TRIM_DELAY_MS 1000

#define DEFAULT_HANDSHAKE_TIMEOUT_MS 10000
#define DEFAULT_CLOSE_NOTIFY_TIMEOUT_MS 3000 /* Netty's closeNotifyFlushTimeout */

/* A write waiting for the flush that encrypts it. Its plaintext counts in the channel's
 * pending bytes meanwhile (Netty's PendingWriteQueue does the same), so the water marks and
 * the hard cap see what an application wrote through TLS before it flushed. */
typedef struct pending_s {
    struct pending_s *next;
    eddy_msg_t *msg;
    eddy_promise_t *p; /* a reference, or NULL */
    size_t bytes;      /* plaintext, counted in the channel's pending bytes */
} pending_t;

/* Entries come from the thread's small blocks: one per write, freed when it is sealed. */
static void pending_free(pending_t *e)
{
    if (e != NULL) {
        eddy__small_free(e, sizeof(*e));
    }
}

struct eddy_tls_handler_s {
    eddy_tls_context_t *tctx; /* a reference */
    SSL *ssl;                 /* NULL once removed */
    BIO *rbio, *wbio;         /* the SSL's: network to SSL (memory), SSL to network (out) */
    eddy_buf_t *out;          /* records the write BIO took, not yet handed on; or NULL */
    size_t unsealed;          /* plaintext of the flush being sealed still to go through
                                 SSL_write: sizes the next out buffer */
    bool out_nomem;           /* the write BIO failed for want of memory */
    eddy_ctx_t *ctx;
    eddy_promise_t *handshake;
    uint64_t timer; /* a scoped timer's id: the handshake's timeout until it completes, then
                       the BIO trim; 0: none */
    pending_t *head, *tail;
    int64_t hs_timeout_ms, cn_timeout_ms;
    bool client, start_on_demand;
    bool started, done, failed;
    bool flush_pending;        /* a flush came before the handshake completed */
    bool cn_sent, cn_received; /* close_notify */
    bool fired;                /* plaintext went on since the last read_complete */
    bool big_bios;             /* the read BIO grew past BIO_KEEP since the last trim */
    bool sealing, reseal;      /* inside seal_pending; a flush came meanwhile */
    struct region_waker_s *waker; /* a file region's piece is on its way: the rest waits */
    /* Closes asked for while sealing (from an event the records fired): run once the
     * sealing is over, so close_notify never lands between two flushed writes. */
    bool deferred_cn, deferred_close;
    bool deferred_graceful; /* the deferred close is a close after flush */
    eddy_promise_t *deferred_cn_p, *deferred_close_p; /* references, or NULL */
    /* Strings, allocated when there is something to say, so that a connection carries no
     * fixed text arrays: NULL reads as "". */
    char *server_name;            /* a client's, as given */
    char *key;                    /* a client's session cache key */
    const char *protocol, *cipher; /* OpenSSL's own static names, after the handshake */
    char *alpn;                   /* the protocol ALPN chose */
    char *error;                  /* why this handler failed */
    /* The handshake's user event: its data stays in the state, read by offloaded handlers
     * after the event was fired (the pipeline keeps the state until they are done). */
    eddy_tls_handshake_event_t hs_event;
};

/* Set s->error unless it is set: the first reason stays, and so does every pointer
 * eddy_tls_handler_error() gave out. Out of memory leaves it unset. */
static void set_error(eddy_tls_handler_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_error(eddy_tls_handler_t *s, const char *fmt, ...)
{
    if (s->error != NULL) {
        return;
    }
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    s->error = strdup(text);
}

static eddy_tls_handler_t *state_of(eddy_ctx_t *ctx)
{
    return eddy_ctx_state(ctx);
}

const char *eddy__tls_handler_session_key(SSL *ssl)
{
    eddy_tls_handler_t *s = SSL_get_ex_data(ssl, eddy__tls_ssl_index());
    return s != NULL ? s->key : NULL;
}

/* ---------------------------------------------------------------------------------------
 * Making and freeing
 */

/* A memory BIO for which empty means "retry later" (WANT_READ), not the end of the stream. */
static BIO *mem_bio_new(void)
{
    BIO *b = BIO_new(BIO_s_mem());
    if (b != NULL) {
        BIO_set_mem_eof_return(b, -1);
    }
    return b;
}

/*
 * The write BIO: OpenSSL hands each sealed record to it, and it appends the record to s->out,
 * the buffer emit() hands on. A memory BIO would keep the records in a buffer it zeroes as it
 * grows, then emit() would copy them out: a record is copied once after encryption here, not
 * twice, and no buffer stays between flushes. s->out is sized for what the flush still has
 * to seal (s->unsealed), so it rarely grows, and never past one COALESCE_MAX batch.
 */
#define RECORD_OVERHEAD 64 /* a record's header, tag, type and explicit nonce, with room */
#define OUT_MIN 1024       /* handshake messages and alerts: grown as they come */

/* Drop the records not handed on (s->out may be NULL). */
static void out_drop(eddy_tls_handler_t *s)
{
    if (s->out != NULL) {
        eddy_buf_release(s->out);
        s->out = NULL;
    }
}

static size_t out_size(const eddy_tls_handler_t *s, size_t n)
{
    size_t plain = s->unsealed < COALESCE_MAX ? s->unsealed : COALESCE_MAX;
    size_t want = plain + (plain / WRITE_CHUNK + 1) * RECORD_OVERHEAD;
    want = want > n ? want : n;
    return want > OUT_MIN ? want : OUT_MIN;
}

static int out_write(BIO *bio, const char *data, int len)
{
    eddy_tls_handler_t *s = BIO_get_data(bio);
    assert(s != NULL && s->ctx != NULL && len >= 0);
    BIO_clear_retry_flags(bio);
    size_t n = (size_t)len;
    if (s->out == NULL) {
        s->out = eddy_buf_alloc(eddy_ctx_alloc(s->ctx), out_size(s, n),
                                EDDY_BUF_DEFAULT_MAX_CAPACITY);
    }
    if (s->out == NULL || eddy_buf_write_bytes(s->out, data, n) != 0) {
        s->out_nomem = true;
        return -1; /* SSL_ERROR_SYSCALL: seal() reports EDDY_ENOMEM */
    }
    return len;
}

static long out_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    const eddy_tls_handler_t *s = BIO_get_data(bio);
    switch (cmd) {
    case BIO_CTRL_PENDING:
    case BIO_CTRL_WPENDING:
        return s != NULL && s->out != NULL ? (long)eddy_buf_readable(s->out) : 0;
    case BIO_CTRL_FLUSH:
        return 1;
    default:
        return 0;
    }
}

static int out_create(BIO *bio)
{
    BIO_set_init(bio, 1);
    return 1;
}

static BIO_METHOD *out_method;
static pthread_once_t out_method_once = PTHREAD_ONCE_INIT;

static void out_method_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "eddy_tls_out");
    if (m != NULL && (BIO_meth_set_write(m, out_write) != 1 ||
                      BIO_meth_set_ctrl(m, out_ctrl) != 1 ||
                      BIO_meth_set_create(m, out_create) != 1)) {
        BIO_meth_free(m);
        m = NULL;
    }
    out_method = m; /* kept for the process, as OpenSSL keeps its own methods */
}

static BIO *out_bio_new(eddy_tls_handler_t *s)
{
    pthread_once(&out_method_once, out_method_make);
    BIO *b = out_method != NULL ? BIO_new(out_method) : NULL;
    if (b != NULL) {
        BIO_set_data(b, s);
    }
    return b;
}

static eddy_tls_handler_t *handler_make(eddy_tls_context_t *c,
                                        const eddy_tls_handler_options_t *opts, int *err)
{
    eddy_tls_handler_options_t o = opts != NULL ? *opts : (eddy_tls_handler_options_t){0};
    *err = EDDY_EINVAL;
    if (c == NULL || (o.server_name != NULL && strlen(o.server_name) >= 256)) {
        return NULL;
    }
    if ((*err = eddy__tls_context_build(c)) != 0) {
        return NULL;
    }
    *err = EDDY_ENOMEM;
    eddy_tls_handler_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->tctx = eddy_tls_context_retain(c);
    s->client = c->mode == EDDY_TLS_CLIENT;
    s->start_on_demand = o.start_on_demand && s->client;
    s->hs_timeout_ms =
        o.handshake_timeout_ms == 0 ? DEFAULT_HANDSHAKE_TIMEOUT_MS : o.handshake_timeout_ms;
    s->cn_timeout_ms =
        o.close_notify_timeout_ms > 0 ? o.close_notify_timeout_ms : DEFAULT_CLOSE_NOTIFY_TIMEOUT_MS;
    s->protocol = s->cipher = "";
    if (o.server_name != NULL && o.server_name[0] != '\0' &&
        (s->server_name = strdup(o.server_name)) == NULL) {
        eddy_tls_handler_free(s);
        return NULL;
    }
    s->handshake = eddy_promise_new(NULL);
    ERR_clear_error();
    s->ssl = SSL_new(c->ssl_ctx);
    s->rbio = mem_bio_new();
    s->wbio = out_bio_new(s);
    if (s->handshake == NULL || s->ssl == NULL || s->rbio == NULL || s->wbio == NULL) {
        BIO_free(s->rbio);
        BIO_free(s->wbio);
        s->rbio = s->wbio = NULL;
        eddy_tls_handler_free(s);
        return NULL;
    }
    SSL_set_bio(s->ssl, s->rbio, s->wbio);
    SSL_set_ex_data(s->ssl, eddy__tls_ssl_index(), s);
    bool ok = true;
    if (s->client) {
        SSL_set_connect_state(s->ssl);
        char *name = s->server_name; /* SSL_set_tlsext_host_name() casts to void * */
        if (name != NULL && eddy__tls_is_ip(name)) {
            /* No SNI for addresses (RFC 6066); the certificate must name the address. */
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl), name) == 1;
        } else if (name != NULL) {
            ok = SSL_set_tlsext_host_name(s->ssl, name) == 1 && SSL_set1_host(s->ssl, name) == 1;
        }
    } else {
        SSL_set_accept_state(s->ssl);
    }
    if (!ok) {
        *err = EDDY_ETLS;
        eddy_tls_handler_free(s);
        ERR_clear_error();
        return NULL;
    }
    *err = 0;
    return s;
}

eddy_tls_handler_t *eddy_tls_handler_new(eddy_tls_context_t *c,
                                         const eddy_tls_handler_options_t *opts)
{
    int err;
    return handler_make(c, opts, &err);
}

/*
 * A file region is sealed REGION_STEP bytes at a time: the next piece is read once the
 * records of the one before were written, so a large file sent through TLS holds about that
 * much ciphertext at once, not the file. Half of COALESCE_MAX, so that a piece's records never
 * fill the write BIO to where seal() hands them on by itself: they all go in the one buffer
 * whose promise waits (a piece handed on before that would leave the promise an empty buffer,
 * completed at once, and the whole file would be sealed in one go). The wait is a promise on
 * the piece's records whose listener holds a waker: the handler may be freed before the
 * records are written (or failed), and the waker is told so.
 */
#define REGION_STEP (COALESCE_MAX / 2)
static_assert(REGION_STEP + REGION_STEP / 8 < COALESCE_MAX, "a piece's records fit one buffer");

typedef struct region_waker_s {
    eddy_tls_handler_t *s; /* NULL once the handler is freed */
} region_waker_t;

static void region_waker_forget(eddy_tls_handler_t *s)
{
    if (s->waker != NULL) {
        s->waker->s = NULL; /* the listener frees it when the records' promise completes */
        s->waker = NULL;
    }
}

void eddy_tls_handler_free(void *state)
{
    eddy_tls_handler_t *s = state;
    if (s == NULL) {
        return;
    }
    region_waker_forget(s);
    SSL_free(s->ssl); /* and its BIOs */
    out_drop(s);
    eddy_future_release(s->handshake);
    eddy_tls_context_release(s->tctx);
    eddy_future_release(s->deferred_cn_p); /* NULL unless freed mid-seal, which cannot be */
    eddy_future_release(s->deferred_close_p);
    free(s->server_name);
    free(s->key);
    free(s->alpn);
    free(s->error);
    free(s);
}

/* ---------------------------------------------------------------------------------------
 * Output: the write BIO into ciphertext buffers
 */

/* Take the queued plaintext out of the channel's pending bytes (the loop's thread). */
static size_t uncount_pending(eddy_tls_handler_t *s)
{
    size_t bytes = 0;
    for (pending_t *e = s->head; e != NULL; e = e->next) {
        bytes += e->bytes;
    }
    if (bytes > 0) {
        eddy_channel_t *ch = eddy_ctx_channel(s->ctx);
        eddy__outbound_unreserve(ch, bytes);
    }
    return bytes;
}

/* Fail the queued writes; their bytes are already out of the count. */
static void drop_pending(eddy_tls_handler_t *s, int err)
{
    while (s->head != NULL) {
        pending_t *e = s->head;
        assert(e->msg != NULL && (e->next != NULL || s->tail == e));
        s->head = e->next;
        eddy_msg_release(e->msg);
        eddy__promise_done(e->p, err);
        eddy_future_release(e->p);
        pending_free(e);
    }
    s->tail = NULL;
}

static void fail_pending(eddy_tls_handler_t *s, int err)
{
    if (s->head == NULL) {
        return;
    }
    uncount_pending(s);
    drop_pending(s, err);
    eddy__outbound_update_writability(eddy_ctx_channel(s->ctx));
}

/* Write what the write BIO holds downstream as one buffer, p (may be NULL) on it; p completes
 * at once when there is nothing. 0, or EDDY_ECLOSED once removed (p failed). No flush. */
static int emit(eddy_tls_handler_t *s, eddy_promise_t *p)
{
    if (s->wbio == NULL) {
        assert(s->out == NULL); /* tls_removed dropped it */
        eddy__promise_done(p, EDDY_ECLOSED); /* removed: nothing goes out any more */
        return EDDY_ECLOSED;
    }
    if (s->out == NULL || eddy_buf_readable(s->out) == 0) {
        out_drop(s);
        eddy__promise_done(p, 0);
        return 0;
    }
    eddy_buf_t *b = s->out;
    s->out = NULL;
    /* The hard cap admitted the plaintext (tls_write's reserve); its records are larger by
     * their headers and tags, and the alerts and close_notify are ours: the cap must not
     * refuse them, or accepted data would be lost (serverfuzz tls_cap). */
    eddy_channel_t *ch = eddy_ctx_channel(s->ctx);
    ch->flags |= EDDY__CH_SEALED;
    eddy_ctx_write(s->ctx, eddy_buf_msg(b), p);
    ch->flags &= ~EDDY__CH_SEALED;
    return 0;
}

/* Promises completed together by the last buffer of a flush. */
typedef struct batch_s {
    size_t n;
    eddy_promise_t *p[];
} batch_t;

static void batch_done(eddy_future_t *f, void *arg)
{
    batch_t *b = arg;
    int err = eddy_future_error(f);
    for (size_t i = 0; i < b->n; i++) {
        eddy__promise_done(b->p[i], err);
        eddy_future_release(b->p[i]);
    }
    free(b);
}

/* Sealing must stop: handing records on fired an event in which the application closed
 * the channel or removed this handler (the SSL is gone), or TLS failed. */
static bool seal_stopped(const eddy_tls_handler_t *s)
{
    return s->ssl == NULL || s->failed || s->cn_sent;
}

/* Feed len plaintext bytes to SSL_write, a record at a time, handing ciphertext on whenever
 * COALESCE_MAX of it has piled up. 0, EDDY_ETLS, EDDY_ENOMEM, or EDDY_ECLOSED when sealing
 * had to stop (seal_stopped). */
static int seal(eddy_tls_handler_t *s, const uint8_t *data, size_t len)
{
    while (len > 0) {
        if (seal_stopped(s)) {
            return EDDY_ECLOSED;
        }
        int chunk = (int)(len < WRITE_CHUNK ? len : WRITE_CHUNK);
        ERR_clear_error();
        int r = SSL_write(s->ssl, data, chunk);
        if (r <= 0) {
            if (SSL_get_error(s->ssl, r) != SSL_ERROR_WANT_WRITE) {
                return s->out_nomem ? EDDY_ENOMEM : EDDY_ETLS;
            }
            r = 0; /* the write BIO is drained below; then retry */
        }
        data += r;
        len -= (size_t)r;
        s->unsealed -= s->unsealed < (size_t)r ? s->unsealed : (size_t)r;
        if (r == 0 || BIO_ctrl_pending(s->wbio) >= COALESCE_MAX) {
            int rc = emit(s, NULL);
            if (rc != 0) {
                return rc;
            }
        }
    }
    return 0;
}

/* Read up to max bytes of region r a record at a time and seal them: the bytes sealed, or a
 * negative code (EDDY_ETRUNCATED: the file ended before the region). */
static ssize_t seal_region_bytes(eddy_tls_handler_t *s, eddy_file_region_t *r, size_t max)
{
    uint8_t chunk[WRITE_CHUNK];
    size_t done = 0;
    while (done < max && eddy_file_region_remaining(r) > 0) {
        ssize_t got = eddy_file_region_read(r, chunk, sizeof(chunk));
        int rc = got < 0 ? (int)got : seal(s, chunk, (size_t)got);
        if (rc != 0) {
            return rc;
        }
        eddy_file_region_skip(r, (uint64_t)got);
        done += (size_t)got;
    }
    return (ssize_t)done;
}

static int seal_msg(eddy_tls_handler_t *s, eddy_msg_t *msg)
{
    eddy_buf_t *b = eddy_buf_of(msg);
    if (b != NULL) {
        return seal(s, eddy_buf_read_ptr(b), eddy_buf_readable(b));
    }
    eddy_file_region_t *r = eddy_file_region_of(msg);
    if (r != NULL) {
        ssize_t rc = seal_region_bytes(s, r, SIZE_MAX);
        return rc < 0 ? (int)rc : 0;
    }
    eddy_composite_t *c = eddy_composite_of(msg);
    struct iovec iov[64];
    int rc = 0;
    while (rc == 0 && eddy_composite_readable(c) > 0) {
        int n = eddy_composite_iovec(c, iov, 64);
        size_t done = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            rc = seal(s, iov[i].iov_base, iov[i].iov_len);
            done += iov[i].iov_len;
        }
        eddy_composite_skip(c, done);
    }
    return rc;
}

/*
 * OpenSSL makes one record per SSL_write, and every record costs both ends a MAC, a header
 * and a read: the writes of one flush are copied into full records' worth of plaintext
 * (16 KiB) first, small ones (HTTP/2 frames, pipelined answers) and medium ones (a 4 KiB
 * body) alike, so a peer reads one record where it read one per write. A write of a record
 * or more goes to SSL_write as it is once the gathered bytes before it are sealed. The
 * gathering buffer is the thread's (no memory per connection); a flush that starts while
 * another is gathering on the same thread (from an event the records caused) seals its
 * writes one by one.
 */
static _Thread_local uint8_t gather_buf[WRITE_CHUNK];
static _Thread_local bool gather_busy;

typedef struct gather_s {
    bool on;  /* this flush owns gather_buf */
    size_t n; /* plaintext gathered, not yet sealed */
} gather_t;

static int gather_seal(eddy_tls_handler_t *s, gather_t *g)
{
    size_t n = g->n;
    g->n = 0;
    return n > 0 ? seal(s, gather_buf, n) : 0;
}

/* Gather n bytes at p, sealing each record's worth as it fills; what is left once the
 * gathering is empty and a record or more goes to seal() directly. */
static int gather(eddy_tls_handler_t *s, gather_t *g, const uint8_t *p, size_t n)
{
    while (n > 0) {
        if (g->n == 0 && n >= sizeof(gather_buf)) {
            return seal(s, p, n);
        }
        size_t k = sizeof(gather_buf) - g->n < n ? sizeof(gather_buf) - g->n : n;
        memcpy(gather_buf + g->n, p, k);
        g->n += k;
        p += k;
        n -= k;
        if (g->n == sizeof(gather_buf)) {
            int rc = gather_seal(s, g);
            if (rc != 0) {
                return rc;
            }
        }
    }
    return 0;
}

/* Seal msg through the gathering when this flush owns it. */
static int seal_gathered(eddy_tls_handler_t *s, gather_t *g, eddy_msg_t *msg)
{
    eddy_buf_t *b = g->on ? eddy_buf_of(msg) : NULL;
    if (b != NULL) {
        return gather(s, g, eddy_buf_read_ptr(b), eddy_buf_readable(b));
    }
    int rc = gather_seal(s, g);
    return rc != 0 ? rc : seal_msg(s, msg);
}

static void tls_fail(eddy_tls_handler_t *s, int err);
static void tls_close(eddy_ctx_t *ctx, eddy_promise_t *p);

/* Take one queued write's plaintext out of the channel's pending count. */
static void uncount(eddy_tls_handler_t *s, const pending_t *e)
{
    if (e->bytes > 0) {
        eddy_channel_t *ch = eddy_ctx_channel(s->ctx);
        eddy__outbound_unreserve(ch, e->bytes);
    }
}

/*
 * Encrypt the writes of list (detached from the queue) and hand the records on. Each write's
 * plaintext leaves the channel's pending count just before its records enter the outbound
 * buffer, so the two are never counted together and the count never drops below what is
 * still queued. Handing records on can fire writability (and so new writes, even a flush)
 * into the application: those queue anew on s->head, after this list.
 */
static void seal_list(eddy_tls_handler_t *s, pending_t *list)
{
    size_t promises = 0, plain = 0;
    for (pending_t *e = list; e != NULL; e = e->next) {
        promises += e->p != NULL;
        plain += e->bytes;
    }
    batch_t *batch = NULL;
    if (promises > 1 && (batch = malloc(sizeof(*batch) + promises * sizeof(batch->p[0]))) == NULL) {
        while (list != NULL) {
            pending_t *e = list;
            list = e->next;
            uncount(s, e);
            eddy_msg_release(e->msg);
            eddy__promise_done(e->p, EDDY_ENOMEM);
            eddy_future_release(e->p);
            pending_free(e);
        }
        tls_fail(s, EDDY_ENOMEM); /* the stream has a gap now: it cannot go on */
        return;
    }
    eddy_promise_t *last = NULL; /* the one promise, when there is one */
    int rc = 0;
    if (batch != NULL) {
        batch->n = 0;
    }
    gather_t g = {.on = !gather_busy && list->next != NULL, .n = 0};
    gather_busy |= g.on;
    s->unsealed = plain;
    while (list != NULL) {
        pending_t *e = list;
        list = e->next;
        uncount(s, e);
        if (rc == 0) {
            rc = seal_gathered(s, &g, e->msg);
        }
        eddy_msg_release(e->msg);
        if (rc != 0) {
            eddy__promise_done(e->p, rc);
            eddy_future_release(e->p);
        } else if (e->p != NULL && batch != NULL) {
            batch->p[batch->n++] = e->p; /* the batch's reference now */
        } else if (e->p != NULL) {
            last = e->p;
        }
        pending_free(e);
    }
    if (rc == 0) {
        rc = gather_seal(s, &g); /* a failure here fails the writes gathered, below */
    }
    if (g.on) {
        gather_busy = false;
    }
    s->unsealed = 0;
    if (rc != 0) {
        for (size_t i = 0; batch != NULL && i < batch->n; i++) {
            eddy__promise_done(batch->p[i], rc);
            eddy_future_release(batch->p[i]);
        }
        free(batch);
        eddy__promise_done(last, rc);
        eddy_future_release(last);
        if (rc != EDDY_ECLOSED) {
            tls_fail(s, rc); /* ECLOSED: it ended already, in the application's hands */
        }
        return;
    }
    int err = 0;
    if (batch != NULL) {
        eddy_promise_t *all = eddy_promise_new(eddy_ctx_loop(s->ctx));
        if (all == NULL || eddy_future_add_listener(all, batch_done, batch) != 0) {
            eddy_future_release(all);
            for (size_t i = 0; i < batch->n; i++) {
                eddy_promise_fail(batch->p[i], EDDY_ENOMEM);
                eddy_future_release(batch->p[i]);
            }
            free(batch);
            err = EDDY_ENOMEM; /* the writes' promises are gone: end it rather than lie */
        } else {
            err = emit(s, all);
            eddy_future_release(all);
        }
    } else {
        err = emit(s, last);
        eddy_future_release(last);
    }
    if (err == EDDY_ENOMEM) {
        tls_fail(s, err);
    }
}

/* Put list (detached) back in front of what was queued since. */
static void requeue(eddy_tls_handler_t *s, pending_t *list)
{
    pending_t *last = list;
    while (last->next != NULL) {
        last = last->next;
    }
    last->next = s->head;
    if (s->head == NULL) {
        s->tail = last;
    }
    s->head = list;
}

/* Detach the entries of list before its first file region: list keeps them, the rest is
 * returned. */
static pending_t *split_at_region(pending_t *list)
{
    for (pending_t *e = list; e->next != NULL; e = e->next) {
        if (e->next->msg->type == EDDY_MSG_FILE_REGION) {
            pending_t *rest = e->next;
            e->next = NULL;
            return rest;
        }
    }
    return NULL;
}

static void seal_pending(eddy_tls_handler_t *s);

/* A region's piece was written (or failed): seal on from where it stopped. */
static void region_written(eddy_future_t *f, void *arg)
{
    region_waker_t *w = arg;
    eddy_tls_handler_t *s = w->s;
    free(w);
    if (s == NULL) {
        return; /* the handler is gone: what it queued was failed with it */
    }
    s->waker = NULL;
    if (eddy_future_error(f) == 0 && !seal_stopped(s)) {
        seal_pending(s);
        eddy_ctx_flush(s->ctx);
    }
}

/* Hand the piece's records on with a promise whose completion seals the next piece. */
static int region_wait(eddy_tls_handler_t *s)
{
    region_waker_t *w = malloc(sizeof(*w));
    eddy_promise_t *p = w != NULL ? eddy_promise_new(eddy_ctx_loop(s->ctx)) : NULL;
    if (p == NULL || eddy_future_add_listener(p, region_written, w) != 0) {
        eddy_future_release(p);
        free(w);
        return EDDY_ENOMEM;
    }
    w->s = s;
    s->waker = w;
    int err = emit(s, p); /* a failure completes p: the listener frees w */
    eddy_future_release(p);
    return err;
}

/* The entry e leaves the queue with its last records, or fails with err. */
static void region_done(eddy_tls_handler_t *s, pending_t *e, int err)
{
    uncount(s, e);
    eddy_msg_release(e->msg);
    if (err == 0) {
        emit(s, e->p); /* completes e->p, with EDDY_ENOMEM when it cannot */
    } else {
        eddy__promise_done(e->p, err);
    }
    eddy_future_release(e->p);
    pending_free(e);
    if (err != 0 && err != EDDY_ECLOSED) {
        tls_fail(s, err);
    }
}

/*
 * The file region at the head of list: its next piece sealed and handed on. When more is
 * left, the list goes back to the queue to wait for the piece's records to be written (NULL
 * returned); else the entry is done and the rest of list is returned.
 */
static pending_t *seal_region(eddy_tls_handler_t *s, pending_t *list)
{
    pending_t *e = list;
    if (s->waker != NULL) {
        requeue(s, list); /* still waiting for the piece before */
        return NULL;
    }
    eddy_file_region_t *r = eddy_file_region_of(e->msg);
    uint64_t left = eddy_file_region_remaining(r);
    s->unsealed = left < REGION_STEP ? (size_t)left : REGION_STEP; /* sizes the out buffer */
    ssize_t n = seal_region_bytes(s, r, REGION_STEP);
    s->unsealed = 0;
    if (n > 0) {
        eddy__outbound_unreserve(eddy_ctx_channel(s->ctx), (size_t)n);
        e->bytes -= (size_t)n;
    }
    pending_t *rest = e->next;
    if (n >= 0 && eddy_file_region_remaining(r) > 0) {
        int err = region_wait(s);
        if (err == 0) {
            requeue(s, list);
            return NULL;
        }
        n = err;
    }
    region_done(s, e, n < 0 ? (int)n : 0);
    return rest;
}

/* Seal list (detached): runs of bytes through seal_list(), file regions a piece at a time. */
static void seal_some(eddy_tls_handler_t *s, pending_t *list)
{
    while (list != NULL) {
        if (list->msg->type == EDDY_MSG_FILE_REGION && !seal_stopped(s)) {
            list = seal_region(s, list);
            continue;
        }
        pending_t *rest = seal_stopped(s) ? NULL : split_at_region(list);
        seal_list(s, list); /* stopped: fails them all */
        list = rest;
    }
}

/*
 * Encrypt every queued write and hand the records on; no flush (the callers flush after).
 * A flush asked for while sealing (from a writability event the records caused) only marks
 * another pass, so writes keep their order; the pass seals what was queued meanwhile.
 */
static void seal_pending(eddy_tls_handler_t *s)
{
    if (s->sealing) {
        s->reseal = true;
        return;
    }
    s->sealing = true;
    do {
        s->reseal = false;
        pending_t *list = s->head;
        s->head = s->tail = NULL;
        if (list != NULL) {
            seal_some(s, list);
        }
    } while (s->reseal && !seal_stopped(s) && s->head != NULL && s->waker == NULL);
    s->sealing = false;
    eddy__outbound_update_writability(eddy_ctx_channel(s->ctx));
    if (s->deferred_cn) {
        eddy_promise_t *p = s->deferred_cn_p;
        s->deferred_cn = false;
        s->deferred_cn_p = NULL;
        eddy_tls_handler_close_outbound(s, p);
        eddy_future_release(p);
    }
    if (s->deferred_close) {
        eddy_promise_t *p = s->deferred_close_p;
        eddy_channel_t *ch = eddy_ctx_channel(s->ctx);
        unsigned was = ch->flags & EDDY__CH_CLOSE_GRACEFUL;
        s->deferred_close = false;
        s->deferred_close_p = NULL;
        /* As it was asked: a close after flush walks on with the channel marked so. */
        ch->flags |= s->deferred_graceful ? EDDY__CH_CLOSE_GRACEFUL : 0;
        tls_close(s->ctx, p);
        ch->flags = (ch->flags & ~EDDY__CH_CLOSE_GRACEFUL) | was;
        eddy_future_release(p);
    }
}

/* close_notify into the write BIO and out, p on it. */
static void send_close_notify(eddy_tls_handler_t *s, eddy_promise_t *p)
{
    assert(s->done && !s->cn_sent && s->ssl != NULL); /* once, after the handshake */
    s->cn_sent = true;
    ERR_clear_error();
    SSL_shutdown(s->ssl); /* 0: sent, the peer's not yet received; fine either way */
    ERR_clear_error();
    emit(s, p);
    eddy_ctx_flush(s->ctx);
}

/* Hand on what OpenSSL produced by itself (handshake messages, tickets, alerts). */
static void send_output(eddy_tls_handler_t *s)
{
    assert(s->ssl != NULL && s->wbio != NULL);
    if (BIO_ctrl_pending(s->wbio) > 0 && emit(s, NULL) == 0) {
        eddy_ctx_flush(s->ctx);
    }
}

/* ---------------------------------------------------------------------------------------
 * The handshake
 */

static void stop_timer(eddy_tls_handler_t *s)
{
    if (s->timer != 0) {
        eddy_ctx_cancel(s->ctx, s->timer);
        s->timer = 0;
    }
}

/* Swap the SSL's read BIO for a new one if it is empty but holds more than BIO_KEEP; false
 * when it is still in use (not empty). The write BIO keeps nothing between flushes. */
static bool trim_read_bio(eddy_tls_handler_t *s)
{
    if (BIO_ctrl_pending(s->rbio) > 0) {
        return false;
    }
    BUF_MEM *m = NULL;
    BIO_get_mem_ptr(s->rbio, &m);
    if (m == NULL || m->max <= BIO_KEEP) {
        return true;
    }
    BIO *fresh = mem_bio_new();
    if (fresh != NULL) {
        SSL_set0_rbio(s->ssl, fresh); /* frees the old one */
        s->rbio = fresh;
    }
    return true; /* without a new one, keep the big one: it still works */
}

size_t eddy__tls_handler_bio_capacity(eddy_tls_handler_t *h)
{
    BUF_MEM *m = NULL;
    if (h->rbio != NULL) {
        BIO_get_mem_ptr(h->rbio, &m);
    }
    return (m != NULL ? m->max : 0) + (h->out != NULL ? eddy_buf_capacity(h->out) : 0);
}

static void bios_trim_due(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    eddy_tls_handler_t *s = arg; /* alive: the timer is the handler's (scoped) */
    s->timer = 0;
    if (s->ssl == NULL || s->failed) {
        return;
    }
    s->big_bios = !trim_read_bio(s);
    if (s->big_bios) {
        s->timer = eddy_ctx_schedule(s->ctx, BIO_TRIM_DELAY_MS, bios_trim_due, s);
    }
}

/* After a read batch or a flush: a BIO that grew gets a trim later. */
static void schedule_trim(eddy_tls_handler_t *s)
{
    if (s->big_bios && s->timer == 0 && s->done && !s->failed && s->ssl != NULL) {
        s->timer = eddy_ctx_schedule(s->ctx, BIO_TRIM_DELAY_MS, bios_trim_due, s);
    }
}

static void fire_handshake_event(eddy_tls_handler_t *s, int err)
{
    assert((err == 0) == s->done); /* success once done, a failure before */
    s->hs_event = (eddy_tls_handshake_event_t){
        .error = err,
        .reason = err != 0 && s->error != NULL ? s->error : "",
        .protocol = s->protocol,
        .cipher = s->cipher,
        .alpn = s->alpn != NULL ? s->alpn : "",
        .resumed = err == 0 && SSL_session_reused(s->ssl) == 1,
    };
    eddy_ctx_fire_user_event(s->ctx, EDDY_EVENT_TLS_HANDSHAKE, &s->hs_event);
}

/*
 * The end of this handler's TLS: the handshake future and event when it was still running,
 * exception_caught, then close. The reason is s->error when set, else OpenSSL's error queue.
 */
static void tls_fail(eddy_tls_handler_t *s, int err)
{
    if (s->failed || s->ssl == NULL) {
        return;
    }
    assert(err < 0);
    s->failed = true;
    stop_timer(s);
    if (s->error == NULL) {
        char text[512];
        eddy__tls_error_text(s->ssl, text, sizeof(text));
        set_error(s, "%s", text);
    }
    ERR_clear_error();
    eddy_ctx_t *ctx = s->ctx;
    send_output(s); /* the alert OpenSSL queued, if any: the peer learns why */
    fail_pending(s, err);
    if (!s->done) {
        eddy_promise_fail(s->handshake, err);
        fire_handshake_event(s, err);
    }
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_fire_exception(ctx, err);
    }
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_close(ctx, NULL);
    }
}

static void handshake_done(eddy_tls_handler_t *s)
{
    assert(s->started && !s->done && !s->failed);
    s->done = true;
    stop_timer(s);
    s->protocol = SSL_get_version(s->ssl);     /* a literal */
    s->cipher = SSL_get_cipher_name(s->ssl);   /* from OpenSSL's static cipher table */
    if (s->cipher == NULL) {
        s->cipher = "";
    }
    const unsigned char *alpn = NULL;
    unsigned alpn_len = 0;
    SSL_get0_alpn_selected(s->ssl, &alpn, &alpn_len);
    if (alpn != NULL && alpn_len > 0 && (s->alpn = malloc(alpn_len + 1)) != NULL) {
        memcpy(s->alpn, alpn, alpn_len);
        s->alpn[alpn_len] = '\0';
    }
    eddy_promise_succeed(s->handshake, NULL);
    fire_handshake_event(s, 0);
    if (!eddy_ctx_is_removed(s->ctx) && s->flush_pending && !s->failed) {
        s->flush_pending = false;
        seal_pending(s);
        eddy_ctx_flush(s->ctx);
    }
}

/* One step: answer what the read BIO holds. */
static void handshake_step(eddy_tls_handler_t *s)
{
    assert(s->started && !s->done && s->ssl != NULL);
    ERR_clear_error();
    int r = SSL_do_handshake(s->ssl);
    send_output(s);
    if (s->ssl == NULL) {
        return; /* writing the flight failed and closed the channel: the SSL is gone */
    }
    if (r == 1) {
        handshake_done(s);
        return;
    }
    int e = SSL_get_error(s->ssl, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        tls_fail(s, EDDY_ETLS);
    }
}

static void handshake_timed_out(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    eddy_tls_handler_t *s = arg; /* alive: the timer is the handler's (scoped), and runs with
                                    the channel held until tls_fail has finished with s */
    s->timer = 0;
    if (s->done || s->failed) {
        return;
    }
    set_error(s, "handshake timed out after %lld ms", (long long)s->hs_timeout_ms);
    tls_fail(s, EDDY_ETIMEDOUT);
}

static void start_handshake(eddy_tls_handler_t *s)
{
    if (s->started || s->failed || s->ssl == NULL) {
        return;
    }
    assert(!s->done && s->timer == 0);
    s->started = true;
    if (s->hs_timeout_ms > 0) {
        s->timer = eddy_ctx_schedule(s->ctx, s->hs_timeout_ms, handshake_timed_out, s);
    }
    if (!s->client) {
        return; /* the client speaks first */
    }
    if (s->tctx->resumption) {
        char addr[128];
        eddy_addr_format(eddy_channel_remote_addr(eddy_ctx_channel(s->ctx)), addr, sizeof(addr));
        free(s->key);
        size_t n = (s->server_name != NULL ? strlen(s->server_name) : 0) + strlen(addr) + 2;
        s->key = n <= EDDY__TLS_KEY_MAX ? malloc(n) : NULL; /* none: no resumption */
        if (s->key != NULL) {
            snprintf(s->key, n, "%s|%s", s->server_name != NULL ? s->server_name : "", addr);
        }
        SSL_SESSION *sess = s->key != NULL ? eddy__tls_session_get(s->tctx, s->key) : NULL;
        if (sess != NULL) {
            SSL_set_session(s->ssl, sess);
            SSL_SESSION_free(sess);
        }
    }
    handshake_step(s);
}

/* ---------------------------------------------------------------------------------------
 * Inbound
 */

/* The peer's close_notify: the event; then, unless the channel allows half-closure, our
 * close_notify and the close (as a FIN closes a channel without half-closure). */
static void close_notify_received(eddy_tls_handler_t *s)
{
    assert(s->done && !s->cn_received); /* tls_read drops what comes after it */
    s->cn_received = true;
    eddy_ctx_fire_user_event(s->ctx, EDDY_EVENT_TLS_CLOSE_NOTIFY, NULL);
    if (eddy_ctx_is_removed(s->ctx)) {
        return;
    }
    eddy_channel_t *ch = eddy_ctx_channel(s->ctx);
    if (!eddy_channel_option(ch, EDDY_ALLOW_HALF_CLOSURE)) {
        /* As a FIN does on a plain channel: what this read fired first gets its
         * read_complete, so the answers written to it are flushed before our close_notify
         * (the close would otherwise drop them, unflushed). */
        if (s->fired) {
            s->fired = false;
            eddy_ctx_fire_channel_read_complete(s->ctx);
            if (eddy_ctx_is_removed(s->ctx) || s->failed) {
                return;
            }
        }
        if (!s->cn_sent) {
            send_close_notify(s, NULL);
        }
        if (!eddy_ctx_is_removed(s->ctx)) {
            eddy_ctx_close(s->ctx, NULL);
        }
    }
}

/* SSL_read until the read BIO is empty, firing plaintext as buffers fill. */
static void unseal(eddy_tls_handler_t *s)
{
    eddy_ctx_t *ctx = s->ctx;
    assert(s->done && !s->failed && s->ssl != NULL); /* application data after the handshake */
    eddy_buf_t *buf = NULL;
    for (;;) {
        if (buf == NULL) {
            buf = eddy_buf_alloc(eddy_ctx_alloc(ctx), READ_CHUNK, EDDY_BUF_DEFAULT_MAX_CAPACITY);
            if (buf == NULL) {
                set_error(s, "out of memory");
                tls_fail(s, EDDY_ENOMEM);
                return;
            }
        }
        ERR_clear_error();
        int r = SSL_read(s->ssl, eddy_buf_write_ptr(buf), (int)eddy_buf_writable(buf));
        if (r > 0) {
            eddy_buf_produce(buf, (size_t)r);
            if (eddy_buf_writable(buf) == 0) {
                s->fired = true;
                eddy_ctx_fire_channel_read(ctx, eddy_buf_msg(buf));
                buf = NULL;
                if (eddy_ctx_is_removed(ctx) || s->failed) {
                    return;
                }
            }
            continue;
        }
        int e = SSL_get_error(s->ssl, r);
        if (e == SSL_ERROR_WANT_WRITE) {
            send_output(s);
            if (s->ssl == NULL) {
                eddy_buf_release(buf); /* the write failed and closed the channel */
                return;
            }
            continue;
        }
        if (eddy_buf_readable(buf) > 0) {
            s->fired = true;
            eddy_ctx_fire_channel_read(ctx, eddy_buf_msg(buf));
        } else {
            eddy_buf_release(buf);
        }
        if (eddy_ctx_is_removed(ctx) || s->failed) {
            return;
        }
        if (e == SSL_ERROR_WANT_READ) {
            send_output(s); /* TLS 1.3 key updates, renegotiation answers */
            return;
        }
        if (e == SSL_ERROR_ZERO_RETURN) {
            close_notify_received(s);
            return;
        }
        tls_fail(s, EDDY_ETLS);
        return;
    }
}

/* Ciphertext into the read BIO: 0 or EDDY_ENOMEM. */
static int feed(eddy_tls_handler_t *s, eddy_msg_t *msg)
{
    eddy_buf_t *b = eddy_buf_of(msg);
    eddy_composite_t *c = eddy_composite_of(msg);
    struct iovec iov[64];
    int n = 0;
    if (b != NULL) {
        iov[0].iov_base = (void *)(uintptr_t)eddy_buf_read_ptr(b);
        iov[0].iov_len = eddy_buf_readable(b);
        n = 1;
    } else if (c != NULL) {
        n = eddy_composite_iovec(c, iov, 64);
    }
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len > 0 &&
            BIO_write(s->rbio, iov[i].iov_base, (int)iov[i].iov_len) != (int)iov[i].iov_len) {
            return EDDY_ENOMEM;
        }
    }
    s->big_bios |= BIO_ctrl_pending(s->rbio) > BIO_KEEP;
    if (c != NULL && eddy_composite_readable(c) > 0 && n == 64) {
        size_t done = 0;
        for (int i = 0; i < n; i++) {
            done += iov[i].iov_len;
        }
        eddy_composite_skip(c, done);
        return feed(s, msg); /* more components than one iovec batch */
    }
    return 0;
}

static void tls_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_tls_handler_t *s = state_of(ctx);
    if (s->failed || s->cn_received) {
        eddy_msg_release(msg); /* nothing after close_notify or a failure is data */
        return;
    }
    int rc = feed(s, msg);
    eddy_msg_release(msg);
    if (rc != 0) {
        set_error(s, "out of memory");
        tls_fail(s, rc);
        return;
    }
    if (!s->started) {
        start_handshake(s); /* a server, or a client on demand that hears first */
    }
    if (!s->done) {
        handshake_step(s);
        if (!s->done || eddy_ctx_is_removed(ctx) || s->failed) {
            return;
        }
    }
    unseal(s);
}

static void tls_read_complete(eddy_ctx_t *ctx)
{
    eddy_tls_handler_t *s = state_of(ctx);
    bool fired = s->fired;
    s->fired = false;
    schedule_trim(s);
    /* Handshake bytes only: without auto-read nobody downstream would ask for more. */
    if (!fired && !eddy_channel_option(eddy_ctx_channel(ctx), EDDY_AUTO_READ)) {
        eddy_ctx_read(ctx);
    }
    eddy_ctx_fire_channel_read_complete(ctx);
}

static void tls_active(eddy_ctx_t *ctx)
{
    eddy_tls_handler_t *s = state_of(ctx);
    if (!s->start_on_demand) {
        start_handshake(s);
    }
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_fire_channel_active(ctx);
    }
}

static void tls_inactive(eddy_ctx_t *ctx)
{
    eddy_tls_handler_t *s = state_of(ctx);
    if (!s->failed && !s->done) {
        s->failed = true;
        stop_timer(s);
        set_error(s, "connection closed during the TLS handshake");
        eddy_promise_fail(s->handshake, EDDY_ECLOSED);
        if (s->started) {
            fire_handshake_event(s, EDDY_ECLOSED);
        }
    } else if (!s->failed && !s->cn_received && !s->cn_sent &&
               !eddy_loop_is_shutting_down(eddy_ctx_loop(ctx))) {
        /* (The loop's shutdown closes channels without the pipeline's close: our doing, not
         * the peer's.) */
        s->failed = true;
        set_error(s, "the peer closed without close_notify (truncation)");
        eddy_ctx_fire_exception(ctx, EDDY_ECONNABORTED);
    }
    fail_pending(s, EDDY_ECLOSED);
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_fire_channel_inactive(ctx);
    }
}

static void tls_user_event(eddy_ctx_t *ctx, int event, void *data)
{
    eddy_tls_handler_t *s = state_of(ctx);
    if (event == EDDY_EVENT_INPUT_SHUTDOWN && !s->failed && !s->cn_received) {
        if (!s->done) {
            set_error(s, "the peer shut down during the TLS handshake");
            tls_fail(s, EDDY_ECLOSED);
            return;
        }
        set_error(s, "the peer shut down without close_notify (truncation)");
        eddy_ctx_fire_exception(ctx, EDDY_ECONNABORTED);
        if (eddy_ctx_is_removed(ctx)) {
            return;
        }
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

/* ---------------------------------------------------------------------------------------
 * Outbound
 */

static void tls_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_tls_handler_t *s = state_of(ctx);
    int err = 0;
    if (s->failed || s->ssl == NULL || (eddy_ctx_channel(ctx)->flags & EDDY__CH_CLOSED)) {
        err = EDDY_ECLOSED;
    } else if (s->cn_sent) {
        err = EDDY_EPIPE;
    } else if (eddy_buf_of(msg) == NULL && eddy_composite_of(msg) == NULL &&
               eddy_file_region_of(msg) == NULL) {
        err = EDDY_ENOTSUP; /* an encoder is missing */
    }
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    size_t bytes = err == 0 ? eddy__msg_bytes(msg) : 0;
    pending_t *e = err == 0 ? eddy__small_alloc(sizeof(*e)) : NULL;
    if (e == NULL) {
        err = err != 0 ? err : EDDY_ENOMEM;
    } else {
        err = eddy__outbound_reserve(ch, bytes); /* the hard cap, as the channel applies it */
    }
    if (err != 0) {
        pending_free(e);
        eddy_ctx_fail_write(ctx, msg, p, err); /* with no promise: raised, closed after */
        return;
    }
    assert((s->head == NULL) == (s->tail == NULL));
    e->next = NULL;
    e->msg = msg;
    e->p = p != NULL ? eddy_future_retain(p) : NULL;
    e->bytes = bytes;
    if (s->tail != NULL) {
        s->tail->next = e;
    } else {
        s->head = e;
    }
    s->tail = e;
    eddy__outbound_update_writability(ch);
}

static void tls_flush(eddy_ctx_t *ctx)
{
    eddy_tls_handler_t *s = state_of(ctx);
    if (!s->done && !s->failed) {
        s->flush_pending = true; /* done once the handshake completes */
        return;
    }
    if (!s->failed) {
        seal_pending(s);
        schedule_trim(s);
    }
    /* Passed on even when the application removed this handler while it sealed: the records
     * handed on before that are what it asked to flush. */
    eddy_ctx_flush(ctx);
}

/* A close waiting for its close_notify to be written: the first of the write's completion
 * and the timer closes the channel (through the pipeline again; close_notify is sent by
 * then, so this handler passes the close on). */
typedef struct closer_s {
    unsigned refs; /* the listener's and the timer's; the loop's thread */
    bool fired;
    eddy_channel_t *ch;
    eddy_promise_t *p;
    eddy_timer_t *timer;
} closer_t;

/* Drops n of c's references; the last frees it. */
static void closer_put(closer_t *c, unsigned n)
{
    assert(n > 0 && c->refs >= n);
    c->refs -= n;
    if (c->refs > 0) {
        return;
    }
    eddy_timer_release(c->timer);
    eddy_future_release(c->p);
    eddy_channel_release(c->ch);
    free(c);
}

static void closer_fire(closer_t *c)
{
    if (!c->fired) {
        c->fired = true;
        eddy_channel_close(c->ch, c->p);
    }
}

static void closer_written(eddy_future_t *f, void *arg)
{
    (void)f;
    closer_t *c = arg;
    closer_fire(c);
    unsigned drop = 1; /* the listener's */
    if (c->timer != NULL && eddy_timer_cancel(c->timer) == 0) {
        drop++; /* and the timer's: it will not run */
    }
    closer_put(c, drop);
}

static void closer_timed_out(eddy_timer_t *t, void *arg)
{
    (void)t;
    closer_t *c = arg;
    closer_fire(c);
    closer_put(c, 1); /* the timer's */
}

static void tls_close(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    eddy_tls_handler_t *s = state_of(ctx);
    bool graceful = (eddy_ctx_channel(ctx)->flags & EDDY__CH_CLOSE_GRACEFUL) != 0;
    if (s->sealing && !s->deferred_close) {
        /* From an event the records being sealed fired: after them, and after what was
         * flushed meanwhile. */
        s->deferred_close = true;
        s->deferred_graceful = graceful;
        s->deferred_close_p = p != NULL ? eddy_future_retain(p) : NULL;
        return;
    }
    /* Written but never flushed: failed, as the channel does, and without a writability
     * event, which would invite writes into a closing channel. */
    uncount_pending(s);
    drop_pending(s, EDDY_ECLOSED);
    eddy__outbound_closing(eddy_ctx_channel(ctx));
    if (!s->done || s->failed || s->cn_sent || s->ssl == NULL ||
        !eddy_channel_is_active(eddy_ctx_channel(ctx))) {
        eddy_ctx_close(ctx, p);
        return;
    }
    if (graceful) {
        /* The socket closes after everything flushed is out, close_notify included: no
         * need to wait for its write here. */
        send_close_notify(s, NULL);
        eddy_ctx_close(ctx, p);
        return;
    }
    eddy_promise_t *w = eddy_promise_new(eddy_ctx_loop(ctx));
    closer_t *c = w != NULL ? calloc(1, sizeof(*c)) : NULL;
    send_close_notify(s, w);
    if (c == NULL || eddy_future_is_done(w) || eddy_ctx_is_removed(ctx)) {
        /* Written at once (the usual case), failed, or no memory to wait: close now. */
        free(c);
        eddy_future_release(w);
        eddy_ctx_close(ctx, p);
        return;
    }
    c->ch = eddy_channel_retain(eddy_ctx_channel(ctx));
    c->p = p != NULL ? eddy_future_retain(p) : NULL;
    c->refs = 1;
    c->timer = eddy_loop_schedule(eddy_ctx_loop(ctx), s->cn_timeout_ms, closer_timed_out, c);
    if (c->timer != NULL) {
        c->refs++;
    }
    if (eddy_future_add_listener(w, closer_written, c) != 0) {
        closer_written(w, c);
    }
    eddy_future_release(w);
}

/* ---------------------------------------------------------------------------------------
 * Lifetime
 */

static void tls_added(eddy_ctx_t *ctx)
{
    eddy_tls_handler_t *s = state_of(ctx);
    assert(s->ssl != NULL && !s->started && (s->ctx == NULL || s->ctx == ctx)); /* added once */
    s->ctx = ctx;
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    if (!s->start_on_demand && eddy_channel_is_active(ch) && eddy_channel_is_registered(ch)) {
        start_handshake(s); /* channel_active has been and gone */
    }
}

static void tls_removed(eddy_ctx_t *ctx)
{
    eddy_tls_handler_t *s = state_of(ctx);
    stop_timer(s);
    fail_pending(s, EDDY_ECLOSED);
    if (!s->done && eddy_promise_fail(s->handshake, EDDY_ECLOSED) == 0 && s->error == NULL) {
        set_error(s, "the TLS handler was removed before the handshake");
    }
    s->failed = s->failed || !s->done;
    SSL_free(s->ssl); /* and its BIOs */
    s->ssl = NULL;
    s->rbio = s->wbio = NULL;
    out_drop(s); /* records made after the last emit: nowhere to go now */
}

static const eddy_handler_ops_t tls_ops = {
    .name = "tls",
    .handler_added = tls_added,
    .handler_removed = tls_removed,
    .channel_active = tls_active,
    .channel_inactive = tls_inactive,
    .channel_read = tls_read,
    .channel_read_complete = tls_read_complete,
    .user_event_triggered = tls_user_event,
    .close = tls_close,
    .write = tls_write,
    .flush = tls_flush,
};

eddy_handler_t eddy_tls_handler(eddy_tls_context_t *c, const eddy_tls_handler_options_t *opts)
{
    return eddy_handler(NULL, &tls_ops, eddy_tls_handler_new(c, opts), eddy_tls_handler_free);
}

const eddy_handler_ops_t *eddy_tls_handler_ops(void)
{
    return &tls_ops;
}

int eddy_tls_add(eddy_channel_t *ch, eddy_tls_context_t *c, const eddy_tls_handler_options_t *opts,
                 eddy_future_t **handshake)
{
    if (handshake != NULL) {
        *handshake = NULL;
    }
    int err;
    eddy_tls_handler_t *s = handler_make(c, opts, &err);
    if (s == NULL) {
        return err;
    }
    eddy_future_t *f = eddy_future_retain(s->handshake);
    err = eddy_pipeline_add_first(eddy_channel_pipeline(ch), "tls", &tls_ops, s,
                                  eddy_tls_handler_free);
    if (err != 0 || handshake == NULL) {
        eddy_future_release(f);
    } else {
        *handshake = f;
    }
    return err;
}

eddy_tls_handler_t *eddy_tls_handler_of(eddy_channel_t *ch)
{
    eddy_ctx_t *ctx = eddy_pipeline_context_ops(eddy_channel_pipeline(ch), &tls_ops);
    return ctx != NULL ? eddy_ctx_state(ctx) : NULL;
}

eddy_future_t *eddy_tls_handler_retain_handshake(eddy_tls_handler_t *h)
{
    return eddy_future_retain(h->handshake);
}

/* These two may be called outside any pipeline event (a timer, a task): hold the channel
 * and the pipeline, as handshake_timed_out does, so that a close the application makes in
 * an event they fire does not free h under them. */
static eddy_channel_t *hold(eddy_tls_handler_t *h)
{
    return eddy__channel_hold(eddy_ctx_channel(h->ctx));
}

void eddy_tls_handler_handshake(eddy_tls_handler_t *h)
{
    if (h->ctx != NULL && eddy_channel_is_active(eddy_ctx_channel(h->ctx))) {
        eddy_channel_t *ch = hold(h);
        start_handshake(h);
        eddy__channel_unhold(ch);
    }
}

void eddy_tls_handler_close_outbound(eddy_tls_handler_t *h, eddy_promise_t *p)
{
    if (h->ssl == NULL || h->failed || !h->done || h->cn_sent) {
        eddy__promise_done(p, h->cn_sent ? EDDY_EALREADY : EDDY_ENOTCONN);
        return;
    }
    if (h->sealing) {
        if (h->deferred_cn) {
            eddy__promise_done(p, EDDY_EALREADY);
            return;
        }
        h->deferred_cn = true; /* after the sealing, see seal_pending */
        h->deferred_cn_p = p != NULL ? eddy_future_retain(p) : NULL;
        return;
    }
    eddy_channel_t *ch = hold(h);
    seal_pending(h); /* what was written goes before close_notify */
    if (!seal_stopped(h) && !eddy_ctx_is_removed(h->ctx)) {
        send_close_notify(h, p);
    } else {
        eddy__promise_done(p, EDDY_ECLOSED);
    }
    eddy__channel_unhold(ch);
}

const char *eddy_tls_handler_protocol(const eddy_tls_handler_t *h)
{
    return h->protocol;
}

const char *eddy_tls_handler_cipher(const eddy_tls_handler_t *h)
{
    return h->cipher;
}

const char *eddy_tls_handler_alpn(const eddy_tls_handler_t *h)
{
    return h->alpn != NULL ? h->alpn : "";
}

const char *eddy_tls_handler_server_name(const eddy_tls_handler_t *h)
{
    return h->ssl != NULL ? SSL_get_servername(h->ssl, TLSEXT_NAMETYPE_host_name) : NULL;
}

bool eddy_tls_handler_session_reused(const eddy_tls_handler_t *h)
{
    return h->ssl != NULL && SSL_session_reused(h->ssl) == 1;
}

bool eddy_tls_handler_is_handshake_done(const eddy_tls_handler_t *h)
{
    return h->done;
}

const char *eddy_tls_handler_error(const eddy_tls_handler_t *h)
{
    return h->error != NULL ? h->error : "";
}

struct ssl_st *eddy_tls_handler_ssl(eddy_tls_handler_t *h)
{
    return h->ssl;
}
