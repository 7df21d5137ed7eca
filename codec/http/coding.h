/*
 * Content codings (RFC 9110 section 8.4.1) for the compressor and decompressor handlers
 * (include/eddy/http_coding.h): one ops table per coding, each in a file of its own built
 * when its library is (coding_zlib.c: gzip and deflate; coding_brotli.c: br; coding_zstd.c:
 * zstd), and two drivers that run any of them into a growing buffer (coding.c).
 */
#ifndef EDDY_CODEC_HTTP_CODING_H
#define EDDY_CODEC_HTTP_CODING_H

#include <eddy/buffer.h>
#include <eddy/http_coding.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What an encoder step is asked to do with the input it is given. */
typedef enum {
    EDDY__CODING_RUN = 0, /* take the input, emit what the coding has ready */
    EDDY__CODING_FLUSH,   /* ... and everything so far, decodable by the peer now */
    EDDY__CODING_FINISH   /* ... and end the stream */
} eddy__coding_mode_t;

/* The buffers of a step: in/in_n what is left to read, out/out_n the room left to write. */
typedef struct eddy__coding_io_s {
    const uint8_t *in;
    size_t in_n;
    uint8_t *out;
    size_t out_n;
} eddy__coding_io_t;

typedef struct eddy__coding_ops_s {
    const char *name; /* as Content-Encoding names it: "gzip", "deflate", "br", "zstd" */
    int default_level;
    int min_level, max_level;
    size_t level_option; /* where eddy_http_compressor_options_t holds its level (offsetof) */
    /* A compressor at level (within min..max); size: the whole input's length when it is
     * known (a body compressed at once: the window is sized for it, as nginx does), else 0.
     * NULL without memory. */
    void *(*enc_new)(int level, size_t size);
    /* Read and write what io allows: 1 once mode is done (every byte read, and with FLUSH or
     * FINISH every byte written), 0 when it wants more room, EDDY_ENOMEM or EDDY_EINVAL. */
    int (*enc_step)(void *s, eddy__coding_io_t *io, eddy__coding_mode_t mode);
    void (*enc_free)(void *s);
    /* A whole body compressed at once at level onto the end of out (growing it), faster
     * than a stream (libdeflate, where built): 0, EDDY_ENOMEM, EDDY_ECAPACITY. NULL: none,
     * the body goes through enc_new/enc_step. */
    int (*enc_whole)(int level, const uint8_t *in, size_t n, eddy_buf_t *out);
    /* A decompressor; NULL without memory. */
    void *(*dec_new)(void);
    /* Read and write what io allows: 1 once the stream ended, 0 when it wants more input or
     * more room, EDDY_EDECODE for a corrupt stream, EDDY_ENOMEM. */
    int (*dec_step)(void *s, eddy__coding_io_t *io);
    void (*dec_free)(void *s);
} eddy__coding_ops_t;

/* The tables each file defines, when built. */
extern const eddy__coding_ops_t eddy__coding_gzip, eddy__coding_deflate, eddy__coding_br,
    eddy__coding_zstd;

/* The codings this build has, in the default order of preference (br, zstd, gzip, deflate,
 * those built); *n their count. */
const eddy__coding_ops_t *const *eddy__codings(size_t *n);
/* The names of eddy__codings() as an Accept-Encoding value: "br, zstd, gzip, deflate". */
const char *eddy__codings_list(void);
/* The coding named by the n bytes at name (any case; "x-gzip" is gzip, RFC 9110 section
 * 8.4.1.3), or NULL when this build has none such. */
const eddy__coding_ops_t *eddy__coding_find(const char *name, size_t n);

/* Compress the n bytes at in with s (of ops) onto the end of out, growing it. 0,
 * EDDY_ENOMEM, EDDY_ECAPACITY, EDDY_EINVAL. */
int eddy__coding_encode(const eddy__coding_ops_t *ops, void *s, const uint8_t *in, size_t n,
                        eddy__coding_mode_t mode, eddy_buf_t *out);
/* Decompress the n bytes at in with s (of ops) onto the end of out, which may not pass max
 * readable bytes; *done set once the stream ended. 0, EDDY_EDECODE (corrupt, or bytes after
 * the end), EDDY_ETOOLONGFRAME (past max), EDDY_ENOMEM. */
int eddy__coding_decode(const eddy__coding_ops_t *ops, void *s, const uint8_t *in, size_t n,
                        eddy_buf_t *out, size_t max, bool *done);

#endif /* EDDY_CODEC_HTTP_CODING_H */
