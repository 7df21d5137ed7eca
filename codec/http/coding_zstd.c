/*
 * zstd (RFC 8878, as RFC 9659 makes it a content coding) through libzstd.
 */
#include "codec/http/coding.h"

#include <eddy/common.h>

#include <stddef.h>

#include <zstd.h>
#include <zstd_errors.h>

/* RFC 9659 section 3: a decoder of the zstd content coding needs a window of no more than
 * 8 MiB, and should refuse larger ones; without this a frame could make us allocate 128 MiB
 * (libzstd's default limit). */
#define DEC_WINDOW_LOG_MAX 23

static void *zstd_enc_new(int level, size_t size)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    if (c == NULL) {
        return NULL;
    }
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
    if (size > 0) {
        ZSTD_CCtx_setPledgedSrcSize(c, size); /* smaller tables, and the size in the frame */
    }
    return c;
}

static int zstd_enc_step(void *s, eddy__coding_io_t *io, eddy__coding_mode_t mode)
{
    static const ZSTD_EndDirective end[] = {ZSTD_e_continue, ZSTD_e_flush, ZSTD_e_end};
    ZSTD_inBuffer in = {io->in, io->in_n, 0};
    ZSTD_outBuffer out = {io->out, io->out_n, 0};
    size_t left = ZSTD_compressStream2(s, &out, &in, end[mode]);
    io->in += in.pos;
    io->in_n -= in.pos;
    io->out += out.pos;
    io->out_n -= out.pos;
    if (ZSTD_isError(left)) {
        return EDDY_EINVAL;
    }
    return io->in_n == 0 && (mode == EDDY__CODING_RUN || left == 0) ? 1 : 0;
}

static void zstd_enc_free(void *s)
{
    ZSTD_freeCCtx(s);
}

static void *zstd_dec_new(void)
{
    ZSTD_DCtx *d = ZSTD_createDCtx();
    if (d != NULL) {
        ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, DEC_WINDOW_LOG_MAX);
    }
    return d;
}

static int zstd_dec_step(void *s, eddy__coding_io_t *io)
{
    ZSTD_inBuffer in = {io->in, io->in_n, 0};
    ZSTD_outBuffer out = {io->out, io->out_n, 0};
    size_t rc = ZSTD_decompressStream(s, &out, &in);
    io->in += in.pos;
    io->in_n -= in.pos;
    io->out += out.pos;
    io->out_n -= out.pos;
    if (ZSTD_isError(rc)) {
        return ZSTD_getErrorCode(rc) == ZSTD_error_memory_allocation ? EDDY_ENOMEM : EDDY_EDECODE;
    }
    return rc == 0 ? 1 : 0; /* 0: a frame decoded and flushed whole */
}

static void zstd_dec_free(void *s)
{
    ZSTD_freeDCtx(s);
}

const eddy__coding_ops_t eddy__coding_zstd = {
    .name = "zstd",
    .default_level = 3, /* libzstd's own default */
    .min_level = 1,
    .max_level = 19,
    .level_option = offsetof(eddy_http_compressor_options_t, zstd_level),
    .enc_new = zstd_enc_new,
    .enc_step = zstd_enc_step,
    .enc_free = zstd_enc_free,
    .dec_new = zstd_dec_new,
    .dec_step = zstd_dec_step,
    .dec_free = zstd_dec_free,
};
