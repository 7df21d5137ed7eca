/*
 * File regions (include/eddy/file.h): through the embedded channel (and the HTTP response
 * encoder, a handler that knows only its own messages and bytes), and over real loopback
 * sockets on the poller EDDY_POLLER names (sendfile on readiness, read and send on io_uring):
 * in order between the buffers written before and after, through partial sends with a small
 * send buffer, counted against the water marks, a truncated file failing the write and
 * closing the channel after a correct prefix, a write after close failing its promise, a closed
 * peer failing the write without SIGPIPE. Every
 * test is bounded in time and closes what it opened.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/file.h>
#include <eddy/http.h>
#include <eddy/pipeline.h>

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE_MS 10000

#include "support/socket_util.h"
#include "support/wait_util.h"

/* A temporary file of n bytes of a pattern (unlinked: gone with its last descriptor). */
static eddy_file_t *temp_file(size_t n, unsigned char **bytes)
{
    char path[] = "/tmp/eddy-region-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    unsigned char *b = malloc(n > 0 ? n : 1);
    for (size_t i = 0; i < n; i++) {
        b[i] = (unsigned char)(i * 131 + (i >> 11));
    }
    assert_int_equal(write(fd, b, n), (ssize_t)n);
    *bytes = b;
    eddy_file_t *f = eddy_file_adopt(fd);
    assert_non_null(f);
    return f;
}

static eddy_msg_t *region(eddy_file_t *f, uint64_t off, uint64_t len)
{
    eddy_file_region_t *r = eddy_file_region_new(f, off, len);
    assert_non_null(r);
    return eddy_file_region_msg(r);
}

static eddy_msg_t *text(const char *s)
{
    return eddy_buf_msg(eddy_buf_from(s, strlen(s)));
}

/* ---------------------------------------------------------------------------------------
 * Without sockets
 */

static void test_file_region_passes_the_embedded_channel_in_order(void **state)
{
    (void)state;
    unsigned char *bytes;
    eddy_file_t *f = temp_file(1000, &bytes);
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_true(eddy_embedded_write_outbound(ch, text("before")));
    assert_true(eddy_embedded_write_outbound(ch, region(f, 10, 100)));
    assert_true(eddy_embedded_write_outbound(ch, text("after")));
    eddy_msg_t *m = eddy_embedded_read_outbound(ch);
    assert_int_equal(m->type, EDDY_MSG_BUF);
    eddy_msg_release(m);
    m = eddy_embedded_read_outbound(ch);
    eddy_file_region_t *r = eddy_file_region_of(m);
    assert_non_null(r);
    assert_int_equal(eddy_file_region_offset(r), 10);
    assert_int_equal(eddy_file_region_remaining(r), 100);
    unsigned char got[100];
    assert_int_equal(eddy_file_region_read(r, got, sizeof(got)), 100);
    assert_memory_equal(got, bytes + 10, 100);
    eddy_msg_release(m);
    m = eddy_embedded_read_outbound(ch);
    assert_int_equal(m->type, EDDY_MSG_BUF);
    eddy_msg_release(m);
    assert_true(eddy_embedded_finish(ch));
    assert_true(eddy_file_release(f)); /* the regions let go of their references */
    free(bytes);
}

static void test_file_region_past_the_end_reads_as_truncated(void **state)
{
    (void)state;
    unsigned char *bytes;
    eddy_file_t *f = temp_file(10, &bytes);
    eddy_file_region_t *r = eddy_file_region_new(f, 4, 100);
    unsigned char got[100];
    assert_int_equal(eddy_file_region_read(r, got, sizeof(got)), 6);
    eddy_file_region_skip(r, 6);
    assert_int_equal(eddy_file_region_read(r, got, sizeof(got)), EDDY_ETRUNCATED);
    eddy_msg_release(eddy_file_region_msg(r));
    assert_true(eddy_file_release(f));
    free(bytes);
}

/* The response encoder writes the head as bytes and hands the region on untouched. */
static void test_file_region_as_a_response_body_passes_the_encoder(void **state)
{
    (void)state;
    unsigned char *bytes;
    eddy_file_t *f = temp_file(5000, &bytes);
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_response_encoder()), 0);
    eddy_http_response_t *r = eddy_http_response_new(200);
    assert_int_equal(eddy_http_response_add_body(r, region(f, 0, 5000)), 0);
    assert_int_equal(eddy_http_response_add_body(r, text("!")), 0);
    assert_int_equal(eddy_http_response_body_length(r), 5001);
    assert_true(eddy_embedded_write_outbound(ch, eddy_http_response_msg(r)));
    eddy_msg_t *m = eddy_embedded_read_outbound(ch);
    eddy_buf_t *head = eddy_buf_of(m);
    assert_non_null(head);
    assert_non_null(memmem(eddy_buf_read_ptr(head), eddy_buf_readable(head),
                           "Content-Length: 5001\r\n", 22));
    eddy_msg_release(m);
    m = eddy_embedded_read_outbound(ch);
    assert_non_null(eddy_file_region_of(m));
    assert_int_equal(eddy_file_region_remaining(eddy_file_region_of(m)), 5000);
    eddy_msg_release(m);
    m = eddy_embedded_read_outbound(ch);
    assert_int_equal(eddy_buf_readable(eddy_buf_of(m)), 1);
    eddy_msg_release(m);
    assert_true(eddy_embedded_finish(ch));
    assert_true(eddy_file_release(f));
    free(bytes);
}

/* ---------------------------------------------------------------------------------------
 * Over sockets: a server that reads nothing and writes what the test writes to its child.
 */

typedef struct server_s {
    eddy_loop_group_t *group;
    eddy_channel_t *listener;
    eddy_addr_t addr;
    _Atomic(eddy_channel_t *) child;
    _Atomic int errors, last_error, unwritable;
    eddy_channel_config_t config;
} server_t;

static void note_exception(eddy_ctx_t *ctx, int err)
{
    server_t *s = eddy_ctx_state(ctx);
    atomic_store(&s->last_error, err);
    atomic_fetch_add(&s->errors, 1);
}

static void note_writability(eddy_ctx_t *ctx)
{
    server_t *s = eddy_ctx_state(ctx);
    if (!eddy_channel_is_writable(eddy_ctx_channel(ctx))) {
        atomic_fetch_add(&s->unwritable, 1);
    }
}

static const eddy_handler_ops_t quiet_ops = {
    .name = "quiet",
    .sharable = true,
    .channel_writability_changed = note_writability,
    .exception_caught = note_exception,
};

static int init_child(eddy_channel_t *ch, void *arg)
{
    server_t *s = arg;
    atomic_store(&s->child, eddy_channel_retain(ch));
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "h", &quiet_ops, s, NULL);
}

/* Start s on at (NULL: 127.0.0.1) with a 16 KiB send buffer (partial sends), accept one
 * client. */
static int server_start_on(server_t *s, const eddy_addr_t *at)
{
    s->group = eddy_loop_group_new(1, NULL);
    assert_non_null(s->group);
    if (s->config.set == 0) {
        eddy_channel_config_init(&s->config);
    }
    eddy_channel_config_set(&s->config, EDDY_SO_SNDBUF, 16 * 1024);
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    a = at != NULL ? *at : a;
    eddy_listen_options_t o = {
        .loop = eddy_loop_group_next(s->group),
        .child_init = init_child,
        .child_arg = s,
        .child_config = &s->config,
    };
    eddy_future_t *f = eddy_channel_listen(&a, &o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    s->listener = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    s->addr = *eddy_channel_local_addr(s->listener);
    int fd = client_connect(&s->addr);
    WAIT_FOR(atomic_load(&s->child) != NULL);
    return fd;
}

static int server_start(server_t *s)
{
    return server_start_on(s, NULL);
}

static void close_and_wait(eddy_channel_t *ch)
{
    eddy_channel_close(ch, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(ch), DEADLINE_MS), 0);
    eddy_channel_release(ch);
}

static void server_stop(server_t *s)
{
    close_and_wait(s->listener);
    close_and_wait(atomic_exchange(&s->child, NULL));
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(s->group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(s->group), 0);
}

/* Read from fd until EOF or n bytes, slowly at first (so the server meets a full socket). */
static size_t read_until(int fd, unsigned char *buf, size_t n, bool eof)
{
    size_t got = 0;
    struct pollfd pfd = {fd, POLLIN, 0};
    while ((got < n || eof) && poll(&pfd, 1, DEADLINE_MS) > 0) {
        ssize_t r = recv(fd, buf + got, got < n ? n - got : 1, 0);
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
        if (got < 65536) {
            usleep(1000);
        }
    }
    return got;
}

static eddy_promise_t *write_on(eddy_channel_t *ch, eddy_msg_t *msg, bool flush)
{
    eddy_promise_t *p = eddy_promise_new(NULL);
    if (flush) {
        eddy_channel_write_and_flush(ch, msg, p);
    } else {
        eddy_channel_write(ch, msg, p);
    }
    return p;
}

static int outcome(eddy_promise_t *p)
{
    assert_int_equal(eddy_future_await(p, DEADLINE_MS), 0);
    int err = eddy_future_error(p);
    eddy_future_release(p);
    return err;
}

static void test_file_region_keeps_its_order_through_partial_sends(void **state)
{
    (void)state;
    server_t s = {0};
    int fd = server_start(&s);
    eddy_channel_t *ch = atomic_load(&s.child);
    size_t size = 3 << 20;
    unsigned char *bytes;
    eddy_file_t *f = temp_file(size, &bytes);
    eddy_promise_t *p[3];
    p[0] = write_on(ch, text("before"), false);
    p[1] = write_on(ch, region(f, 100, size - 200), false);
    /* 3 MiB queued: past the high water mark, the channel is unwritable until it drains. */
    WAIT_FOR(!eddy_channel_is_writable(ch));
    p[2] = write_on(ch, text("after"), true);
    size_t want = 6 + (size - 200) + 5;
    unsigned char *got = malloc(want);
    assert_int_equal(read_until(fd, got, want, false), want);
    assert_memory_equal(got, "before", 6);
    assert_memory_equal(got + 6, bytes + 100, size - 200);
    assert_memory_equal(got + 6 + size - 200, "after", 5);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(outcome(p[i]), 0);
    }
    WAIT_FOR(eddy_channel_is_writable(ch));
    assert_true(atomic_load(&s.unwritable) > 0);
    assert_int_equal(atomic_load(&s.errors), 0);
    close(fd);
    server_stop(&s);
    assert_true(eddy_file_release(f));
    free(bytes);
    free(got);
}

static void test_file_region_of_a_truncated_file_fails_and_closes(void **state)
{
    (void)state;
    server_t s = {0};
    int fd = server_start(&s);
    eddy_channel_t *ch = atomic_load(&s.child);
    unsigned char *bytes;
    eddy_file_t *f = temp_file(200000, &bytes);
    eddy_promise_t *p = write_on(ch, region(f, 0, 1 << 20), true); /* the file is shorter */
    unsigned char *got = malloc(1 << 20);
    size_t n = read_until(fd, got, 1 << 20, true);
    assert_int_equal(n, 200000); /* the file, then EOF: nothing past its end */
    assert_memory_equal(got, bytes, n);
    assert_int_equal(outcome(p), EDDY_ETRUNCATED);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(ch), DEADLINE_MS), 0);
    assert_int_equal(atomic_load(&s.last_error), EDDY_ETRUNCATED);
    close(fd);
    server_stop(&s);
    assert_true(eddy_file_release(f));
    free(bytes);
    free(got);
}

static void test_file_region_written_after_close_fails_its_promise(void **state)
{
    (void)state;
    server_t s = {0};
    int fd = server_start(&s);
    eddy_channel_t *ch = atomic_load(&s.child);
    unsigned char *bytes;
    eddy_file_t *f = temp_file(1000, &bytes);
    eddy_channel_close(ch, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(ch), DEADLINE_MS), 0);
    assert_int_equal(outcome(write_on(ch, region(f, 0, 1000), true)), EDDY_ECLOSED);
    close(fd);
    server_stop(&s);
    assert_true(eddy_file_release(f)); /* the failed write released its region */
    free(bytes);
}

/* The peer is gone before a region is sent: the write fails with EPIPE and the process lives
 * on. sendfile has no MSG_NOSIGNAL; on a Unix socket whose peer closed (and whose EOF is
 * never read: AUTO_READ off), it raises SIGPIPE at once, whose default action would end the
 * process. */
static void test_file_region_to_a_closed_peer_fails_without_sigpipe(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof(path), "/tmp/eddy-region-%d.sock", (int)getpid());
    unlink(path);
    eddy_addr_t a;
    assert_int_equal(eddy_addr_unix(&a, path), 0);
    server_t s = {0};
    eddy_channel_config_init(&s.config);
    eddy_channel_config_set(&s.config, EDDY_AUTO_READ, 0);
    int fd = server_start_on(&s, &a);
    eddy_channel_t *ch = atomic_load(&s.child);
    unsigned char *bytes;
    eddy_file_t *f = temp_file(1 << 20, &bytes);
    close(fd);
    assert_int_equal(outcome(write_on(ch, region(f, 0, 1 << 20), true)), EDDY_EPIPE);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(ch), DEADLINE_MS), 0);
    server_stop(&s);
    unlink(path);
    assert_true(eddy_file_release(f));
    free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_region_passes_the_embedded_channel_in_order),
        cmocka_unit_test(test_file_region_past_the_end_reads_as_truncated),
        cmocka_unit_test(test_file_region_as_a_response_body_passes_the_encoder),
        cmocka_unit_test(test_file_region_keeps_its_order_through_partial_sends),
        cmocka_unit_test(test_file_region_of_a_truncated_file_fails_and_closes),
        cmocka_unit_test(test_file_region_written_after_close_fails_its_promise),
        cmocka_unit_test(test_file_region_to_a_closed_peer_fails_without_sigpipe),
    };
    return cmocka_run_group_tests_name("pipeline.file_region", tests, NULL, NULL);
}
