/*
 * Fuzz target: the content decompressor (codec/http/decompressor.c) on an embedded channel,
 * and the compressor's output read back. The input's second byte picks the coding (its low
 * two bits: gzip, deflate, br, zstd), whether the bytes are a compressed body to decompress
 * or a plain one to compress first (bit 2), and a small cap (bit 3: 4 KiB, else 1 MiB); the
 * rest is the body, fed as a response head and its content in the pieces the first byte's
 * mode cuts. Checks: no sanitizer report, every buffer released, the only errors EDDY_EDECODE
 * and EDDY_ETOOLONGFRAME, nothing past the cap, a plain body compressed and decompressed
 * coming back byte for byte (unless past the cap), and the same outcome and bytes whether
 * fed whole or in pieces.
 */
#include <eddy/http.h>
#include <eddy/http_coding.h>

#include "codec/http/coding.h"
#include "codec/http/internal.h"
#include "common.h"

static const char *const codings[] = {"gzip", "deflate", "br", "zstd"};

/* body compressed whole with the coding called name: a new buffer. */
static eddy_buf_t *compress_body(const char *name, const uint8_t *p, size_t n)
{
    const eddy__coding_ops_t *ops = eddy__coding_find(name, strlen(name));
    CHECK(ops != NULL);
    void *enc = ops->enc_new(ops->default_level, n);
    eddy_buf_t *out = eddy_buf_new(n / 2 + 64);
    CHECK(enc != NULL && out != NULL);
    CHECK(eddy__coding_encode(ops, enc, p, n, EDDY__CODING_FINISH, out) == 0);
    ops->enc_free(enc);
    return out;
}

/* A response head saying coding name, as the client codec decodes one. */
static eddy_msg_t *head_new(const char *name)
{
    eddy_http_response_t *r = eddy_http_response_of(eddy__http_message_new(true, 1));
    CHECK(r != NULL);
    r->status = 200;
    r->chunked = true;
    r->headers[r->header_count++] =
        (eddy_http_header_t){{"Content-Encoding", 16}, {name, strlen(name)}};
    return &r->_msg;
}

/* What came out: the bytes (hashed, and kept in got up to max + 1) and the error. */
static void drain(eddy_channel_t *ch, hash_t *h, eddy_buf_t *got, int *error)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
        CHECK(*error == 0);
        eddy_http_content_t *c = eddy_http_content_of(m);
        if (c != NULL && c->data != NULL) {
            hash_bytes(h, eddy_buf_read_ptr(c->data), eddy_buf_readable(c->data));
            eddy_buf_write_bytes(got, eddy_buf_read_ptr(c->data), eddy_buf_readable(c->data));
        } else if (c == NULL) {
            CHECK(eddy_http_response_header(eddy_http_response_of(m), "content-encoding") == NULL);
        }
        eddy_msg_release(m);
    }
    int err = eddy_embedded_error(ch);
    if (err != 0) {
        CHECK(*error == 0);
        CHECK(err == EDDY_EDECODE || err == EDDY_ETOOLONGFRAME);
        *error = err;
    }
}

static uint64_t run(const uint8_t *p, size_t n, uint8_t mode, uint8_t opt)
{
    const char *name = codings[opt & 3];
    size_t max = (opt & 8) ? 4096 : (size_t)1 << 20;
    eddy_buf_t *body = (opt & 4) ? compress_body(name, p, n) : eddy_buf_from(p, n);
    CHECK(body != NULL);
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_http_decompressor_options_t o = {.max_length = max};
    CHECK(ch != NULL);
    CHECK(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_decompressor(&o)) == 0);
    eddy_embedded_write_inbound(ch, head_new(name));
    hash_t h = HASH_INIT;
    eddy_buf_t *got = eddy_buf_new(1024);
    int error = 0;
    uint32_t rng = mode;
    size_t len = eddy_buf_readable(body), off = 0;
    do {
        size_t k = next_chunk(mode, &rng, len - off);
        eddy_buf_t *piece = eddy_buf_from(eddy_buf_read_ptr(body) + off, k);
        off += k;
        eddy_http_content_t *c = eddy_http_content_new(piece, off == len);
        CHECK(c != NULL);
        eddy_embedded_write_inbound(ch, &c->_msg);
        drain(ch, &h, got, &error);
    } while (off < len && eddy_channel_is_open(ch));
    CHECK(eddy_buf_readable(got) <= max);
    if ((opt & 4) && error == 0) {
        CHECK(eddy_buf_readable(got) == n && memcmp(eddy_buf_read_ptr(got), p, n) == 0);
    }
    if ((opt & 4) && n <= max) {
        CHECK(error == 0);
    }
    eddy_embedded_finish(ch);
    eddy_buf_release(got);
    eddy_buf_release(body);
    /* Pieces emitted before an error differ with the cut: only the outcome must not. */
    hash_t outcome = HASH_INIT;
    hash_int(&outcome, error);
    return error != 0 ? outcome.h : h.h ^ outcome.h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(run, data, size);
    return 0;
}
