/*
 * The content codings this build has, and the two loops that run any of them: a step reads
 * and writes what its buffers allow, and the loop gives it room until it is done.
 */
#include "codec/http/coding.h"

#include "eddy_config.h"

#include <eddy/common.h>

#include <pthread.h>
#include <stdio.h>
#include <strings.h>

/* The default order of preference, used where the client's q-values tie. br first: at its
 * quality 5 it costs what gzip 6 costs and is 6% smaller on text; zstd next: at its level 3
 * it is gzip 6's size at 3.5 times the speed (figures in coding_brotli.c: zstd 3 29.4% at
 * 75 MB/s); gzip, which every client speaks; deflate last, which clients have read both as
 * zlib's format and as raw deflate. Netty's HttpContentCompressor prefers the same way. */
static const eddy__coding_ops_t *const codings[] = {
#ifdef EDDY_HAVE_BROTLI
    &eddy__coding_br,
#endif
#ifdef EDDY_HAVE_ZSTD
    &eddy__coding_zstd,
#endif
#ifdef EDDY_HAVE_ZLIB
    &eddy__coding_gzip,
    &eddy__coding_deflate,
#endif
    NULL,
};

const eddy__coding_ops_t *const *eddy__codings(size_t *n)
{
    *n = sizeof(codings) / sizeof(codings[0]) - 1;
    return codings;
}

/* The names, made once: what the codings[] array says, in a form the preprocessor cannot
 * join without a trailing separator. */
static char list[64]; /* "br, zstd, gzip, deflate": 23 bytes */
static pthread_once_t list_once = PTHREAD_ONCE_INIT;

static void list_make(void)
{
    size_t len = 0;
    for (const eddy__coding_ops_t *const *c = codings; *c != NULL; c++) {
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", len > 0 ? ", " : "",
                                (*c)->name);
    }
}

const char *eddy__codings_list(void)
{
    pthread_once(&list_once, list_make);
    return list;
}

const eddy__coding_ops_t *eddy__coding_find(const char *name, size_t n)
{
    if (n == 6 && strncasecmp(name, "x-gzip", 6) == 0) {
        name += 2;
        n -= 2;
    }
    for (const eddy__coding_ops_t *const *c = codings; *c != NULL; c++) {
        if (strlen((*c)->name) == n && strncasecmp((*c)->name, name, n) == 0) {
            return *c;
        }
    }
    return NULL;
}

/* Room of at least want bytes at the end of out, io pointed at it. */
static int out_room(eddy_buf_t *out, size_t want, eddy__coding_io_t *io)
{
    if (eddy_buf_writable(out) < want) {
        int err = eddy_buf_ensure_writable(out, want);
        if (err != 0) {
            return err;
        }
    }
    io->out = eddy_buf_write_ptr(out);
    io->out_n = eddy_buf_writable(out);
    return 0;
}

/* Count what a step wrote into out. */
static void out_done(eddy_buf_t *out, const eddy__coding_io_t *io)
{
    eddy_buf_produce(out, (size_t)(io->out - eddy_buf_write_ptr(out)));
}

int eddy__coding_encode(const eddy__coding_ops_t *ops, void *s, const uint8_t *in, size_t n,
                        eddy__coding_mode_t mode, eddy_buf_t *out)
{
    eddy__coding_io_t io = {.in = in, .in_n = n};
    for (;;) {
        /* A quarter of what is left to read: text shrinks to about that at level 6. */
        int err = out_room(out, io.in_n / 4 + 256, &io);
        if (err != 0) {
            return err;
        }
        int rc = ops->enc_step(s, &io, mode);
        out_done(out, &io);
        if (rc != 0) {
            return rc < 0 ? rc : 0;
        }
    }
}

/* A step's output room when max bytes may be written in all: one more than is left, so a
 * stream that would pass max shows it by passing. */
static size_t dec_want(const eddy_buf_t *out, size_t max)
{
    size_t left = max - eddy_buf_readable(out) + 1;
    return left < 65536 ? left : 65536;
}

int eddy__coding_decode(const eddy__coding_ops_t *ops, void *s, const uint8_t *in, size_t n,
                        eddy_buf_t *out, size_t max, bool *done)
{
    eddy__coding_io_t io = {.in = in, .in_n = n};
    while (!*done) {
        if (eddy_buf_readable(out) > max) {
            return EDDY_ETOOLONGFRAME;
        }
        int err = out_room(out, dec_want(out, max), &io);
        if (err != 0) {
            return err == EDDY_ECAPACITY ? EDDY_ETOOLONGFRAME : err;
        }
        io.out_n = dec_want(out, max);
        int rc = ops->dec_step(s, &io);
        out_done(out, &io);
        if (rc < 0) {
            return rc;
        }
        *done = rc == 1;
        if (!*done && io.in_n == 0 && io.out_n > 0) {
            break; /* it wants input */
        }
    }
    if (eddy_buf_readable(out) > max) {
        return EDDY_ETOOLONGFRAME;
    }
    return *done && io.in_n > 0 ? EDDY_EDECODE : 0;
}
