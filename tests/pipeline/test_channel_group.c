/*
 * Channel groups (pipeline/channel_group.c): members forgotten as they close; a broadcast
 * shares one buffer's bytes among every member (no copy) with one future for all; the
 * policies for members that do not keep up (skip, close) on real sockets against a client
 * that stops reading; matchers; flush and close of all; a group freed while its members live
 * on; the fire-and-forget forms, which write each member with no promise, leave a member's
 * failure to its own pipeline and work from any thread. Bounded in time; closes what it
 * opened.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/buffer.h>
#include <eddy/channel.h>
#include <eddy/channel_group.h>
#include <eddy/pipeline.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEADLINE_MS 10000

#include "support/wait_util.h"
#include "support/socket_util.h"

static eddy_buf_t *text_buf(const char *s)
{
    size_t n = strlen(s);
    eddy_buf_t *b = eddy_buf_alloc(eddy_allocator_default(), n, n);
    assert_non_null(b);
    eddy_buf_write_bytes(b, s, n);
    return b;
}

/* ---------------------------------------------------------------------------------------
 * On embedded channels: what each member gets
 */

/* One broadcast to three members: each gets its own view of the same bytes; the future
 * completes once all three writes did; nothing was copied. */
static void broadcast_shares_the_bytes(void **state)
{
    (void)state;
    eddy_channel_group_t *g = eddy_channel_group_new("test");
    eddy_channel_t *ch[3];
    for (int i = 0; i < 3; i++) {
        ch[i] = eddy_embedded_channel_new();
        assert_int_equal(eddy_channel_group_add(g, ch[i]), 0);
    }
    assert_int_equal(eddy_channel_group_add(g, ch[0]), EDDY_EEXIST);
    assert_int_equal(eddy_channel_group_size(g), 3);
    eddy_buf_t *b = text_buf("hello, all");
    const uint8_t *bytes = eddy_buf_read_ptr(b);
    eddy_future_t *f = eddy_channel_group_write(g, eddy_buf_msg(b), NULL, NULL, true);
    assert_non_null(f);
    for (int i = 0; i < 3; i++) {
        eddy_embedded_run_pending(ch[i]); /* the member's write travels as a task */
        eddy_msg_t *m = eddy_embedded_read_outbound(ch[i]);
        assert_non_null(m);
        eddy_buf_t *got = eddy_buf_of(m);
        assert_int_equal(eddy_buf_readable(got), 10);
        assert_ptr_equal(eddy_buf_read_ptr(got), bytes); /* the same memory: no copy */
        eddy_msg_release(m);
    }
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_future_release(f);
    eddy_group_counters_t c;
    eddy_channel_group_counters(g, &c);
    assert_int_equal(c.written, 3);
    assert_int_equal(c.members, 3);

    /* A second broadcast, drained. */
    f = eddy_channel_group_write(g, eddy_buf_msg(text_buf("x")), NULL, NULL, true);
    eddy_future_release(f);
    for (int i = 0; i < 3; i++) {
        eddy_embedded_run_pending(ch[i]);
        eddy_msg_release(eddy_embedded_read_outbound(ch[i]));
    }

    /* Closing a member takes it out of the group. */
    eddy_channel_close(ch[1], NULL);
    eddy_embedded_run_pending(ch[1]);
    WAIT_FOR(eddy_channel_group_size(g) == 2);
    assert_false(eddy_channel_group_contains(g, ch[1]));
    assert_true(eddy_channel_group_remove(g, ch[2]));
    assert_false(eddy_channel_group_remove(g, ch[2]));
    assert_int_equal(eddy_channel_group_size(g), 1);
    eddy_channel_group_free(g); /* ch[0] stays open */
    assert_true(eddy_channel_is_open(ch[0]));
    for (int i = 0; i < 3; i++) {
        eddy_embedded_finish(ch[i]);
    }
}

static bool only_first(eddy_channel_t *ch, void *arg)
{
    return ch == arg;
}

/* Matchers pick members; close of all closes them and completes once all closed; a closed
 * channel is refused. */
static void matcher_and_close_all(void **state)
{
    (void)state;
    eddy_channel_group_t *g = eddy_channel_group_new(NULL);
    eddy_channel_t *a = eddy_embedded_channel_new(), *b = eddy_embedded_channel_new();
    eddy_channel_group_add(g, a);
    eddy_channel_group_add(g, b);
    eddy_future_t *f = eddy_channel_group_write(g, eddy_buf_msg(text_buf("only a")), only_first,
                                                a, true);
    eddy_embedded_run_pending(a);
    eddy_embedded_run_pending(b);
    eddy_msg_t *m = eddy_embedded_read_outbound(a);
    assert_non_null(m);
    eddy_msg_release(m);
    assert_null(eddy_embedded_read_outbound(b));
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    eddy_future_release(f);

    f = eddy_channel_group_close(g, NULL, NULL);
    eddy_embedded_run_pending(a);
    eddy_embedded_run_pending(b);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_future_release(f);
    assert_false(eddy_channel_is_open(a));
    WAIT_FOR(eddy_channel_group_size(g) == 0);
    assert_int_equal(eddy_channel_group_add(g, a), EDDY_ECLOSED);
    /* An empty group's operations complete at once. */
    f = eddy_channel_group_write(g, eddy_buf_msg(text_buf("nobody")), NULL, NULL, true);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_future_release(f);
    eddy_channel_group_free(g);
    eddy_embedded_finish(a);
    eddy_embedded_finish(b);
}

/* What an outbound handler saw of the writes through it. */
typedef struct seen_s {
    int writes;
    int with_promise;
} seen_t;

static void record_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    seen_t *seen = eddy_ctx_state(ctx);
    seen->writes++;
    seen->with_promise += p != NULL;
    eddy_ctx_write(ctx, msg, p);
}

static const eddy_handler_ops_t record_ops = {.name = "record", .write = record_write};

/* A handler that cannot pass a write on, as an encoder given what it does not know. */
static void refuse_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOTSUP);
}

static const eddy_handler_ops_t refuse_ops = {.name = "refuse", .write = refuse_write};

/* The fire-and-forget forms: every member gets the bytes, written with no promise; a write
 * left unflushed goes out with the group's flush; close of all closes them. Nothing to
 * release, and nothing left behind. */
static void void_broadcast_writes_each_member_with_no_promise(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_group_t *g = eddy_channel_group_new("void");
    eddy_channel_t *ch[3];
    seen_t seen[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        ch[i] = eddy_embedded_channel_new();
        assert_int_equal(eddy_pipeline_add_last(eddy_channel_pipeline(ch[i]), "record", &record_ops,
                                                &seen[i], NULL),
                         0);
        assert_int_equal(eddy_channel_group_add(g, ch[i]), 0);
    }
    eddy_buf_t *b = text_buf("hello, all");
    const uint8_t *bytes = eddy_buf_read_ptr(b);
    eddy_channel_group_write_void(g, eddy_buf_msg(b), NULL, NULL, true);
    for (int i = 0; i < 3; i++) {
        eddy_embedded_run_pending(ch[i]);
        eddy_msg_t *m = eddy_embedded_read_outbound(ch[i]);
        assert_non_null(m);
        assert_int_equal(eddy_buf_readable(eddy_buf_of(m)), 10);
        assert_ptr_equal(eddy_buf_read_ptr(eddy_buf_of(m)), bytes); /* shared, as ever */
        eddy_msg_release(m);
        assert_int_equal(seen[i].writes, 1);
        assert_int_equal(seen[i].with_promise, 0);
    }

    eddy_channel_group_write_void(g, eddy_buf_msg(text_buf("later")), only_first, ch[0], false);
    eddy_embedded_run_pending(ch[0]);
    assert_null(eddy_embedded_read_outbound(ch[0])); /* not flushed yet */
    eddy_channel_group_flush_void(g, NULL, NULL);
    for (int i = 0; i < 3; i++) {
        eddy_embedded_run_pending(ch[i]);
        eddy_msg_t *m = eddy_embedded_read_outbound(ch[i]);
        assert_true(i == 0 ? m != NULL : m == NULL);
        if (m != NULL) {
            eddy_msg_release(m);
        }
    }
    assert_int_equal(seen[0].with_promise, 0);
    eddy_group_counters_t c;
    eddy_channel_group_counters(g, &c);
    assert_int_equal(c.written, 4);

    eddy_channel_group_close_void(g, NULL, NULL);
    for (int i = 0; i < 3; i++) {
        eddy_embedded_run_pending(ch[i]);
        assert_false(eddy_channel_is_open(ch[i]));
    }
    WAIT_FOR(eddy_channel_group_size(g) == 0);
    eddy_channel_group_free(g);
    for (int i = 0; i < 3; i++) {
        assert_true(eddy_embedded_finish(ch[i]));
    }
    assert_int_equal(eddy_buf_live_count(), live);
}

/* A member that cannot take a fire-and-forget write: its own pipeline raises the error and
 * its stream closes; the other member gets the message and goes on. */
static void void_write_failure_stays_with_its_member(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_group_t *g = eddy_channel_group_new("void");
    eddy_channel_t *ok = eddy_embedded_channel_new(), *bad = eddy_embedded_channel_new();
    assert_int_equal(
        eddy_pipeline_add_last(eddy_channel_pipeline(bad), "refuse", &refuse_ops, NULL, NULL), 0);
    assert_int_equal(eddy_channel_group_add(g, ok), 0);
    assert_int_equal(eddy_channel_group_add(g, bad), 0);
    eddy_channel_group_write_void(g, eddy_buf_msg(text_buf("hello")), NULL, NULL, true);
    eddy_embedded_run_pending(ok);
    eddy_embedded_run_pending(bad);
    eddy_msg_t *m = eddy_embedded_read_outbound(ok);
    assert_non_null(m);
    eddy_msg_release(m);
    assert_int_equal(eddy_embedded_error(ok), 0);
    assert_true(eddy_channel_is_open(ok));
    assert_null(eddy_embedded_read_outbound(bad));
    assert_int_equal(eddy_embedded_error(bad), EDDY_ENOTSUP);
    assert_false(eddy_channel_is_open(bad));
    WAIT_FOR(eddy_channel_group_size(g) == 1);
    eddy_channel_group_free(g);
    assert_true(eddy_embedded_finish(ok));
    assert_true(eddy_embedded_finish(bad));
    assert_int_equal(eddy_buf_live_count(), live);
}

/* ---------------------------------------------------------------------------------------
 * On real sockets: members that do not keep up
 */

typedef struct server_s {
    eddy_loop_group_t *loops;
    eddy_channel_t *listener;
    eddy_channel_group_t *g;
    eddy_addr_t addr;
    _Atomic int accepted;
    _Atomic(eddy_channel_t *) last; /* the last member accepted, retained */
} server_t;

static int init_child(eddy_channel_t *ch, void *arg)
{
    server_t *s = arg;
    int err = eddy_channel_group_add(s->g, ch);
    eddy_channel_t *prev = atomic_exchange(&s->last, eddy_channel_retain(ch));
    if (prev != NULL) {
        eddy_channel_release(prev);
    }
    atomic_fetch_add(&s->accepted, 1);
    return err;
}

static void server_start(server_t *s, eddy_group_policy_t policy)
{
    s->loops = eddy_loop_group_new(2, NULL);
    s->g = eddy_channel_group_new("srv");
    eddy_channel_group_set_policy(s->g, policy);
    eddy_channel_config_t cc;
    eddy_channel_config_init(&cc);
    eddy_channel_config_set(&cc, EDDY_SO_SNDBUF, 8192);
    eddy_channel_config_set(&cc, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 64 * 1024);
    eddy_channel_config_set(&cc, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 16 * 1024);
    eddy_listen_options_t o = {.loop = eddy_loop_group_next(s->loops),
                               .children = s->loops,
                               .child_init = init_child,
                               .child_arg = s,
                               .child_config = &cc};
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    eddy_future_t *f = eddy_channel_listen(&a, &o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    s->listener = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    s->addr = *eddy_channel_local_addr(s->listener);
}

static void server_stop(server_t *s)
{
    eddy_channel_close(s->listener, NULL);
    eddy_future_await(eddy_channel_close_future(s->listener), DEADLINE_MS);
    eddy_channel_release(s->listener);
    eddy_future_t *f = eddy_channel_group_close(s->g, NULL, NULL);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    eddy_future_release(f);
    eddy_channel_group_free(s->g);
    if (atomic_load(&s->last) != NULL) {
        eddy_channel_release(atomic_load(&s->last));
    }
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(s->loops, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(s->loops), 0);
}

/* Connect a reader (*fast) and a client that never reads (*slow, a small receive buffer),
 * then broadcast 64 KiB messages 64 times (4 MiB each); the reader drains what it is sent. */
static void broadcast_while_one_stalls(server_t *s, int *fast, int *slow)
{
    *fast = client_connect(&s->addr);
    *slow = client_connect(&s->addr);
    int rcv = 4096;
    setsockopt(*slow, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    WAIT_FOR(eddy_channel_group_size(s->g) == 2);
    char *chunk = malloc(65536);
    memset(chunk, 'b', 65536);
    char *sink = malloc(65536);
    for (int i = 0; i < 64; i++) {
        eddy_buf_t *b = eddy_buf_alloc(eddy_allocator_default(), 65536, 65536);
        eddy_buf_write_bytes(b, chunk, 65536);
        eddy_future_t *f = eddy_channel_group_write(s->g, eddy_buf_msg(b), NULL, NULL, true);
        eddy_future_release(f);
        recv_all(*fast, sink, 65536);
    }
    free(chunk);
    free(sink);
}

static void slow_member_skipped(void **state)
{
    (void)state;
    server_t s = {0};
    server_start(&s, EDDY_GROUP_SKIP_UNWRITABLE);
    int fast, slow;
    broadcast_while_one_stalls(&s, &fast, &slow);
    eddy_group_counters_t c;
    eddy_channel_group_counters(s.g, &c);
    assert_true(c.skipped > 0);     /* the slow one was left out... */
    assert_int_equal(c.members, 2); /* ...but stays a member */
    assert_int_equal(c.closed, 0);
    close(fast);
    close(slow);
    server_stop(&s);
}

static void slow_member_closed(void **state)
{
    (void)state;
    server_t s = {0};
    server_start(&s, EDDY_GROUP_CLOSE_UNWRITABLE);
    int fast, slow;
    broadcast_while_one_stalls(&s, &fast, &slow);
    eddy_group_counters_t c;
    WAIT_FOR((eddy_channel_group_counters(s.g, &c), c.members == 1));
    assert_int_equal(c.closed, 1);
    close(fast);
    close(slow);
    server_stop(&s);
}

/* A task that holds a member's loop until `go`, then writes the member there. */
typedef struct held_loop_s {
    eddy_channel_t *ch;
    _Atomic int phase; /* 1: holding the loop, 2: go, 3: written */
    bool done_at_once;
    int error;
} held_loop_t;

static void hold_then_write(void *arg)
{
    held_loop_t *h = arg;
    atomic_store(&h->phase, 1);
    while (atomic_load(&h->phase) != 2) {
        usleep(1000);
    }
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(h->ch));
    if (p != NULL) { /* else done_at_once stays false: the test fails */
        eddy_channel_write_and_flush(h->ch, eddy_buf_msg(text_buf("after the hole")), p);
        h->done_at_once = eddy_future_is_done(p);
        h->error = eddy_future_error(p);
        eddy_future_release(p);
    }
    atomic_store(&h->phase, 3);
}

/* A member dropped for not keeping up gets nothing more, not even what its own loop writes
 * (a pong) between the group's decision on another thread and its close there: that write
 * fails at once with EDDY_ECLOSED instead of following the message left out. */
static void dropped_member_takes_no_later_write(void **state)
{
    (void)state;
    server_t s = {0};
    server_start(&s, EDDY_GROUP_CLOSE_UNWRITABLE);
    int slow = client_connect(&s.addr);
    int rcv = 4096;
    setsockopt(slow, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    WAIT_FOR(eddy_channel_group_size(s.g) == 1);
    eddy_channel_t *ch = atomic_load(&s.last);
    char *chunk = calloc(1, 65536);
    for (int i = 0; i < 4; i++) { /* 256 KiB to a reader that takes none: past high water */
        eddy_buf_t *b = eddy_buf_alloc(eddy_allocator_default(), 65536, 65536);
        eddy_buf_write_bytes(b, chunk, 65536);
        eddy_channel_write_and_flush(ch, eddy_buf_msg(b), NULL);
    }
    free(chunk);
    WAIT_FOR(!eddy_channel_is_writable(ch));
    held_loop_t h = {.ch = ch};
    assert_int_equal(eddy_loop_execute(eddy_channel_loop(ch), hold_then_write, &h), 0);
    WAIT_FOR(atomic_load(&h.phase) == 1);
    /* Decided here, closed behind the held task on the member's loop. */
    eddy_channel_group_write_void(s.g, eddy_buf_msg(text_buf("left out")), NULL, NULL, true);
    atomic_store(&h.phase, 2);
    WAIT_FOR(atomic_load(&h.phase) == 3);
    assert_true(h.done_at_once);
    assert_int_equal(h.error, EDDY_ECLOSED);
    eddy_group_counters_t c;
    WAIT_FOR((eddy_channel_group_counters(s.g, &c), c.members == 0));
    assert_int_equal(c.closed, 1);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(ch), DEADLINE_MS), 0);
    close(slow);
    server_stop(&s);
}

/* Fire-and-forget broadcasts from threads that are no loop's: SENDERS threads, each writing
 * VOID_SENDS messages of VOID_MSG bytes of its own letter. */
#define SENDERS 3
#define VOID_SENDS 200
#define VOID_MSG 32

typedef struct sender_s {
    eddy_channel_group_t *g;
    char letter;
} sender_t;

static void *send_void(void *arg)
{
    sender_t *s = arg;
    char text[VOID_MSG];
    memset(text, s->letter, sizeof(text));
    for (int i = 0; i < VOID_SENDS; i++) {
        eddy_buf_t *b = eddy_buf_from(text, sizeof(text));
        if (b != NULL) { /* else the readers come up short: the test fails there */
            eddy_channel_group_write_void(s->g, eddy_buf_msg(b), NULL, NULL, true);
        }
    }
    return NULL;
}

/* Every member reads each sender's messages, every one whole. */
static void void_broadcasts_from_other_threads_reach_every_member(void **state)
{
    (void)state;
    server_t s = {0};
    server_start(&s, EDDY_GROUP_WRITE_ANYWAY);
    int fd[2];
    for (int i = 0; i < 2; i++) {
        fd[i] = client_connect(&s.addr);
    }
    WAIT_FOR(eddy_channel_group_size(s.g) == 2);
    pthread_t t[SENDERS];
    sender_t snd[SENDERS];
    for (int i = 0; i < SENDERS; i++) {
        snd[i] = (sender_t){s.g, (char)('a' + i)};
        assert_int_equal(pthread_create(&t[i], NULL, send_void, &snd[i]), 0);
    }
    for (int i = 0; i < SENDERS; i++) {
        pthread_join(t[i], NULL);
    }
    static char got[SENDERS * VOID_SENDS * VOID_MSG];
    for (int i = 0; i < 2; i++) {
        recv_all(fd[i], got, sizeof(got));
        int count[SENDERS] = {0};
        for (size_t at = 0; at < sizeof(got); at += VOID_MSG) {
            int who = got[at] - 'a';
            assert_true(who >= 0 && who < SENDERS);
            for (size_t k = 1; k < VOID_MSG; k++) {
                assert_int_equal(got[at + k], got[at]); /* whole, not interleaved */
            }
            count[who]++;
        }
        for (int k = 0; k < SENDERS; k++) {
            assert_int_equal(count[k], VOID_SENDS);
        }
    }
    eddy_group_counters_t c;
    eddy_channel_group_counters(s.g, &c);
    assert_int_equal(c.written, 2 * SENDERS * VOID_SENDS);
    close(fd[0]);
    close(fd[1]);
    server_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(broadcast_shares_the_bytes),
        cmocka_unit_test(matcher_and_close_all),
        cmocka_unit_test(void_broadcast_writes_each_member_with_no_promise),
        cmocka_unit_test(void_write_failure_stays_with_its_member),
        cmocka_unit_test(slow_member_skipped),
        cmocka_unit_test(slow_member_closed),
        cmocka_unit_test(dropped_member_takes_no_later_write),
        cmocka_unit_test(void_broadcasts_from_other_threads_reach_every_member),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
