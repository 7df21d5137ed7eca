/*
 * Fuzz target: the HTTP/1.1 client codec and the response aggregator on an embedded channel,
 * with the default limits, small ones, or tiny ones. The input's third byte writes the
 * requests first: 1 to 8 of them (its low three bits), each a GET or a HEAD (the bits above);
 * the rest is what the server sends, then the end of input. Checks: no sanitizer report,
 * every buffer released, every response well formed (a full response with a status of 100 to
 * 999, version 10 or 11, a body within the limit, none where the request or status allows
 * none, as long as Content-Length said otherwise, answering the request in its turn), no more
 * final responses than requests, the only errors EDDY_EDECODE, EDDY_ETOOLONGFRAME and
 * EDDY_EOF and nothing after one, the same responses and error whether fed whole or in
 * pieces.
 */
#include <eddy/http_client.h>

#include "common.h"

typedef struct seen_s {
    hash_t h;
    size_t max_body;
    uint8_t heads; /* bit i: request i was a HEAD */
    size_t requests;
    size_t answered; /* final responses so far */
} seen_t;

static void check_response(seen_t *s, eddy_msg_t *m)
{
    CHECK(m->type == EDDY_MSG_HTTP_FULL_RESPONSE || m->type == EDDY_MSG_BUF);
    if (m->type == EDDY_MSG_BUF) {
        eddy_buf_t *b = eddy_buf_of(m); /* after a 101: bytes as they came */
        hash_bytes(&s->h, eddy_buf_read_ptr(b), eddy_buf_readable(b));
        return;
    }
    eddy_http_response_t *r = eddy_http_response_of(m);
    CHECK(r != NULL);
    CHECK(r->status >= 100 && r->status <= 999);
    CHECK(r->version == 10 || r->version == 11);
    CHECK(s->answered < s->requests);
    bool head = (s->heads >> s->answered) & 1;
    CHECK(r->request_method == (head ? EDDY_HTTP_HEAD : EDDY_HTTP_GET));
    size_t len = r->body != NULL ? eddy_buf_readable(r->body) : 0;
    CHECK(len <= s->max_body);
    if (head || r->status < 200 || r->status == 204 || r->status == 304) {
        CHECK(len == 0);
        CHECK(!r->chunked);
    } else if (!r->chunked && r->content_length >= 0) {
        CHECK((int64_t)len == r->content_length);
    }
    for (size_t i = 0; i < r->header_count; i++) {
        CHECK(r->headers[i].name.len > 0 && r->headers[i].name.p != NULL);
        CHECK(memchr(r->headers[i].value.p, '\n', r->headers[i].value.len) == NULL);
    }
    if (r->status >= 200 || r->status == 101) {
        s->answered++;
    }
    hash_int(&s->h, r->status);
    hash_int(&s->h, r->version);
    hash_int(&s->h, r->keep_alive);
    hash_int(&s->h, r->chunked);
    hash_int(&s->h, r->content_length);
    hash_bytes(&s->h, r->reason.p, r->reason.len);
    hash_int(&s->h, (int64_t)r->header_count);
    for (size_t i = 0; i < r->header_count; i++) {
        hash_bytes(&s->h, r->headers[i].name.p, r->headers[i].name.len);
        hash_bytes(&s->h, r->headers[i].value.p, r->headers[i].value.len);
    }
    hash_int(&s->h, (int64_t)len);
    if (len > 0) {
        hash_bytes(&s->h, eddy_buf_read_ptr(r->body), len);
    }
}

/* Read what came out; an error ends the stream: nothing may come after it. */
static void drain(eddy_channel_t *ch, seen_t *s, int *error)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
        CHECK(*error == 0);
        /* The aggregator that failed closed the channel, which removed it: the rest of the
         * pieces the codec emitted in that call pass on to the tail, unaggregated. */
        if (m->type != EDDY_MSG_HTTP_CONTENT || eddy_channel_is_open(ch)) {
            check_response(s, m);
        }
        eddy_msg_release(m);
    }
    int err = eddy_embedded_error(ch);
    if (err != 0) {
        CHECK(*error == 0);
        CHECK(err == EDDY_EDECODE || err == EDDY_ETOOLONGFRAME || err == EDDY_EOF);
        *error = err;
    }
}

static uint64_t run(const uint8_t *p, size_t n, uint8_t mode, uint8_t opt)
{
    if (n == 0) {
        return 0;
    }
    eddy_http_client_codec_options_t o = {0};
    size_t max_body = 0;
    if (opt & 1) {
        o = (eddy_http_client_codec_options_t){64, 128, 8, 16};
        max_body = 64;
    } else if (opt & 2) {
        o = (eddy_http_client_codec_options_t){24, 40, 3, 3};
        max_body = 1024;
    }
    eddy_channel_t *ch = eddy_embedded_channel_new();
    CHECK(ch != NULL);
    eddy_handler_t codec = eddy_http_client_codec(&o);
    CHECK(codec.ops != NULL);
    CHECK(eddy_decoder_set_cumulator(codec.state, (opt & 4) ? EDDY_CUMULATOR_COMPOSITE
                                                           : EDDY_CUMULATOR_MERGE) == 0);
    CHECK(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), codec,
                                 eddy_http_response_aggregator(max_body)) == 0);
    seen_t seen = {HASH_INIT, max_body != 0 ? max_body : EDDY_HTTP_MAX_CONTENT_LENGTH,
                   (uint8_t)(p[0] >> 3), (size_t)(p[0] & 7) + 1, 0};
    for (size_t i = 0; i < seen.requests; i++) {
        bool head = (seen.heads >> i) & 1;
        eddy_http_request_t *r = eddy_http_request_new(head ? "HEAD" : "GET", "/");
        CHECK(r != NULL);
        eddy_embedded_write_outbound(ch, eddy_http_request_msg(r));
    }
    hash_t out = HASH_INIT;
    drain_outbound(ch, &out);
    p++;
    n--;
    int error = 0;
    uint32_t rng = mode;
    for (size_t off = 0; off < n && eddy_channel_is_open(ch);) {
        size_t k = next_chunk(mode, &rng, n - off);
        eddy_buf_t *b = eddy_buf_from(p + off, k);
        CHECK(b != NULL);
        eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        off += k;
        drain(ch, &seen, &error);
    }
    if (eddy_channel_is_open(ch)) {
        eddy_embedded_shutdown_input(ch);
        drain(ch, &seen, &error);
    }
    hash_int(&seen.h, error);
    eddy_embedded_finish(ch);
    return seen.h.h ^ (out.h * 31);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(run, data, size);
    return 0;
}
