/*
 * What the HTTP codec's files share (not API).
 */
#ifndef EDDY_PIPELINE_CODEC_HTTP_INTERNAL_H
#define EDDY_PIPELINE_CODEC_HTTP_INTERNAL_H

#include <eddy/http.h>
#include <eddy/http_client.h>

#include "shared.h"

#include <sys/types.h>


/* The first of the n headers at h called name (any case), or NULL. */
const eddy_http_header_t *eddy__http_header_find(const eddy_http_header_t *h, size_t n,
                                                 const char *name);

/* Append the bytes of c (borrowed; a last piece that is the whole body is taken from it
 * uncopied) to *body, a body of at most max bytes; the first piece allocates it from a,
 * sized for announced bytes when that is known (> 0): what both aggregators do. 0,
 * EDDY_ETOOLONGFRAME (nothing appended), EDDY_ENOMEM. */
int eddy__http_body_append(eddy_allocator_t *a, eddy_buf_t **body, eddy_http_content_t *c,
                           int64_t announced, size_t max);

/* s without leading and trailing spaces and tabs. */
eddy_http_str_t eddy__http_trim(eddy_http_str_t s);

/* t (seconds since the epoch) as an IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT", into out
 * (EDDY_HTTP_DATE_LEN bytes and a NUL). */
void eddy__http_date_format(int64_t t, char *out);

/* ---------------------------------------------------------------------------------------
 * Parsing, for the request decoder and the client's response decoder (parse.c). Errors are
 * EDDY_EDECODE (malformed) and EDDY_ETOOLONGFRAME (past a limit); each decoder reports them
 * its own way.
 */

/* The limits a decoder applies, 0 replaced by the defaults. */
typedef struct eddy__http_limits_s {
    size_t max_line;         /* the first line, and a chunk-size line */
    size_t max_header_size;  /* a header or trailer section */
    size_t max_header_count; /* header lines */
    size_t max_chunk;        /* the largest content piece emitted */
} eddy__http_limits_t;

/* l from options (0: the default). */
void eddy__http_limits_init(eddy__http_limits_t *l, size_t max_line, size_t max_header_size,
                            size_t max_header_count, size_t max_chunk);


/* What the header lines of a head say about framing and the connection. */
typedef struct eddy__http_head_info_s {
    int hosts;              /* Host header lines */
    bool has_length;        /* Content-Length came (all its values equal) */
    int64_t content_length; /* ... and said this */
    bool has_te;            /* Transfer-Encoding came */
    int te_chunked;         /* how many of its codings were chunked */
    bool te_chunked_last;   /* chunked was the final coding */
    bool te_other;          /* a coding other than chunked was listed */
    bool conn_close;        /* Connection: close */
    bool conn_keep_alive;   /* Connection: keep-alive */
    bool expect_continue;   /* Expect: 100-continue */
} eddy__http_head_info_t;

/*
 * The length of a section ending with a blank line ("\n\n" or "\n\r\n") in the n bytes at p,
 * given that an LF sits at index from (or, from == SIZE_MAX, just before p: an empty section
 * is possible). Resumes at *scan; returns 0 when the blank line has not arrived yet, *scan
 * saved.
 */
size_t eddy__http_find_blank_line(const uint8_t *p, size_t n, size_t from, size_t *scan);
/* Where the search for a head's end is, between reads. */
typedef struct eddy__http_head_scan_s {
    size_t scan;  /* bytes searched already: for the first line's LF, then for the blank line */
    size_t line1; /* the first line's length with its LF, once known */
} eddy__http_head_scan_t;

enum {
    EDDY__HTTP_LINE_TOO_LONG = -1, /* the first line passed max_line */
    EDDY__HTTP_HEAD_TOO_LONG = -2  /* the header section passed max_header_size */
};

/* The length of the head at p (avail bytes from its first line on: empty lines skipped
 * already) once its blank line is there, *line1 then its first line's length with its LF and
 * hs reset for the next head; 0 while it is not (hs keeps where the search stopped, so a head
 * trickling in costs O(n)); or EDDY__HTTP_LINE_TOO_LONG, EDDY__HTTP_HEAD_TOO_LONG as soon as
 * more bytes than the limits allow are waiting. */
ssize_t eddy__http_head_find(eddy__http_head_scan_t *hs, const eddy__http_limits_t *l,
                             const uint8_t *p, size_t avail, size_t *line1);
/* eddy__http_head_find() on the readable bytes of in, the empty lines before the head skipped
 * first (RFC 9112 section 2.2): what it returns, or EDDY_ENOMEM (distinct from its own
 * negative values). */
ssize_t eddy__http_head_next(eddy__http_head_scan_t *hs, const eddy__http_limits_t *l,
                             eddy_cumulation_t *in, size_t *line1);
/* How many of the n bytes at p are CR and LF: the empty lines before a message, which are
 * skipped (RFC 9112 section 2.2). */
size_t eddy__http_empty_lines(const uint8_t *p, size_t n);
/* The header lines of the head of n bytes at p whose first line takes line1 bytes with its
 * LF: [*begin, *end), each ending in an LF, the blank line left out. Returns their count. */
size_t eddy__http_header_lines(const uint8_t *p, size_t n, size_t line1, const uint8_t **begin,
                               const uint8_t **end);
/* Whether the n bytes at p are an RFC 9110 token (methods, header names); false when empty. */
bool eddy__http_is_token(const void *p, size_t n);
/* The line [p, lf) without its line ending: LF or CRLF; any other CR is an error (-1). */
ssize_t eddy__http_line_length(const uint8_t *p, const uint8_t *lf);
/* Whether every byte of a header value is allowed: no controls but HTAB (RFC 9110 5.5). */
bool eddy__http_value_ok(const uint8_t *p, size_t n);
/* The LFs in [p, end). */
size_t eddy__http_count_lines(const uint8_t *p, const uint8_t *end);
/* Whether a message of version with these headers leaves the connection open: 1.1 unless
 * "Connection: close", 1.0 only with "Connection: keep-alive" (RFC 9112 section 9.3). */
bool eddy__http_keep_alive(int version, const eddy__http_head_info_t *h);

/* A head taken from the input into a message, its header lines parsed. */
typedef struct eddy__http_head_s {
    eddy_msg_t *msg;             /* the request or response, holding the head's bytes */
    eddy_http_str_t line;        /* its start line without the line ending; p NULL: a bare CR */
    eddy__http_head_info_t info; /* what its header lines say */
} eddy__http_head_t;

/*
 * Take the head of n bytes at the front of in (line1 of them the start line with its LF) into
 * a new request (response false) or response with a slot for each header line, and parse
 * those lines: what the request decoder and the client's response decoder share, their
 * start lines aside. 0; EDDY_EDECODE (a malformed header line: h->msg made all the same, for
 * the caller to judge the start line first); EDDY_ETOOLONGFRAME (more header lines than
 * max_count; no message), EDDY_ENOMEM (no message).
 */
int eddy__http_head_decode(eddy_cumulation_t *in, size_t n, size_t line1, size_t max_count,
                           bool response, eddy__http_head_t *h);

/* Parse the header lines [p, end) (each ending in LF, the blank line excluded) into
 * headers[*count...] (room for each line), counting them in *count, and what they say into
 * h (zeroed by the caller): 0 or EDDY_EDECODE (a malformed line, conflicting lengths). */
int eddy__http_parse_headers(const uint8_t *p, const uint8_t *end, eddy_http_header_t *headers,
                             size_t *count, eddy__http_head_info_t *h);

/* How a body is framed, and where its decoding is. */
enum {
    EDDY__HTTP_BODY_NONE = 0,   /* no body under way */
    EDDY__HTTP_BODY_LENGTH,     /* Content-Length bytes to pass on */
    EDDY__HTTP_BODY_CHUNK_SIZE, /* a chunk-size line */
    EDDY__HTTP_BODY_CHUNK_DATA, /* chunk bytes to pass on */
    EDDY__HTTP_BODY_CHUNK_END,  /* the CRLF after a chunk's data */
    EDDY__HTTP_BODY_TRAILERS,   /* the trailer section after the last chunk */
    EDDY__HTTP_BODY_UNTIL_CLOSE /* every byte until the connection closes (responses) */
};

typedef struct eddy__http_body_s {
    int state;          /* EDDY__HTTP_BODY_* */
    uint64_t remaining; /* LENGTH, CHUNK_DATA: bytes still to come */
    size_t scan;        /* TRAILERS: bytes already searched for the blank line */
} eddy__http_body_t;

/* Begin a body in state (LENGTH with length bytes > 0, CHUNK_SIZE, UNTIL_CLOSE). */
void eddy__http_body_start(eddy__http_body_t *b, int state, uint64_t length);
/* Decode the readable body bytes of in into content messages, the last one with last set
 * (then b->state is NONE; the bytes after it are left). 0 (also when it needs more bytes),
 * EDDY_EDECODE (bad chunk framing, or a chunk-size line past max_line), EDDY_ETOOLONGFRAME
 * (trailers past max_header_size), EDDY_ENOMEM. */
int eddy__http_body_decode(eddy__http_body_t *b, const eddy__http_limits_t *l,
                           eddy_cumulation_t *in, eddy_decoder_out_t *out);
/* The input ended: a body until the close is complete (the rest of in and its last content
 * emitted), one of another kind was cut short (EDDY_EOF); 0 when none was under way. */
int eddy__http_body_finish(eddy__http_body_t *b, const eddy__http_limits_t *l,
                           eddy_cumulation_t *in, eddy_decoder_out_t *out);

/* ---------------------------------------------------------------------------------------
 * The client (fifo.c, client_codec.c, aggregator.c, exchange.c; its requests in message.c)
 */

/* A FIFO of entries of one size in a ring that doubles when full: the requests a client has
 * written and not seen answered (the codec's methods, the exchange's promises). Zeroed, it
 * is empty; eddy__http_fifo_destroy() frees its memory. */
typedef struct eddy__http_fifo_s {
    uint8_t *v;
    size_t size; /* of an entry */
    size_t cap, first, count;
} eddy__http_fifo_t;

/* Append the entry at e (size bytes, copied): 0 or EDDY_ENOMEM. */
int eddy__http_fifo_push(eddy__http_fifo_t *f, const void *e);
/* The i-th entry from the oldest (i < count). */
void *eddy__http_fifo_at(const eddy__http_fifo_t *f, size_t i);
/* Drop the oldest entry (count > 0), or the newest. */
void eddy__http_fifo_pop(eddy__http_fifo_t *f);
void eddy__http_fifo_pop_newest(eddy__http_fifo_t *f);
/* Drop the i-th entry from the oldest (i < count), those after it moving up: HTTP/2 answers
 * out of order (the compressor's notes). */
void eddy__http_fifo_remove(eddy__http_fifo_t *f, size_t i);
void eddy__http_fifo_destroy(eddy__http_fifo_t *f);

/* The body bytes r's encoding carries: 0 for a chunked request (its content follows). */
size_t eddy__http_client_request_body_len(const eddy_http_request_t *r);
/* Whether r goes with "Expect: 100-continue": asked for, and with content to hold back. */
bool eddy__http_client_request_expects(const eddy_http_request_t *r);
/* Room enough for r's head as eddy__http_client_request_encode_head() writes it. */
size_t eddy__http_client_request_head_size(const eddy_http_request_t *r);
/* Append r's request line, headers, framing lines and blank line to out (no body): 0 or
 * EDDY_ENOMEM, EDDY_ECAPACITY. */
int eddy__http_client_request_encode_head(const eddy_http_request_t *r, eddy_buf_t *out);
/* Add name: value to msg, a built request or response, as eddy_http_request_add_header() and
 * eddy_http_response_add_header() do, but let the framing headers through too: for an
 * upgrade's "Connection: Upgrade" (the WebSocket handshakes, codec/ws/handshake.c), whose
 * framing the caller answers for. 0, EDDY_EINVAL (not a built message, a name that is not a
 * token, a value with CR or LF), EDDY_ENOMEM (msg unchanged). */
int eddy__http_add_field(eddy_msg_t *msg, const char *name, const char *value);
/* Remove every header called name (any case) from msg, a request or a response: a built
 * one loses the lines from its head too, a decoded one only the slots (its bytes stay). The
 * number removed, or EDDY_EINVAL (not a request or response). (The content coding handlers
 * drop Content-Encoding and rewrite ETag with it.) */
int eddy__http_remove_field(eddy_msg_t *msg, const char *name);
/* Point r at its server: target replaces its request target, and a Host header of authority
 * goes first unless r has one. 0, EDDY_EINVAL (a target as eddy_http_request_new()
 * refuses it, or a decoded request), EDDY_ENOMEM (r unchanged). (eddy_http_client_t,
 * codec/http/client.c) */
int eddy__http_client_request_route(eddy_http_request_t *r, const char *target,
                                    const char *authority);

#endif /* EDDY_PIPELINE_CODEC_HTTP_INTERNAL_H */
