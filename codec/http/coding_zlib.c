/*
 * gzip (RFC 1952) and deflate (zlib's format, RFC 1950, as RFC 9110 section 8.4.1.2 means it)
 * through zlib.
 */
#include "codec/http/coding.h"

#include <eddy/common.h>

#include <stddef.h>

#include <stdlib.h>

#define ZLIB_CONST /* next_in points at const bytes */
#include <zlib.h>

/* zlib's largest window, and what selects the gzip wrapper around it. */
#define WBITS 15
#define GZIP_WRAPPER 16

/* The window and hash sizes for a body of size bytes (0: unknown), as nginx's gzip filter
 * picks them: each halving of the window that still holds the body halves the memory
 * deflateInit2 takes (256 KiB at 15 bits and memLevel 8) and the time it spends clearing it. */
static void zlib_sizes(size_t size, int *wbits, int *memlevel)
{
    *wbits = WBITS;
    *memlevel = 8;
    while (size > 0 && size < ((size_t)1 << (*wbits - 1)) - 262 && *wbits > 9) {
        --*wbits;
        if (*memlevel > 1) {
            --*memlevel;
        }
    }
}

static void *zlib_enc_new(int level, size_t size, int wrapper)
{
    z_stream *z = calloc(1, sizeof(*z));
    int wbits, memlevel;
    zlib_sizes(size, &wbits, &memlevel);
    if (z != NULL &&
        deflateInit2(z, level, Z_DEFLATED, wbits + wrapper, memlevel, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(z);
        z = NULL;
    }
    return z;
}

static void *gzip_enc_new(int level, size_t size)
{
    return zlib_enc_new(level, size, GZIP_WRAPPER);
}

static void *deflate_enc_new(int level, size_t size)
{
    return zlib_enc_new(level, size, 0);
}

/* Point z at io's buffers for a call. */
static void zlib_load(z_stream *z, const eddy__coding_io_t *io)
{
    /* The drivers never pass more than uInt holds in one call: bodies stay under 4 GiB
     * (EDDY_BUF_DEFAULT_MAX_CAPACITY is 2 GiB) and output room under 64 KiB per decode. */
    z->next_in = io->in;
    z->avail_in = (uInt)io->in_n;
    z->next_out = io->out;
    z->avail_out = (uInt)io->out_n;
}

/* Take back what a call read and wrote. */
static void zlib_store(const z_stream *z, eddy__coding_io_t *io)
{
    io->in = z->next_in;
    io->in_n = z->avail_in;
    io->out = z->next_out;
    io->out_n = z->avail_out;
}

static int zlib_enc_step(void *s, eddy__coding_io_t *io, eddy__coding_mode_t mode)
{
    static const int flush[] = {Z_NO_FLUSH, Z_SYNC_FLUSH, Z_FINISH};
    z_stream *z = s;
    zlib_load(z, io);
    int rc = deflate(z, flush[mode]);
    zlib_store(z, io);
    if (rc == Z_STREAM_END) {
        return 1;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return EDDY_EINVAL;
    }
    /* Room left over means deflate had nothing more to write for this mode. */
    return mode != EDDY__CODING_FINISH && io->in_n == 0 && io->out_n > 0 ? 1 : 0;
}

static void zlib_enc_free(void *s)
{
    deflateEnd(s);
    free(s);
}

static void *zlib_dec_new(int wbits)
{
    z_stream *z = calloc(1, sizeof(*z));
    if (z != NULL && inflateInit2(z, wbits) != Z_OK) {
        free(z);
        z = NULL;
    }
    return z;
}

static void *gzip_dec_new(void)
{
    return zlib_dec_new(WBITS + GZIP_WRAPPER);
}

static void *deflate_dec_new(void)
{
    return zlib_dec_new(WBITS);
}

static int zlib_dec_step(void *s, eddy__coding_io_t *io)
{
    z_stream *z = s;
    zlib_load(z, io);
    int rc = inflate(z, Z_NO_FLUSH);
    zlib_store(z, io);
    switch (rc) {
    case Z_STREAM_END:
        return 1;
    case Z_OK:
    case Z_BUF_ERROR: /* no progress possible: it wants input or room */
        return 0;
    case Z_MEM_ERROR:
        return EDDY_ENOMEM;
    default: /* Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR */
        return EDDY_EDECODE;
    }
}

static void zlib_dec_free(void *s)
{
    inflateEnd(s);
    free(s);
}

const eddy__coding_ops_t eddy__coding_gzip = {
    .name = "gzip",
    .default_level = 6, /* nginx's gzip_comp_level and zlib's own default */
    .min_level = 1,
    .max_level = 9,
    .level_option = offsetof(eddy_http_compressor_options_t, gzip_level),
    .enc_new = gzip_enc_new,
    .enc_step = zlib_enc_step,
    .enc_free = zlib_enc_free,
    .dec_new = gzip_dec_new,
    .dec_step = zlib_dec_step,
    .dec_free = zlib_dec_free,
};

const eddy__coding_ops_t eddy__coding_deflate = {
    .name = "deflate",
    .default_level = 6,
    .min_level = 1,
    .max_level = 9,
    .level_option = offsetof(eddy_http_compressor_options_t, gzip_level),
    .enc_new = deflate_enc_new,
    .enc_step = zlib_enc_step,
    .enc_free = zlib_enc_free,
    .dec_new = deflate_dec_new,
    .dec_step = zlib_dec_step,
    .dec_free = zlib_dec_free,
};
