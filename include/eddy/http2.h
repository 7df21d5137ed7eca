/*
 * eddy HTTP/2 (RFC 9113) on nghttp2: the connection handler, stream handles, the adapter to
 * HTTP/1.1's request and response objects, and the server's negotiation (h2 over TLS, h2c by
 * prior knowledge and by Upgrade); on the client's side the same connection handler with a
 * client session, streams opened by eddy_h2_stream_open(), and the client's adapter, which
 * eddy_http_client_t (http_client.h) puts on a connection that chose "h2" by ALPN or speaks
 * h2c by prior knowledge. docs/http2.md is the guide; this header is the manual.
 *
 * The layers, in Netty's words:
 *
 *   - eddy_h2_connection() is Http2FrameCodec: one nghttp2 session per channel, fed with the
 *     bytes the handler before it reads, its frames written through the pipeline's one ordered
 *     outbound path. It turns frames into messages that name their stream (inbound) and takes
 *     what the application sends on a stream through the stream's functions below.
 *   - eddy_h2_http_adapter() is Http2StreamFrameToHttpObjectCodec without child channels: it
 *     turns each stream's request into the eddy_http_request_t the HTTP/1.1 decoder makes
 *     (version 20, the whole body, as the aggregator gives it), and the eddy_http_response_t
 *     the application writes back into the stream's HEADERS and DATA, so one request handler
 *     serves HTTP/1.1 and HTTP/2 unchanged.
 *   - eddy_h2_server_upgrade() sits where an HTTP/1.1 server's decoder is: it looks at the
 *     first bytes, and when they are HTTP/2's connection preface (a client with prior
 *     knowledge, or one that chose "h2" by ALPN through the TLS handler before it) it replaces
 *     the HTTP/1.1 handlers with the two above; otherwise it steps aside, and a first request
 *     asking "Upgrade: h2c" is answered "101 Switching Protocols" and becomes stream 1.
 *
 * Streams are the library's objects (eddy_h2_stream_t): counted references, freed once the
 * stream closed and nobody holds one. Sending on a stream that has closed fails with
 * EDDY_ECLOSED; nothing touches freed memory.
 *
 * Threads: everything here runs on the channel's loop (handlers' callbacks, and the stream
 * functions, which are called from them or from handler-scoped timers and tasks); retain and
 * release of a stream may come from any thread.
 */
#ifndef EDDY_HTTP2_H
#define EDDY_HTTP2_H

#include <eddy/buffer.h>
#include <eddy/common.h>
#include <eddy/http.h>
#include <eddy/pipeline.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Message types, in eddy's own range below EDDY_MSG_USER. */
enum {
    EDDY_MSG_H2_HEADERS = 26, /* eddy_h2_headers_t: a request or response head, or trailers */
    EDDY_MSG_H2_DATA = 27,    /* eddy_h2_data_t: a piece of a stream's body */
    EDDY_MSG_H2_RESET = 28    /* eddy_h2_reset_t: the stream ended before both sides finished */
};

/* User events, in eddy's own range (below EDDY_EVENT_USER). */
enum {
    EDDY_EVENT_H2_STREAM_WRITABLE = 80, /* data: the eddy_h2_stream_t (borrowed) whose
                                           writability changed: eddy_h2_stream_is_writable() */
    EDDY_EVENT_H2_GOAWAY = 81,          /* data: const eddy_h2_goaway_t *: the peer's GOAWAY */
    EDDY_EVENT_H2_ACTIVE = 82           /* the connection handler took over; data NULL */
};

/* HTTP/2 error codes (RFC 9113 section 7). */
enum {
    EDDY_H2_NO_ERROR = 0x0,
    EDDY_H2_PROTOCOL_ERROR = 0x1,
    EDDY_H2_INTERNAL_ERROR = 0x2,
    EDDY_H2_FLOW_CONTROL_ERROR = 0x3,
    EDDY_H2_SETTINGS_TIMEOUT = 0x4,
    EDDY_H2_STREAM_CLOSED = 0x5,
    EDDY_H2_FRAME_SIZE_ERROR = 0x6,
    EDDY_H2_REFUSED_STREAM = 0x7,
    EDDY_H2_CANCEL = 0x8,
    EDDY_H2_COMPRESSION_ERROR = 0x9,
    EDDY_H2_CONNECT_ERROR = 0xa,
    EDDY_H2_ENHANCE_YOUR_CALM = 0xb,
    EDDY_H2_INADEQUATE_SECURITY = 0xc,
    EDDY_H2_HTTP_1_1_REQUIRED = 0xd
};

typedef struct eddy_h2_stream_s eddy_h2_stream_t;

/*
 * The connection's settings and limits. Zero in a field means its default, so {0} (or NULL
 * where options are taken) is the defaults. The defaults are chosen to hold under the attacks
 * of docs/http2.md ("Limits").
 */
typedef struct eddy_h2_options_s {
    uint32_t max_concurrent_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS (100); past it:
                                        REFUSED_STREAM before the peer acknowledged it, GOAWAY
                                        PROTOCOL_ERROR after (nghttp2) */
    uint32_t initial_window_size;    /* SETTINGS_INITIAL_WINDOW_SIZE, per stream (65535) */
    uint32_t connection_window;      /* the connection's receive window and the bytes it
                                        buffers for streams the application has not consumed
                                        (4 MiB) */
    uint32_t max_frame_size;         /* SETTINGS_MAX_FRAME_SIZE we accept (16384) */
    uint32_t max_header_list_size;   /* SETTINGS_MAX_HEADER_LIST_SIZE, enforced by eddy (16 KiB):
                                        a request past it is answered 431 */
    uint32_t max_header_count;       /* header fields in one block, enforced with the size (100) */
    size_t max_memory;               /* bytes nghttp2 and the connection's queues may hold
                                        (8 MiB); past it new streams are refused and nghttp2's
                                        allocations fail, which ends the connection */
    size_t max_stream_pending;       /* bytes queued unsent on one stream (1 MiB): writes past
                                        it fail with EDDY_ENOBUFS; the stream is unwritable past
                                        half of it */
    uint32_t reset_burst;            /* RST_STREAMs received: a bucket of reset_burst (1000) */
    uint32_t reset_rate;             /* refilled at reset_rate per second (33); empty: GOAWAY
                                        ENHANCE_YOUR_CALM (CVE-2023-44487) */
    uint32_t max_resets_sent;        /* RST_STREAMs we send per 30 s (200); past it GOAWAY
                                        ENHANCE_YOUR_CALM (MadeYouReset, CVE-2025-8671) */
    uint32_t max_empty_frames;       /* consecutive DATA frames with neither bytes nor
                                        END_STREAM (2; CVE-2019-9518) */
    uint32_t max_continuations;      /* CONTINUATION frames in one header block (8) */
    int64_t settings_timeout_ms;     /* our SETTINGS must be acknowledged within (10 s) */
    int64_t idle_timeout_ms;         /* no stream open and nothing read for (60 s): GOAWAY;
                                        negative: never */
    int64_t header_timeout_ms;       /* a stream's header block must arrive whole within (10 s) */
    int64_t send_stall_timeout_ms;   /* a stream with bytes queued that the peer's window keeps
                                        at zero is reset after (30 s) */
    int64_t shutdown_timeout_ms;     /* after a graceful GOAWAY, streams in flight get this long
                                        before the connection closes (30 s) */
    uint32_t max_queued_streams;     /* client: streams opened past the peer's
                                        MAX_CONCURRENT_STREAMS wait for one to end, up to this
                                        many (1000); past it eddy_h2_stream_open() fails with
                                        EDDY_EBUSY */
} eddy_h2_options_t;

/* ---------------------------------------------------------------------------------------
 * Messages the connection handler passes on (inbound), each naming its stream. The receiver
 * owns one reference to the message; the stream inside is borrowed from it (retain it to
 * keep it past the message).
 */

/* A header block: a request's head (server), a response's (client), or trailers. */
typedef struct eddy_h2_headers_s {
    eddy_msg_t _msg;              /* EDDY_MSG_H2_HEADERS */
    eddy_h2_stream_t *stream;     /* borrowed from the message, which holds a reference */
    bool end_stream;              /* the peer sends nothing more on the stream */
    bool trailers;                /* this block follows the body */
    size_t count;                 /* fields, pseudo-header fields (":method"...) first */
    const eddy_http_header_t *fields; /* names in lower case as on the wire; strings valid
                                         while the message is, not NUL-terminated */
} eddy_h2_headers_t;

/* A piece of a stream's body, as one DATA frame brought it (its padding removed). */
typedef struct eddy_h2_data_s {
    eddy_msg_t _msg;          /* EDDY_MSG_H2_DATA */
    eddy_h2_stream_t *stream; /* borrowed from the message */
    eddy_buf_t *data;         /* the bytes, a slice of what was read (never NULL, may be
                                 empty); owned by the message */
    bool end_stream;          /* the body ends with this piece */
} eddy_h2_data_t;

/* The stream ended before both sides finished: the peer reset it (RST_STREAM), eddy did
 * (a limit, a protocol error in it, a timeout), or the connection closed under it. */
typedef struct eddy_h2_reset_s {
    eddy_msg_t _msg;          /* EDDY_MSG_H2_RESET */
    eddy_h2_stream_t *stream; /* borrowed from the message */
    uint32_t error_code;      /* EDDY_H2_CANCEL, ...: the RST_STREAM's or the GOAWAY's code */
    bool by_peer;             /* the peer sent the RST_STREAM */
} eddy_h2_reset_t;

/* The data of EDDY_EVENT_H2_GOAWAY: borrowed, valid during the event. Streams above
 * last_stream_id were not processed by the peer; they end with an EDDY_MSG_H2_RESET of
 * EDDY_H2_REFUSED_STREAM. */
typedef struct eddy_h2_goaway_s {
    uint32_t last_stream_id;
    uint32_t error_code;
    const uint8_t *debug; /* the debug data (debug_len bytes) */
    size_t debug_len;
} eddy_h2_goaway_t;

/** The headers behind msg when it is EDDY_MSG_H2_HEADERS, else NULL. Borrows. */
EDDY_EXTERN eddy_h2_headers_t *eddy_h2_headers_of(eddy_msg_t *msg);
/** The data behind msg when it is EDDY_MSG_H2_DATA, else NULL. Borrows. */
EDDY_EXTERN eddy_h2_data_t *eddy_h2_data_of(eddy_msg_t *msg);
/** The reset behind msg when it is EDDY_MSG_H2_RESET, else NULL. Borrows. */
EDDY_EXTERN eddy_h2_reset_t *eddy_h2_reset_of(eddy_msg_t *msg);
/** The first field called name (lower case) in h, or NULL. Borrows. */
EDDY_EXTERN const eddy_http_header_t *eddy_h2_headers_get(const eddy_h2_headers_t *h,
                                                          const char *name);

/* ---------------------------------------------------------------------------------------
 * Streams. The loop's thread, but retain and release (any thread).
 */

/**
 * Open a stream on ch, whose pipeline holds eddy_h2_client_connection(), and send its request
 * head: fields (n of them, copied) are the pseudo-header fields first (":method", ":scheme",
 * ":authority", ":path"; CONNECT: ":method" and ":authority"), then the regular ones, names
 * in lower case; connection-specific fields are refused as eddy_h2_stream_send_headers()
 * refuses them. end_stream: the request has no body; else send it with
 * eddy_h2_stream_send_data() (and trailers with eddy_h2_stream_send_headers()). The stream's
 * id is reserved at once (eddy_h2_stream_id(); ids rise in the order streams are opened) and
 * its HEADERS go out in that order; while the peer's SETTINGS_MAX_CONCURRENT_STREAMS streams
 * are open, new ones wait for one of them to end (Netty's StreamBufferingEncoder), at most
 * max_queued_streams of them. The response arrives as the messages above, naming the stream:
 * EDDY_MSG_H2_HEADERS (an interim 1xx head, then the head, then trailers, if any),
 * EDDY_MSG_H2_DATA, or EDDY_MSG_H2_RESET; a stream still waiting when the peer's GOAWAY comes
 * ends with EDDY_MSG_H2_RESET of EDDY_H2_REFUSED_STREAM (the peer never saw it: safe to send
 * again elsewhere). Returns the stream with one reference, the caller's (release it), or NULL
 * with *err (err may be NULL): EDDY_EINVAL (no client connection handler in ch's pipeline, a
 * bad field, no ":method" first), EDDY_ENOTCONN (ch is not active yet), EDDY_ECLOSED (the
 * connection is closing or closed), EDDY_ECONNABORTED (the peer's GOAWAY came: open it on
 * another connection), EDDY_EBUSY (max_queued_streams wait already), EDDY_ENOMEM. The loop's
 * thread.
 */
EDDY_EXTERN eddy_h2_stream_t *eddy_h2_stream_open(eddy_channel_t *ch,
                                                  const eddy_http_header_t *fields, size_t n,
                                                  bool end_stream, int *err);

/** Take a reference to s (returns s). */
EDDY_EXTERN eddy_h2_stream_t *eddy_h2_stream_retain(eddy_h2_stream_t *s);
/** Drop a reference; the last one, once the stream closed, frees it. NULL is fine. */
EDDY_EXTERN void eddy_h2_stream_release(eddy_h2_stream_t *s);
/** The stream's id (odd: opened by the client). */
EDDY_EXTERN uint32_t eddy_h2_stream_id(const eddy_h2_stream_t *s);
/** Whether the stream is closed (both sides done, or reset, or its connection gone). */
EDDY_EXTERN bool eddy_h2_stream_is_closed(const eddy_h2_stream_t *s);
/** The channel the stream travels on (borrowed; NULL once the connection handler is gone). */
EDDY_EXTERN eddy_channel_t *eddy_h2_stream_channel(const eddy_h2_stream_t *s);
/** The application's pointer for s (NULL until set). The stream does not own it. */
EDDY_EXTERN void *eddy_h2_stream_user_data(const eddy_h2_stream_t *s);
EDDY_EXTERN void eddy_h2_stream_set_user_data(eddy_h2_stream_t *s, void *data);

/**
 * Send a header block on s: the response's head (":status" first; server) or trailers (after
 * the body, end_stream implied). fields (n of them) are copied; names must be lower case and
 * connection-specific fields (connection, keep-alive, transfer-encoding, upgrade) are
 * refused. end_stream: nothing follows. 0, or EDDY_ECLOSED (s closed), EDDY_EINVAL (a bad
 * field, a second head, trailers before a head), EDDY_ENOMEM.
 */
EDDY_EXTERN int eddy_h2_stream_send_headers(eddy_h2_stream_t *s, const eddy_http_header_t *fields,
                                            size_t n, bool end_stream);
/**
 * Queue data (taken over, also on failure; NULL: no bytes) as the body of s after its head;
 * end_stream ends the body (trailers may not follow then). The bytes go without a copy, as
 * DATA frames the peer's windows allow, in order with everything the connection writes. p
 * (may be NULL) completes once the last of them was written to the channel, or fails with
 * the stream's end. 0, or EDDY_ECLOSED (s closed or its body ended), EDDY_EINVAL (no head
 * sent yet), EDDY_ENOBUFS (past max_stream_pending; data released), EDDY_ENOMEM. A failure
 * returned here is not also reported through p (p is failed with it).
 */
EDDY_EXTERN int eddy_h2_stream_send_data(eddy_h2_stream_t *s, eddy_buf_t *data, bool end_stream,
                                         eddy_promise_t *p);
/** Reset s with error_code (EDDY_H2_CANCEL...): RST_STREAM goes out, what was queued is
 * dropped and its promises fail with EDDY_ECLOSED. 0, or EDDY_ECLOSED when s had closed. */
EDDY_EXTERN int eddy_h2_stream_reset(eddy_h2_stream_t *s, uint32_t error_code);
/** Whether a send on s would be taken without going past half of max_stream_pending, and the
 * peer's window and the channel allow bytes to move. Once this said false (or a send left s
 * full), the connection handler fires EDDY_EVENT_H2_STREAM_WRITABLE with s when it becomes
 * writable again; a stream that nobody asked about hears nothing. The loop's thread. */
EDDY_EXTERN bool eddy_h2_stream_is_writable(const eddy_h2_stream_t *s);
/**
 * Tell the connection that n bytes of s's body were consumed, so the peer may send as many
 * more: the stream's receive window is returned only this way (a WINDOW_UPDATE once half of
 * it was consumed), never by shrinking it, so not consuming is how an application pauses a
 * stream. The adapter consumes for the requests it aggregates. Unknown or closed s: no-op.
 */
EDDY_EXTERN void eddy_h2_stream_consume(eddy_h2_stream_t *s, size_t n);
/**
 * A timer scoped to the stream: cb(s, arg) runs delay_ms from now on the loop, unless the
 * stream closed before (it never runs after the stream's end: a deadline that came too late
 * costs nothing). Returns the timer's id for eddy_h2_stream_cancel(), or 0 when refused
 * (stream closed, no memory).
 */
EDDY_EXTERN uint64_t eddy_h2_stream_schedule(eddy_h2_stream_t *s, int64_t delay_ms,
                                             void (*cb)(eddy_h2_stream_t *s, void *arg),
                                             void *arg);
/** Cancel a stream timer: 0, or EDDY_EALREADY when it ran, was cancelled, or is not s's. */
EDDY_EXTERN int eddy_h2_stream_cancel(eddy_h2_stream_t *s, uint64_t id);

/* ---------------------------------------------------------------------------------------
 * Handlers
 */

/**
 * The connection handler, server side (o borrowed; NULL: the defaults). Add it where the
 * bytes are (after the TLS handler, or first); what follows it gets the stream messages
 * above. It sends its SETTINGS when the channel is active (or when added to an active one),
 * and GOAWAY and close on a connection error. A close of the channel from the tail, or the
 * server bootstrap's graceful shutdown, sends GOAWAY first and lets streams in flight end
 * (within shutdown_timeout_ms). Inbound messages other than bytes, and outbound ones, pass
 * unchanged, except raw bytes written toward the head, which would break the framing: those
 * fail (EDDY_ENOTSUP).
 */
EDDY_EXTERN eddy_handler_t eddy_h2_connection(const eddy_h2_options_t *o);

/**
 * The connection handler, client side (Netty's Http2FrameCodec for a client; o borrowed, NULL:
 * the defaults; reset_burst and reset_rate do not apply). The same handler as
 * eddy_h2_connection() with a client session: when the channel is active (or when added to an
 * active one, as after a TLS handshake that chose "h2" by ALPN) it sends the client
 * connection preface and its SETTINGS; streams are opened with eddy_h2_stream_open(), and
 * what the server sends arrives as the stream messages above. A close from the tail is
 * graceful as on the server: GOAWAY, then the streams in flight end (within
 * shutdown_timeout_ms). The peer's GOAWAY fires EDDY_EVENT_H2_GOAWAY; no stream opens after
 * it, and the connection closes once its last stream ended. idle_timeout_ms applies as on
 * the server (no stream open for so long: GOAWAY and close).
 */
EDDY_EXTERN eddy_handler_t eddy_h2_client_connection(const eddy_h2_options_t *o);

/**
 * The client's adapter from HTTP/1.1's messages to streams, after
 * eddy_h2_client_connection(): the HTTP/2 counterpart of the client codec, the aggregator and
 * eddy_http_exchange() in one (http_client.h), so eddy_http_send() works on such a channel
 * unchanged. Each eddy_http_request_t written (EDDY_MSG_HTTP_CLIENT_REQUEST, or through
 * eddy_http_send()) opens a stream: ":method" and ":path" from the request, ":scheme" "https"
 * when the pipeline holds a TLS handler (else "http"), ":authority" from its Host header
 * (which is not sent), the other headers in lower case without the connection-specific ones
 * (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade, TE but "trailers"),
 * content-length when there is a body, and the body; Expect: 100-continue is not sent (the
 * body goes at once). A chunked request's content messages (EDDY_MSG_HTTP_CONTENT) follow it
 * on its stream, the last one ending it; another request may not be written before that last
 * one (EDDY_EBUSY). Requests are multiplexed: their responses come in whatever order the
 * server answers.
 *
 * A response is aggregated into one eddy_http_response_t, EDDY_MSG_HTTP_FULL_RESPONSE
 * (version 20, stream_id set, reason the registry's phrase, headers in lower case as sent,
 * no pseudo-header fields, trailers dropped, body at most max_content_length bytes: 0 means
 * EDDY_HTTP_MAX_CONTENT_LENGTH); interim 1xx responses are dropped. It completes the future of
 * the eddy_http_send() that sent its request, or, for a request written by hand, passes on
 * to the next handler. The future fails with: EDDY_ECONNABORTED when the server did not
 * process the request (RST_STREAM or GOAWAY with REFUSED_STREAM, or a stream that could not
 * open after the peer's GOAWAY: safe to send again, whatever the method); EDDY_ECONNRESET when
 * the stream was reset otherwise (by the peer, or by the connection for a protocol error in
 * it); EDDY_ETOOLONGFRAME for a body past max_content_length (the stream is reset, CANCEL)
 * or a head past the connection's header limits (reset, ENHANCE_YOUR_CALM); EDDY_ETIMEDOUT
 * when no whole response came within response_timeout_ms of the request's write (<= 0: no
 * limit; the stream is reset, CANCEL); EDDY_ECLOSED (or the error that ended the connection, from exception_caught) when
 * the connection closed first; what eddy_h2_stream_open() fails with (EDDY_EBUSY,
 * EDDY_ECONNABORTED...). Cancelling the future resets its stream (CANCEL), leaving the other
 * streams and the connection as they are. Other messages pass unchanged both ways, but raw
 * bytes written to it fail with EDDY_ENOTSUP. ops NULL without memory.
 */
EDDY_EXTERN eddy_handler_t eddy_h2_http_client_adapter(size_t max_content_length,
                                                       int64_t response_timeout_ms);

/**
 * The adapter from streams to HTTP/1.1's messages, after eddy_h2_connection(): each stream's
 * request arrives as one EDDY_MSG_HTTP_FULL_REQUEST (version 20, stream_id set, the body
 * whole, at most max_content_length bytes: 0 means EDDY_HTTP_MAX_CONTENT_LENGTH; a longer one
 * is a request with error 413, as the aggregator makes). A request that breaks HTTP's rules
 * in HTTP/2 terms arrives with error 400 (431 past the header limits). Write an
 * eddy_http_response_t (EDDY_MSG_HTTP_RESPONSE) to answer: its stream_id names the stream (0:
 * the oldest request not yet answered, which is what an HTTP/1.1 handler that answers in
 * order does); a chunked response's content messages follow it on that stream. Header names
 * are sent in lower case, connection-specific ones dropped; Content-Length is added when the
 * body is known. Raw bytes written to the adapter fail with EDDY_ENOTSUP (pre-encoded
 * HTTP/1.1 bytes have no place in HTTP/2). A response for a stream that was reset is dropped
 * (its promise fails with EDDY_ECLOSED).
 */
EDDY_EXTERN eddy_handler_t eddy_h2_http_adapter(size_t max_content_length);

/**
 * The server's negotiation (Netty's CleartextHttp2ServerUpgradeHandler and
 * ApplicationProtocolNegotiationHandler in one): add it before the HTTP/1.1 request decoder
 * (and after the TLS handler, whose context offers "h2" and "http/1.1" by ALPN). When the
 * first bytes are HTTP/2's preface it replaces the HTTP/1.1 decoder, the aggregator and the
 * response encoder (the library's own, found by their ops) with eddy_h2_connection(o) and
 * eddy_h2_http_adapter(max_content_length), fires EDDY_EVENT_H2_ACTIVE, and passes the bytes
 * on to them. Otherwise it removes itself; the HTTP/1.1 handlers go on, and the first request
 * with "Upgrade: h2c" and one HTTP2-Settings header (no body) is answered 101 and switched the
 * same way, the request served as stream 1. o borrowed (NULL: defaults). In a build without
 * nghttp2 it removes itself once added: the server speaks HTTP/1.1 as before.
 */
EDDY_EXTERN eddy_handler_t eddy_h2_server_upgrade(const eddy_h2_options_t *o,
                                                  size_t max_content_length);

/** The protocols to offer by ALPN for a server that speaks both (eddy_tls_context_alpn):
 * {"h2", "http/1.1"}, 2 of them. */
EDDY_EXTERN const char *const *eddy_h2_alpn_protocols(size_t *n);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_HTTP2_H */
