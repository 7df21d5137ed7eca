/*
 * What the fuzz harnesses share: feeding modes, a hash of what came out (to compare whole
 * and chunked feeding), draining, and the checks. Each harness defines
 * LLVMFuzzerTestOneInput; built with clang's -fsanitize=fuzzer it is a libFuzzer target, and
 * with replay.c a program that runs a corpus (the fuzz.* tests of make test).
 *
 * An input's first byte picks how it is fed (whole, byte by byte, fixed chunks of 1-16
 * bytes, pseudo-random chunks of 1-24), its second the decoder's limits and cumulator; the
 * rest are the bytes.
 */
#ifndef EDDY_FUZZ_COMMON_H
#define EDDY_FUZZ_COMMON_H

#include <eddy/buffer.h>
#include <eddy/channel.h>
#include <eddy/codec.h>
#include <eddy/pipeline.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a over what the decoder produced. */
typedef struct hash_s {
    uint64_t h;
} hash_t;

#define HASH_INIT {1469598103934665603ull}

static void hash_bytes(hash_t *h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h->h ^= b[i];
        h->h *= 1099511628211ull;
    }
}

static void hash_int(hash_t *h, int64_t v)
{
    hash_bytes(h, &v, sizeof(v));
}

/* Checked always, whatever the build (abort: libFuzzer keeps the input). */
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "CHECK failed %s:%d: %s\n", __FILE__, __LINE__, #c);                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The next chunk's length for feed mode `mode`. */
static size_t next_chunk(uint8_t mode, uint32_t *rng, size_t left)
{
    size_t k;
    switch (mode & 3) {
    case 0:
        k = left;
        break;
    case 1:
        k = 1;
        break;
    case 2:
        k = (size_t)((mode >> 2) & 15) + 1;
        break;
    default:
        *rng = *rng * 1103515245u + 12345u;
        k = ((*rng >> 16) % 24) + 1;
        break;
    }
    return k < left ? k : left;
}

static void drain_outbound(eddy_channel_t *ch, hash_t *h)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        hash_int(h, m->type);
        eddy_msg_release(m);
    }
}

/* Add decoder d (taken over) to ch as name, cumulating as the options byte says: bit 2 set,
 * a composite of the reads; else one merged buffer. */
static inline void add_decoder(eddy_channel_t *ch, const char *name, const eddy_handler_ops_t *ops,
                               eddy_decoder_t *d, uint8_t opt)
{
    CHECK(d != NULL);
    CHECK(eddy_decoder_set_cumulator(d, (opt & 4) ? EDDY_CUMULATOR_COMPOSITE
                                                  : EDDY_CUMULATOR_MERGE) == 0);
    CHECK(eddy_pipeline_add_last(eddy_channel_pipeline(ch), name, ops, d, eddy_free_state) == 0);
}

/* What reached the tail: looked at (the message is released after). */
typedef void (*fuzz_msg_fn)(eddy_msg_t *m, void *arg);

/* Feed n bytes into ch in the pieces `mode` says, each followed by a look at every message
 * that came out at the tail (on_msg) and at the head (hashed into out). */
static inline void feed(eddy_channel_t *ch, const uint8_t *p, size_t n, uint8_t mode, fuzz_msg_fn on_msg,
                 void *arg, hash_t *out)
{
    uint32_t rng = mode;
    size_t off = 0;
    do {
        size_t k = next_chunk(mode, &rng, n - off);
        eddy_buf_t *b = eddy_buf_from(p + off, k);
        CHECK(b != NULL);
        eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        off += k;
        CHECK(eddy_embedded_error(ch) == 0);
        eddy_msg_t *m;
        while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
            on_msg(m, arg);
            eddy_msg_release(m);
        }
        drain_outbound(ch, out);
    } while (off < n);
}

/* run(bytes, n, mode, options) feeds one input and returns the hash of what came out. */
typedef uint64_t (*fuzz_run_fn)(const uint8_t *p, size_t n, uint8_t mode, uint8_t opt);

/* One input: fed as its first byte says, then (if that was in pieces) whole, the outputs
 * compared; every buffer released either way. */
static void fuzz_one(fuzz_run_fn run, const uint8_t *data, size_t size)
{
    if (size < 2) {
        return;
    }
    int64_t live = eddy_buf_live_count();
    uint64_t a = run(data + 2, size - 2, data[0], data[1]);
    CHECK(eddy_buf_live_count() == live);
    if ((data[0] & 3) != 0) {
        uint64_t b = run(data + 2, size - 2, 0, data[1]);
        CHECK(eddy_buf_live_count() == live);
        CHECK(a == b); /* whole and chunked feeding give the same messages */
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("EDDY_ALLOCATOR", "unpooled", 1); /* every buffer its own allocation: ASan sees it */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* EDDY_FUZZ_COMMON_H */
