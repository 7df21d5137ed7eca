/*
 * The chunked writer (pipeline/handler/chunked.c): on the embedded channel, an input's chunks
 * in order with what was written before and after it and its promise completed after the
 * last; a failing input failing its promise and closing; on a real loopback socket, a slow
 * reader of a 64 MiB generated input with what was generated and not yet read bounded by the
 * water marks and the socket buffers, not by the input. Bounded in time; closes what it opens.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/handler.h>
#include <eddy/pipeline.h>

#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE_MS 10000

#include "support/socket_util.h"
#include "support/wait_util.h"

/* A generator: total bytes of a pattern, then the end (or an error at fail_at). */
typedef struct gen_s {
    _Atomic uint64_t made;
    uint64_t total, fail_at;
    _Atomic int closed;
} gen_t;

static ssize_t gen_read(void *arg, uint8_t *dst, size_t cap)
{
    gen_t *g = arg;
    uint64_t made = atomic_load(&g->made);
    if (g->fail_at != 0 && made >= g->fail_at) {
        return EDDY_EIO;
    }
    size_t n = g->total - made < cap ? (size_t)(g->total - made) : cap;
    for (size_t i = 0; i < n; i++) {
        dst[i] = (uint8_t)((made + i) * 7);
    }
    atomic_store(&g->made, made + n);
    return (ssize_t)n;
}

static void gen_close(void *arg)
{
    gen_t *g = arg;
    atomic_fetch_add(&g->closed, 1);
}

static eddy_msg_t *gen_msg(gen_t *g, size_t chunk)
{
    eddy_chunked_t *c = eddy_chunked_new(gen_read, gen_close, g, chunk);
    assert_non_null(c);
    return eddy_chunked_msg(c);
}

static eddy_msg_t *text(const char *s)
{
    return eddy_buf_msg(eddy_buf_from(s, strlen(s)));
}

static size_t readable_of(eddy_msg_t *m)
{
    size_t n = eddy_buf_readable(eddy_buf_of(m));
    eddy_msg_release(m);
    return n;
}

static void test_chunked_writes_chunks_in_order_then_completes(void **state)
{
    (void)state;
    gen_t g = {.total = 2500};
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_chunked_writer()), 0);
    eddy_channel_write(ch, text("head"), NULL);
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_channel_write(ch, gen_msg(&g, 1000), p);
    eddy_channel_write(ch, text("tail"), NULL);
    eddy_channel_flush(ch);
    eddy_embedded_run_pending(ch);
    size_t want[] = {4, 1000, 1000, 500, 0, 4};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        eddy_msg_t *m = eddy_embedded_read_outbound(ch);
        assert_non_null(m);
        assert_int_equal(readable_of(m), want[i]);
    }
    assert_int_equal(eddy_future_await(p, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(p), 0);
    eddy_future_release(p);
    assert_int_equal(atomic_load(&g.closed), 1);
    assert_true(eddy_embedded_finish(ch));
}

static void test_chunked_input_that_fails_fails_its_promise_and_closes(void **state)
{
    (void)state;
    gen_t g = {.total = 5000, .fail_at = 2000};
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_chunked_writer()), 0);
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_channel_write_and_flush(ch, gen_msg(&g, 1000), p);
    eddy_embedded_run_pending(ch);
    assert_int_equal(eddy_future_await(p, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(p), EDDY_EIO);
    eddy_future_release(p);
    assert_int_equal(atomic_load(&g.closed), 1);
    assert_false(eddy_channel_is_active(ch));
    eddy_embedded_finish(ch); /* the raised error and the chunks before it are left */
}

/* Writes queued behind an input count toward the channel's writability (so a decoder
 * upstream stops passing messages while answers pile up behind a body), and stop counting
 * once they went on; a write once the channel closed is refused at once, not queued. */
static void test_chunked_writes_queued_behind_an_input_hold_writability(void **state)
{
    (void)state;
    gen_t g = {.total = 3000};
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 4096), 0);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 8192), 0);
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_chunked_writer()), 0);
    eddy_channel_write(ch, gen_msg(&g, 1000), NULL);
    char kib[1025];
    memset(kib, 'k', 1024);
    kib[1024] = '\0';
    int queued = 0;
    while (eddy_channel_is_writable(ch)) {
        assert_true(queued < 16); /* about 8 KiB of writes held, not more */
        eddy_channel_write(ch, text(kib), NULL);
        queued++;
    }
    assert_true(queued >= 5);
    eddy_channel_flush(ch);
    eddy_embedded_run_pending(ch);
    assert_true(eddy_channel_is_writable(ch));
    size_t total = 0;
    for (eddy_msg_t *m; (m = eddy_embedded_read_outbound(ch)) != NULL;) {
        total += readable_of(m);
    }
    assert_int_equal(total, 3000 + (size_t)queued * 1024);
    eddy_channel_write(ch, gen_msg(&g, 1000), NULL); /* busy again, then closed */
    eddy_channel_close(ch, NULL);
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_channel_write(ch, text("late"), p);
    assert_int_equal(eddy_future_await(p, DEADLINE_MS), 0);
    assert_int_not_equal(eddy_future_error(p), 0);
    eddy_future_release(p);
    eddy_embedded_finish(ch);
}

/* ---------------------------------------------------------------------------------------
 * A slow reader over a socket
 */

static _Atomic(eddy_channel_t *) child;

static int init_child(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    atomic_store(&child, eddy_channel_retain(ch));
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_chunked_writer());
}

static void test_chunked_slow_reader_holds_bounded_memory(void **state)
{
    (void)state;
    eddy_loop_group_t *group = eddy_loop_group_new(1, NULL);
    eddy_channel_config_t config;
    eddy_channel_config_init(&config);
    eddy_channel_config_set(&config, EDDY_SO_SNDBUF, 64 * 1024);
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    eddy_listen_options_t o = {.loop = eddy_loop_group_next(group), .child_init = init_child,
                               .child_config = &config};
    eddy_future_t *f = eddy_channel_listen(&a, &o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    eddy_channel_t *listener = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    int fd = client_connect(eddy_channel_local_addr(listener));
    int rcv = 64 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    WAIT_FOR(atomic_load(&child) != NULL);
    eddy_channel_t *ch = atomic_load(&child);
    gen_t g = {.total = 64u << 20};
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_channel_write_and_flush(ch, gen_msg(&g, 16384), p);
    /* Read 8 MiB slowly: what was generated stays within a few MiB of what was read. */
    uint8_t buf[16384];
    uint64_t got = 0, ahead_max = 0;
    while (got < (8u << 20)) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        assert_true(n > 0);
        for (ssize_t i = 0; i < n; i++) {
            assert_int_equal(buf[i], (uint8_t)((got + (uint64_t)i) * 7));
        }
        got += (uint64_t)n;
        uint64_t ahead = atomic_load(&g.made) - got;
        ahead_max = ahead > ahead_max ? ahead : ahead_max;
        if ((got & 0xfffff) < (uint64_t)n) {
            usleep(20000); /* 20 ms a MiB: slower than the loop would write */
        }
    }
    assert_true(ahead_max < (8u << 20));
    assert_true(atomic_load(&g.made) < (24u << 20));
    close(fd);
    assert_int_equal(eddy_future_await(p, DEADLINE_MS), 0);
    assert_int_not_equal(eddy_future_error(p), 0); /* the peer went away: it failed */
    eddy_future_release(p);
    WAIT_FOR(atomic_load(&g.closed) == 1);
    eddy_channel_close(listener, NULL);
    eddy_channel_release(listener);
    eddy_channel_release(atomic_exchange(&child, NULL));
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(group), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunked_writes_chunks_in_order_then_completes),
        cmocka_unit_test(test_chunked_input_that_fails_fails_its_promise_and_closes),
        cmocka_unit_test(test_chunked_writes_queued_behind_an_input_hold_writability),
        cmocka_unit_test(test_chunked_slow_reader_holds_bounded_memory),
    };
    return cmocka_run_group_tests_name("pipeline.chunked", tests, NULL, NULL);
}
