/*
 * gzip (RFC 1952) and deflate (zlib's format, RFC 1950, as RFC 9110 section 8.4.1.2 means it)
 * through zlib.
 */
#include "codec/http/coding.h"

#include <eddy/common.h>

#include "eddy_config.h"

#include <assert.h>

#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define ZLIB_CONST /* next_in points at const bytes */
#include <zlib.h>

#ifdef EDDY_HAVE_LIBDEFLATE
#include <libdeflate.h>
#include <pthread.h>
#endif

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

/*
 * A compressor's memory in one block, as nginx's gzip filter preallocates it: the z_stream,
 * then what deflateInit2 asks for (its state, the window, prev, head and pending buffers),
 * handed out in order. zlib's own five allocations of 64 KiB and less, freed together, leave
 * 256 KiB free at the top of glibc's heap, which trims it, and the next response faults the
 * pages in again: deflateInit2 and deflateEnd took 290 us a pair on our VM against 1.3 us
 * with trimming off, as much as compressing 100 KiB. One block of 256 KiB or more is mapped
 * the first time, which raises glibc's thresholds so that later ones come from the heap and
 * stay there. What does not fit (another zlib's layout) comes from malloc.
 */
typedef struct zlib_enc_s {
    z_stream z;
    size_t used, size;
    alignas(max_align_t) unsigned char mem[];
} zlib_enc_t;

/* What deflateInit2 allocates for wbits and memlevel (zlib 1.2's deflate.c), its state
 * rounded up to 8 KiB as nginx rounds it. */
static size_t zlib_need(int wbits, int memlevel)
{
    return 8192 + ((size_t)1 << (wbits + 2)) + ((size_t)1 << (memlevel + 9));
}

static voidpf zlib_alloc(voidpf opaque, uInt items, uInt size)
{
    zlib_enc_t *e = opaque;
    size_t n = ((size_t)items * size + 15) & ~(size_t)15;
    if (n <= e->size - e->used) {
        void *p = e->mem + e->used;
        e->used += n;
        return p;
    }
    return calloc(items, size);
}

static void zlib_free(voidpf opaque, voidpf p)
{
    zlib_enc_t *e = opaque;
    if ((unsigned char *)p < e->mem || (unsigned char *)p >= e->mem + e->size) {
        free(p); /* one malloc gave when the block was full */
    }
}

static void *zlib_enc_new(int level, size_t size, int wrapper)
{
    int wbits, memlevel;
    zlib_sizes(size, &wbits, &memlevel);
    size_t need = zlib_need(wbits, memlevel);
    zlib_enc_t *e = malloc(sizeof(*e) + need);
    if (e == NULL) {
        return NULL;
    }
    memset(&e->z, 0, sizeof(e->z));
    e->used = 0;
    e->size = need;
    e->z.zalloc = zlib_alloc;
    e->z.zfree = zlib_free;
    e->z.opaque = e;
    if (deflateInit2(&e->z, level, Z_DEFLATED, wbits + wrapper, memlevel, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
        free(e);
        return NULL;
    }
    return &e->z; /* the first member: zlib_enc_free finds the block from it */
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
    free(EDDY_CONTAINER_OF(s, zlib_enc_t, z));
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

#ifdef EDDY_HAVE_LIBDEFLATE
/* ---------------------------------------------------------------------------------------
 * Whole bodies through libdeflate: the same formats, at the same level in 40% of zlib's time
 * (100 KiB of our docs at level 6: 1.5 against 3.7 ms, 0.3% smaller). Its compressor (about
 * 1 MB at level 6) is made once per thread and kept, for the level last asked for.
 */

typedef struct whole_s {
    struct libdeflate_compressor *c;
    int level;
} whole_t;

static pthread_key_t whole_key;
static pthread_once_t whole_once = PTHREAD_ONCE_INIT;

static void whole_free(void *arg)
{
    whole_t *w = arg;
    libdeflate_free_compressor(w->c);
    free(w);
}

static void whole_key_make(void)
{
    if (pthread_key_create(&whole_key, whole_free) != 0) {
        abort(); /* out of keys at start: nothing sensible is left to do */
    }
}

/* This thread's compressor at level, or NULL without memory. */
static struct libdeflate_compressor *whole_compressor(int level)
{
    pthread_once(&whole_once, whole_key_make);
    whole_t *w = pthread_getspecific(whole_key);
    if (w == NULL && (w = calloc(1, sizeof(*w))) != NULL &&
        pthread_setspecific(whole_key, w) != 0) {
        free(w);
        w = NULL;
    }
    if (w != NULL && (w->c == NULL || w->level != level)) {
        libdeflate_free_compressor(w->c);
        w->c = libdeflate_alloc_compressor(level);
        w->level = level;
    }
    return w != NULL ? w->c : NULL;
}

typedef size_t (*whole_bound_fn)(struct libdeflate_compressor *c, size_t n);
typedef size_t (*whole_fn)(struct libdeflate_compressor *c, const void *in, size_t n, void *out,
                           size_t cap);

static int whole_run(whole_bound_fn bound, whole_fn run, int level, const uint8_t *in, size_t n,
                     eddy_buf_t *out)
{
    struct libdeflate_compressor *c = whole_compressor(level);
    if (c == NULL) {
        return EDDY_ENOMEM;
    }
    size_t cap = bound(c, n);
    int err = eddy_buf_ensure_writable(out, cap);
    if (err != 0) {
        return err;
    }
    size_t got = run(c, in, n, eddy_buf_write_ptr(out), cap);
    assert(got > 0); /* the bound is room enough */
    eddy_buf_produce(out, got);
    return 0;
}

static int gzip_whole(int level, const uint8_t *in, size_t n, eddy_buf_t *out)
{
    return whole_run(libdeflate_gzip_compress_bound, libdeflate_gzip_compress, level, in, n, out);
}

static int deflate_whole(int level, const uint8_t *in, size_t n, eddy_buf_t *out)
{
    return whole_run(libdeflate_zlib_compress_bound, libdeflate_zlib_compress, level, in, n, out);
}
#else
#define gzip_whole NULL
#define deflate_whole NULL
#endif

const eddy__coding_ops_t eddy__coding_gzip = {
    .name = "gzip",
    .default_level = 6, /* nginx's gzip_comp_level and zlib's own default */
    .min_level = 1,
    .max_level = 9,
    .level_option = offsetof(eddy_http_compressor_options_t, gzip_level),
    .enc_new = gzip_enc_new,
    .enc_step = zlib_enc_step,
    .enc_free = zlib_enc_free,
    .enc_whole = gzip_whole,
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
    .enc_whole = deflate_whole,
    .dec_new = deflate_dec_new,
    .dec_step = zlib_dec_step,
    .dec_free = zlib_dec_free,
};
