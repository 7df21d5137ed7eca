/*
 * eddy gRPC: servers and clients of gRPC's protocol over eddy's HTTP/2 (http2.h), on the
 * channel's loop, with eddy's buffers and backpressure. docs/grpc.md is the guide; this header
 * is the manual.
 *
 * A call (eddy_grpc_call_t) is one RPC, on the server's side or the client's: a stream of
 * length-prefixed messages each way, request metadata, response metadata, and a status with
 * trailing metadata at the end. Messages are bytes (eddy_buf_t): serialization is the
 * application's (the examples use protobuf-c). The library owns the protocol's rules: the
 * message framing across any DATA boundaries, the size limits each way, gzip message
 * compression, grpc-timeout deadlines, percent-encoded status messages, base64 "-bin"
 * metadata, trailers-only answers for early errors, the HTTP/2 reset that ends a call early.
 *
 * Lifetime: the library creates a call and holds it until it ends (finished and, on the
 * server, the client's side done; or cancelled). Its callbacks may use it freely; code that
 * keeps it past a callback (a timer, a task, another call's callback) takes a reference with
 * eddy_grpc_call_retain() and releases it when done. Functions on a call that ended fail with
 * EDDY_ECLOSED and touch nothing freed.
 *
 * Threads: everything here runs on the loop of the call's connection (callbacks, and the call
 * functions, called from them or from call-scoped timers and tasks on that loop), but for
 * eddy_grpc_call_retain() and eddy_grpc_call_release() (any thread), and what says otherwise.
 */
#ifndef EDDY_GRPC_H
#define EDDY_GRPC_H

#include <eddy/buffer.h>
#include <eddy/carrier.h>
#include <eddy/common.h>
#include <eddy/http.h>
#include <eddy/http2.h>
#include <eddy/pipeline.h>
#include <eddy/tls.h>

#ifdef __cplusplus
extern "C" {
#endif

/* gRPC's status codes (grpc/grpc doc/statuscodes.md). */
typedef enum {
    EDDY_GRPC_OK = 0,
    EDDY_GRPC_CANCELLED = 1,
    EDDY_GRPC_UNKNOWN = 2,
    EDDY_GRPC_INVALID_ARGUMENT = 3,
    EDDY_GRPC_DEADLINE_EXCEEDED = 4,
    EDDY_GRPC_NOT_FOUND = 5,
    EDDY_GRPC_ALREADY_EXISTS = 6,
    EDDY_GRPC_PERMISSION_DENIED = 7,
    EDDY_GRPC_RESOURCE_EXHAUSTED = 8,
    EDDY_GRPC_FAILED_PRECONDITION = 9,
    EDDY_GRPC_ABORTED = 10,
    EDDY_GRPC_OUT_OF_RANGE = 11,
    EDDY_GRPC_UNIMPLEMENTED = 12,
    EDDY_GRPC_INTERNAL = 13,
    EDDY_GRPC_UNAVAILABLE = 14,
    EDDY_GRPC_DATA_LOSS = 15,
    EDDY_GRPC_UNAUTHENTICATED = 16
} eddy_grpc_status_t;

/** The code's name ("DEADLINE_EXCEEDED"), "UNKNOWN" for a code outside 0-16. Any thread. */
EDDY_EXTERN const char *eddy_grpc_status_name(int status);

/* The four shapes of a method (the proto's "stream" keywords). */
typedef enum {
    EDDY_GRPC_UNARY = 0,            /* one request, one response */
    EDDY_GRPC_SERVER_STREAMING = 1, /* one request, any number of responses */
    EDDY_GRPC_CLIENT_STREAMING = 2, /* any number of requests, one response */
    EDDY_GRPC_BIDI_STREAMING = 3    /* any number each way, in any order */
} eddy_grpc_kind_t;

typedef struct eddy_grpc_call_s eddy_grpc_call_t;
typedef struct eddy_grpc_server_s eddy_grpc_server_t;

/* gRPC's default largest message, each way (GRPC_DEFAULT_MAX_RECV_MESSAGE_LENGTH). */
#define EDDY_GRPC_MAX_MESSAGE (4u * 1024 * 1024)

/* ---------------------------------------------------------------------------------------
 * Metadata. A call's metadata is a list of eddy_http_header_t: names in lower case as on the
 * wire ([0-9a-z_.-]; "grpc-" names are the protocol's own and are neither shown nor sent as
 * metadata), values as bytes. A name ending in "-bin" carries binary bytes: the library
 * decodes them from base64 (padded or not; a repeated field's values joined by "," are
 * decoded one by one) and encodes what is sent (unpadded). Other values are printable ASCII
 * (0x20-0x7E); a value outside it is refused on sending (EDDY_EINVAL).
 */

/* ---------------------------------------------------------------------------------------
 * The server
 */

/*
 * What a method does with its calls. The library calls these on the connection's loop; the
 * call is valid during each (retain it to keep it past one).
 *
 * Unary and server streaming methods have on_request; client streaming and bidirectional ones
 * on_message and on_half_close. Every method may have on_cancel and on_writable.
 */
typedef struct eddy_grpc_method_ops_s {
    /* Unary, server streaming: the one request (taken over: release it), once the client has
     * sent it and half-closed. Answer with eddy_grpc_call_reply() (unary), or
     * eddy_grpc_call_send() then eddy_grpc_call_finish(), now or later. A client that sends
     * no request or two gets INTERNAL without reaching this. */
    void (*on_request)(eddy_grpc_call_t *call, eddy_buf_t *request);
    /* Client and bidirectional streaming: the call began (its metadata is readable); NULL:
     * nothing to do then. */
    void (*on_start)(eddy_grpc_call_t *call);
    /* ...each request message (taken over), in order... */
    void (*on_message)(eddy_grpc_call_t *call, eddy_buf_t *msg);
    /* ...and the client's end of requests. The method finishes when it likes (before, too). */
    void (*on_half_close)(eddy_grpc_call_t *call);
    /* The call ended without the method's finish: the client cancelled (EDDY_GRPC_CANCELLED),
     * its deadline passed (EDDY_GRPC_DEADLINE_EXCEEDED; the client is sent that status, or a
     * reset CANCEL while the call's messages wait for its window), or the connection went
     * (EDDY_GRPC_UNAVAILABLE). Sends after it fail with EDDY_ECLOSED; finishing is not
     * needed (it fails the same way). Optional: a method that keeps no state past its
     * callbacks needs none. */
    void (*on_cancel)(eddy_grpc_call_t *call, eddy_grpc_status_t why);
    /* The call can take messages again after eddy_grpc_call_is_writable() said false, or a
     * send left it full. Optional. */
    void (*on_writable)(eddy_grpc_call_t *call);
} eddy_grpc_method_ops_t;

/*
 * The server's settings. Zero in a field means its default, so {0} (or NULL) is the defaults.
 */
typedef struct eddy_grpc_server_options_s {
    eddy_h2_options_t h2;           /* the connections' HTTP/2 settings; zeros: http2.h's
                                       defaults but for the initial stream window (1 MiB: gRPC
                                       moves larger messages than a page) and the rapid-reset
                                       bucket (10000 at 1000 per second, so clients that
                                       cancel calls as a matter of course are never cut off) */
    size_t max_recv_message;        /* a request message's largest size, after inflating
                                       (EDDY_GRPC_MAX_MESSAGE): past it RESOURCE_EXHAUSTED,
                                       before any byte of it is gathered */
    size_t max_send_message;        /* a response message's (EDDY_GRPC_MAX_MESSAGE): a send
                                       past it fails with EDDY_EMSGSIZE and the call finishes
                                       RESOURCE_EXHAUSTED */
    int64_t min_ping_interval_ms;   /* keepalive enforcement (grpc doc/keepalive.md): a PING
                                       sooner than this after the last one, while no call
                                       sent data, is a strike (300000: five minutes) */
    uint32_t max_ping_strikes;      /* strikes before GOAWAY ENHANCE_YOUR_CALM
                                       "too_many_pings" (2) */
    bool permit_pings_without_calls; /* pings with no call open count as data did (false) */
} eddy_grpc_server_options_t;

/** A server (services and methods, and the settings its connections take); o borrowed (NULL:
 * the defaults). NULL without memory. Add methods before the first connection; then the server
 * is read by every loop at once and must not change. Free it after the last connection closed
 * (the server bootstrap's shutdown future). */
EDDY_EXTERN eddy_grpc_server_t *eddy_grpc_server_new(const eddy_grpc_server_options_t *o);
EDDY_EXTERN void eddy_grpc_server_free(eddy_grpc_server_t *s);

/**
 * Register a method by its full path ("/package.Service/Method", case-sensitive; copied) with
 * its shape, callbacks (ops static, outliving the server) and arg (eddy_grpc_call_arg()).
 * 0, or EDDY_EEXIST (the path is taken), EDDY_EINVAL (a path not of that form, ops missing
 * what its kind needs), EDDY_ENOMEM. A call to a path that is not registered is answered
 * UNIMPLEMENTED at once (trailers-only), whatever its service.
 */
EDDY_EXTERN int eddy_grpc_server_add_method(eddy_grpc_server_t *s, const char *path,
                                           eddy_grpc_kind_t kind,
                                           const eddy_grpc_method_ops_t *ops, void *arg);

/**
 * eddy_grpc_server_add_method() for a method that blocks (a database, a file, a computation):
 * its callbacks run on carrier c's threads (carrier.h; borrowed: it must outlive the server),
 * keyed by call, so one call's callbacks come in order (with an EDDY_CARRIER_ORDERED carrier
 * partitioned EDDY_CARRIER_BY_KEY) while the loop goes on serving. From those threads the
 * call's functions are handed to its loop in the order they were made: eddy_grpc_call_send(),
 * _reply(), _finish(), _send_headers(), _set_compression() and _cancel() return 0 once queued
 * (a send's promise says how it went; the other errors are those of the loop's own call,
 * logged by nobody: check the call's state from a later callback), and
 * eddy_grpc_call_is_writable() says what the loop last knew. Timers (eddy_grpc_call_schedule)
 * belong to the loop's thread. The carrier may stop after the loops (drained then): a call it
 * holds keeps its loop's memory, and what a callback does once the loop has ended is dropped
 * (a send's promise fails). Same errors as eddy_grpc_server_add_method().
 */
EDDY_EXTERN int eddy_grpc_server_add_method_on(eddy_grpc_server_t *s, const char *path,
                                              eddy_grpc_kind_t kind,
                                              const eddy_grpc_method_ops_t *ops, void *arg,
                                              eddy_carrier_t *c);

/**
 * Serve the standard health service (grpc.health.v1.Health/Check and Watch) on s: the service
 * "" is SERVING, and so is each service of a registered method, unless set otherwise with
 * eddy_grpc_server_set_health(). 0, or EDDY_EEXIST, EDDY_ENOMEM. Before the first connection.
 */
EDDY_EXTERN int eddy_grpc_server_add_health(eddy_grpc_server_t *s);
/** Set a service's health ("" the server's): serving true answers SERVING, false
 * NOT_SERVING; a name never set nor registered is SERVICE_UNKNOWN (Check: NOT_FOUND).
 * The loop's thread of any connection; the table is shared, read by each Check. */
EDDY_EXTERN int eddy_grpc_server_set_health(eddy_grpc_server_t *s, const char *service,
                                           bool serving);

/**
 * The gRPC handler, after eddy_h2_connection() in a server connection's pipeline: it takes
 * the stream messages and runs s's methods. s borrowed: it must outlive every connection.
 * A request that is not gRPC's (a method other than POST, a content-type other than
 * application/grpc[+...]) is answered as HTTP says (405, 415) with a gRPC status too.
 */
EDDY_EXTERN eddy_handler_t eddy_grpc_server_handler(eddy_grpc_server_t *s);

/**
 * Set up a server connection's pipeline for s: eddy_h2_connection() with s's HTTP/2 settings,
 * then eddy_grpc_server_handler(s), after what ch's pipeline holds (a TLS handler, whose
 * context must offer "h2" by ALPN: eddy_grpc_alpn_protocols()). A server bootstrap's child
 * initializer calls it. 0 or the pipeline's error (EDDY_ENOMEM). The loop's thread of ch.
 */
EDDY_EXTERN int eddy_grpc_server_init_channel(eddy_channel_t *ch, eddy_grpc_server_t *s);

/** The protocols a gRPC server or client offers by ALPN: {"h2"}, 1 of them. */
EDDY_EXTERN const char *const *eddy_grpc_alpn_protocols(size_t *n);

/* ---------------------------------------------------------------------------------------
 * Calls: what both sides do
 */

/** Take a reference to call (returns call). Any thread. */
EDDY_EXTERN eddy_grpc_call_t *eddy_grpc_call_retain(eddy_grpc_call_t *call);
/** Drop a reference; the last one frees an ended call. NULL is fine. Any thread. */
EDDY_EXTERN void eddy_grpc_call_release(eddy_grpc_call_t *call);

/**
 * Send a message (taken over, also on failure) on call: the server's response, the client's
 * request. It goes with the 5-byte prefix, compressed when the call compresses, in order, as
 * the stream's window allows, without a copy. The server's response headers go before the
 * first message (eddy_grpc_call_send_headers() sends them earlier). p (may be NULL) completes
 * once the bytes were written to the channel, or fails with the call's end. 0, or
 * EDDY_ECLOSED (the call ended, or this side already finished or half-closed), EDDY_EMSGSIZE
 * (past the largest message sent: the call then ends RESOURCE_EXHAUSTED, the server's with
 * that status, the client's reset and closed with it), EDDY_ENOBUFS (the stream's queue is
 * full: wait for on_writable), EDDY_EINVAL (a unary or client streaming method's second response),
 * EDDY_ENOMEM. A failure returned here is not also reported through p (p is failed with it).
 */
EDDY_EXTERN int eddy_grpc_call_send(eddy_grpc_call_t *call, eddy_buf_t *msg, eddy_promise_t *p);

/** Whether a send would be taken without filling the stream's queue; when it says false, the
 * call's on_writable runs once it can take more. A client call still waiting for its
 * connection has no stream: false, and on_writable runs once its stream opened. */
EDDY_EXTERN bool eddy_grpc_call_is_writable(eddy_grpc_call_t *call);

/** Cancel call: the stream is reset (CANCEL), the peer sees CANCELLED; the server's method
 * hears on_cancel(CANCELLED), the client's call completes with CANCELLED. 0, or EDDY_ECLOSED
 * when the call had ended. */
EDDY_EXTERN int eddy_grpc_call_cancel(eddy_grpc_call_t *call);

/** The method's path ("/pkg.Service/Method"), NUL-terminated, valid with the call. */
EDDY_EXTERN const char *eddy_grpc_call_path(const eddy_grpc_call_t *call);
/** The metadata the peer sent first: the request's (server), the response's headers (client;
 * none before they came). *n set to their count; valid with the call. */
EDDY_EXTERN const eddy_http_header_t *eddy_grpc_call_metadata(const eddy_grpc_call_t *call,
                                                              size_t *n);
/** The first metadata field called name (lower case) the peer sent first, or NULL. */
EDDY_EXTERN const eddy_http_header_t *eddy_grpc_call_metadata_get(const eddy_grpc_call_t *call,
                                                                  const char *name);
/** Milliseconds left before the call's deadline (0 once passed), or -1 when it has none. */
EDDY_EXTERN int64_t eddy_grpc_call_time_left_ms(const eddy_grpc_call_t *call);
/** Whether the call ended (finished, cancelled, or its connection gone). */
EDDY_EXTERN bool eddy_grpc_call_is_done(const eddy_grpc_call_t *call);
/** The method's arg (server), or the call's (client). */
EDDY_EXTERN void *eddy_grpc_call_arg(const eddy_grpc_call_t *call);
/** The application's pointer for call (NULL until set). */
EDDY_EXTERN void *eddy_grpc_call_user_data(const eddy_grpc_call_t *call);
/** Set it, with free_data (may be NULL) to free it once the call is freed, whichever way it
 * ended (finished, cancelled, its connection gone): per-call state needs no cleanup on each
 * path. A pointer set before is freed with its own free_data first. */
EDDY_EXTERN void eddy_grpc_call_set_user_data(eddy_grpc_call_t *call, void *data,
                                              void (*free_data)(void *data));
/** The channel (connection) the call travels on; NULL once it ended, and while a client call
 * waits for its connection. Borrowed. */
EDDY_EXTERN eddy_channel_t *eddy_grpc_call_channel(const eddy_grpc_call_t *call);

/**
 * A timer scoped to the call: cb(call, arg) runs delay_ms from now on the call's loop unless
 * the call ended first (it never runs after: a handler's late work costs nothing). The
 * timer id for eddy_grpc_call_cancel_timer(), or 0 when refused (call ended, no memory, a
 * client call still waiting for its connection: eddy_grpc_call_channel() says NULL).
 */
EDDY_EXTERN uint64_t eddy_grpc_call_schedule(eddy_grpc_call_t *call, int64_t delay_ms,
                                             void (*cb)(eddy_grpc_call_t *call, void *arg),
                                             void *arg);
/** Cancel a call timer: 0, or EDDY_EALREADY when it ran or was cancelled. */
EDDY_EXTERN int eddy_grpc_call_cancel_timer(eddy_grpc_call_t *call, uint64_t id);

/* ---------------------------------------------------------------------------------------
 * Calls: the server's side
 */

/**
 * Send the response headers now with metadata md (n fields, copied; may be none) rather than
 * with the first message or the status. Once, before any message. 0, or EDDY_ECLOSED,
 * EDDY_EALREADY (they went), EDDY_EINVAL (a bad name or value), EDDY_ENOMEM.
 */
EDDY_EXTERN int eddy_grpc_call_send_headers(eddy_grpc_call_t *call, const eddy_http_header_t *md,
                                            size_t n);

/**
 * Compress the call's responses with encoding ("gzip", or "identity" to stop) when the client
 * accepts it (its grpc-accept-encoding); else they go uncompressed. Before the headers went.
 * 0, or EDDY_ENOTSUP (an encoding the library has not), EDDY_EALREADY (headers sent).
 */
EDDY_EXTERN int eddy_grpc_call_set_compression(eddy_grpc_call_t *call, const char *encoding);

/**
 * Finish the call with status, message (may be NULL; UTF-8, percent-encoded on the wire) and
 * trailing metadata md (n fields, copied). Once. When nothing went before (no headers, no
 * message) the answer is one trailers-only block. A client that has not half-closed is then
 * told so (RST_STREAM NO_ERROR) and what it sends is dropped. The call ends once its stream
 * is done; on_cancel does not run after a finish. 0, or EDDY_ECLOSED (ended or finished),
 * EDDY_EINVAL (a status outside 0-16, a bad metadata field), EDDY_ENOMEM.
 */
EDDY_EXTERN int eddy_grpc_call_finish(eddy_grpc_call_t *call, eddy_grpc_status_t status,
                                      const char *message, const eddy_http_header_t *md,
                                      size_t n);

/** eddy_grpc_call_send(call, response, NULL) then eddy_grpc_call_finish(call, OK, no
 * message, no metadata), going out together. The first error of the two. */
EDDY_EXTERN int eddy_grpc_call_reply(eddy_grpc_call_t *call, eddy_buf_t *response);

/* ---------------------------------------------------------------------------------------
 * The client
 */

typedef struct eddy_grpc_channel_s eddy_grpc_channel_t;

/*
 * A client's settings. Zero in a field means its default, so {0} (or NULL) is the defaults.
 */
typedef struct eddy_grpc_channel_options_s {
    eddy_tls_context_t *tls;       /* TLS (a client context, retained; it should offer "h2"
                                      by ALPN: eddy_grpc_alpn_protocols()); NULL: plaintext,
                                      HTTP/2 by prior knowledge */
    const char *authority;         /* ":authority" and the TLS server name (copied); NULL:
                                      the target's "host:port" and host */
    size_t connections;            /* HTTP/2 connections calls are spread over, round robin
                                      (1) */
    size_t max_recv_message;       /* EDDY_GRPC_MAX_MESSAGE: a response past it ends the call
                                      RESOURCE_EXHAUSTED */
    size_t max_send_message;       /* EDDY_GRPC_MAX_MESSAGE: a send past it fails with
                                      EDDY_EMSGSIZE (the call goes on; eddy_grpc_unary()'s
                                      ends RESOURCE_EXHAUSTED) */
    int64_t connect_timeout_ms;    /* each connect, and the host's lookup (10 s) */
    int64_t keepalive_ms;          /* a PING after this long without reading while calls are
                                      open on the connection (grpc doc/keepalive.md; none on
                                      an idle one); unanswered within keepalive_timeout_ms,
                                      the connection's calls end UNAVAILABLE and it closes
                                      (also the sockets' TCP_USER_TIMEOUT). The server's GOAWAY
                                      ENHANCE_YOUR_CALM ("too_many_pings") doubles it for the
                                      channel (0: off) */
    int64_t keepalive_timeout_ms;  /* (20 s) */
    bool compress;                 /* gzip the requests (grpc-encoding: gzip) */
    eddy_h2_options_t h2;          /* the connections' HTTP/2 settings; zeros: http2.h's
                                      defaults but for the initial stream window (1 MiB), a
                                      stream's queue (max_stream_pending: two of the largest
                                      requests, at least 1 MiB), streams waiting past the
                                      server's limit and RST_STREAMs sent (no limit: a client's
                                      queue and cancels are its own) and the idle timeout
                                      (30 minutes, gRPC's channel idleness) */
} eddy_grpc_channel_options_t;

/**
 * A channel to target ("host:port", "[v6]:port"; copied), on loop (borrowed: it must outlive
 * the channel): its connections are made when the first call needs them (the host resolved
 * on the loop), made again after they fail, each an HTTP/2 connection that carries many
 * calls. o borrowed (NULL: the defaults). NULL without memory or for a target that does not
 * parse. Any thread.
 */
EDDY_EXTERN eddy_grpc_channel_t *eddy_grpc_channel_new(eddy_loop_t *loop, const char *target,
                                                      const eddy_grpc_channel_options_t *o);

/** Close the channel: calls in flight and those waiting for a connection end UNAVAILABLE
 * ("channel closed"), and the channel is freed once its connections closed, which the returned
 * future (the caller releases it) says. Once: a second call's future fails with
 * EDDY_EALREADY; one whose loop is shutting down fails with EDDY_ESHUTDOWN (logged; the
 * channel stays). Any thread. */
EDDY_EXTERN eddy_future_t *eddy_grpc_channel_close(eddy_grpc_channel_t *c);

/* What a client call's callbacks are told. Each optional (NULL). The call is valid during each. */
typedef struct eddy_grpc_client_ops_s {
    /* The response headers came (eddy_grpc_call_metadata() reads them). */
    void (*on_headers)(eddy_grpc_call_t *call);
    /* A response message (taken over: release it). */
    void (*on_message)(eddy_grpc_call_t *call, eddy_buf_t *msg);
    /* The call can take requests again after eddy_grpc_call_is_writable() said false. */
    void (*on_writable)(eddy_grpc_call_t *call);
    /* The call ended, with the server's status or one the library made: CANCELLED (cancelled
     * here), DEADLINE_EXCEEDED (the deadline passed here; the stream is reset), UNAVAILABLE
     * (no connection, the connection failed, or the server refused the stream: the call never
     * ran there and may be made again), RESOURCE_EXHAUSTED (a response past the largest),
     * INTERNAL (a protocol error), or what an HTTP status without gRPC's means
     * (grpc doc/http-grpc-status-mapping.md). message: the status message decoded (NUL-
     * terminated, never NULL); eddy_grpc_call_trailers() holds the trailing metadata. Runs
     * once, last; the call's reference the start gave is still the caller's to release. */
    void (*on_close)(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message);
} eddy_grpc_client_ops_t;

/* A client call's settings. NULL or {0}: no deadline, no metadata. */
typedef struct eddy_grpc_call_options_s {
    int64_t deadline_ms;            /* the call must end within (sent as grpc-timeout); 0 none */
    const eddy_http_header_t *metadata; /* the request metadata (copied) */
    size_t metadata_count;
} eddy_grpc_call_options_t;

/**
 * Start a call of path ("/pkg.Service/Method") on c: the request headers go at once on the
 * next ready connection (round robin), or, with none ready, once the connection it waits for
 * is (one being made, or made for it); until then sends queue (at most half a stream's
 * queue: EDDY_ENOBUFS past it) and the deadline runs. Send requests with
 * eddy_grpc_call_send(), end them with eddy_grpc_call_half_close(); what comes back arrives
 * through ops (static, or outliving the call) with arg (eddy_grpc_call_arg()). Returns the
 * call with one reference, the caller's (release it, after on_close or not), or NULL with
 * *err (may be NULL): EDDY_EINVAL (a bad path or metadata, a negative deadline), EDDY_ECLOSED
 * (c closing), EDDY_ENOMEM. Errors after the start come as on_close's status (a connection
 * that fails at once: before the start returns). The loop's thread.
 */
EDDY_EXTERN eddy_grpc_call_t *eddy_grpc_call_start(eddy_grpc_channel_t *c, const char *path,
                                                  const eddy_grpc_call_options_t *o,
                                                  const eddy_grpc_client_ops_t *ops, void *arg,
                                                  int *err);

/** The client's end of requests (END_STREAM, after the requests queued before the stream
 * opened). 0, or EDDY_ECLOSED (ended, or already), EDDY_EINVAL (a server's call). */
EDDY_EXTERN int eddy_grpc_call_half_close(eddy_grpc_call_t *call);

/** The trailing metadata of a client call (after on_close; none before). */
EDDY_EXTERN const eddy_http_header_t *eddy_grpc_call_trailers(const eddy_grpc_call_t *call,
                                                              size_t *n);

/* The outcome of a unary call made with eddy_grpc_unary(). */
typedef struct eddy_grpc_reply_s {
    eddy_grpc_status_t status;
    const char *message;          /* the status message (NUL-terminated, never NULL) */
    eddy_buf_t *response;         /* the response message when status is OK (borrowed from
                                     the reply: retain it to keep it), else NULL */
    const eddy_http_header_t *headers, *trailers; /* the metadata both ways */
    size_t headers_count, trailers_count;
} eddy_grpc_reply_t;

/**
 * A unary call: request (taken over) to path on c, with o (may be NULL). The future (the
 * caller releases it) completes with an eddy_grpc_reply_t whatever the status (read it with
 * eddy_future_grpc_reply(); it lives with the future), and fails only with EDDY_ENOMEM,
 * EDDY_EINVAL (what eddy_grpc_call_start() refuses so: checked at once) or, cancelled, with
 * EDDY_ECANCELED (the call is cancelled too). A closing channel's reply is UNAVAILABLE
 * ("channel closed"); OK with no response message, or a second one, is INTERNAL. Any
 * thread.
 */
EDDY_EXTERN eddy_future_t *eddy_grpc_unary(eddy_grpc_channel_t *c, const char *path,
                                           eddy_buf_t *request, const eddy_grpc_call_options_t *o);
/** The reply of a completed eddy_grpc_unary() future, else NULL. Borrowed from f. */
EDDY_EXTERN const eddy_grpc_reply_t *eddy_future_grpc_reply(const eddy_future_t *f);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_GRPC_H */
