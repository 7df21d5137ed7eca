/*
 * eddy HTTP content codings (RFC 9110 section 8.4): a compressor for responses and a
 * decompressor for bodies that arrive compressed (Netty's HttpContentCompressor and
 * HttpContentDecompressor), gzip and deflate through zlib, br through libbrotli, zstd through
 * libzstd: each where the build has its library (eddy_http_coding_available()).
 *
 * The compressor sits between the response encoder and the application, on HTTP/1.1 and, left
 * in place when eddy_h2_server_upgrade() swaps HTTP/1.1's handlers for HTTP/2's, between the
 * HTTP/2 adapter and the application:
 *
 *     EDDY_PIPELINE_ADD_LAST(p, eddy_h2_server_upgrade(NULL, 0),
 *                            eddy_http_request_decoder(NULL), eddy_http_aggregator(0),
 *                            eddy_http_response_encoder(), eddy_http_compressor(NULL), app);
 *
 * It reads each request's Accept-Encoding on its way in and rewrites the response that answers
 * it on its way out: matched by stream_id over HTTP/2 (0: the oldest request not answered, the
 * adapter's own rule), in order over HTTP/1.1. The application must answer with response
 * objects (eddy_http_response_t, and content after a chunked one): bytes written pre-encoded
 * pass untouched and answer nothing, so the requests they answer would take the next
 * responses' codings. Every callback runs on the channel's loop.
 */
#ifndef EDDY_HTTP_CODING_H
#define EDDY_HTTP_CODING_H

#include <eddy/common.h>
#include <eddy/http.h>
#include <eddy/pipeline.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The smallest whole body the compressor compresses by default. */
#define EDDY_HTTP_COMPRESS_MIN_LENGTH 1024

typedef struct eddy_http_compressor_options_s {
    /* The codings to offer, most preferred first, comma-separated ("gzip", "br, gzip"); the
     * client's q-values choose, this order breaks their ties. NULL: every coding this build
     * has, in the order "br, zstd, gzip, deflate". */
    const char *codings;
    size_t min_length; /* whole bodies shorter pass untouched (0: 1024) */
    int gzip_level;    /* gzip and deflate, 1-9 (0: 6, as nginx's gzip_comp_level) */
    int br_quality;    /* br, 1-11 (0: 5) */
    int zstd_level;    /* zstd, 1-19 (0: 3) */
} eddy_http_compressor_options_t;

/**
 * The compressor handler (o borrowed; NULL: the defaults). For each response it answers:
 *
 *   - it chooses the coding the request's Accept-Encoding gives the highest q-value among
 *     those offered (q=0 refuses one, "*" stands for those not named, "x-gzip" is gzip; ties
 *     go to the order of o->codings); none acceptable, no Accept-Encoding, or a HEAD request:
 *     the response goes as it is ("identity;q=0" is not answered 406: the body goes
 *     uncompressed, as nginx and Netty send it);
 *   - it leaves alone 1xx, 204, 206, 304, HEAD answers (head_only), a response with a
 *     Content-Encoding of its own or "Cache-Control: no-transform", types that are compressed
 *     already (image/ but image/svg+xml, audio/, video/, font/woff*, and application/ zip,
 *     gzip, x-gzip, zstd, x-bzip2, x-xz, x-7z-compressed, x-rar-compressed; other types,
 *     application/octet-stream among them, are compressed) and whole bodies under min_length;
 *   - for the others it adds "Vary: Accept-Encoding" (unless a Vary names it or "*"), whatever
 *     the client accepted, and when it compresses, "Content-Encoding" and a weak ETag
 *     ("W/" before a strong one);
 *   - a whole body is compressed at once (the encoder then writes the compressed length as
 *     Content-Length); a chunked response's content is compressed piece by piece as it comes,
 *     each piece flushed (Z_SYNC_FLUSH, BROTLI_OPERATION_FLUSH, ZSTD_e_flush) so the client
 *     can read what was sent so far, the last piece ending the stream: a body is never held
 *     whole. Streamed bodies are compressed whatever their size;
 *   - a body of parts (file regions and buffers, eddy_http_response_add_body(): the file
 *     handler's answers) of min_length or more is compressed as it is read: its parts become
 *     one chunked input read 32 KiB at a time, pulled only while the peer takes more, and the
 *     response goes streamed (chunked on HTTP/1.1, no Content-Length, no Accept-Ranges). A
 *     file that shrinks meanwhile cuts the body (EDDY_ETRUNCATED raised, connection closed or
 *     HTTP/2 stream reset).
 *
 * A coding that cannot start (no memory) leaves a whole body uncompressed; one that fails in
 * the middle of a streamed body fails its write (eddy_ctx_fail_write: the connection closes
 * after what was written before). Fails (ops NULL) with EDDY_ENOTSUP when o->codings names a
 * coding this build lacks or does not know (one EDDY_LOG_ERROR naming it), EDDY_EINVAL for a
 * level out of range, EDDY_ENOMEM.
 */
EDDY_EXTERN eddy_handler_t eddy_http_compressor(const eddy_http_compressor_options_t *o);

/** Whether this build has the coding called name ("gzip", "deflate", "br", "zstd"; any case).
 * Any thread. */
EDDY_EXTERN bool eddy_http_coding_available(const char *name);
/** The codings this build has, most preferred first, as an Accept-Encoding value ("br, zstd,
 * gzip, deflate"; "" for none). A static string; any thread. */
EDDY_EXTERN const char *eddy_http_codings(void);

typedef struct eddy_http_decompressor_options_s {
    size_t max_length; /* the longest body once decompressed (0: EDDY_HTTP_MAX_CONTENT_LENGTH) */
} eddy_http_decompressor_options_t;

/**
 * The decompressor handler (o borrowed; NULL: the defaults), for inbound messages: responses
 * on a client (after the client codec, before or after its aggregator), requests on a server
 * (after the request decoder or the aggregator; before the aggregator, its limit counts the
 * decompressed bytes, after it the compressed ones). A message with a Content-Encoding this
 * build has loses the header (and Content-Length, which counted the compressed bytes) and
 * arrives with its body decompressed: a full message's at once, a head's content piece by
 * piece; content_length is -1 after a head, the new length for a full message. Other
 * messages pass untouched. At most max_length bytes come out per body. The channel's loop.
 *
 * Errors: a full request whose body is corrupt, cut short or past max_length arrives as a
 * rejected one (error 400 or 413, body dropped, keep_alive false: answer it and close, as
 * with the decoder's rejections). A full response's, and a streamed body's of either kind
 * (its head went on already), fire exception_caught (EDDY_EDECODE, EDDY_ETOOLONGFRAME; an
 * exchange fails its request with it), the rest of that body is dropped, and the channel
 * closes.
 */
EDDY_EXTERN eddy_handler_t eddy_http_decompressor(const eddy_http_decompressor_options_t *o);

/**
 * Decompress the body of the full response r in place: when r has a Content-Encoding this
 * build has, its body becomes the decompressed bytes, content_length their count, and the
 * header goes, with Content-Length. 0 (also when there was nothing to do), EDDY_EDECODE
 * (corrupt, cut short, or bytes after its end), EDDY_ETOOLONGFRAME (more than max bytes once
 * decompressed; 0: EDDY_HTTP_MAX_CONTENT_LENGTH), EDDY_ENOMEM; r is unchanged on error. A
 * coding this build lacks, or several codings, leave r as it is (0). Any thread that owns r.
 */
EDDY_EXTERN int eddy_http_response_decompress(eddy_http_response_t *r, size_t max);
/** eddy_http_response_decompress() for the body of a full request. */
EDDY_EXTERN int eddy_http_request_decompress(eddy_http_request_t *r, size_t max);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_HTTP_CODING_H */
