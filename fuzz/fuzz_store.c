/*
 * Fuzz target: eddy-resp-server's commands (examples/resp_store.c) behind the RESP decoder,
 * on a store whose clock moves 300 ms per command so that deadlines pass. Whatever the
 * arguments (numbers out of range, options in any order, unknown commands, keys and values
 * of any bytes), each command gets a reply, nothing leaks, and no sanitizer speaks.
 */
#include <eddy/resp.h>

#include "common.h"
#include "examples/resp_store.h"

typedef struct run_s {
    resp_store_t *store;
    int64_t now_ms;
    eddy_buf_t *out;
    hash_t h;
    bool closed;
} run_t;

static int64_t clock_of(void *arg)
{
    return ((run_t *)arg)->now_ms;
}

static void on_command(eddy_msg_t *m, void *arg)
{
    run_t *r = arg;
    eddy_resp_cmd_t *c = eddy_resp_cmd_of(m);
    CHECK(c != NULL);
    if (c->error != NULL || r->closed) {
        return; /* the server answers the error and closes; nothing after QUIT is run */
    }
    r->now_ms += 300;
    eddy_buf_clear(r->out);
    int rc = resp_store_exec(r->store, c, r->out);
    CHECK(rc == 0 || rc == RESP_STORE_CLOSE);
    CHECK(eddy_buf_readable(r->out) > 0); /* every command gets a reply */
    r->closed = rc == RESP_STORE_CLOSE;
    const uint8_t *reply = eddy_buf_read_ptr(r->out);
    CHECK(reply[0] == '+' || reply[0] == '-' || reply[0] == ':' || reply[0] == '$' ||
          reply[0] == '*');
    /* INFO reports uptime and the like: only the first byte goes into the hash. */
    hash_bytes(&r->h, reply, 1);
}

static uint64_t run(const uint8_t *p, size_t n, uint8_t mode, uint8_t opt)
{
    (void)opt;
    run_t r = {.store = resp_store_new(), .now_ms = 1000, .out = eddy_buf_new(256), .h = HASH_INIT};
    CHECK(r.store != NULL && r.out != NULL);
    resp_store_set_clock(r.store, clock_of, &r);
    eddy_channel_t *ch = eddy_embedded_channel_new();
    CHECK(ch != NULL);
    eddy_resp_decoder_options_t o = {0};
    add_decoder(ch, "resp", eddy_resp_decoder_ops(), eddy_resp_decoder_new(&o), 0); /* merged */
    hash_t out = HASH_INIT;
    feed(ch, p, n, mode, on_command, &r, &out);
    r.now_ms += 100000;
    resp_store_expire_cycle(r.store, 0, 1, 1u << 20);
    eddy_embedded_finish(ch);
    eddy_buf_release(r.out);
    resp_store_free(r.store);
    return r.h.h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(run, data, size);
    return 0;
}
