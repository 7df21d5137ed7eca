/*
 * The completion transport (pipeline/transport/socket.h): stream and listening sockets on a loop that
 * runs on io_uring (reactor/poller_uring.c, reactor/uring.h).
 *
 * - Reading: one multishot receive per channel into the loop's ring of provided buffers,
 *   armed while the channel wants to read; each completion hands its pooled buffer up the
 *   pipeline without a copy, and channel_read_complete follows once the batch of completions
 *   has been dispatched. A channel that stops reading (the backpressure pause, AUTO_READ off,
 *   half closure) cancels its receive; what was received before the cancel took effect is
 *   still delivered. With AUTO_READ off each read request is one single-shot receive.
 * - Writing: one send in flight per channel, a sendmsg() of the outbound buffer's flushed
 *   bytes; its completion says how many were written and the next send starts from there.
 *   A file region at the head goes with sendfile(2) from the loop, as on the readiness
 *   transports, as far as the socket takes it; when it is full, a poll for POLLOUT takes the
 *   send's place and its completion flushes on. No copy through user space and no pipe per
 *   channel (a splice needs two, and two linked operations whose partial completions must be
 *   undone); a region read into a buffer and sent cost twice sendfile's CPU per MiB.
 *   The send holds a reference to each message it reads, so a close that fails the entries
 *   cannot free memory the kernel still sends from.
 * - Accepting: one multishot accept per listener.
 * - Connecting: a poll for writability, in the receive's place (none is armed before the
 *   channel is active).
 * - Closing: the receive and the send are cancelled and the descriptor closed at once; the
 *   kernel lets go of the socket (and the peer sees its FIN) when the cancelled operations
 *   complete. Every operation in flight holds a reference to its channel, so the channel and
 *   its buffers stay until its last completion, cancelled ones included.
 *
 * A channel holds only what it needs while idle, inside its own allocation, in place of the
 * descriptor's watcher that readiness transports use (uring_ch_t, 24 B): the receive, the
 * state bits, and the send's block while a send is in flight. The send's operation and iovec
 * live in that block, lent by the loop; the read_complete after a batch is queued on the
 * loop.
 */
#include "pipeline/transport/socket.h"

#ifdef EDDY_HAVE_IO_URING
#include "reactor/layer.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* Iovecs per send: more go with the next one. A send of 64 messages is already far past what
 * amortises its submission. */
#define MAX_IOV 64

/* uring_ch_t.state */
enum {
    RECV_ARMED = 1u << 0,       /* a receive (or a listener's accept) is with the kernel */
    RECV_CANCELLING = 1u << 1,  /* and its cancel too */
    SENDING = 1u << 2,          /* a send is with the kernel */
    READ_BATCH = 1u << 3,       /* reads this batch: channel_read_complete is due */
    READ_DONE_QUEUED = 1u << 4, /* and on_read_done is queued on the loop */
    RECV_SHORT = 1u << 5,       /* receives are single-shot until the output drains (arm) */
};

/* What a send in flight reads, and its operation: taken from the loop's cache when a send
 * starts and given back when the sends stop, so an idle channel holds none. */
typedef struct send_block_s {
    eddy__uring_op_t op;
    eddy_channel_t *ch;
    struct msghdr mh;
    int nheld;
    eddy_msg_t *held[MAX_IOV]; /* the messages its bytes belong to */
    struct iovec iov[MAX_IOV];
} send_block_t;

/* A channel's part, zeroed with the channel (eddy__channel_state()). */
typedef struct uring_ch_s {
    /* The receive, a listener's accept, or the poll that waits for a connect: at most one of
     * them is with the kernel, and its callback is set as it is armed. */
    eddy__uring_op_t recv;
    send_block_t *sb; /* while sending */
    unsigned state;
} uring_ch_t;

static_assert(sizeof(uring_ch_t) <= sizeof(eddy_io_t), "the state takes the watcher's place");

static void on_recv(eddy__uring_op_t *op, int res, unsigned flags);
static void on_send(eddy__uring_op_t *op, int res, unsigned flags);
static void on_accept(eddy__uring_op_t *op, int res, unsigned flags);
static void on_connect_poll(eddy__uring_op_t *op, int res, unsigned flags);
static bool retry_later(int res);

static uring_ch_t *uring_of(eddy_channel_t *ch)
{
    return eddy__channel_state(ch);
}

/* The channel of an operation of its uring_ch_t (recv). */
static eddy_channel_t *channel_of_recv(eddy__uring_op_t *op)
{
    return eddy__channel_of_state(EDDY_CONTAINER_OF(op, uring_ch_t, recv));
}

/* An operation starts or ends: the channel and the loop wait for its completion. */
static void op_begin(eddy_channel_t *ch)
{
    eddy_channel_retain(ch);
    eddy__uring_inflight(eddy__loop_of(ch), 1);
}

static void op_end(eddy_channel_t *ch)
{
    eddy__uring_inflight(eddy__loop_of(ch), -1);
    eddy_channel_release(ch);
}

/* A failure of the transport itself (no memory for its state, no submission entry). */
static void fail(eddy_channel_t *ch, int err)
{
    eddy_pipeline_fire_exception(&ch->pipeline, err);
    eddy__channel_do_close(ch, err, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Interest: the receive (or accept) armed while wanted, the watcher while connecting
 */

static bool arm(eddy_channel_t *ch, uring_ch_t *u)
{
    eddy_loop_t *loop = eddy__loop_of(ch);
    assert(!(u->state & RECV_ARMED) && ch->fd >= 0); /* one receive (or accept) at a time */
    struct io_uring_sqe *sqe = eddy__uring_sqe(loop, &u->recv);
    if (sqe == NULL) {
        return false;
    }
    if (ch->flags & EDDY__CH_LISTENER) {
        u->recv.cb = on_accept;
        io_uring_prep_multishot_accept(sqe, ch->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } else if (ch->flags & EDDY__CH_CONNECTING) {
        u->recv.cb = on_connect_poll;
        io_uring_prep_poll_add(sqe, ch->fd, POLLOUT);
    } else {
        u->recv.cb = on_recv;
        /* After the backpressure pause, one buffer a receive until the peer has taken all we
         * had for it: a multishot receive takes what the socket holds, up to the loop's
         * whole ring, in one batch before its cancel lands, where epoll reads once. (Against
         * the hostile suite's TLS client that never reads it changed little: that socket's
         * send buffer keeps draining the output, so the output empties between pauses; the
         * ring's budget is what bounds that case.) */
        if ((u->state & RECV_SHORT) && eddy__outbound_pending(ch) == 0) {
            u->state &= ~RECV_SHORT;
        }
        if (ch->opt[EDDY_AUTO_READ] && !(u->state & RECV_SHORT) &&
            !eddy__uring_single_shot(loop)) {
            io_uring_prep_recv_multishot(sqe, ch->fd, NULL, 0, 0);
        } else {
            io_uring_prep_recv(sqe, ch->fd, NULL, 0, 0); /* one batch per read request */
        }
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = eddy__uring_buf_group(loop);
    }
    u->state |= RECV_ARMED;
    op_begin(ch);
    return true;
}

static bool cancel(eddy_channel_t *ch, eddy__uring_op_t *op)
{
    /* By the operation, not the descriptor: the descriptor may be closed before the cancel
     * reaches the kernel. */
    struct io_uring_sqe *sqe = eddy__uring_sqe(eddy__loop_of(ch), NULL);
    if (sqe == NULL) {
        return false;
    }
    io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)op, 0);
    return true;
}

static bool wants_input(const eddy_channel_t *ch)
{
    unsigned f = ch->flags;
    if (f & EDDY__CH_LISTENER) {
        return (f & EDDY__CH_READING) != 0;
    }
    return (f & EDDY__CH_READING) && (f & EDDY__CH_ACTIVE) &&
           !(f & (EDDY__CH_NO_INPUT | EDDY__CH_INPUT_SHUTDOWN | EDDY__CH_CONNECTING));
}

static void update_interest(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    if (ch->flags & EDDY__CH_CLOSED) {
        return;
    }
    uring_ch_t *u = uring_of(ch);
    bool want = (ch->flags & EDDY__CH_CONNECTING) || wants_input(ch);
    if (want && !(u->state & RECV_ARMED)) {
        if (!arm(ch, u)) {
            fail(ch, EDDY_ENOMEM);
        }
    } else if (!want && (u->state & RECV_ARMED) && !(u->state & RECV_CANCELLING)) {
        if (ch->flags & EDDY__CH_NO_INPUT) {
            u->state |= RECV_SHORT;
        }
        if (!cancel(ch, &u->recv)) {
            fail(ch, EDDY_ENOMEM);
            return;
        }
        u->state |= RECV_CANCELLING;
    }
}

static void begin_read(eddy_channel_t *ch)
{
    if (!(ch->flags & EDDY__CH_ACTIVE) && !(ch->flags & EDDY__CH_LISTENER)) {
        return;
    }
    ch->flags |= EDDY__CH_READING;
    update_interest(ch);
}

/* ---------------------------------------------------------------------------------------
 * Connecting
 */

/* The error a connect ended with (SO_ERROR, negated), or 0. */
static int connect_error(int fd)
{
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) {
        soerr = errno;
    }
    return -soerr;
}

static void on_connect_poll(eddy__uring_op_t *op, int res, unsigned flags)
{
    (void)flags;
    eddy_channel_t *ch = eddy__channel_hold(channel_of_recv(op));
    uring_ch_t *u = uring_of(ch);
    u->state &= ~(RECV_ARMED | RECV_CANCELLING);
    if (ch->flags & EDDY__CH_CLOSED) {
        /* The connect timed out or was closed: nothing to do. */
    } else if (res >= 0) {
        /* Writable, or an error or hang-up: the connect is over either way. */
        eddy__socket_connected(ch, connect_error(ch->fd));
    } else if (retry_later(res)) {
        update_interest(ch); /* polled again while still connecting */
    } else {
        eddy__socket_connected(ch, res);
    }
    op_end(ch);
    eddy__channel_unhold(ch);
}

/* ---------------------------------------------------------------------------------------
 * Reading
 */

/* channel_read_complete for the reads of the batch, now rather than after it. */
static void read_complete_now(eddy_channel_t *ch, uring_ch_t *u)
{
    if (u->state & READ_BATCH) {
        u->state &= ~READ_BATCH;
        if (!(ch->flags & EDDY__CH_CLOSED)) {
            eddy_pipeline_fire_channel_read_complete(&ch->pipeline);
        }
    }
}

static void on_read_done(void *arg)
{
    eddy_channel_t *ch = eddy__channel_hold(arg);
    eddy_channel_release(ch); /* the reference taken when it was queued */
    uring_ch_t *u = uring_of(ch);
    u->state &= ~READ_DONE_QUEUED;
    read_complete_now(ch, u);
    eddy__channel_unhold(ch);
}

/* A receive's bytes (the pooled buffer it filled): dropped while lingering, else up the
 * pipeline, channel_read_complete after the batch. */
static void got_bytes(eddy_channel_t *ch, uring_ch_t *u, eddy_buf_t *buf, int res)
{
    assert(res > 0 && buf != NULL && !(ch->flags & EDDY__CH_CLOSED));
    if (ch->flags & EDDY__CH_LINGERING) {
        eddy_buf_release(buf);
        eddy__socket_linger_input(ch, res);
        return;
    }
    atomic_fetch_add_explicit(&ch->bytes_read, (uint64_t)res, memory_order_relaxed);
    atomic_fetch_add_explicit(&ch->msgs_read, 1, memory_order_relaxed);
    bool complete_now = false; /* no memory to queue it for after the batch */
    if (!(u->state & READ_BATCH)) {
        u->state |= READ_BATCH;
        if (!(u->state & READ_DONE_QUEUED)) {
            if (eddy__uring_later(eddy__loop_of(ch), on_read_done, eddy_channel_retain(ch)) == 0) {
                u->state |= READ_DONE_QUEUED;
            } else {
                eddy_channel_release(ch);
                complete_now = true;
            }
        }
    }
    if (!ch->opt[EDDY_AUTO_READ]) {
        /* This receive answered the read request; asking again inside the batch arms the
         * next. */
        ch->flags &= ~EDDY__CH_READING;
    }
    eddy_pipeline_fire_channel_read(&ch->pipeline, eddy_buf_msg(buf));
    if (complete_now) {
        read_complete_now(ch, u);
    }
}

/* A buffer a completion may have carried (NULL: none), not wanted. */
static void drop(eddy_buf_t *buf)
{
    if (buf != NULL) {
        eddy_buf_release(buf);
    }
}

/*
 * A result that is not the socket's: our own cancel (-ECANCELED), a dry buffer ring
 * (-ENOBUFS), or -EAGAIN (-EINTR): the kernel's internal poll for an operation woke for
 * something else (the peer's FIN wakes every waiter of the socket), found it still blocked,
 * and gave up rather than poll twice. The operation is simply made again.
 */
static bool retry_later(int res)
{
    return res == -ECANCELED || res == -ENOBUFS || res == -EAGAIN || res == -EINTR;
}

static void on_recv(eddy__uring_op_t *op, int res, unsigned flags)
{
    eddy_channel_t *ch = eddy__channel_hold(channel_of_recv(op));
    uring_ch_t *u = uring_of(ch);
    bool more = (flags & IORING_CQE_F_MORE) != 0;
    if (!more) {
        u->state &= ~(RECV_ARMED | RECV_CANCELLING);
    }
    eddy_buf_t *buf = eddy__uring_take_buf(eddy__loop_of(ch), res, flags);
    if (ch->flags & EDDY__CH_CLOSED) {
        drop(buf);
    } else if (res > 0 && buf != NULL) {
        got_bytes(ch, u, buf, res);
    } else if (res == 0 || (res < 0 && !retry_later(res))) {
        /* The peer's FIN or an error: what was read before it completes first. */
        drop(buf);
        if (ch->flags & EDDY__CH_LINGERING) {
            eddy__socket_linger_input(ch, res);
        } else {
            read_complete_now(ch, u);
            if (!(ch->flags & EDDY__CH_CLOSED)) {
                eddy__socket_input_end(ch, res < 0 ? res : 0, res == 0);
            }
        }
    } else {
        /* Cancelled (by us), the buffer ring ran dry for a moment, or a spurious wake-up:
         * armed again below if still wanted. */
        drop(buf);
    }
    if (!more) {
        /* The receive ended (an error, a cancel, one batch done, a full completion queue):
         * armed again while the channel still wants input. */
        update_interest(ch);
        op_end(ch);
    }
    eddy__channel_unhold(ch);
}

/* ---------------------------------------------------------------------------------------
 * Writing
 */

static void release_held(uring_ch_t *u)
{
    send_block_t *sb = u->sb;
    assert(sb != NULL && sb->nheld >= 0);
    for (int i = 0; i < sb->nheld; i++) {
        eddy_msg_release(sb->held[i]);
    }
    sb->nheld = 0;
}

/* The sends stopped: the block goes back to the loop. */
static void give_back_block(eddy_channel_t *ch, uring_ch_t *u)
{
    if (u->sb != NULL && !(u->state & SENDING)) {
        assert(u->sb->nheld == 0);
        eddy__uring_block_give(eddy__loop_of(ch), u->sb);
        u->sb = NULL;
    }
}

/* The stream cannot go on (the peer is gone, a file region's file ended): fail what is
 * queued, close. */
static void broken(eddy_channel_t *ch, int err)
{
    eddy__outbound_fail_all(ch, err);
    eddy_pipeline_fire_exception(&ch->pipeline, err);
    eddy__channel_do_close(ch, err, NULL);
}

static void on_writable(eddy__uring_op_t *op, int res, unsigned flags);

/* Wait for the socket to take more: a poll for POLLOUT in the send's place. */
static void arm_writable(eddy_channel_t *ch, uring_ch_t *u)
{
    struct io_uring_sqe *sqe = eddy__uring_sqe(eddy__loop_of(ch), &u->sb->op);
    if (sqe == NULL) {
        fail(ch, EDDY_ENOMEM);
        return;
    }
    u->sb->op.cb = on_writable;
    io_uring_prep_poll_add(sqe, ch->fd, POLLOUT);
    u->state |= SENDING;
    op_begin(ch);
}

/* sendfile calls per flush before the loop gets a turn (a fast peer of a large file). */
#define REGION_SPIN 8

/*
 * The file region at the head, sent in the kernel as far as the socket takes it: true to go
 * on flushing; false once the socket is full (a poll armed) or the stream broke.
 */
static bool send_region(eddy_channel_t *ch, uring_ch_t *u, const eddy_file_region_t *r,
                        int *spins)
{
    size_t total;
    ssize_t w = eddy__socket_send_region(ch, r, &total);
    if (w > 0) {
        eddy__outbound_written(ch, (size_t)w); /* promises complete: their listeners may
                                                  write, flush (a send in flight) or close */
        if (u->state & SENDING || (ch->flags & EDDY__CH_CLOSED)) {
            return false;
        }
        if (++*spins < REGION_SPIN) {
            return true;
        }
        w = -EAGAIN; /* enough for one turn: the poll comes back at once if it can take more */
    }
    if (w == -EAGAIN || w == -EINTR) {
        arm_writable(ch, u);
    } else {
        broken(ch, (int)w);
    }
    return false;
}

static void uring_flush(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    if ((ch->flags & EDDY__CH_CLOSED) || !(ch->flags & EDDY__CH_ACTIVE)) {
        return;
    }
    uring_ch_t *u = uring_of(ch);
    if (u->state & SENDING) {
        return; /* the send's completion goes on with what was flushed since */
    }
    int spins = 0;
    /* Completed promises run listeners that may flush (a send then in flight) or close. */
    while (eddy__outbound_has_flushed(ch) && !(u->state & SENDING) &&
           !(ch->flags & EDDY__CH_CLOSED)) {
        if (u->sb == NULL) {
            u->sb = eddy__uring_block_take(eddy__loop_of(ch), sizeof(send_block_t));
            if (u->sb == NULL) {
                fail(ch, EDDY_ENOMEM);
                return;
            }
            u->sb->op.cb = on_send;
            u->sb->ch = ch;
            u->sb->nheld = 0;
        }
        send_block_t *sb = u->sb;
        const eddy_file_region_t *r = eddy__outbound_head_region(ch);
        if (r != NULL) {
            if (send_region(ch, u, r, &spins)) {
                continue;
            }
            give_back_block(ch, u); /* unless a send or a poll is in flight */
            return;
        }
        int n;
        ssize_t total = (ssize_t)eddy__outbound_iovec(ch, sb->iov, MAX_IOV, &n, sb->held,
                                                      &sb->nheld);
        if (total < 0) {
            broken(ch, (int)total);
            give_back_block(ch, u);
            return;
        }
        if (total == 0) {
            release_held(u);
            eddy__outbound_written(ch, 0); /* empty messages complete at once */
            continue;
        }
        struct io_uring_sqe *sqe = eddy__uring_sqe(eddy__loop_of(ch), &sb->op);
        if (sqe == NULL) {
            release_held(u);
            fail(ch, EDDY_ENOMEM);
            return;
        }
        sb->mh = (struct msghdr){.msg_iov = sb->iov, .msg_iovlen = (size_t)n};
        sb->op.cb = on_send;
        io_uring_prep_sendmsg(sqe, ch->fd, &sb->mh, MSG_NOSIGNAL | eddy__socket_more_flag(ch));
        u->state |= SENDING;
        op_begin(ch);
        return;
    }
    give_back_block(ch, u);
    if ((u->state & SENDING) || (ch->flags & EDDY__CH_CLOSED)) {
        return; /* a listener's flush sends, or a listener closed */
    }
    if (ch->flags & EDDY__CH_SHUTDOWN_PENDING) {
        eddy__socket_finish_shutdown_output(ch);
    }
}

static void on_send(eddy__uring_op_t *op, int res, unsigned flags)
{
    (void)flags;
    eddy_channel_t *ch = eddy__channel_hold(EDDY_CONTAINER_OF(op, send_block_t, op)->ch);
    uring_ch_t *u = uring_of(ch);
    assert((u->state & SENDING) && &u->sb->op == op); /* the one send in flight */
    u->state &= ~SENDING;
    release_held(u);
    if (!(ch->flags & EDDY__CH_CLOSED)) {
        if (res >= 0 || res == -EAGAIN || res == -EINTR) {
            eddy__outbound_written(ch, res > 0 ? (size_t)res : 0);
            uring_flush(ch); /* what is still flushed, or the FIN a shutdown waits for */
        } else if (res != -ECANCELED) {
            broken(ch, res); /* EPIPE, ECONNRESET */
        }
    }
    give_back_block(ch, u);
    op_end(ch);
    eddy__channel_unhold(ch);
}

/* The socket can take more (or failed: the sendfile that follows says how). */
static void on_writable(eddy__uring_op_t *op, int res, unsigned flags)
{
    (void)flags;
    eddy_channel_t *ch = eddy__channel_hold(EDDY_CONTAINER_OF(op, send_block_t, op)->ch);
    uring_ch_t *u = uring_of(ch);
    assert((u->state & SENDING) && &u->sb->op == op && u->sb->nheld == 0);
    u->state &= ~SENDING;
    if (!(ch->flags & EDDY__CH_CLOSED)) {
        if (res >= 0 || res == -EINTR) {
            uring_flush(ch);
        } else if (res != -ECANCELED) {
            broken(ch, res);
        }
    }
    give_back_block(ch, u);
    op_end(ch);
    eddy__channel_unhold(ch);
}

/* ---------------------------------------------------------------------------------------
 * Closing
 */

/* What follows in the buffer, written as far as the socket takes it without waiting. */
static void write_rest_now(eddy_channel_t *ch, send_block_t *sb)
{
    while (eddy__outbound_has_flushed(ch) && eddy__outbound_head_region(ch) == NULL) {
        int n;
        size_t total = eddy__outbound_iovec(ch, sb->iov, MAX_IOV, &n, NULL, NULL);
        if (total == 0) {
            eddy__outbound_written(ch, 0);
            continue;
        }
        sb->mh = (struct msghdr){.msg_iov = sb->iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(ch->fd, &sb->mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0) {
            return;
        }
        assert((size_t)w <= total);
        eddy__outbound_written(ch, (size_t)w);
        if ((size_t)w < total) {
            return;
        }
    }
}

/*
 * The one try a close gives what was flushed, as on a readiness transport: the send in
 * flight goes to the kernel now; if it completed at once, what follows it in the buffer is
 * written as far as the socket takes it without waiting, and only the rest fails with the
 * close. A send still waiting for room is cancelled (a readiness close would find the socket
 * full too). Without it, a reply and the TLS close_notify behind it were cut off by the close
 * that the peer's own close_notify asked for.
 */
static void last_try(eddy_channel_t *ch, uring_ch_t *u)
{
    eddy_loop_t *loop = eddy__loop_of(ch);
    assert((u->state & SENDING) && u->sb != NULL);
    eddy__uring_submit(loop);
    int res;
    unsigned flags;
    if (!eddy__uring_take_cqe(loop, &u->sb->op, &res, &flags)) {
        cancel(ch, &u->sb->op);
        return;
    }
    u->state &= ~SENDING;
    release_held(u);
    op_end(ch); /* the channel's own reference stays until its close is done */
    if (res >= 0) {
        eddy__outbound_written(ch, (size_t)res);
        write_rest_now(ch, u->sb);
    }
    give_back_block(ch, u);
}

/*
 * Let go of the descriptor at a close: the last try above, the receive cancelled, and the
 * descriptor closed by an operation queued behind them: a close() here would free its number
 * while entries that name it may still wait for the next submission, and another thread
 * could be given the number meanwhile. The kernel keeps the socket until the cancelled
 * operations complete.
 */
static void let_go(eddy_channel_t *ch)
{
    eddy_loop_t *loop = eddy__loop_of(ch);
    uring_ch_t *u = uring_of(ch);
    assert(ch->flags & EDDY__CH_CLOSED); /* a part of the close */
    if (u->state & SENDING) {
        last_try(ch, u);
    }
    if ((u->state & RECV_ARMED) && !(u->state & RECV_CANCELLING)) {
        cancel(ch, &u->recv);
        u->state |= RECV_CANCELLING;
    }
    if (ch->fd >= 0) {
        struct io_uring_sqe *sqe = eddy__uring_sqe(loop, NULL);
        if (sqe != NULL) {
            eddy__fd_closing(); /* TSan does not see the ring's close */
            io_uring_prep_close(sqe, ch->fd);
        } else {
            eddy__fd_close(ch->fd);
        }
        ch->fd = -1;
    }
}

static void stream_do_close(eddy_channel_t *ch)
{
    let_go(ch);
    eddy__socket_close_parts(ch);
}

static void stream_destroy(eddy_channel_t *ch)
{
    eddy__socket_destroy(ch);
    uring_ch_t *u = uring_of(ch);
    free(u->sb); /* none once the sends completed: only a channel that never ran */
    u->sb = NULL;
}

static const eddy__channel_ops_t stream_ops = {
    EDDY__SOCKET_STREAM_OPS,
    .begin_read = begin_read,
    .update_interest = update_interest,
    .flush = uring_flush,
    .do_close = stream_do_close,
    .destroy = stream_destroy,
    .state_size = sizeof(uring_ch_t),
};

/* ---------------------------------------------------------------------------------------
 * Listening
 */

static void on_accept(eddy__uring_op_t *op, int res, unsigned flags)
{
    eddy_channel_t *ch = eddy__channel_hold(channel_of_recv(op));
    uring_ch_t *u = uring_of(ch);
    bool more = (flags & IORING_CQE_F_MORE) != 0;
    if (!more) {
        u->state &= ~(RECV_ARMED | RECV_CANCELLING);
    }
    if (ch->flags & EDDY__CH_CLOSED) {
        if (res >= 0) {
            close(res);
        }
    } else if (res >= 0) {
        eddy__fd_made(); /* TSan does not see the ring's accept */
        eddy__listener_child(ch, res, NULL);
    } else if (res == -EMFILE || res == -ENFILE) {
        eddy__listener_out_of_descriptors(ch, res);
    } else if (res != -ECANCELED && res != -EINTR && res != -ECONNABORTED && res != -EAGAIN) {
        eddy_pipeline_fire_exception(&ch->pipeline, res);
    }
    if (!more) {
        update_interest(ch);
        op_end(ch);
    }
    eddy__channel_unhold(ch);
}

static void listener_do_close(eddy_channel_t *ch)
{
    let_go(ch);
    eddy__listener_close_parts(ch);
}

static const eddy__channel_ops_t listener_ops = {
    EDDY__SOCKET_LISTENER_OPS,
    .begin_read = begin_read,
    .update_interest = update_interest,
    .do_close = listener_do_close,
    .state_size = sizeof(uring_ch_t),
};

const eddy__transport_t eddy__transport_uring = {
    .name = "io_uring",
    .stream = &stream_ops,
    .listener = &listener_ops,
};
#else
/* Not built here; ISO C wants something in every file. */
typedef int eddy__no_uring_transport_t;
#endif /* EDDY_HAVE_IO_URING */
