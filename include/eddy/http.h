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
 *
 * The same two structs serve the client (http_client.h): it builds an eddy_http_request_t
 * with eddy_http_request_new() and reads the eddy_http_response_t its codec decodes, as Netty
 * has one HttpRequest and one HttpResponse for both sides.
 */
#ifndef EDDY_HTTP_H
#define EDDY_HTTP_H

#include <eddy/buffer.h>
#include <eddy/codec.h>
#include <eddy/common.h>
#include <eddy/file.h>
#include <eddy/pipeline.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Message types, in eddy's own range below EDDY_MSG_USER. Two structs travel under them, one
 * request and one response, each inbound (decoded) and outbound (built) alike; the type says
 * which role a message plays. */
enum {
    EDDY_MSG_HTTP_REQUEST = 16,        /* eddy_http_request_t decoded, body to follow as content */
    EDDY_MSG_HTTP_FULL_REQUEST = 17,   /* eddy_http_request_t decoded, with its body */
    EDDY_MSG_HTTP_CONTENT = 18,        /* eddy_http_content_t */
    EDDY_MSG_HTTP_RESPONSE = 19,       /* eddy_http_response_t built, for the response encoder */
    EDDY_MSG_HTTP_CLIENT_REQUEST = 20, /* eddy_http_request_t built, for the client codec */
    EDDY_MSG_HTTP_RESPONSE_HEAD = 21,  /* eddy_http_response_t decoded, body to follow as content */
    EDDY_MSG_HTTP_FULL_RESPONSE = 22   /* eddy_http_response_t decoded, with its body */
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

/*
 * A request, as the request decoder fills it (a server reads it) or as eddy_http_request_new()
 * and the setters build it (a client writes it with the client codec, http_client.h). Read
 * either the same way: the strings point into _head, valid while the request is, not
 * NUL-terminated. A decoded request keeps the bytes it came in; a built one keeps its request
 * line and header lines as the encoder writes them, and its strings follow them as they grow.
 */
typedef struct eddy_http_request_s {
    eddy_msg_t _msg; /* decoded: EDDY_MSG_HTTP_REQUEST or _FULL_REQUEST; built: _CLIENT_REQUEST */
    int error;       /* decoded: 0, or the status to answer a rejected request with */
    eddy_http_method_t method; /* EDDY_HTTP_OTHER for a method not listed: see method_name */
    eddy_http_str_t method_name;
    eddy_http_str_t target; /* the request target as sent ("/", "/a?b=c", "*"...) */
    int version;            /* 10 or 11 (decoded: HTTP/1.x with x > 1 counts as 11), 20 for a
                               request that came over HTTP/2 (http2.h) */
    uint32_t stream_id;     /* HTTP/2: the stream it came on (http2.h); 0 for HTTP/1.x */
    bool keep_alive;        /* the connection stays open after the response; built: true by
                               default, false writes "Connection: close" */
    bool chunked;           /* decoded: the body came chunked; built: the body follows as
                               content messages, body unused */
    bool expect_continue;   /* "Expect: 100-continue" (HTTP/1.1); built: written when set
                               (eddy_http_request_expect()) */
    int64_t content_length; /* decoded: from Content-Length, -1 when absent; built: -1 (the
                               encoder writes the body's length) */
    eddy_buf_t *body;       /* full or built requests: the body, NULL when empty; owned */
    size_t header_count;
    eddy_http_header_t *headers; /* header_count entries, in the order sent or added */
    eddy_buf_t *_head;           /* the bytes the strings point into */
    size_t _header_cap;          /* built: the slots of headers, an array of its own */
} eddy_http_request_t;

/* A piece of a body. */
typedef struct eddy_http_content_s {
    eddy_msg_t _msg;  /* EDDY_MSG_HTTP_CONTENT */
    eddy_buf_t *data; /* the bytes (may be NULL when empty); owned */
    bool last;        /* the body ends with this piece (trailers are not kept) */
} eddy_http_content_t;

/*
 * A response, as eddy_http_response_new() and the setters build it (a server writes it with
 * the response encoder) or as the client codec fills it (a client reads it, http_client.h).
 * Read either the same way: the strings point into _head, valid while the response is, not
 * NUL-terminated. A built response keeps its header lines as the encoder writes them (the
 * status line comes from status and version when it is encoded).
 */
typedef struct eddy_http_response_s {
    eddy_msg_t _msg;        /* built: EDDY_MSG_HTTP_RESPONSE; decoded: EDDY_MSG_HTTP_RESPONSE_HEAD
                               or _FULL_RESPONSE */
    int status;             /* 100 to 999 */
    int version;            /* 10 or 11: the status line's version (built: 11 by default);
                               20: it came, or goes, over HTTP/2 (http2.h) */
    uint32_t stream_id;     /* HTTP/2: the stream it answers (built: 0 lets eddy_h2_http_adapter
                               pick the oldest request not yet answered) */
    bool keep_alive;        /* built: true by default; false writes "Connection: close", and a
                               1.0 response that stays open gets "Connection: keep-alive".
                               Decoded: the connection may carry another request after it */
    bool chunked;           /* built: the body follows as content messages; body unused. For
                               1.0: no chunks, the close ends the body (keep_alive forced off).
                               Decoded: the body came chunked */
    bool head_only;         /* built: answer to HEAD: Content-Length of body, but not the body */
    eddy_buf_t *body;       /* built or full responses: the body, NULL when empty; owned */
    eddy_http_str_t reason; /* decoded: the reason phrase as sent (may be empty); built:
                               eddy_http_reason() of the status it was made with */
    int64_t content_length; /* decoded: from Content-Length, -1 when absent; built: -1 */
    eddy_http_method_t request_method; /* decoded: the method of the request it answers */
    size_t header_count;
    eddy_http_header_t *headers; /* header_count entries, in the order sent or added */
    eddy_buf_t *_head;           /* the bytes the strings point into */
    size_t _header_cap;          /* built: the slots of headers, an array of its own */
    eddy_msg_t **_parts;         /* built: the body as parts (eddy_http_response_add_body()) */
    size_t _nparts, _parts_cap;
    uint64_t _parts_len; /* their bytes */
    bool _streamed;      /* its one part is a chunked input: its length is not known */
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

/** The request behind a message of type EDDY_MSG_HTTP_REQUEST, _FULL_REQUEST or
 * _CLIENT_REQUEST, else NULL. Borrows. */
EDDY_EXTERN eddy_http_request_t *eddy_http_request_of(eddy_msg_t *msg);
/** The content behind a message of type EDDY_MSG_HTTP_CONTENT, else NULL. Borrows. */
EDDY_EXTERN eddy_http_content_t *eddy_http_content_of(eddy_msg_t *msg);
/** The response behind a message of type EDDY_MSG_HTTP_RESPONSE, _RESPONSE_HEAD or
 * _FULL_RESPONSE, else NULL. Borrows. */
EDDY_EXTERN eddy_http_response_t *eddy_http_response_of(eddy_msg_t *msg);

/** The first header called name (any case) among req's, or NULL. Borrows. */
EDDY_EXTERN const eddy_http_header_t *eddy_http_request_header(const eddy_http_request_t *req,
                                                               const char *name);
/** The first header called name (any case) among r's, or NULL. Borrows. */
EDDY_EXTERN const eddy_http_header_t *eddy_http_response_header(const eddy_http_response_t *r,
                                                                const char *name);
/** Whether s equals the NUL-terminated lit, ignoring ASCII case. */
EDDY_EXTERN bool eddy_http_str_eq_nocase(eddy_http_str_t s, const char *lit);
/** Whether s equals the NUL-terminated lit exactly. */
EDDY_EXTERN bool eddy_http_str_eq(eddy_http_str_t s, const char *lit);

/** A content message holding data (taken over; NULL: empty). NULL when out of memory (data
 * released). The caller owns the one reference. */
EDDY_EXTERN eddy_http_content_t *eddy_http_content_new(eddy_buf_t *data, bool last);

/*
 * Building a request, for the client codec (http_client.h). The setters take requests made
 * with eddy_http_request_new(), not decoded ones (EDDY_EINVAL, or nothing done). A request is
 * built on one thread at a time; once written it is the pipeline's.
 */

/**
 * A request (type EDDY_MSG_HTTP_CLIENT_REQUEST): method (a token: "GET", "POST",
 * "PROPFIND"...) for target (the request target as it goes on the request line: "/",
 * "/a?b=c", "*", or an absolute URL for a proxy), both copied; HTTP/1.1, keep-alive, no
 * headers, no body. The caller owns the one reference; pass it on with
 * eddy_http_request_msg() or eddy_http_send(). NULL: a method that is not a token, a target
 * with a blank, CR, LF or NUL, or out of memory.
 */
EDDY_EXTERN eddy_http_request_t *eddy_http_request_new(const char *method, const char *target);
/** Add name: value (both copied) to a built request. 0, EDDY_EINVAL (a decoded request, a
 * name that is not a token, a value with CR, LF or NUL, or Content-Length,
 * Transfer-Encoding, Connection or Expect, which the encoder writes itself from the fields),
 * EDDY_ENOMEM (r unchanged). Host is the caller's to add (eddy_http_client_t adds it). */
EDDY_EXTERN int eddy_http_request_add_header(eddy_http_request_t *r, const char *name,
                                             const char *value);
/** Set the body of r to b (taken over; NULL: empty), releasing the one before. */
EDDY_EXTERN void eddy_http_request_set_body(eddy_http_request_t *r, eddy_buf_t *b);
/** Send "Expect: 100-continue" and hold the body back until the server answers 100 (the body
 * then goes) or a final status (the body never goes; with keep-alive the connection is closed
 * after the response, as RFC 9110 section 10.1.1 allows, since the server may wait for it). */
EDDY_EXTERN void eddy_http_request_expect(eddy_http_request_t *r, bool on);
/** The message header of r, to write it. Borrows. */
EDDY_EXTERN eddy_msg_t *eddy_http_request_msg(eddy_http_request_t *r);
/** Append the built request r encoded (request line, headers, body) to out. Borrows r. 0,
 * EDDY_EINVAL (a decoded request), EDDY_ENOMEM or EDDY_ECAPACITY (out then holds a partial
 * request). */
EDDY_EXTERN int eddy_http_request_encode(const eddy_http_request_t *r, eddy_buf_t *out);

/*
 * Building a response, for the response encoder. The setters take responses made with
 * eddy_http_response_new(), not decoded ones, as the request's do.
 */

/** A response (type EDDY_MSG_HTTP_RESPONSE) with status (100-999), HTTP/1.1, keep-alive, no
 * headers, no body. The caller owns the one reference; pass it on with
 * eddy_http_response_msg(). NULL: bad status or out of memory. */
EDDY_EXTERN eddy_http_response_t *eddy_http_response_new(int status);
/** Add the header name: value (both copied) to a built response. 0, EDDY_EINVAL (a decoded
 * response, a name that is not a token, a value with CR, LF or NUL, or Content-Length,
 * Transfer-Encoding or Connection, which the encoder writes itself), EDDY_ENOMEM (r
 * unchanged). */
EDDY_EXTERN int eddy_http_response_add_header(eddy_http_response_t *r, const char *name,
                                              const char *value);
/** Set the body of r to b (taken over; NULL: empty), releasing the one before. */
EDDY_EXTERN void eddy_http_response_set_body(eddy_http_response_t *r, eddy_buf_t *b);
/**
 * Append msg, a byte buffer or a file region (file.h), to the body of the built response r,
 * instead of a body buffer: the body is then its parts in order, written after the head as
 * they are (a file region reaches the socket through sendfile where the transport can, or as
 * DATA frames read from the file over HTTP/2), and Content-Length is the sum of their
 * lengths. A HEAD answer (head_only) writes the length and drops the parts (those added
 * after head_only was set, at once: a HEAD answer queued behind others holds no file). The response
 * encoder handler writes the parts; eddy_http_response_encode() writes the head alone (the
 * parts are then the caller's to write after it).
 *
 * msg may instead be a chunked input (handler.h: a generator, a file read and transformed),
 * as the body's only part: the body is then what it reads, of a length not known up front,
 * pulled a chunk at a time only while the connection (HTTP/1.1) or the stream (HTTP/2) takes
 * more, so a slow reader costs a chunk, not the body. It goes as chunks on HTTP/1.1
 * (Transfer-Encoding: chunked; to a 1.0 client as it is, the close ending it), as DATA frames
 * on HTTP/2; the response's promise completes after its last byte, or fails with the input's
 * read error (the connection, or the HTTP/2 stream, is then cut: the body has a hole). The
 * HTTP compressor answers a compressible file this way (http_coding.h).
 *
 * Takes ownership of msg, also on failure. 0, EDDY_EINVAL (a decoded or chunked response, one
 * with a body buffer, a message of another type, a chunked input beside another part),
 * EDDY_ENOMEM. The thread building r.
 */
EDDY_EXTERN int eddy_http_response_add_body(eddy_http_response_t *r, eddy_msg_t *msg);
/** The length of r's body as it is encoded: its body buffer's bytes, or its parts' sum. */
EDDY_EXTERN uint64_t eddy_http_response_body_length(const eddy_http_response_t *r);
/** The message header of r, to write it. Borrows. */
EDDY_EXTERN eddy_msg_t *eddy_http_response_msg(eddy_http_response_t *r);
/** Append the built response r encoded (status line, headers, body) to out. Borrows r. 0,
 * EDDY_EINVAL (a decoded response), EDDY_ENOMEM, EDDY_ECAPACITY (out cannot grow enough; out
 * then holds a partial response). Written so, a response that does not keep alive
 * (eddy_http_response_keeps_alive()) is the caller's to close after: the encoder handler
 * closes by itself. */
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

/* ---------------------------------------------------------------------------------------
 * Static files (docs/http.md, "Files"): a handler placed where the application's request
 * handler goes, after the aggregator (or after eddy_h2_http_adapter() for HTTP/2), that
 * answers every full request from a directory: GET and HEAD (405 for the rest, with Allow);
 * Content-Type from the extension; ETag and Last-Modified, with If-None-Match,
 * If-Modified-Since and If-Range; Range (one range: 206 and Content-Range; several:
 * multipart/byteranges; none satisfiable: 416 with the unsatisfied-range form of Content-Range,
 * RFC 9110 section 14.4); the index
 * file for a directory, and 301 to "/dir/" for "/dir"; a ".br" or ".gz" sibling when the
 * request's Accept-Encoding allows it (Content-Encoding; only accepted codings are looked for,
 * and every file answer says "Vary: Accept-Encoding" unless no_precompressed). The body is
 * a file region (file.h): sendfile on a plain socket.
 *
 * Nothing outside the root is ever served: the path is percent-decoded once, and a decoded
 * NUL, backslash, "." or ".." segment is 403 (an encoded slash splits segments as a slash
 * does, so "%2e%2e%2f" is ".." and refused); the rest is opened beneath the root's
 * descriptor in one openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) (Linux 5.6; elsewhere each
 * segment with openat(O_NOFOLLOW) beneath the one before), so no symbolic link is followed,
 * inside the root or out (404); a path past PATH_MAX or a segment past NAME_MAX is 404.
 */
typedef struct eddy_http_files_s eddy_http_files_t;

typedef struct eddy_http_files_options_s {
    const char *index;     /* what a directory serves (NULL: "index.html") */
    bool no_precompressed; /* never look for ".br" and ".gz" siblings */
} eddy_http_files_options_t;

/**
 * Serve the directory root (opened now; o borrowed, NULL: the defaults) with a count of 1 in
 * *out, shared by the handlers of every channel and loop (immutable: any thread). 0, or a
 * negative errno from opening root (EDDY_ENOENT, EDDY_ENOTDIR...), EDDY_EINVAL, EDDY_ENOMEM.
 */
EDDY_EXTERN int eddy_http_files_new(const char *root, const eddy_http_files_options_t *o,
                                    eddy_http_files_t **out);
/** Take one more reference to f; returns f. Any thread. */
EDDY_EXTERN eddy_http_files_t *eddy_http_files_retain(eddy_http_files_t *f);
/** Drop one reference; the last closes the root. Any thread. */
EDDY_EXTERN void eddy_http_files_release(eddy_http_files_t *f);
/**
 * A handler for one channel serving f (which it retains), as one value (eddy_handler_t). It
 * answers full requests (others, and messages of other kinds, pass on), flushes at the end
 * of each read batch, and closes after an answer that does not keep alive (the encoder does,
 * for HTTP/1.1). Its constructor fails with EDDY_ENOMEM.
 */
EDDY_EXTERN eddy_handler_t eddy_http_files_handler(eddy_http_files_t *f);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_HTTP_H */
