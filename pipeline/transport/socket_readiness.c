/*
 * The readiness transport (pipeline/transport/socket.h): stream and listening sockets on epoll, kqueue
 * and poll. The loop watches each socket level-triggered (reactor/poller_epoll.c says why):
 * read interest follows AUTO_READ, a pending read request and the backpressure pause; write
 * interest is taken only while the socket is full. Reads stop at EAGAIN, a short read or the
 * per-read cap; writes gather the outbound buffer's flushed bytes into one sendmsg(), and a
 * file region goes with sendfile(2).
 */
#include "pipeline/transport/socket.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif
/* Iovecs per sendmsg: IOV_MAX is the kernel's limit; more costs the kernel a copy of the
 * array for nothing once the socket buffer is full. */
#define MAX_IOV (IOV_MAX < 1024 ? IOV_MAX : 1024)

/* ---------------------------------------------------------------------------------------
 * Interest
 */

/*
 * Read interest follows READING and the backpressure pause, lazily: a pause (or AUTO_READ
 * turned off in a read) leaves the interest registered, and it goes only if bytes arrive
 * before reading resumes (eddy__readiness_on_io calls watch(ch, false) then). A handler that
 * pauses while its answers drain and resumes before the peer speaks again (HTTP/2 under
 * h2load: every batch) costs no epoll_ctl instead of two.
 */
static void watch(eddy_channel_t *ch, bool lazy)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    if (ch->flags & EDDY__CH_CLOSED) {
        return;
    }
    assert(ch->fd >= 0); /* an open channel has its descriptor: close_fd() runs at close */
    unsigned ev = 0;
    bool wanted = (ch->flags & EDDY__CH_READING) && !(ch->flags & EDDY__CH_INPUT_SHUTDOWN);
    if (wanted && !(ch->flags & EDDY__CH_NO_INPUT)) {
        ev |= EDDY_IO_READ;
    } else if (lazy && !(ch->flags & (EDDY__CH_LISTENER | EDDY__CH_INPUT_SHUTDOWN)) &&
               (eddy__io_interest(&ch->io) & EDDY_IO_READ)) {
        ev |= EDDY_IO_READ; /* paused or stopped: kept until bytes come (a listener's pause,
                               an input that ended, go at once: they would stay ready) */
    }
    if (ch->flags & (EDDY__CH_WRITE_WAIT | EDDY__CH_CONNECTING)) {
        ev |= EDDY_IO_WRITE;
    }
    eddy__socket_watch(ch, ev);
}

static void update_interest(eddy_channel_t *ch)
{
    watch(ch, true);
}

static void begin_read(eddy_channel_t *ch)
{
    if (!(ch->flags & EDDY__CH_ACTIVE) && !(ch->flags & EDDY__CH_LISTENER)) {
        return;
    }
    ch->flags |= EDDY__CH_READING;
    update_interest(ch);
}

static void linger_read(eddy_channel_t *ch);

/* ---------------------------------------------------------------------------------------
 * Reading, with the adaptive receive buffer (AdaptiveRecvByteBufAllocator): sizes step up
 * fast when a read fills the buffer and down slowly, after two short reads in a row.
 */

static const uint32_t recv_sizes[] = {64,    128,   256,   512,    1024,   2048,   4096,   8192,
                                      16384, 32768, 65536, 131072, 262144, 524288, 1048576};
#define NSIZES (sizeof(recv_sizes) / sizeof(recv_sizes[0]))

static size_t recv_guess(eddy_channel_t *ch)
{
    size_t lo = (size_t)ch->opt[EDDY_RCVBUF_ALLOC_MIN];
    size_t hi = (size_t)ch->opt[EDDY_RCVBUF_ALLOC_MAX];
    if (ch->recv_index == 0) {
        /* First read: the initial size, as an index. */
        size_t want = (size_t)ch->opt[EDDY_RCVBUF_ALLOC_INITIAL];
        size_t i = 0;
        while (i + 1 < NSIZES && recv_sizes[i] < want) {
            i++;
        }
        ch->recv_index = (uint8_t)(i + 1);
    }
    size_t size = recv_sizes[ch->recv_index - 1];
    return size < lo ? lo : size > hi ? hi : size;
}

static void recv_record(eddy_channel_t *ch, size_t got, size_t asked)
{
    size_t i = ch->recv_index - 1;
    if (got >= asked) {
        if (i + 4 < NSIZES) {
            i += 4; /* a full buffer: grow fast */
        } else {
            i = NSIZES - 1;
        }
        ch->recv_shrink_next = false;
    } else if (i > 0 && got < recv_sizes[i - 1]) {
        /* Strictly less: a steady flow of N bytes a read must not shrink onto a buffer of
         * exactly N, which every read fills, costing one more read that finds EAGAIN (10% of
         * the reads of bench/echo's 64x16x64 before this). */
        if (ch->recv_shrink_next) {
            i--;
            ch->recv_shrink_next = false;
        } else {
            ch->recv_shrink_next = true;
        }
    } else {
        ch->recv_shrink_next = false;
    }
    ch->recv_index = (uint8_t)(i + 1);
}

/*
 * A read that filled a buffer of the largest size allowed, at least this large, ends the
 * batch. Reading on would most often find EAGAIN, since a peer that writes a message of
 * exactly that size (bench/echo's 64 KiB) fills the buffer and drains the socket in one go:
 * one read of three system calls per message, where raw epoll pays two (0.90x its MB/s). The
 * poller is level-triggered, so bytes that are left bring the channel back at the next wait,
 * which serves every ready channel at once; against a read of 64 KiB, that wait costs a peer
 * that streams without pause a few percent at most. Smaller buffers keep reading: one wait
 * per read of a few KiB would cost more than the reads that find EAGAIN.
 */
#define FULL_READ_ENDS_BATCH 65536

static bool full_read_ends_batch(const eddy_channel_t *ch, size_t size)
{
    return size >= FULL_READ_ENDS_BATCH && size >= (size_t)ch->opt[EDDY_RCVBUF_ALLOC_MAX];
}

static void socket_read(eddy_channel_t *ch)
{
    if (ch->flags & EDDY__CH_LINGERING) {
        linger_read(ch); /* closing: what comes now is dropped, never handed on */
        return;
    }
    assert(!(ch->flags & (EDDY__CH_CLOSED | EDDY__CH_LISTENER)) && ch->fd >= 0);
    eddy_pipeline_t *p = &ch->pipeline;
    int64_t max_msgs = ch->opt[EDDY_MAX_MESSAGES_PER_READ];
    eddy_allocator_t *alloc = eddy_allocator_default();
    int64_t msgs = 0;
    int err = 0;
    bool eof = false;
    /* AUTO_READ off: this batch answers the request; a handler asking again inside it (from
     * channel_read or channel_read_complete) sets READING anew. */
    bool one_batch = !ch->opt[EDDY_AUTO_READ] && (ch->flags & EDDY__CH_READING);
    if (one_batch) {
        ch->flags &= ~EDDY__CH_READING;
    }
    while (msgs < max_msgs && !(ch->flags & (EDDY__CH_CLOSED | EDDY__CH_NO_INPUT))) {
        size_t size = recv_guess(ch);
        eddy_buf_t *buf = eddy_buf_alloc(alloc, size, size);
        if (buf == NULL) {
            err = EDDY_ENOMEM;
            break;
        }
        ssize_t n = read(ch->fd, eddy_buf_write_ptr(buf), size);
        if (n > 0) {
            assert((size_t)n <= size);
            eddy_buf_set_writer_index(buf, eddy_buf_writer_index(buf) + (size_t)n);
            atomic_fetch_add_explicit(&ch->bytes_read, (uint64_t)n, memory_order_relaxed);
            atomic_fetch_add_explicit(&ch->msgs_read, 1, memory_order_relaxed);
            recv_record(ch, (size_t)n, size);
            msgs++;
            eddy_pipeline_fire_channel_read(p, eddy_buf_msg(buf));
            if ((size_t)n < size || full_read_ends_batch(ch, size)) {
                break; /* the socket is most likely drained: no read just to see EAGAIN */
            }
            continue;
        }
        eddy_buf_release(buf);
        if (n == 0) {
            eof = true;
        } else if (errno == EINTR) {
            continue;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            err = -errno;
        }
        break;
    }
    if (msgs > 0 && !(ch->flags & EDDY__CH_CLOSED)) {
        eddy_pipeline_fire_channel_read_complete(p);
    }
    if (ch->flags & EDDY__CH_CLOSED) {
        return;
    }
    if (err != 0 || eof) {
        eddy__socket_input_end(ch, err, eof);
        return;
    }
    if (one_batch && !(ch->flags & EDDY__CH_READING)) {
        /* One batch per request: the next needs eddy_channel_read(). */
        update_interest(ch);
    } else if (!one_batch && !ch->opt[EDDY_AUTO_READ] && (ch->flags & EDDY__CH_READING)) {
        /* AUTO_READ was turned off during the batch (a handler stops reading while the
         * channel is full): the interest goes lazily (watch). */
        ch->flags &= ~EDDY__CH_READING;
    }
}

/* ---------------------------------------------------------------------------------------
 * Writing
 */

/* One write of what is flushed: the bytes up to a file region in one sendmsg(), or the
 * region at the head. The bytes sent, *total those offered (0: only empty messages are
 * next), or -errno. */
static ssize_t write_once(eddy_channel_t *ch, struct iovec *iov, size_t *total)
{
    const eddy_file_region_t *r = eddy__outbound_head_region(ch);
    if (r != NULL) {
        return eddy__socket_send_region(ch, r, total);
    }
    int n;
    *total = eddy__outbound_iovec(ch, iov, MAX_IOV, &n, NULL, NULL);
    if (*total == 0) {
        return 0;
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(ch->fd, &mh, MSG_NOSIGNAL | eddy__socket_more_flag(ch));
    return w < 0 ? -errno : w;
}

static void stream_flush(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    if ((ch->flags & (EDDY__CH_FLUSHING | EDDY__CH_CLOSED)) || !(ch->flags & EDDY__CH_ACTIVE)) {
        return; /* a flush inside the flush (a promise listener) is folded into this one */
    }
    if (ch->flags & EDDY__CH_WRITE_WAIT) {
        return; /* the socket is full: the write-ready event flushes */
    }
    assert(ch->fd >= 0); /* active and not closed */
    ch->flags |= EDDY__CH_FLUSHING;
    int64_t spins = ch->opt[EDDY_WRITE_SPIN_COUNT];
    int err = 0;
    bool blocked = false;
    struct iovec iov[MAX_IOV];
    while (spins-- > 0 && eddy__outbound_has_flushed(ch)) {
        size_t total;
        ssize_t w = write_once(ch, iov, &total);
        if (total == 0) {
            eddy__outbound_written(ch, 0); /* empty messages complete at once */
            continue;
        }
        if (w < 0) {
            if (w == -EINTR) {
                spins++;
                continue;
            }
            if (w == -EAGAIN) { /* EWOULDBLOCK is EAGAIN where sendfile exists */
                blocked = true;
            } else {
                err = (int)w;
            }
            break;
        }
        assert((size_t)w <= total);
        eddy__outbound_written(ch, (size_t)w);
        if ((size_t)w < total) {
            blocked = true; /* a short write: the socket buffer is full */
            break;
        }
    }
    assert(ch->flags & EDDY__CH_FLUSHING); /* no flush inside this one ran (and cleared it) */
    ch->flags &= ~EDDY__CH_FLUSHING;
    if (ch->flags & EDDY__CH_CLOSED) {
        return;
    }
    if (err != 0) {
        /* The peer is gone (EPIPE, ECONNRESET), or a file region's file ended before it
         * (EDDY_ETRUNCATED: the peer must see a short stream, not another response's bytes
         * where the rest belonged): fail what is queued, close. */
        eddy__outbound_fail_all(ch, err);
        eddy_pipeline_fire_exception(&ch->pipeline, err);
        eddy__channel_do_close(ch, err, NULL);
        return;
    }
    bool more = eddy__outbound_has_flushed(ch);
    if (blocked) {
        ch->flags |= EDDY__CH_WRITE_WAIT;
        update_interest(ch);
    } else if (more) {
        /* Spun enough: let the loop serve others, and come back (Netty's incompleteWrite). */
        eddy__socket_flush_later(ch);
    } else if (ch->flags & EDDY__CH_SHUTDOWN_PENDING) {
        eddy__socket_finish_shutdown_output(ch);
    }
}

static void on_writable(eddy_channel_t *ch)
{
    /* Flush first and settle the interest once: a flush that blocks again keeps the write
     * interest as it was (no epoll_ctl), one that drains drops it. */
    ch->flags &= ~EDDY__CH_WRITE_WAIT;
    stream_flush(ch);
    update_interest(ch);
}

/* ---------------------------------------------------------------------------------------
 * Closing
 */

static void close_fd(eddy_channel_t *ch)
{
    if (ch->fd >= 0) {
        eddy__io_close(&ch->io);
        eddy__fd_close(ch->fd);
        ch->fd = -1;
    }
}

/* Readable while lingering: drop it, up to the per-read budget; the peer's FIN ends it. */
static void linger_read(eddy_channel_t *ch)
{
    assert((ch->flags & EDDY__CH_LINGERING) && ch->fd >= 0);
    char sink[16384];
    for (int64_t i = ch->opt[EDDY_MAX_MESSAGES_PER_READ]; i > 0; i--) {
        ssize_t n = recv(ch->fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        }
        if (!eddy__socket_linger_input(ch, n < 0 ? -errno : n)) {
            return;
        }
    }
}

static void stream_do_close(eddy_channel_t *ch)
{
    close_fd(ch);
    eddy__socket_close_parts(ch);
}

static const eddy__channel_ops_t stream_ops = {
    EDDY__SOCKET_STREAM_OPS,
    .begin_read = begin_read,
    .update_interest = update_interest,
    .flush = stream_flush,
    .do_close = stream_do_close,
    .destroy = eddy__socket_destroy,
};

/* ---------------------------------------------------------------------------------------
 * Listening
 */

static void listener_do_close(eddy_channel_t *ch)
{
    close_fd(ch);
    eddy__listener_close_parts(ch);
}

static void listener_accept(eddy_channel_t *ch)
{
    assert((ch->flags & EDDY__CH_LISTENER) && ch->listener != NULL);
    eddy__listener_t *l = ch->listener;
    unsigned cap = l->accepts_per_wakeup ? l->accepts_per_wakeup : 64;
    for (unsigned i = 0; i < cap && !(ch->flags & EDDY__CH_CLOSED); i++) {
        eddy_addr_t peer;
        peer.len = sizeof(peer.u);
#if defined(__linux__)
        int fd = accept4(ch->fd, &peer.u.sa, &peer.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
        int fd = accept(ch->fd, &peer.u.sa, &peer.len);
        if (fd >= 0 && eddy__socket_nonblock_cloexec(fd) != 0) {
            close(fd);
            continue;
        }
#endif
        if (fd < 0) {
            int err = -errno;
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            if (errno == EMFILE || errno == ENFILE) {
                eddy__listener_out_of_descriptors(ch, err);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                eddy_pipeline_fire_exception(&ch->pipeline, err);
            }
            return;
        }
        eddy__listener_child(ch, fd, &peer);
    }
}

void eddy__readiness_on_io(eddy_channel_t *ch, unsigned events)
{
    if (ch->flags & EDDY__CH_LISTENER) {
        listener_accept(ch);
        return;
    }
    if ((events & EDDY_IO_WRITE) && !(ch->flags & EDDY__CH_CLOSED)) {
        on_writable(ch);
    }
    if (!(events & (EDDY_IO_READ | EDDY_IO_HUP | EDDY_IO_ERROR)) || (ch->flags & EDDY__CH_CLOSED)) {
        return;
    }
    if ((ch->flags & EDDY__CH_READING) &&
        !(ch->flags & (EDDY__CH_INPUT_SHUTDOWN | EDDY__CH_NO_INPUT))) {
        socket_read(ch);
    } else if (events & EDDY_IO_ERROR) {
        int err = eddy__io_socket_error(&ch->io);
        err = err != 0 ? err : EDDY_ECONNRESET;
        eddy_pipeline_fire_exception(&ch->pipeline, err);
        eddy__channel_do_close(ch, err, NULL);
    } else {
        watch(ch, false); /* readable while not reading: the interest kept lazily goes now */
    }
}

static const eddy__channel_ops_t listener_ops = {
    EDDY__SOCKET_LISTENER_OPS,
    .begin_read = begin_read,
    .update_interest = update_interest,
    .do_close = listener_do_close,
};

const eddy__transport_t eddy__transport_readiness = {
    .name = "readiness",
    .stream = &stream_ops,
    .listener = &listener_ops,
};
