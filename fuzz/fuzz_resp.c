/*
 * Fuzz target: the RESP request decoder on an embedded channel, with the default limits,
 * small ones, or tiny ones. Checks: no sanitizer report, every buffer released, nothing
 * reaches the tail as an exception, the protocol-error command is the last message and has
 * no arguments, commands within the limits, the same commands whether fed whole or in
 * pieces.
 */
#include <eddy/resp.h>

#include "common.h"

typedef struct seen_s {
    hash_t h;
    const eddy_resp_decoder_options_t *o;
    bool failed;
} seen_t;

static void on_command(eddy_msg_t *m, void *arg)
{
    seen_t *s = arg;
    CHECK(!s->failed); /* nothing after the protocol error */
    eddy_resp_cmd_t *c = eddy_resp_cmd_of(m);
    CHECK(c != NULL);
    if (c->error != NULL) {
        CHECK(c->argc == 0);
        hash_bytes(&s->h, c->error, strlen(c->error));
        s->failed = true;
        return;
    }
    CHECK(c->argc >= 1);
    hash_int(&s->h, (int64_t)c->argc);
    hash_int(&s->h, c->is_inline);
    for (size_t i = 0; i < c->argc; i++) {
        hash_int(&s->h, (int64_t)c->argv[i].len);
        hash_bytes(&s->h, c->argv[i].ptr, c->argv[i].len);
        if (s->o->max_bulk_len != 0 && !c->is_inline) {
            CHECK(c->argv[i].len <= s->o->max_bulk_len);
        }
    }
    if (s->o->max_array_len != 0 && !c->is_inline) {
        CHECK(c->argc <= s->o->max_array_len);
    }
}

static uint64_t run(const uint8_t *p, size_t n, uint8_t mode, uint8_t opt)
{
    eddy_resp_decoder_options_t o = {0};
    if (opt & 1) {
        o.max_bulk_len = 32;
        o.max_array_len = 8;
        o.max_inline_len = 48;
        o.max_command_len = 96;
    } else if (opt & 2) {
        o.max_bulk_len = 3;
        o.max_array_len = 2;
        o.max_inline_len = 5;
        o.max_command_len = 2;
    }
    eddy_channel_t *ch = eddy_embedded_channel_new();
    CHECK(ch != NULL);
    add_decoder(ch, "resp", eddy_resp_decoder_ops(), eddy_resp_decoder_new(&o), opt);
    seen_t seen = {HASH_INIT, &o, false};
    hash_t out = HASH_INIT;
    feed(ch, p, n, mode, on_command, &seen, &out);
    eddy_embedded_finish(ch);
    return seen.h.h ^ (out.h * 31);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(run, data, size);
    return 0;
}
