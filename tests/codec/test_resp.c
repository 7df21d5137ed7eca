/*
 * codec/resp/ through the embedded channel: the request decoder fed whole, coalesced,
 * byte by byte and in odd chunks (both cumulators), inline requests with quotes, malformed and
 * oversized input ending the stream with one error command; the reply writers byte for byte;
 * and the example server's commands (examples/resp_store.c) behind the decoder, with replies
 * batched per read and a protocol error answered then closed. Nothing leaked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/resp.h>

#include "examples/resp_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

enum { WHOLE, BYTE_BY_BYTE, CHUNKS_OF_3, CHUNKS_OF_7, FEED_MODES };

static eddy_channel_t *decoder_channel(const eddy_resp_decoder_options_t *o, eddy_cumulator_t cum)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    eddy_decoder_t *d = eddy_resp_decoder_new(o);
    assert_non_null(d);
    assert_int_equal(eddy_decoder_set_cumulator(d, cum), 0);
    assert_int_equal(eddy_pipeline_add_last(eddy_channel_pipeline(ch), "resp",
                                            eddy_resp_decoder_ops(), d, eddy_free_state),
                     0);
    return ch;
}

static void feed(eddy_channel_t *ch, const void *bytes, size_t n, int mode)
{
    size_t chunk = mode == BYTE_BY_BYTE ? 1 : mode == CHUNKS_OF_3 ? 3 : mode == CHUNKS_OF_7 ? 7 : n;
    const uint8_t *p = bytes;
    for (size_t off = 0; off < n;) {
        size_t k = chunk < n - off ? chunk : n - off;
        eddy_buf_t *b = eddy_buf_from(p + off, k);
        assert_non_null(b);
        eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        off += k;
    }
}

/* The commands that came out, as "ARG|ARG|..." per line ("!text" for the error command),
 * into out (NUL-terminated). */
static void collect(eddy_channel_t *ch, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
        eddy_resp_cmd_t *cmd = eddy_resp_cmd_of(m);
        assert_non_null(cmd);
        if (cmd->error != NULL) {
            assert_int_equal(cmd->argc, 0);
            n += (size_t)snprintf(out + n, cap - n, "!%s", cmd->error);
        }
        for (size_t i = 0; i < cmd->argc; i++) {
            assert_true(n + cmd->argv[i].len + 2 < cap);
            if (i > 0) {
                out[n++] = '|';
            }
            memcpy(out + n, cmd->argv[i].ptr, cmd->argv[i].len);
            n += cmd->argv[i].len;
        }
        out[n++] = '\n';
        out[n] = '\0';
        eddy_resp_cmd_release(cmd);
    }
}

/* Feed stream in every mode and both cumulators; each time the commands must be expected. */
static void expect_decoded(const eddy_resp_decoder_options_t *o, const char *stream, size_t n,
                           const char *expected)
{
    static char got[65536];
    for (int cum = 0; cum < 2; cum++) {
        for (int mode = 0; mode < FEED_MODES; mode++) {
            int64_t live = eddy_buf_live_count();
            eddy_channel_t *ch = decoder_channel(o, (eddy_cumulator_t)cum);
            feed(ch, stream, n, mode);
            collect(ch, got, sizeof(got));
            if (strcmp(got, expected) != 0) {
                fail_msg("cumulator %d, mode %d: got\n%s\nexpected\n%s", cum, mode, got, expected);
            }
            eddy_embedded_finish(ch);
            assert_int_equal(eddy_buf_live_count(), live);
        }
    }
}

#define EXPECT(o, lit, expected) expect_decoded(o, lit, sizeof(lit) - 1, expected)

/* ---------------------------------------------------------------------------------------
 * The decoder
 */

static void test_resp_decodes_multibulk_commands(void **state)
{
    (void)state;
    EXPECT(NULL, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n", "SET|k|value\n");
    EXPECT(NULL, "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "PING\nGET|k\n");
    /* Bulks are binary: CR, LF, NUL inside; an empty one. */
    EXPECT(NULL, "*3\r\n$3\r\nSET\r\n$0\r\n\r\n$4\r\na\r\nb\r\n", "SET||a\r\nb\n");
}

static void test_resp_decodes_coalesced_pipelines_in_order(void **state)
{
    (void)state;
    char stream[4096], expected[4096];
    size_t n = 0, e = 0;
    for (int i = 0; i < 50; i++) {
        char key[16];
        int k = snprintf(key, sizeof(key), "key:%d", i);
        n += (size_t)snprintf(stream + n, sizeof(stream) - n, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", k,
                              key);
        e += (size_t)snprintf(expected + e, sizeof(expected) - e, "GET|%s\n", key);
    }
    expect_decoded(NULL, stream, n, expected);
}

static void test_resp_decodes_inline_commands_like_redis(void **state)
{
    (void)state;
    EXPECT(NULL, "PING\r\n", "PING\n");
    EXPECT(NULL, "set  k   v\n", "set|k|v\n");
    EXPECT(NULL, "SET k \"two words\\r\\n\\x41\"\r\n", "SET|k|two words\r\nA\n");
    EXPECT(NULL, "SET k 'it\\'s'\r\n", "SET|k|it's\n");
    EXPECT(NULL, "ECHO \"\"\r\n", "ECHO|\n");
    /* Empty lines are no commands at all, as *0 and *-1 are. */
    EXPECT(NULL, "\r\n   \r\nPING\r\n*0\r\n*-1\r\nPING\r\n", "PING\nPING\n");
    /* Inline and multibulk mixed. */
    EXPECT(NULL, "PING\r\n*1\r\n$4\r\nPING\r\nECHO x\r\n", "PING\nPING\nECHO|x\n");
}

static void test_resp_malformed_input_ends_the_stream_with_one_error(void **state)
{
    (void)state;
    /* What came before is emitted first; what comes after is dropped. */
    EXPECT(NULL, "PING\r\n*1\r\n+PING\r\n*1\r\n$4\r\nPING\r\n",
           "PING\n!Protocol error: expected '$', got '+'\n");
    EXPECT(NULL, "*x\r\n", "!Protocol error: invalid multibulk length\n");
    EXPECT(NULL, "*1\r\n$abc\r\n", "!Protocol error: invalid bulk length\n");
    EXPECT(NULL, "*1\r\n$-1\r\n", "!Protocol error: invalid bulk length\n");
    EXPECT(NULL, "*1\r\n$01\r\nx\r\n", "!Protocol error: invalid bulk length\n");
    EXPECT(NULL, "*1\r\n$4\r\nPINGxx", "!Protocol error: expected CRLF after bulk string\n");
    EXPECT(NULL, "SET k \"open\r\n", "!Protocol error: unbalanced quotes in request\n");
    EXPECT(NULL, "SET k \"a\"b\r\n", "!Protocol error: unbalanced quotes in request\n");
    /* An incomplete command at the end of input is dropped without a word. */
    EXPECT(NULL, "PING\r\n*2\r\n$3\r\nGET\r\n", "PING\n");
}

static void test_resp_oversized_input_ends_the_stream_with_one_error(void **state)
{
    (void)state;
    eddy_resp_decoder_options_t o = {
        .max_bulk_len = 16, .max_array_len = 4, .max_inline_len = 32, .max_command_len = 64};
    EXPECT(&o, "*1\r\n$16\r\n0123456789abcdef\r\n", "0123456789abcdef\n");
    EXPECT(&o, "*1\r\n$17\r\n", "!Protocol error: invalid bulk length\n");
    EXPECT(&o, "*1\r\n$999999999999999999999\r\n", "!Protocol error: invalid bulk length\n");
    EXPECT(&o, "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n", "a|b|c|d\n");
    EXPECT(&o, "*5\r\n", "!Protocol error: invalid multibulk length\n");
    EXPECT(&o, "*1048577\r\n", "!Protocol error: invalid multibulk length\n");
    EXPECT(&o, "PING 0123456789012345678901234567890123456789",
           "!Protocol error: too big inline request\n");
    EXPECT(&o, "PING 0123456789012345678901234567890123456789\r\n",
           "!Protocol error: too big inline request\n");
    EXPECT(&o, "*0000000000000000000000000000000000000001",
           "!Protocol error: too big mbulk count string\n");
    EXPECT(&o, "*1\r\n$0000000000000000000000000000000000000001",
           "!Protocol error: too big bulk count string\n");
    EXPECT(&o, "*4\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$16\r\n",
           "!Protocol error: command too long\n");
    /* The defaults: 64 MiB bulks, 1M arguments. */
    EXPECT(NULL, "*1\r\n$67108865\r\n", "!Protocol error: invalid bulk length\n");
    EXPECT(NULL, "*1048577\r\n", "!Protocol error: invalid multibulk length\n");
}

static void test_resp_arguments_point_into_the_bytes_read(void **state)
{
    (void)state;
    eddy_channel_t *ch = decoder_channel(NULL, EDDY_CUMULATOR_MERGE);
    const char *s = "*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n";
    eddy_buf_t *b = eddy_buf_from(s, strlen(s));
    const uint8_t *base = eddy_buf_read_ptr(b);
    eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
    eddy_resp_cmd_t *cmd = eddy_resp_cmd_of(eddy_embedded_read_inbound(ch));
    assert_non_null(cmd);
    assert_false(cmd->is_inline);
    assert_ptr_equal(cmd->argv[1].ptr, base + 18); /* no copy */
    assert_true(eddy_resp_arg_is(cmd, 0, "echo"));
    assert_true(eddy_resp_arg_is(cmd, 0, "ECHO"));
    assert_false(eddy_resp_arg_is(cmd, 0, "ech"));
    assert_false(eddy_resp_arg_is(cmd, 0, "echoo"));
    assert_false(eddy_resp_arg_is(cmd, 2, "x"));
    eddy_resp_cmd_release(cmd);
    assert_true(eddy_embedded_finish(ch));
}

static void test_resp_parse_int_accepts_what_redis_does(void **state)
{
    (void)state;
    int64_t v;
#define OK_INT(s, want)                                                                            \
    assert_true(eddy_resp_parse_int((const uint8_t *)(s), strlen(s), &v));                         \
    assert_true(v == (want))
#define BAD_INT(s) assert_false(eddy_resp_parse_int((const uint8_t *)(s), strlen(s), &v))
    OK_INT("0", 0);
    OK_INT("-1", -1);
    OK_INT("9223372036854775807", INT64_MAX);
    OK_INT("-9223372036854775808", INT64_MIN);
    BAD_INT("");
    BAD_INT("-");
    BAD_INT("+1");
    BAD_INT("01");
    BAD_INT("-0");
    BAD_INT(" 1");
    BAD_INT("1x");
    BAD_INT("9223372036854775808");
    BAD_INT("-9223372036854775809");
    BAD_INT("99999999999999999999");
#undef OK_INT
#undef BAD_INT
}

/* ---------------------------------------------------------------------------------------
 * The writers
 */

static void expect_buf(eddy_buf_t *b, const char *s)
{
    size_t n = strlen(s);
    if (eddy_buf_readable(b) != n || memcmp(eddy_buf_read_ptr(b), s, n) != 0) {
        fail_msg("got \"%.*s\", expected \"%s\"", (int)eddy_buf_readable(b),
                 (const char *)eddy_buf_read_ptr(b), s);
    }
    eddy_buf_clear(b);
}

static void test_resp_writers_write_every_reply_type(void **state)
{
    (void)state;
    eddy_buf_t *b = eddy_buf_new(8);
    assert_non_null(b);
    assert_int_equal(eddy_resp_write_simple(b, "OK", 2), 0);
    expect_buf(b, "+OK\r\n");
    assert_int_equal(eddy_resp_write_simple(b, "a\r\nb", 4), 0);
    expect_buf(b, "+a  b\r\n");
    assert_int_equal(eddy_resp_write_error(b, "ERR bad\n", 8), 0);
    expect_buf(b, "-ERR bad \r\n");
    assert_int_equal(eddy_resp_write_errorf(b, "ERR %s %d", "x", 42), 0);
    expect_buf(b, "-ERR x 42\r\n");
    assert_int_equal(eddy_resp_write_integer(b, 0), 0);
    expect_buf(b, ":0\r\n");
    assert_int_equal(eddy_resp_write_integer(b, INT64_MIN), 0);
    expect_buf(b, ":-9223372036854775808\r\n");
    assert_int_equal(eddy_resp_write_integer(b, INT64_MAX), 0);
    expect_buf(b, ":9223372036854775807\r\n");
    assert_int_equal(eddy_resp_write_bulk(b, "a\r\nb", 4), 0);
    expect_buf(b, "$4\r\na\r\nb\r\n");
    assert_int_equal(eddy_resp_write_bulk(b, NULL, 0), 0);
    expect_buf(b, "$0\r\n\r\n");
    assert_int_equal(eddy_resp_write_bulk_str(b, "hello"), 0);
    expect_buf(b, "$5\r\nhello\r\n");
    assert_int_equal(eddy_resp_write_null_bulk(b), 0);
    expect_buf(b, "$-1\r\n");
    assert_int_equal(eddy_resp_write_array(b, 2), 0);
    assert_int_equal(eddy_resp_write_integer(b, 1), 0);
    assert_int_equal(eddy_resp_write_null_bulk(b), 0);
    expect_buf(b, "*2\r\n:1\r\n$-1\r\n");
    assert_int_equal(eddy_resp_write_null_array(b), 0);
    expect_buf(b, "*-1\r\n");
    eddy_buf_release(b);

    /* A buffer that cannot grow says so. */
    eddy_buf_t *small = eddy_buf_alloc(NULL, 4, 4);
    assert_non_null(small);
    assert_int_equal(eddy_resp_write_bulk_str(small, "hello"), EDDY_ECAPACITY);
    eddy_buf_release(small);
}

/* ---------------------------------------------------------------------------------------
 * The example server's commands behind the decoder: a handler as eddy-resp-server's, with
 * the replies of one read in one buffer, flushed at read_complete.
 */

typedef struct conn_s {
    resp_store_t *store;
    eddy_buf_t *out;
    bool closing; /* the last reply is on its way: the rest is ignored */
} conn_t;

static void conn_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *c = eddy_ctx_state(ctx);
    eddy_resp_cmd_t *cmd = eddy_resp_cmd_of(msg);
    assert_non_null(cmd);
    if (c->closing) {
        eddy_resp_cmd_release(cmd);
        return;
    }
    if (c->out == NULL) {
        c->out = eddy_buf_new(64);
        assert_non_null(c->out);
    }
    int rc = cmd->error != NULL ? eddy_resp_write_errorf(c->out, "ERR %s", cmd->error)
                                : resp_store_exec(c->store, cmd, c->out);
    assert_true(rc >= 0);
    if (cmd->error != NULL || rc == RESP_STORE_CLOSE) {
        /* The close may run at once (the write completes inside), removing this handler:
         * its state must not hold the buffer any more. */
        eddy_buf_t *last = c->out;
        c->out = NULL;
        c->closing = true;
        eddy_resp_close_after_flush(ctx, eddy_buf_msg(last));
    }
    eddy_resp_cmd_release(cmd);
}

static void conn_read_complete(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->out != NULL) {
        eddy_ctx_write_and_flush(ctx, eddy_buf_msg(c->out), NULL);
        c->out = NULL;
    }
}

static void conn_removed(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->out != NULL) {
        eddy_buf_release(c->out);
        c->out = NULL;
    }
}

static const eddy_handler_ops_t conn_ops = {
    .name = "conn",
    .handler_removed = conn_removed,
    .channel_read = conn_read,
    .channel_read_complete = conn_read_complete,
};

static int64_t fake_now = 1000000;

static int64_t fake_clock(void *arg)
{
    (void)arg;
    return fake_now;
}

static eddy_channel_t *server_channel(resp_store_t *s, conn_t *c)
{
    eddy_channel_t *ch = decoder_channel(NULL, EDDY_CUMULATOR_MERGE);
    c->store = s;
    c->out = NULL;
    c->closing = false;
    assert_int_equal(eddy_pipeline_add_last(eddy_channel_pipeline(ch), "conn", &conn_ops, c, NULL),
                     0);
    return ch;
}

/* A store on the virtual clock. */
static resp_store_t *test_store(void)
{
    resp_store_t *s = resp_store_new();
    assert_non_null(s);
    resp_store_set_clock(s, fake_clock, NULL);
    return s;
}

/* Nothing left over on ch; then s goes. */
static void finish_store(eddy_channel_t *ch, resp_store_t *s)
{
    assert_true(eddy_embedded_finish(ch));
    resp_store_free(s);
}

/* Everything flushed so far, as one string (static storage). */
static const char *replies(eddy_channel_t *ch)
{
    static char got[8192];
    size_t n = 0;
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        assert_non_null(b);
        size_t k = eddy_buf_readable(b);
        assert_true(n + k < sizeof(got));
        memcpy(got + n, eddy_buf_read_ptr(b), k);
        n += k;
        eddy_msg_release(m);
    }
    got[n] = '\0';
    return got;
}

static void roundtrip(eddy_channel_t *ch, const char *request, const char *expected)
{
    feed(ch, request, strlen(request), WHOLE);
    const char *got = replies(ch);
    if (strcmp(got, expected) != 0) {
        fail_msg("%s: got \"%s\", expected \"%s\"", request, got, expected);
    }
}

static void test_resp_store_answers_like_redis(void **state)
{
    (void)state;
    resp_store_t *s = test_store();
    conn_t c;
    eddy_channel_t *ch = server_channel(s, &c);
    roundtrip(ch, "PING\r\n", "+PONG\r\n");
    roundtrip(ch, "PING hi\r\n", "$2\r\nhi\r\n");
    roundtrip(ch, "PING a b\r\n", "-ERR wrong number of arguments for 'ping' command\r\n");
    roundtrip(ch, "ECHO \"a b\"\r\n", "$3\r\na b\r\n");
    roundtrip(ch, "GET k\r\n", "$-1\r\n");
    roundtrip(ch, "SET k v\r\nGET k\r\n", "+OK\r\n$1\r\nv\r\n");
    roundtrip(ch, "SET k w NX\r\nSET k w XX\r\nGET k\r\n", "$-1\r\n+OK\r\n$1\r\nw\r\n");
    roundtrip(ch, "SET n v XX\r\nSET n 1 NX\r\n", "$-1\r\n+OK\r\n");
    roundtrip(ch, "SET k v NX XX\r\n", "-ERR syntax error\r\n");
    roundtrip(ch, "SET k v EX\r\n", "-ERR syntax error\r\n");
    roundtrip(ch, "SET k v EX 1 PX 1\r\n", "-ERR syntax error\r\n");
    roundtrip(ch, "SET k v FOO\r\n", "-ERR syntax error\r\n");
    roundtrip(ch, "SET k v EX x\r\n", "-ERR value is not an integer or out of range\r\n");
    roundtrip(ch, "SET k v EX x FOO\r\n", "-ERR syntax error\r\n");
    roundtrip(ch, "SET k v EX 0\r\n", "-ERR invalid expire time in 'set' command\r\n");
    roundtrip(ch, "SET k v PX -5\r\n", "-ERR invalid expire time in 'set' command\r\n");
    roundtrip(ch, "SET k v EX 9223372036854775\r\n",
              "-ERR invalid expire time in 'set' command\r\n");
    roundtrip(ch, "INCR n\r\nINCR n\r\nDECR n\r\nINCRBY n 10\r\nDECRBY n 3\r\n",
              ":2\r\n:3\r\n:2\r\n:12\r\n:9\r\n");
    roundtrip(ch, "INCR fresh\r\nDECR fresh2\r\n", ":1\r\n:-1\r\n");
    roundtrip(ch, "INCR k\r\n", "-ERR value is not an integer or out of range\r\n");
    roundtrip(ch, "SET big 9223372036854775807\r\nINCR big\r\n",
              "+OK\r\n-ERR increment or decrement would overflow\r\n");
    roundtrip(ch, "SET sp \" 1\"\r\nINCR sp\r\n",
              "+OK\r\n-ERR value is not an integer or out of range\r\n");
    roundtrip(ch, "EXISTS k n nope k\r\n", ":3\r\n");
    roundtrip(ch, "DEL k nope\r\nEXISTS k\r\n", ":1\r\n:0\r\n");
    roundtrip(ch, "GET\r\n", "-ERR wrong number of arguments for 'get' command\r\n");
    roundtrip(ch, "set a\r\n", "-ERR wrong number of arguments for 'set' command\r\n");
    roundtrip(ch, "NOPE a b\r\n",
              "-ERR unknown command 'NOPE', with args beginning with: 'a' 'b' \r\n");
    roundtrip(ch, "COMMAND\r\nCOMMAND DOCS\r\n", "*0\r\n*0\r\n");
    roundtrip(ch, "CONFIG GET save\r\nCONFIG GET appendonly\r\n",
              "*2\r\n$4\r\nsave\r\n$0\r\n\r\n*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
    /* Extra arguments are a syntax error, as in Redis: they must not flush anything. */
    roundtrip(ch, "FLUSHALL ASYNC x\r\nFLUSHDB SYNC SYNC\r\nDBSIZE\r\n",
              "-ERR syntax error\r\n-ERR syntax error\r\n:5\r\n");
    roundtrip(ch, "FLUSHALL\r\nDBSIZE\r\n", "+OK\r\n:0\r\n");
    finish_store(ch, s);
}

static void test_resp_store_expires_keys_on_access_and_by_sweeping(void **state)
{
    (void)state;
    resp_store_t *s = test_store();
    conn_t c;
    eddy_channel_t *ch = server_channel(s, &c);
    roundtrip(ch, "SET a 1 EX 10\r\nTTL a\r\nPTTL a\r\n", "+OK\r\n:10\r\n:10000\r\n");
    roundtrip(ch, "SET b 1 PX 1500\r\nTTL b\r\nTTL nope\r\nSET c 1\r\nTTL c\r\n",
              "+OK\r\n:2\r\n:-2\r\n+OK\r\n:-1\r\n");
    roundtrip(ch, "INCR a\r\nTTL a\r\n", ":2\r\n:10\r\n"); /* INCR keeps the TTL */
    roundtrip(ch, "SET a 5 KEEPTTL\r\nTTL a\r\nSET a 5\r\nTTL a\r\nEXPIRE a 10\r\n",
              "+OK\r\n:10\r\n+OK\r\n:-1\r\n:1\r\n");
    roundtrip(ch, "EXPIRE nope 10\r\nEXPIRE c 100\r\nTTL c\r\n", ":0\r\n:1\r\n:100\r\n");
    roundtrip(ch, "EXPIRE c 50 NX\r\nEXPIRE c 50 GT\r\nEXPIRE c 50 LT\r\nTTL c\r\n",
              ":0\r\n:0\r\n:1\r\n:50\r\n");
    roundtrip(ch, "EXPIRE c 10 NX XX\r\n",
              "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n");
    roundtrip(ch, "EXPIRE c 10 FOO\r\n", "-ERR Unsupported option FOO\r\n");
    roundtrip(ch, "EXPIRE c x\r\n", "-ERR value is not an integer or out of range\r\n");
    roundtrip(ch, "PERSIST c\r\nTTL c\r\nPERSIST c\r\n", ":1\r\n:-1\r\n:0\r\n");
    roundtrip(ch, "DBSIZE\r\n", ":3\r\n");
    fake_now += 1500; /* b is due; nobody asks for it */
    size_t expires;
    assert_int_equal(resp_store_size(s, &expires), 3);
    assert_int_equal(expires, 2);
    size_t swept = 0;
    for (int i = 0; i < 64; i++) {
        swept += resp_store_expire_cycle(s, 0, 1, 64);
    }
    assert_int_equal(swept, 1);
    roundtrip(ch, "DBSIZE\r\nEXISTS b\r\n", ":2\r\n:0\r\n");
    fake_now += 10000; /* a is due: the lookup deletes it */
    roundtrip(ch, "GET a\r\nTTL a\r\nDBSIZE\r\n", "$-1\r\n:-2\r\n:1\r\n");
    roundtrip(ch, "EXPIRE c -1\r\nEXISTS c\r\n", ":1\r\n:0\r\n"); /* the past deletes */
    roundtrip(ch, "INFO keyspace\r\n", "$12\r\n# Keyspace\r\n\r\n");
    finish_store(ch, s);
}

static void test_resp_store_expired_keys_leave_their_chains_intact(void **state)
{
    (void)state;
    resp_store_t *s = test_store();
    conn_t c;
    eddy_channel_t *ch = server_channel(s, &c);
    char req[128], want[128];
    /* 2000 keys in 1024 buckets: chains, with expiring and lasting keys mixed in them. */
    for (int i = 0; i < 1000; i++) {
        snprintf(req, sizeof(req), "SET x:%d 1 PX 10\r\nSET y:%d %d\r\n", i, i, i);
        roundtrip(ch, req, "+OK\r\n+OK\r\n");
    }
    fake_now += 20;
    /* Each SET finds its key expired, deletes it on the way and inserts anew. */
    for (int i = 0; i < 1000; i++) {
        snprintf(req, sizeof(req), "SET x:%d 2 NX\r\n", i);
        roundtrip(ch, req, "+OK\r\n");
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(req, sizeof(req), "GET y:%d\r\nGET x:%d\r\n", i, i);
        snprintf(want, sizeof(want), "$%d\r\n%d\r\n$1\r\n2\r\n", snprintf(NULL, 0, "%d", i), i);
        roundtrip(ch, req, want);
    }
    roundtrip(ch, "DBSIZE\r\n", ":2000\r\n");
    finish_store(ch, s);
}

/* SET count keys named prefix:i with value 1 and options opts (" PX 10", ""), 100 a feed. */
static void set_many(eddy_channel_t *ch, const char *prefix, int count, const char *opts)
{
    char req[8192], want[1024];
    for (int i = 0; i < count;) {
        size_t n = 0, w = 0;
        for (int k = 0; k < 100 && i < count; k++, i++) {
            n += (size_t)snprintf(req + n, sizeof(req) - n, "SET %s:%d 1%s\r\n", prefix, i, opts);
            w += (size_t)snprintf(want + w, sizeof(want) - w, "+OK\r\n");
        }
        roundtrip(ch, req, want);
    }
}

static void test_resp_store_sweeping_keeps_up_with_expired_keys(void **state)
{
    (void)state;
    resp_store_t *s = test_store();
    conn_t c;
    eddy_channel_t *ch = server_channel(s, &c);
    /* 20000 keys nobody asks for again, all due: one sweep of 64 buckets a shard must not
     * leave most of them in memory (Redis' active expiry goes on while it finds many). */
    set_many(ch, "t", 20000, " PX 10");
    set_many(ch, "keep", 50, "");
    fake_now += 20;
    assert_int_equal(resp_store_expire_cycle(s, 0, 1, 64), 20000);
    size_t expires;
    assert_int_equal(resp_store_size(s, &expires), 50);
    assert_int_equal(expires, 0);

    /* FLUSHALL gives the tables back: a few new keys sit in small tables again, and one
     * sweep of a bucket at a time finds them all. */
    roundtrip(ch, "FLUSHALL\r\n", "+OK\r\n");
    set_many(ch, "u", 64, " PX 10");
    fake_now += 20;
    assert_int_equal(resp_store_expire_cycle(s, 0, 1, 1), 64);
    assert_int_equal(resp_store_size(s, NULL), 0);
    finish_store(ch, s);
}

static void test_resp_decodes_a_large_bulk_trickling_in(void **state)
{
    (void)state;
    size_t len = 256 * 1024;
    char *stream = malloc(len + 64);
    assert_non_null(stream);
    int h = snprintf(stream, 64, "*2\r\n$4\r\nECHO\r\n$%zu\r\n", len);
    for (size_t i = 0; i < len; i++) {
        stream[(size_t)h + i] = (char)('a' + i % 26);
    }
    memcpy(stream + h + len, "\r\n", 2);
    size_t n = (size_t)h + len + 2;
    for (int cum = 0; cum < 2; cum++) {
        eddy_channel_t *ch = decoder_channel(NULL, (eddy_cumulator_t)cum);
        for (size_t off = 0; off < n; off += 1000) {
            eddy_buf_t *b = eddy_buf_from(stream + off, n - off < 1000 ? n - off : 1000);
            assert_non_null(b);
            eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        }
        eddy_resp_cmd_t *cmd = eddy_resp_cmd_of(eddy_embedded_read_inbound(ch));
        assert_non_null(cmd);
        assert_int_equal(cmd->argc, 2);
        assert_int_equal(cmd->argv[1].len, len);
        assert_memory_equal(cmd->argv[1].ptr, stream + h, len);
        eddy_resp_cmd_release(cmd);
        assert_true(eddy_embedded_finish(ch));
    }
    free(stream);
}

static void test_resp_protocol_error_is_answered_then_closes(void **state)
{
    (void)state;
    resp_store_t *s = test_store();
    conn_t c;
    eddy_channel_t *ch = server_channel(s, &c);
    /* The commands before the error are answered first, in order, in the same flush. */
    roundtrip(ch, "PING\r\n*1\r\n$99999999999\r\nPING\r\n",
              "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n");
    assert_false(eddy_channel_is_open(ch));
    assert_true(eddy_embedded_finish(ch));

    ch = server_channel(s, &c);
    roundtrip(ch, "QUIT\r\nPING\r\n", "+OK\r\n");
    assert_false(eddy_channel_is_open(ch));
    /* The PING decoded with the QUIT goes past the removed handlers to the end of the
     * pipeline, unanswered (no handler sees an event after handler_removed). */
    eddy_msg_t *late = eddy_embedded_read_inbound(ch);
    assert_non_null(late);
    assert_non_null(eddy_resp_cmd_of(late));
    eddy_msg_release(late);
    finish_store(ch, s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_decodes_multibulk_commands),
        cmocka_unit_test(test_resp_decodes_coalesced_pipelines_in_order),
        cmocka_unit_test(test_resp_decodes_inline_commands_like_redis),
        cmocka_unit_test(test_resp_malformed_input_ends_the_stream_with_one_error),
        cmocka_unit_test(test_resp_oversized_input_ends_the_stream_with_one_error),
        cmocka_unit_test(test_resp_arguments_point_into_the_bytes_read),
        cmocka_unit_test(test_resp_parse_int_accepts_what_redis_does),
        cmocka_unit_test(test_resp_writers_write_every_reply_type),
        cmocka_unit_test(test_resp_store_answers_like_redis),
        cmocka_unit_test(test_resp_store_expires_keys_on_access_and_by_sweeping),
        cmocka_unit_test(test_resp_store_expired_keys_leave_their_chains_intact),
        cmocka_unit_test(test_resp_store_sweeping_keeps_up_with_expired_keys),
        cmocka_unit_test(test_resp_decodes_a_large_bulk_trickling_in),
        cmocka_unit_test(test_resp_protocol_error_is_answered_then_closes),
    };
    return cmocka_run_group_tests_name("codec.resp", tests, NULL, NULL);
}
