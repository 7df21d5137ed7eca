/*
 * What the gRPC codec's files share (not API): the call object both sides use, the message
 * deframer, and the wire's small formats (grpc-timeout, grpc-message, "-bin" metadata, the
 * status tables). The server is server.c, the client client.c; wire.c and call.c are theirs.
 */
#ifndef EDDY_CODEC_GRPC_INTERNAL_H
#define EDDY_CODEC_GRPC_INTERNAL_H

#include <eddy/carrier.h>
#include <eddy/grpc.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Release b when there is one (eddy_buf_release() wants a buffer). */
static inline void eddy__grpc_buf_drop(eddy_buf_t *b)
{
    if (b != NULL) {
        eddy_buf_release(b);
    }
}

/* ---------------------------------------------------------------------------------------
 * Messages in: the 5-byte prefix and the message, across any DATA boundaries.
 */

typedef struct eddy__grpc_deframer_s {
    uint8_t hdr[5];  /* the prefix being read */
    uint8_t nhdr;    /* bytes of it so far */
    uint32_t len;    /* the message's length, once the prefix is whole */
    bool compressed; /* its flag */
    eddy_buf_t *msg; /* the message being gathered when it spans pieces; NULL otherwise */
} eddy__grpc_deframer_t;

/* A whole message (taken over) and its compressed flag; 0 to go on, or a status to stop. */
typedef int (*eddy__grpc_msg_cb)(void *arg, eddy_buf_t *msg, bool compressed);

/*
 * Read the messages in data (borrowed; its bytes are read): each whole one goes to cb, as a
 * slice of data when it lies within it, else gathered. 0, or a gRPC status that ends the
 * call, with *why set: RESOURCE_EXHAUSTED for a length past max (nothing is allocated for
 * it), INTERNAL for a flag other than 0 and 1, or cb's status; EDDY_GRPC_RESOURCE_EXHAUSTED
 * without memory too.
 */
int eddy__grpc_deframe(eddy__grpc_deframer_t *d, eddy_buf_t *data, size_t max,
                       eddy__grpc_msg_cb cb, void *arg, const char **why);
/* Whether a message is partly read (a call that ends here lost it: INTERNAL). */
bool eddy__grpc_deframer_partial(const eddy__grpc_deframer_t *d);
void eddy__grpc_deframer_free(eddy__grpc_deframer_t *d);

/* The 5-byte prefix of a message of len bytes. */
void eddy__grpc_prefix(uint8_t out[5], bool compressed, uint32_t len);

/* msg (borrowed) gzip-compressed into a new buffer, or NULL without memory (or zlib). */
eddy_buf_t *eddy__grpc_gzip(eddy_buf_t *msg);
/* msg (taken over) inflated into a new buffer of at most max bytes: the buffer, or NULL with
 * *status RESOURCE_EXHAUSTED (past max: a bomb stops there) or INTERNAL (corrupt). */
eddy_buf_t *eddy__grpc_gunzip(eddy_buf_t *msg, size_t max, int *status, const char **why);
/* Whether this build compresses gzip (zlib). */
bool eddy__grpc_has_gzip(void);

/* ---------------------------------------------------------------------------------------
 * The wire's small formats
 */

/* grpc-timeout ("1S", at most 8 digits and one of H M S m u n) in nanoseconds, or -1 when it
 * does not parse. */
int64_t eddy__grpc_timeout_parse(const char *p, size_t n);
/* ns as grpc-timeout into out (room for 10 bytes and a NUL): the finest unit that fits in 8
 * digits. Returns the length. */
size_t eddy__grpc_timeout_format(int64_t ns, char out[16]);

/* The percent-encoded form of the n bytes at p (grpc-message: bytes outside 0x20-0x7E and
 * '%' become %XX) into out (room for 3n + 1), NUL-terminated. Returns the length. */
size_t eddy__grpc_percent_encode(const char *p, size_t n, char *out);
/* Decode leniently into out (room for n + 1): a '%' not followed by two hex digits stays. */
size_t eddy__grpc_percent_decode(const char *p, size_t n, char *out);

/* Unpadded standard base64 of n bytes into out (room for 4 * ceil(n / 3) + 1). The length. */
size_t eddy__grpc_base64(const uint8_t *p, size_t n, char *out);
/* Decode base64, padded or not, into out (room for 3 * ceil(n / 4)): the length, or -1. */
int64_t eddy__grpc_unbase64(const char *p, size_t n, uint8_t *out);

/* Whether a metadata name is one gRPC lets an application send ([0-9a-z_.-], not starting
 * "grpc-", not a pseudo-header nor connection-specific, not content-type, te, user-agent). */
bool eddy__grpc_md_name_ok(const char *p, size_t n);
/* Whether a name ends "-bin". */
bool eddy__grpc_md_is_bin(const char *p, size_t n);

/*
 * Metadata from a header block: the fields that are metadata (not pseudo-headers, not
 * "grpc-*", not content-type/te/user-agent...), "-bin" values decoded, copied into one
 * block. *out and *n set (NULL and 0 when there are none); *store owns them (release it).
 * 0, EDDY_EDECODE (a "-bin" value that is not base64), EDDY_ENOMEM.
 */
int eddy__grpc_md_take(const eddy_h2_headers_t *h, eddy_http_header_t **out, size_t *n,
                       eddy_buf_t **store);

/*
 * Fields for sending: fixed (nfixed of them, as they are) then md (n, validated; "-bin"
 * values encoded), into *fields (malloc'd, free it) with their bytes in *store (release it).
 * 0, EDDY_EINVAL (a bad name or value), EDDY_ENOMEM.
 */
int eddy__grpc_md_fields(const eddy_http_header_t *fixed, size_t nfixed,
                         const eddy_http_header_t *md, size_t n, eddy_http_header_t **fields,
                         eddy_buf_t **store);

/* The status an HTTP/2 reset's code means (grpc doc/PROTOCOL-HTTP2.md). */
eddy_grpc_status_t eddy__grpc_status_of_reset(uint32_t h2_code);
/* The status a response with an HTTP status but no grpc-status means
 * (doc/http-grpc-status-mapping.md). */
eddy_grpc_status_t eddy__grpc_status_of_http(int http_status);
/* Parse grpc-status (decimal 0-16; anything else is UNKNOWN). */
eddy_grpc_status_t eddy__grpc_status_parse(const char *p, size_t n);

/* ---------------------------------------------------------------------------------------
 * The call
 */

/* A call timer (eddy_grpc_call_schedule). */
typedef struct eddy__grpc_timer_s {
    struct eddy__grpc_timer_s *next;
    eddy_grpc_call_t *call;
    void (*cb)(eddy_grpc_call_t *call, void *arg);
    void *arg;
    uint64_t id; /* the ctx timer's */
} eddy__grpc_timer_t;

/* What differs between the server's calls and the client's. */
typedef struct eddy__grpc_call_ops_s {
    /* Send the head before the first message (server: the response headers; client: they went
     * at the start). 0 or an error. */
    int (*head)(eddy_grpc_call_t *call);
    /* The call ended: tell the application (on_cancel or on_close) and unlink it. */
    void (*ended)(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message);
    /* Free what the side keeps (called once, with the last reference). */
    void (*free)(eddy_grpc_call_t *call);
    /* The call can take messages again: tell the application. */
    void (*writable)(eddy_grpc_call_t *call);
    /* The application sent a message past the largest: end the call RESOURCE_EXHAUSTED, as
     * this side does (the server with that status; NULL: reset CANCEL, the client's way). */
    void (*too_big)(eddy_grpc_call_t *call, const char *why);
    /* The deadline passed: end the call DEADLINE_EXCEEDED, as this side does (the server with
     * that status; NULL: reset CANCEL, the client's way). */
    void (*expired)(eddy_grpc_call_t *call);
    /* Client: keep msg (taken over) and p until the call's stream opens (call->stream and
     * call->ctx are NULL until then). 0, or an error (p failed with it). */
    int (*hold)(eddy_grpc_call_t *call, eddy_buf_t *msg, bool end_stream, eddy_promise_t *p);
} eddy__grpc_call_ops_t;

struct eddy_grpc_call_s {
    _Atomic uint32_t refs;        /* the library's while live, the application's */
    eddy_loop_t *loop;            /* the connection's (never changes) */
    eddy_carrier_t *carrier;      /* the method's callbacks run there (offload.c); NULL: here */
    _Atomic bool writable_hint;   /* what is_writable last said, for carrier threads */
    const eddy__grpc_call_ops_t *side;
    eddy_h2_stream_t *stream;     /* a reference while live; NULL once ended, and while a
                                     client call waits for its connection */
    eddy_ctx_t *ctx;              /* the handler's (server or client); NULL as stream */
    struct eddy_grpc_call_s *prev, *next; /* the handler's live calls */
    bool *sent_flag;              /* set when a message goes (the server's ping policy) */
    char *path;                   /* NUL-terminated (owned) */
    void *arg, *user_data;
    void (*free_user_data)(void *data);
    eddy_http_header_t *md;       /* what the peer sent first */
    size_t nmd;
    eddy_buf_t *md_store;
    eddy__grpc_deframer_t in;
    size_t max_recv, max_send;
    int64_t deadline;             /* loop ns; 0: none */
    uint64_t deadline_timer;
    eddy__grpc_timer_t *timers;
    uint8_t kind;                 /* eddy_grpc_kind_t (server); BIDI on the client */
    bool headers_sent;            /* server: the response headers went */
    bool local_done;              /* server finished / client half-closed */
    bool remote_done;             /* the peer ended its side */
    bool ended;                   /* nothing more happens; the stream is let go */
    bool compress_out;            /* our messages go gzip'd */
    bool gzip_in;                 /* the peer's compressed messages are gzip */
    bool peer_gzip;               /* the peer accepts gzip */
    bool asked_writable;          /* is_writable said false: on_writable is due */
    uint32_t received;            /* messages received */
    uint32_t sent;                /* messages sent */
};

/* Run call's method callbacks on carrier (offload.c). The call then holds a use of its loop's
 * memory until it is freed: a carrier thread holding the call may hand an operation to the loop
 * after the loop group was freed (the task is refused, as on any terminated loop). */
void eddy__grpc_call_on_carrier(eddy_grpc_call_t *call, eddy_carrier_t *carrier);
/* Initialise call's common part on stream s (a reference is taken) under ctx. */
void eddy__grpc_call_init(eddy_grpc_call_t *call, const eddy__grpc_call_ops_t *side,
                          eddy_ctx_t *ctx, eddy_h2_stream_t *s);
/* End the call once: timers cancelled, the stream let go (reset with h2_code unless
 * h2_code is UINT32_MAX), side->ended told; drops the library's reference. */
void eddy__grpc_call_end(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message,
                         uint32_t h2_code);
/* Read the DATA piece of call's stream (borrowed), consuming its window; messages to cb. 0 or a
 * status (*why set) that ends the call. */
int eddy__grpc_call_data(eddy_grpc_call_t *call, eddy_h2_data_t *d, eddy__grpc_msg_cb cb,
                         const char **why);
/* Arm the deadline timer of call (deadline set); at expiry the call ends DEADLINE_EXCEEDED
 * as its side's expired says. */
void eddy__grpc_call_arm_deadline(eddy_grpc_call_t *call);
/* Queue msg (taken over) framed on call's stream, end_stream after it. */
int eddy__grpc_call_queue(eddy_grpc_call_t *call, eddy_buf_t *msg, bool end_stream,
                          eddy_promise_t *p);
/* The writability event for stream s reached the handler: tell its call. */
void eddy__grpc_call_writable(eddy_h2_stream_t *s);
/* The call a stream carries, or NULL. */
eddy_grpc_call_t *eddy__grpc_call_of(eddy_h2_stream_t *s);
/* A message for a log line: "channel N stream M path". */
void eddy__grpc_call_log(const eddy_grpc_call_t *call, int level, const char *what);

/* ---------------------------------------------------------------------------------------
 * Methods on a carrier (offload.c)
 */

/* A method callback, for eddy__grpc_dispatch(). */
typedef enum {
    EDDY__GRPC_EV_REQUEST,
    EDDY__GRPC_EV_START,
    EDDY__GRPC_EV_MESSAGE,
    EDDY__GRPC_EV_HALF_CLOSE,
    EDDY__GRPC_EV_CANCEL,
    EDDY__GRPC_EV_WRITABLE
} eddy__grpc_ev_t;

/* Run ops' callback ev (msg taken over, status for on_cancel) here, or on call's carrier in
 * the call's order. */
void eddy__grpc_dispatch(eddy_grpc_call_t *call, const eddy_grpc_method_ops_t *ops,
                         eddy__grpc_ev_t ev, eddy_buf_t *msg, int status);

/* A call function done from a carrier thread, for eddy__grpc_post(). */
typedef enum {
    EDDY__GRPC_OP_SEND,
    EDDY__GRPC_OP_REPLY,
    EDDY__GRPC_OP_FINISH,
    EDDY__GRPC_OP_HEADERS,
    EDDY__GRPC_OP_COMPRESS,
    EDDY__GRPC_OP_CANCEL
} eddy__grpc_op_t;

/* Whether the caller is a carrier thread rather than the call's loop. */
bool eddy__grpc_off_loop(const eddy_grpc_call_t *call);
/* Do kind on the call's loop, with msg (taken over), p, status, text and md (n, copied): 0
 * when queued, or EDDY_ENOMEM, EDDY_ESHUTDOWN (msg released, p failed). */
int eddy__grpc_post(eddy_grpc_call_t *call, eddy__grpc_op_t kind, eddy_buf_t *msg,
                    eddy_promise_t *p, int status, const char *text,
                    const eddy_http_header_t *md, size_t n);

#endif /* EDDY_CODEC_GRPC_INTERNAL_H */
