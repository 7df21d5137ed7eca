/*
 * eddy HTTP/1.1: the request decoder, the aggregator and the response encoder (Netty's
 * HttpRequestDecoder, HttpObjectAggregator and HttpResponseEncoder), as pipeline handlers.
 *
 * What travels through the pipeline, inbound:
 *
 *   - EDDY_MSG_HTTP_FULL_REQUEST, an eddy_http_request_t with its whole body (body may be NULL
 *     when empty). The decoder emits a request without a body this way, in one message; the
 *     aggregator turns every request into one.
 *   - EDDY_MSG_HTTP_REQUEST, an eddy_http_request_t whose body follows as
 *     EDDY_MSG_HTTP_CONTENT messages (eddy_http_content_t), the last one with last set. Only
 *     the decoder emits these, for requests with a body (Content-Length > 0 or chunked).
 *
 * A request the decoder or aggregator rejects still arrives, as a full request with error set
 * to the HTTP status to answer with (400, 413, 414, 431, 501, 505) and keep_alive false; it is
 * the last message of the connection: the decoder discards everything after it. The
 * application answers it and closes (eddy-http-server does), as with Netty's DecoderResult.
 *
 * Outbound, the encoder writes an eddy_http_response_t (EDDY_MSG_HTTP_RESPONSE) as the status
 * line, its headers, Content-Length or Transfer-Encoding: chunked, Connection when needed, and
 * its body; for a chunked response the body follows as eddy_http_content_t messages, each
 * written as one chunk, the last one as the zero chunk. HTTP/1.0 has no chunks: a chunked 1.0
 * response (a body of unknown length) goes without Transfer-Encoding, with "Connection:
 * close", its content as it is, and the close ends the body (RFC 9112 section 6.3). A
 * response that does not keep the connection alive (eddy_http_response_keeps_alive()) closes
 * it after its last byte (the response itself, or the last content of a chunked one) with
 * the channel's close after flush: what was written goes out, then FIN, and what the client
 * still sends is dropped for EDDY_LINGER_MS (channel.h). Other messages pass unchanged, so pre-encoded buffers may be written between responses.
 *
 * Requests point into the bytes they were decoded from (a retained slice, no copy): the
 * strings of a request are valid while the request is, and are not NUL-terminated.
 * Every callback runs on the channel's loop.
 */
#ifndef EDDY_HTTP_H
#define EDDY_HTTP_H

#include <eddy/buffer.h>
#include <eddy/codec.h>
#include <eddy/common.h>
#include <eddy/pipeline.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Message types, in eddy's own range below EDDY_MSG_USER. */
enum {
    EDDY_MSG_HTTP_REQUEST = 16,      /* eddy_http_request_t, body to follow as content */
    EDDY_MSG_HTTP_FULL_REQUEST = 17, /* eddy_http_request_t with its body */
    EDDY_MSG_HTTP_CONTENT = 18,      /* eddy_http_content_t */
    EDDY_MSG_HTTP_RESPONSE = 19      /* eddy_http_response_t */
};

/* Limits the decoder and aggregator apply unless told otherwise. */
#define EDDY_HTTP_MAX_INITIAL_LINE 4096
#define EDDY_HTTP_MAX_HEADER_SIZE 8192
#define EDDY_HTTP_MAX_HEADER_COUNT 100
#define EDDY_HTTP_MAX_CHUNK_SIZE 8192
#define EDDY_HTTP_MAX_CONTENT_LENGTH ((size_t)1 << 20)

typedef enum {
    EDDY_HTTP_OTHER = 0, /* a method not listed: see method_name */
    EDDY_HTTP_GET,
    EDDY_HTTP_HEAD,
    EDDY_HTTP_POST,
    EDDY_HTTP_PUT,
    EDDY_HTTP_DELETE,
    EDDY_HTTP_OPTIONS,
    EDDY_HTTP_PATCH,
    EDDY_HTTP_CONNECT,
    EDDY_HTTP_TRACE
} eddy_http_method_t;

/* A string in a message's bytes: len bytes at p, not NUL-terminated. */
typedef struct eddy_http_str_s {
    const char *p;
    size_t len;
} eddy_http_str_t;

typedef struct eddy_http_header_s {
    eddy_http_str_t name;  /* as sent; compare without case (eddy_http_str_eq_nocase) */
    eddy_http_str_t value; /* without surrounding blanks */
} eddy_http_header_t;

/* A request head, with its body when it is a full request. Filled by the decoder; read it. */
typedef struct eddy_http_request_s {
    eddy_msg_t _msg; /* EDDY_MSG_HTTP_REQUEST or EDDY_MSG_HTTP_FULL_REQUEST */
    int error;       /* 0, or the status to answer a rejected request with */
    eddy_http_method_t method;
    eddy_http_str_t method_name;
    eddy_http_str_t target; /* the request target as sent ("/", "/a?b=c", "*"...) */
    int version;            /* 10 or 11 (HTTP/1.x with x > 1 counts as 11) */
    bool keep_alive;        /* the connection stays open after the response */
    bool chunked;           /* the body came chunked */
    bool expect_continue;   /* "Expect: 100-continue" (HTTP/1.1) */
    int64_t content_length; /* from Content-Length; -1 when absent */
    eddy_buf_t *body;       /* full requests: the body, NULL when empty; owned */
    size_t header_count;
    eddy_http_header_t *headers; /* header_count entries, in the order sent */
    eddy_buf_t *_head;           /* the bytes the strings point into */
} eddy_http_request_t;

/* A piece of a body. */
typedef struct eddy_http_content_s {
    eddy_msg_t _msg;  /* EDDY_MSG_HTTP_CONTENT */
    eddy_buf_t *data; /* the bytes (may be NULL when empty); owned */
    bool last;        /* the body ends with this piece (trailers are not kept) */
} eddy_http_content_t;

/* A response for the encoder: build with eddy_http_response_new() and the setters below. */
typedef struct eddy_http_response_s {
    eddy_msg_t _msg;      /* EDDY_MSG_HTTP_RESPONSE */
    int status;           /* 100 to 999 */
    int version;          /* 10 or 11: the status line's version (11 by default) */
    bool keep_alive;      /* true by default; false writes "Connection: close", and a 1.0
                             response that stays open gets "Connection: keep-alive" */
    bool chunked;         /* the body follows as content messages; body unused. For 1.0:
                             no chunks, the close ends the body (keep_alive forced off) */
    bool head_only;       /* answer to HEAD: Content-Length of body, but not the body */
    eddy_buf_t *body;     /* owned; NULL: empty */
    eddy_buf_t *_headers; /* rendered "Name: value\r\n" lines */
} eddy_http_response_t;

typedef struct eddy_http_decoder_options_s {
    size_t max_initial_line; /* longest request line (0: EDDY_HTTP_MAX_INITIAL_LINE): 414 */
    size_t max_header_size;  /* header section, or trailer section (0: ..._HEADER_SIZE): 431 */
    size_t max_header_count; /* headers (0: EDDY_HTTP_MAX_HEADER_COUNT): 431 */
    size_t max_chunk_size;   /* largest content piece emitted (0: EDDY_HTTP_MAX_CHUNK_SIZE) */
} eddy_http_decoder_options_t;

/* ---------------------------------------------------------------------------------------
 * Messages
 */

/** The request behind a message of type EDDY_MSG_HTTP_REQUEST or _FULL_REQUEST, else NULL.
 * Borrows. */
EDDY_EXTERN eddy_http_request_t *eddy_http_request_of(eddy_msg_t *msg);
/** The content behind a message of type EDDY_MSG_HTTP_CONTENT, else NULL. Borrows. */
EDDY_EXTERN eddy_http_content_t *eddy_http_content_of(eddy_msg_t *msg);
/** The response behind a message of type EDDY_MSG_HTTP_RESPONSE, else NULL. Borrows. */
EDDY_EXTERN eddy_http_response_t *eddy_http_response_of(eddy_msg_t *msg);

/** The first header called name (any case) among req's, or NULL. Borrows. */
EDDY_EXTERN const eddy_http_header_t *eddy_http_request_header(const eddy_http_request_t *req,
                                                               const char *name);
/** Whether s equals the NUL-terminated lit, ignoring ASCII case. */
EDDY_EXTERN bool eddy_http_str_eq_nocase(eddy_http_str_t s, const char *lit);
/** Whether s equals the NUL-terminated lit exactly. */
EDDY_EXTERN bool eddy_http_str_eq(eddy_http_str_t s, const char *lit);

/** A content message holding data (taken over; NULL: empty). NULL when out of memory (data
 * released). The caller owns the one reference. */
EDDY_EXTERN eddy_http_content_t *eddy_http_content_new(eddy_buf_t *data, bool last);

/** A response with status (100-999), HTTP/1.1, keep-alive, no headers, no body. The caller
 * owns the one reference; pass it on with eddy_http_response_msg(). NULL: bad status or out
 * of memory. */
EDDY_EXTERN eddy_http_response_t *eddy_http_response_new(int status);
/** Add the header name: value (both copied). 0, EDDY_EINVAL (a name that is not a token, a
 * value with CR, LF or NUL, or Content-Length, Transfer-Encoding or Connection, which the
 * encoder writes itself), EDDY_ENOMEM. */
EDDY_EXTERN int eddy_http_response_add_header(eddy_http_response_t *r, const char *name,
                                              const char *value);
/** Set the body to b (taken over; NULL: empty), releasing the one before. */
EDDY_EXTERN void eddy_http_response_set_body(eddy_http_response_t *r, eddy_buf_t *b);
/** The message header of r, to write it. Borrows. */
EDDY_EXTERN eddy_msg_t *eddy_http_response_msg(eddy_http_response_t *r);
/** Append r encoded (status line, headers, body) to out. Borrows r. 0 or EDDY_ENOMEM,
 * EDDY_ECAPACITY (out cannot grow enough; out then holds a partial response). Written so, a
 * response that does not keep alive (eddy_http_response_keeps_alive()) is the caller's to
 * close after: the encoder handler closes by itself. */
EDDY_EXTERN int eddy_http_response_encode(const eddy_http_response_t *r, eddy_buf_t *out);
/** Whether the connection stays open after r as it is encoded: keep_alive, unless r is a
 * chunked 1.0 response with a body, which only the close can end. Borrows r. */
EDDY_EXTERN bool eddy_http_response_keeps_alive(const eddy_http_response_t *r);
/** The reason phrase of status, for every code in the IANA HTTP Status Code Registry under
 * RFC 9110's names ("Not Found", "Content Too Large", "Upgrade Required"; 418 is "I'm a
 * teapot"), or "Unknown" for a code it does not list. A static string; any thread. */
EDDY_EXTERN const char *eddy_http_reason(int status);

/* The length of eddy_http_date()'s text: "Sun, 06 Nov 1994 08:49:37 GMT". */
#define EDDY_HTTP_DATE_LEN 29

/**
 * Now as a Date header's value (an IMF-fixdate, RFC 9110 section 5.6.7, English whatever the
 * locale: "Sun, 06 Nov 1994 08:49:37 GMT", EDDY_HTTP_DATE_LEN characters and a NUL), cached
 * per loop as nginx's ngx_cached_http_time: formatted by the first call on loop and again once
 * the loop's clock (eddy_loop_now_ns()) reaches the wall clock's next second, so at most once
 * a second however many responses ask; in between, one clock read. On an embedded channel's
 * loop the virtual clock decides when the text is renewed (eddy_embedded_advance_time()), the
 * wall clock what it says. The text is the loop's, renewed in place: valid until the next call
 * on that loop, and the same pointer each time (compare the text to see a change). The loop's
 * thread only (for an embedded channel, the thread driving it). Never NULL.
 */
EDDY_EXTERN const char *eddy_http_date(eddy_loop_t *loop);

/* ---------------------------------------------------------------------------------------
 * Handlers
 */

/**
 * A request decoder (o borrowed; NULL: the defaults), for eddy_pipeline_add_*() with
 * eddy_http_request_decoder_ops() and eddy_free_state. Pipelined requests are all decoded
 * from one read, in order. NULL when out of memory.
 */
EDDY_EXTERN eddy_decoder_t *eddy_http_request_decoder_new(const eddy_http_decoder_options_t *o);
/** The handler table for request decoders. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_http_request_decoder_ops(void);
/** The request decoder as one value (pipeline.h, eddy_handler_t): ops and state. */
EDDY_EXTERN eddy_handler_t eddy_http_request_decoder(const eddy_http_decoder_options_t *o);

/**
 * State for eddy_http_aggregator_ops(), after a request decoder: heads and their content
 * become full requests with bodies of at most max_content_length bytes (0:
 * EDDY_HTTP_MAX_CONTENT_LENGTH). A longer body makes the request a rejected one (error 413),
 * its content discarded. A request with "Expect: 100-continue" within the limit gets
 * "100 Continue" written and flushed at once. Freed with eddy_free_state; NULL: out of memory.
 */
EDDY_EXTERN void *eddy_http_aggregator_new(size_t max_content_length);
/** The handler table for aggregators. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_http_aggregator_ops(void);
/** The aggregator as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_http_aggregator(size_t max_content_length);

/** State for eddy_http_response_encoder_ops(): writes responses and content as bytes, and
 * closes the channel after a response that does not keep alive, once it has been written (the
 * caller's flush sends it). Freed with eddy_free_state; NULL: out of memory. */
EDDY_EXTERN eddy_encoder_t *eddy_http_response_encoder_new(void);
/** The handler table for response encoders. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_http_response_encoder_ops(void);
/** The response encoder as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_http_response_encoder(void);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_HTTP_H */
