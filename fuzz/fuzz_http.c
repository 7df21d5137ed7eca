/*
 * Fuzz target: the HTTP/1.1 request decoder and the aggregator on an embedded channel, with
 * the default limits, small ones, or tiny ones. Checks: no sanitizer report, every buffer
 * released, nothing reaches the tail as an exception, a rejected request (decoder or
 * aggregator) is the last message, bodies within the aggregator's limit and as long as
 * announced, the same messages whether fed whole or in pieces.
 */
#include <eddy/http.h>

#include "common.h"

static void hash_request(hash_t *h, const eddy_http_request_t *r, size_t max_body)
{
    hash_int(h, r->method);
    hash_int(h, r->version);
    hash_int(h, r->keep_alive);
    hash_int(h, r->chunked);
    hash_int(h, r->expect_continue);
    hash_int(h, r->content_length);
    hash_bytes(h, r->method_name.p, r->method_name.len);
    hash_bytes(h, r->target.p, r->target.len);
    hash_int(h, (int64_t)r->header_count);
    for (size_t i = 0; i < r->header_count; i++) {
        hash_bytes(h, r->headers[i].name.p, r->headers[i].name.len);
        hash_bytes(h, r->headers[i].value.p, r->headers[i].value.len);
    }
    size_t len = r->body != NULL ? eddy_buf_readable(r->body) : 0;
    hash_int(h, (int64_t)len);
    CHECK(len <= max_body);
    if (!r->chunked && r->content_length >= 0) {
        CHECK((int64_t)len == r->content_length);
    }
    if (len > 0) {
        uint8_t *copy = malloc(len);
        CHECK(copy != NULL);
        CHECK(eddy_buf_get_bytes(r->body, eddy_buf_reader_index(r->body), copy, len) == 0);
        hash_bytes(h, copy, len);
        free(copy);
    }
}

typedef struct seen_s {
    hash_t h;
    size_t max_body;
    bool rejected;
} seen_t;

static void on_request(eddy_msg_t *m, void *arg)
{
    seen_t *s = arg;
    CHECK(!s->rejected); /* nothing after a rejected request */
    CHECK(m->type == EDDY_MSG_HTTP_FULL_REQUEST);
    eddy_http_request_t *r = eddy_http_request_of(m);
    CHECK(r != NULL);
    hash_int(&s->h, r->error);
    if (r->error != 0) {
        CHECK(!r->keep_alive);
        s->rejected = true;
    } else {
        hash_request(&s->h, r, s->max_body);
    }
}

static uint64_t run(const uint8_t *p, size_t n, uint8_t mode, uint8_t opt)
{
    eddy_http_decoder_options_t o = {0};
    size_t max_body = (size_t)1 << 20;
    if (opt & 1) {
        o.max_initial_line = 64;
        o.max_header_size = 128;
        o.max_header_count = 8;
        o.max_chunk_size = 16;
        max_body = 64;
    } else if (opt & 2) {
        o.max_initial_line = 24;
        o.max_header_size = 40;
        o.max_header_count = 3;
        o.max_chunk_size = 3;
        max_body = 1024;
    }
    eddy_channel_t *ch = eddy_embedded_channel_new();
    CHECK(ch != NULL);
    add_decoder(ch, "decoder", eddy_http_request_decoder_ops(),
                eddy_http_request_decoder_new(&o), opt);
    CHECK(eddy_pipeline_add_last(eddy_channel_pipeline(ch), "aggregator", eddy_http_aggregator_ops(),
                                 eddy_http_aggregator_new(max_body), eddy_free_state) == 0);
    seen_t seen = {HASH_INIT, max_body, false};
    hash_t out = HASH_INIT;
    feed(ch, p, n, mode, on_request, &seen, &out);
    eddy_embedded_finish(ch);
    return seen.h.h ^ (out.h * 31);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(run, data, size);
    return 0;
}
