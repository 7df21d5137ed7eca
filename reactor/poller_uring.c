/*
 * The io_uring backend (Linux, liburing): a poller whose wait is one io_uring_enter() that
 * submits what the turn prepared and waits for completions, and whose completions are of two
 * kinds. Readiness, for eddy_io_t watchers (the wake-up eventfd, connects in progress, the
 * user's descriptors): a one-shot poll per watcher, armed again after each event while the
 * watcher still wants it, which gives the level-triggered behaviour of the epoll backend
 * (a one-shot poll looks at the descriptor as it is armed). And operations of the completion
 * transport (pipeline/transport/socket_uring.c), which call back with their result (reactor/uring.h).
 *
 * The ring is made disabled and enabled by the loop's own thread at its first wait, so that
 * thread is the ring's single issuer, and task work runs only when it enters the kernel to
 * wait (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, Linux 6.1); on older
 * kernels, IORING_SETUP_COOP_TASKRUN. The ring's descriptor is registered.
 *
 * Receives land in a ring of provided buffers, each a pooled eddy_buf_t: a completion hands
 * its buffer up without a copy, and the slot gets a fresh one at once. The ring starts with a
 * few buffers and grows as batches need more, up to its size and its byte budget; its buffers
 * are larger while receives fill them (adapt_buffers).
 */
#include "eddy_config.h"

#ifdef EDDY_HAVE_IO_URING
#include "reactor/internal.h"
#include "buffer/layer.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

#ifndef IORING_SETUP_SUBMIT_ALL
#define IORING_SETUP_SUBMIT_ALL (1U << 7)
#endif
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

/* Defaults (eddy_loop_options_t's uring_* fields): submission entries (completions get four
 * times as many), provided buffers and their size. 16 KiB a buffer: one receive takes what a
 * pipelined burst of small messages brings, and a stream fills it in few completions. */
#define DEFAULT_ENTRIES 1024
#define DEFAULT_BUFFERS 512
#define DEFAULT_BUFFER_SIZE 16384
#define BUF_GROUP 0

/* Provided buffers the ring starts with. The kernel takes them in ring order, so every buffer
 * in the ring is written (its first page made resident) within as many receives as there are
 * buffers: 512 of 16 KiB cost a quiet loop 2 MiB of resident memory after its first 512
 * receives, 205 B per connection of bench/echo's 10,000 idle ones. 16 cost 64 KiB, and a
 * batch that takes half of what the ring holds doubles it. */
#define FIRST_BUFFERS 16

/* The size of the buffers put into the ring while the receives of a batch mostly fill theirs
 * (unless the loop's options or $EDDY_URING_TUNE fix the size): a peer that streams gets the
 * 64 KiB a readiness read takes at most (RCVBUF_ALLOC_MAX), in one completion rather than four.
 * bench/echo's 16 x 64 KiB: 0.70x raw epoll's MB/s with 16 KiB buffers, 0.95x with 64 KiB. */
#define STREAM_BUFFER_SIZE 65536

/* The bytes of buffers a loop's ring holds at most: 128 of the small size; of the stream
 * size, half as many bytes (stream_budget()). Without it, floods of many connections grew
 * each ring to its 512 slots of 64 KiB (32 MiB a loop, resident once written) and it stayed
 * so. It also bounds what one batch can
 * bring in for a channel whose reading paused meanwhile (a multishot receive takes what the
 * socket holds until the ring runs dry): the hostile suite's TLS echo client that never reads
 * grew the server (ASan) by 57 MB with 4 MiB, 49 with 2, 44 with 1; epoll 38. A slot the
 * budget leaves empty is filled after a batch, when takes have made room or the buffers are
 * small again. */
#define RING_BYTES (2u << 20)

/* A receive this short (and at most a quarter of its buffer) is copied into a buffer of its
 * size, and its ring buffer goes back into the slot: a connection that keeps a few bytes (a
 * request waiting for its answer, a decoder's partial frame) must not keep 16 or 64 KiB with
 * them, as epoll's reads, sized per channel, never did. (The hostile suite's growth on
 * io_uring came from elsewhere: the held input and the ring's size; this changed it little.) */
#define COPY_RECV_MAX 4096

/* Batches in a row whose receives filled no buffer before the ring's buffers are small again.
 * A stream's batches often hold only the tail of a message that a receive before took most of
 * (bench/echo's 16 x 64 KiB: its 64 KiB messages came 53 + 65,483 B); going small at the first
 * such batch left the ring half 16 KiB buffers, and half its receives took a quarter message. */
#define SHORT_RUN 16

typedef struct uring_state_s {
    struct io_uring ring;
    bool enabled;     /* made disabled: the loop's thread enables it at its first wait */
    bool register_fd; /* the loop's thread still has to register the ring's descriptor */
    int wakefd;
    /* The provided buffers: the ring the kernel takes from, and the buffer in each slot. */
    struct io_uring_buf_ring *br;
    size_t br_bytes;
    eddy_buf_t **bufs;
    unsigned nbufs;        /* the ring's entries: slots it may grow to */
    unsigned nfilled;      /* slots in use, 0 .. nfilled-1 */
    uint16_t *empty;       /* slots below nfilled with no buffer (the pool had none, or the
                              budget had no room): nempty of them, filled after a batch */
    unsigned nempty;
    size_t ring_bytes;     /* of the buffers in the ring now */
    size_t budget;         /* ... at most (RING_BYTES, or $EDDY_URING_TUNE's ring-bytes) */
    size_t stream_budget;  /* ... while they are stream-sized (half the budget by default) */
    uint32_t buf_size;     /* of the buffers put into the ring now */
    uint32_t small_size;   /* buf_size while receives are short */
    uint32_t stream_size;  /* while they fill their buffers (small_size: a fixed size) */
    unsigned br_added;     /* slots refilled since the tail was last published */
    unsigned br_taken;     /* buffers receives took in this batch */
    unsigned br_full;      /* of which they filled */
    unsigned short_run;    /* batches in a row whose receives filled no buffer */
    bool br_dry;           /* a receive of this batch found the ring empty (-ENOBUFS) */
    struct later_s *later; /* eddy__uring_later()'s queue: nlater of later_cap */
    size_t nlater, later_cap;
    int64_t inflight;
    unsigned dispatched; /* entries of the batch being dispatched that were dispatched */
    bool single_shot;    /* receives end after one completion ($EDDY_URING_TUNE) */
    /* Scratch blocks the transport's operations in flight use (eddy__uring_block_take). */
    void *blocks;
    unsigned nblocks;
    size_t block_size;
} uring_state_t;

typedef struct later_s {
    void (*fn)(void *arg);
    void *arg;
} later_t;

/* Blocks kept for reuse at most: what a busy loop's sends in flight at once need, not what
 * a burst once took. */
#define MAX_CACHED_BLOCKS 64

/* A watcher's poll says which watcher and which arming it is, so that the completion of a
 * poll removed or replaced since is told apart: user_data = gen << 32 | fd << 8 | arm << 1 |
 * 1 (operations are pointers, their low bit clear). io->_index keeps the events armed (low 8
 * bits, 0: none) and the arm counter (the next 7). */
#define WATCH_TAG 1u
#define MAX_WATCH_FD (1 << 24)

/* Mark a completion taken ahead of its batch (eddy__uring_take_cqe). */
static void mark_taken(struct io_uring_cqe *cqe)
{
    cqe->user_data = 0;
}

static uint64_t watch_ud(const eddy_io_t *io, unsigned arm)
{
    return ((uint64_t)io->_gen << 32) | ((uint64_t)(uint32_t)io->fd << 8) | ((arm & 0x7fu) << 1) |
           WATCH_TAG;
}

static unsigned armed_events(const eddy_io_t *io)
{
    return io->_index > 0 ? (unsigned)io->_index & 0xffu : 0;
}

static unsigned arm_count(const eddy_io_t *io)
{
    return io->_index > 0 ? ((unsigned)io->_index >> 8) & 0x7fu : 0;
}

bool eddy__uring_is(const eddy_loop_t *loop)
{
    return loop->poller == &eddy__poller_uring;
}

struct io_uring_sqe *eddy__uring_sqe(eddy_loop_t *loop, eddy__uring_op_t *op)
{
    uring_state_t *st = loop->poller_data;
    eddy__assert_on_loop(loop);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
    if (sqe == NULL) {
        /* Full: hand the queue over now (only the loop's thread submits: it is the ring's
         * single issuer, and enabled it already, since the queue fills only while it runs). */
        io_uring_submit(&st->ring);
        sqe = io_uring_get_sqe(&st->ring);
        if (sqe == NULL) {
            return NULL;
        }
    }
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, op);
    return sqe;
}

void eddy__uring_submit(eddy_loop_t *loop)
{
    uring_state_t *st = loop->poller_data;
    eddy__assert_on_loop(loop);
    if (st->enabled) {
        io_uring_submit(&st->ring);
    }
}

bool eddy__uring_take_cqe(eddy_loop_t *loop, eddy__uring_op_t *op, int *res, unsigned *flags)
{
    uring_state_t *st = loop->poller_data;
    eddy__assert_on_loop(loop);
    /* From the first entry not yet dispatched: the entries of this batch dispatched already
     * are still in the queue (its head moves after the batch), and op may have been used
     * again since (a new send, the same op). */
    unsigned head = *st->ring.cq.khead + st->dispatched;
    struct io_uring_cqe *cqe;
    for (; (cqe = head != io_uring_smp_load_acquire(st->ring.cq.ktail)
                      ? &st->ring.cq.cqes[head & st->ring.cq.ring_mask]
                      : NULL) != NULL;
         head++) {
        if (io_uring_cqe_get_data64(cqe) == (uint64_t)(uintptr_t)op) {
            *res = cqe->res;
            *flags = cqe->flags;
            /* The queue's memory is ours to write (mapped read-write); user_data 0 is an
             * entry the dispatch ignores. */
            mark_taken(cqe);
            return true;
        }
    }
    return false;
}

uint16_t eddy__uring_buf_group(const eddy_loop_t *loop)
{
    (void)loop;
    return BUF_GROUP;
}

/* Put buf into slot bid; published with the batch. */
static void buf_slot_put(uring_state_t *st, uint16_t bid, eddy_buf_t *buf)
{
    assert(bid < st->nfilled && st->bufs[bid] == NULL);
    st->bufs[bid] = buf;
    st->ring_bytes += eddy_buf_writable(buf);
    io_uring_buf_ring_add(st->br, eddy_buf_write_ptr(buf), (unsigned)eddy_buf_writable(buf), bid,
                          io_uring_buf_ring_mask(st->nbufs), (int)st->br_added++);
}

/* A fresh buffer from the pool into slot bid, if the budget has room and the pool gives one;
 * else the slot waits among the empty ones. Whether it was filled. */
static bool buf_slot_fill(uring_state_t *st, uint16_t bid)
{
    size_t limit = st->buf_size > st->small_size ? st->stream_budget : st->budget;
    eddy_buf_t *buf = st->ring_bytes + st->buf_size <= limit
                          ? eddy_buf_alloc(eddy_allocator_default(), st->buf_size, st->buf_size)
                          : NULL;
    if (buf == NULL) {
        assert(st->nempty < st->nbufs);
        st->empty[st->nempty++] = bid;
        return false;
    }
    buf_slot_put(st, bid, buf);
    return true;
}

eddy_buf_t *eddy__uring_take_buf(eddy_loop_t *loop, int res, unsigned flags)
{
    uring_state_t *st = loop->poller_data;
    if (!(flags & IORING_CQE_F_BUFFER)) {
        st->br_dry = st->br_dry || res == -ENOBUFS;
        return NULL;
    }
    st->br_taken++;
    uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
    assert(bid < st->nfilled && st->bufs[bid] != NULL);
    eddy_buf_t *buf = st->bufs[bid];
    st->bufs[bid] = NULL;
    assert(st->ring_bytes >= eddy_buf_writable(buf));
    st->ring_bytes -= eddy_buf_writable(buf);
    if (res <= 0) {
        buf_slot_put(st, bid, buf); /* nothing in it: the same buffer goes back */
        return NULL;
    }
    size_t cap = eddy_buf_writable(buf);
    if ((size_t)res == cap) {
        st->br_full++;
    }
    if ((size_t)res <= COPY_RECV_MAX && (size_t)res <= cap / 4) {
        eddy_buf_t *copy = eddy_buf_alloc(eddy_allocator_default(), (size_t)res, (size_t)res);
        if (copy != NULL) {
            eddy_buf_write_bytes(copy, eddy_buf_write_ptr(buf), (size_t)res);
            buf_slot_put(st, bid, buf);
            return copy;
        }
    }
    eddy_buf_set_writer_index(buf, (size_t)res);
    buf_slot_fill(st, bid);
    return buf;
}

int eddy__uring_later(eddy_loop_t *loop, void (*fn)(void *arg), void *arg)
{
    uring_state_t *st = loop->poller_data;
    eddy__assert_on_loop(loop);
    if (st->nlater == st->later_cap) {
        later_t *l = eddy__array_grow(st->later, &st->later_cap, sizeof(*l), 64);
        if (l == NULL) {
            return EDDY_ENOMEM;
        }
        st->later = l;
    }
    st->later[st->nlater++] = (later_t){fn, arg};
    return 0;
}

/* Run what the batch queued, and what that queues; each a callback the watchdog sees. */
static void run_later(eddy_loop_t *loop, uring_state_t *st)
{
    for (size_t i = 0; i < st->nlater; i++) {
        later_t l = st->later[i]; /* a copy: fn may queue more, which may move the array */
        eddy__callback_begin(loop, (eddy__fnptr_t)l.fn);
        l.fn(l.arg);
        eddy__callback_end(loop);
    }
    st->nlater = 0;
}

void *eddy__uring_block_take(eddy_loop_t *loop, size_t size)
{
    uring_state_t *st = loop->poller_data;
    eddy__assert_on_loop(loop);
    assert(size >= sizeof(void *) && (st->block_size == 0 || st->block_size == size));
    st->block_size = size;
    void *b = st->blocks;
    if (b == NULL) {
        return malloc(size);
    }
    memcpy(&st->blocks, b, sizeof(void *));
    st->nblocks--;
    return b;
}

void eddy__uring_block_give(eddy_loop_t *loop, void *block)
{
    uring_state_t *st = loop->poller_data;
    eddy__assert_on_loop(loop);
    if (st->nblocks >= MAX_CACHED_BLOCKS) {
        free(block);
        return;
    }
    memcpy(block, &st->blocks, sizeof(void *));
    st->blocks = block;
    st->nblocks++;
}

static void blocks_free(uring_state_t *st)
{
    while (st->blocks != NULL) {
        void *b = st->blocks;
        memcpy(&st->blocks, b, sizeof(void *));
        free(b);
    }
    st->nblocks = 0;
}

void eddy__uring_inflight(eddy_loop_t *loop, int delta)
{
    uring_state_t *st = loop->poller_data;
    st->inflight += delta;
    assert(st->inflight >= 0);
}

/* ---------------------------------------------------------------------------------------
 * Readiness watchers
 */

static unsigned poll_mask(unsigned events)
{
    return ((events & EDDY_IO_READ) ? POLLIN | POLLRDHUP : 0) |
           ((events & EDDY_IO_WRITE) ? POLLOUT : 0);
}

static int arm(eddy_loop_t *loop, eddy_io_t *io, unsigned events)
{
    unsigned count = (arm_count(io) + 1) & 0x7fu;
    struct io_uring_sqe *sqe = eddy__uring_sqe(loop, NULL);
    if (sqe == NULL) {
        return EDDY_ENOMEM;
    }
    io_uring_prep_poll_add(sqe, io->fd, poll_mask(events));
    io_uring_sqe_set_data64(sqe, watch_ud(io, count));
    io->_index = (int)((count << 8) | events);
    return 0;
}

static int uring_update(eddy_loop_t *loop, eddy_io_t *io, unsigned events)
{
    if (io->fd >= MAX_WATCH_FD) {
        return EDDY_EINVAL;
    }
    unsigned armed = armed_events(io);
    if (armed == events) {
        return 0;
    }
    if (armed != 0) {
        /* Its completion, if it still comes, is one of an older arming: ignored. */
        struct io_uring_sqe *sqe = eddy__uring_sqe(loop, NULL);
        if (sqe == NULL) {
            return EDDY_ENOMEM;
        }
        io_uring_prep_poll_remove(sqe, watch_ud(io, arm_count(io)));
        io->_index = (int)(arm_count(io) << 8); /* nothing armed, the counter kept */
    }
    return events != 0 ? arm(loop, io, events) : 0;
}

static void watch_done(eddy_loop_t *loop, uint64_t ud, int res)
{
    int fd = (int)((ud >> 8) & (MAX_WATCH_FD - 1));
    uint32_t gen = (uint32_t)(ud >> 32);
    unsigned count = (unsigned)(ud >> 1) & 0x7fu;
    eddy_io_t *io = eddy__io_of(loop, fd);
    if (io == NULL || io->_gen != gen || armed_events(io) == 0 || arm_count(io) != count) {
        return; /* a poll removed, replaced, or of a watcher gone */
    }
    io->_index = (int)(count << 8); /* it fired: nothing armed now */
    if (res < 0) {
        /* The descriptor cannot be polled (closed under us): report it as an error. */
        res = POLLERR;
    }
    unsigned e = (unsigned)res;
    unsigned ready = ((e & (POLLIN | POLLRDHUP)) ? EDDY_IO_READ : 0) |
                     ((e & POLLOUT) ? EDDY_IO_WRITE : 0) | ((e & POLLERR) ? EDDY_IO_ERROR : 0) |
                     ((e & (POLLHUP | POLLNVAL)) ? EDDY_IO_HUP : 0);
    eddy__io_dispatch(loop, fd, gen, ready);
    /* Level-triggered: armed again while the watcher still wants events, unless its callback
     * changed the interest (and armed it) already. */
    io = eddy__io_of(loop, fd);
    if (io != NULL && io->_gen == gen && io->_interest != 0 && armed_events(io) == 0) {
        arm(loop, io, io->_interest);
    }
}

/* ---------------------------------------------------------------------------------------
 * Setup and teardown
 */

static void buffers_free(uring_state_t *st)
{
    if (st->bufs != NULL) {
        for (unsigned i = 0; i < st->nfilled; i++) {
            if (st->bufs[i] != NULL) {
                eddy_buf_release(st->bufs[i]);
            }
        }
        free(st->bufs);
    }
    free(st->empty);
    if (st->br != NULL) {
        munmap(st->br, st->br_bytes);
    }
}

static int buffers_init(uring_state_t *st, unsigned n, uint32_t size)
{
    st->nbufs = n;
    st->buf_size = size;
    st->br_bytes = n * sizeof(struct io_uring_buf);
    void *mem =
        mmap(NULL, st->br_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    st->bufs = calloc(n, sizeof(*st->bufs));
    st->empty = malloc(n * sizeof(*st->empty));
    if (mem == MAP_FAILED || st->bufs == NULL || st->empty == NULL) {
        if (mem != MAP_FAILED) {
            munmap(mem, st->br_bytes);
        }
        return EDDY_ENOMEM;
    }
    st->br = mem;
    io_uring_buf_ring_init(st->br);
    struct io_uring_buf_reg reg = {
        .ring_addr = (uintptr_t)st->br, .ring_entries = n, .bgid = BUF_GROUP};
    int err = io_uring_register_buf_ring(&st->ring, &reg, 0);
    if (err != 0) {
        return err;
    }
    st->nfilled = n < FIRST_BUFFERS ? n : FIRST_BUFFERS;
    /* Empty until the loop's thread fills them at its first wait: taken here, on the thread
     * that makes the loop, they bound that thread to a cache of the pool (84 KiB) and an arena
     * (the first buffers then sat in a chunk of their own), for nothing: 190 KiB more heap
     * before any traffic. */
    for (unsigned i = st->nfilled; i-- > 0;) {
        st->empty[st->nempty++] = (uint16_t)i; /* filled lowest first */
    }
    return 0;
}

/*
 * $EDDY_URING_TUNE: switches one feature off, or sets a size, for measuring each one's effect
 * (bench/RESULTS.md); comma-separated: no-defer-taskrun (COOP_TASKRUN instead),
 * no-registered-fd, single-shot (receives re-armed after each completion), entries=N,
 * buffers=N, buffer-size=N (used where the loop's options leave them 0), ring-bytes=N (the
 * ring's budget). Not for production.
 */
typedef struct tune_s {
    bool no_defer, no_regfd, single_shot;
    unsigned entries, buffers, buffer_size, ring_bytes;
} tune_t;

static tune_t tune_from_env(void)
{
    tune_t t = {0};
    const char *v = getenv("EDDY_URING_TUNE");
    while (v != NULL && *v != '\0') {
        size_t n = strcspn(v, ",");
        unsigned x = 0;
        if (n == 16 && strncmp(v, "no-defer-taskrun", n) == 0) {
            t.no_defer = true;
        } else if (n == 16 && strncmp(v, "no-registered-fd", n) == 0) {
            t.no_regfd = true;
        } else if (n == 11 && strncmp(v, "single-shot", n) == 0) {
            t.single_shot = true;
        } else if (sscanf(v, "entries=%u", &x) == 1) {
            t.entries = x;
        } else if (sscanf(v, "buffers=%u", &x) == 1) {
            t.buffers = x;
        } else if (sscanf(v, "buffer-size=%u", &x) == 1) {
            t.buffer_size = x;
        } else if (sscanf(v, "ring-bytes=%u", &x) == 1) {
            t.ring_bytes = x;
        }
        v += n + (v[n] == ',');
    }
    return t;
}

/* The ring's byte budget: RING_BYTES (or the tune's), or all its slots at the largest size
 * where the loop's options set the count or the size; never below its first buffers. */
static size_t ring_budget(const eddy_loop_t *loop, const tune_t *t, unsigned nbufs,
                          uint32_t largest)
{
    size_t b = t->ring_bytes ? t->ring_bytes : RING_BYTES;
    if (loop->uring_buffers != 0 || loop->uring_buffer_size != 0) {
        b = (size_t)nbufs * largest;
    }
    size_t least = (size_t)FIRST_BUFFERS * largest;
    return b > least ? b : least;
}

/* The bytes of stream-sized buffers the ring holds at most: half the budget (16 of 64 KiB), or
 * all of it where the loop's options rule. Each batch's takes are held until the sends of what
 * they brought complete, and the ring is refilled meanwhile: bench/ws's 16 KiB echo (64
 * connections, a server that cannot keep up) peaked at 11.0 MB of RSS with 32 buffers of 64
 * KiB, 5.7 with 16 (epoll: 4.0); 16 x 64 KiB streaming lost nothing. */
static size_t stream_budget(const eddy_loop_t *loop, size_t budget, uint32_t stream_size)
{
    if (loop->uring_buffers != 0 || loop->uring_buffer_size != 0) {
        return budget;
    }
    size_t half = budget / 2, least = (size_t)FIRST_BUFFERS * stream_size;
    return half > least ? half : least;
}

bool eddy__uring_single_shot(const eddy_loop_t *loop)
{
    const uring_state_t *st = loop->poller_data;
    return st->single_shot;
}

/* The ring with the best flags this kernel takes: 0, or -errno of the last try. */
static int ring_init(uring_state_t *st, unsigned entries, bool no_defer)
{
    static const unsigned tries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED |
            IORING_SETUP_SUBMIT_ALL,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL,
        0,
    };
    int err = -EINVAL;
    for (size_t i = no_defer ? 1 : 0; i < sizeof(tries) / sizeof(tries[0]) && err == -EINVAL;
         i++) {
        struct io_uring_params p;
        memset(&p, 0, sizeof(p));
        p.flags = tries[i] | IORING_SETUP_CQSIZE;
        p.cq_entries = entries * 4;
        err = io_uring_queue_init_params(entries, &st->ring, &p);
        if (err == 0) {
            st->enabled = !(tries[i] & IORING_SETUP_R_DISABLED);
            st->register_fd = true;
        }
    }
    return err;
}

static void uring_destroy(eddy_loop_t *loop);

typedef struct make_ring_s {
    uring_state_t *st;
    unsigned entries;
    bool no_defer;
    int err;
} make_ring_t;

static void *make_ring(void *arg)
{
    make_ring_t *m = arg;
    m->err = ring_init(m->st, m->entries, m->no_defer);
    return NULL;
}

/*
 * Make the ring on a thread of its own that ends at once. The kernel remembers the thread
 * that makes a ring, and when the ring is torn down it queues work on that thread with a
 * signal-like notification, which makes a blocking system call with a timeout there fail with
 * EINTR: a recv() with SO_RCVTIMEO on the thread that freed a loop group, seen in our socket
 * tests. A thread that has ended is skipped. (The loop's own thread is the ring's issuer; it
 * enables the ring at its first wait.)
 */
static int make_ring_apart(uring_state_t *st, unsigned entries, bool no_defer)
{
    make_ring_t m = {st, entries, no_defer, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, make_ring, &m) != 0) {
        make_ring(&m); /* no thread to spare: here, then */
        return m.err;
    }
    pthread_join(t, NULL);
    return m.err;
}

/* Under valgrind, whose memcheck does not see the kernel write the buffers a receive
 * completes with (every byte received would read as uninitialised), and which does not run
 * our rings' waits: refused, so a default loop uses the next backend. */
static bool under_valgrind(void)
{
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
    return RUNNING_ON_VALGRIND != 0;
#endif
#endif
    return false;
}

/* Multishot receives came with Linux 6.0 (provided-buffer rings and multishot accepts with
 * 5.19); an older kernel would make the ring and then fail every receive. */
static bool kernel_too_old(void)
{
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2) {
        return false; /* unknown: the ring's own set-up decides */
    }
    return major < 6;
}

/* The operations the transports use (reactor/uring.h's users: socket_uring.c, datagram.c,
 * this file's watchers and wake-up), each one the kernel must know; a kernel that made the
 * ring but lacks one (or cannot say) is refused, so the default goes on to the next backend
 * rather than failing a channel later. */
static const uint8_t used_ops[] = {
    IORING_OP_NOP,     IORING_OP_POLL_ADD, IORING_OP_POLL_REMOVE,  IORING_OP_RECV,
    IORING_OP_SENDMSG, IORING_OP_ACCEPT,   IORING_OP_ASYNC_CANCEL, IORING_OP_CLOSE,
};

static int probe_ops(struct io_uring *ring)
{
    struct io_uring_probe *probe = io_uring_get_probe_ring(ring);
    if (probe == NULL) {
        return EDDY_ENOSYS;
    }
    int err = 0;
    for (size_t i = 0; i < sizeof(used_ops) && err == 0; i++) {
        if (!io_uring_opcode_supported(probe, used_ops[i])) {
            err = EDDY_ENOSYS;
        }
    }
    io_uring_free_probe(probe);
    return err;
}

static int uring_init(eddy_loop_t *loop)
{
    if (under_valgrind() || kernel_too_old()) {
        return EDDY_ENOSYS;
    }
    uring_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return EDDY_ENOMEM;
    }
    st->wakefd = -1;
    tune_t t = tune_from_env();
    st->single_shot = t.single_shot;
    unsigned entries = loop->uring_entries   ? loop->uring_entries
                       : t.entries           ? t.entries
                                             : DEFAULT_ENTRIES;
    unsigned nbufs = loop->uring_buffers     ? loop->uring_buffers
                     : t.buffers             ? t.buffers
                                             : DEFAULT_BUFFERS;
    uint32_t size = loop->uring_buffer_size  ? loop->uring_buffer_size
                    : t.buffer_size          ? t.buffer_size
                                             : DEFAULT_BUFFER_SIZE;
    bool fixed_size = loop->uring_buffer_size != 0 || t.buffer_size != 0;
    int err = make_ring_apart(st, entries, t.no_defer);
    if (err != 0) {
        free(st);
        return err;
    }
    st->register_fd = st->register_fd && !t.no_regfd;
    loop->poller_data = st;
    st->small_size = size;
    st->stream_size = fixed_size ? size : STREAM_BUFFER_SIZE;
    st->budget = ring_budget(loop, &t, nbufs, st->stream_size);
    st->stream_budget = stream_budget(loop, st->budget, st->stream_size);
    err = probe_ops(&st->ring);
    if (err == 0) {
        err = buffers_init(st, nbufs, size);
    }
    if (err == 0) {
        st->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        err = st->wakefd < 0 ? -errno : 0;
    }
    if (err == 0) {
        eddy_io_init(&loop->wake_io, loop, st->wakefd, eddy__eventfd_drain, NULL);
        err = eddy_io_start(&loop->wake_io, EDDY_IO_READ);
    }
    if (err != 0) {
        uring_destroy(loop);
    }
    return err;
}

static void uring_destroy(eddy_loop_t *loop)
{
    uring_state_t *st = loop->poller_data;
    if (st == NULL) {
        return;
    }
    /* Exiting the ring cancels what is left and waits for the kernel to let go of the
     * buffers; only then are they freed. */
    io_uring_queue_exit(&st->ring);
    buffers_free(st);
    blocks_free(st);
    free(st->later);
    if (st->wakefd >= 0) {
        close(st->wakefd);
    }
    free(st);
    loop->poller_data = NULL;
}

/* ---------------------------------------------------------------------------------------
 * The wait
 */

/* Submit and wait as the timeout says, entering the kernel only when there is something to
 * submit, or nothing to reap yet. */
static int enter(uring_state_t *st, int64_t timeout_ns)
{
    struct io_uring *r = &st->ring;
    bool to_submit = io_uring_sq_ready(r) > 0;
    if (io_uring_cq_ready(r) > 0) {
        /* Completions are there already: hand the queue over without waiting, if any. */
        return to_submit ? io_uring_submit(r) : 0;
    }
    if (timeout_ns == 0) {
        /* Nothing to wait for: run the deferred task work, which posts completions. */
        return to_submit ? io_uring_submit_and_get_events(r) : io_uring_get_events(r);
    }
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts;
    struct __kernel_timespec *tsp = NULL;
    if (timeout_ns > 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tsp = &ts;
    }
    int rc = io_uring_submit_and_wait_timeout(r, &cqe, 1, tsp, NULL);
    return rc == -ETIME || rc == -EINTR ? 0 : rc;
}

/* The empty slots get buffers while the budget has room and the pool gives them. */
static void refill_empty(uring_state_t *st)
{
    while (st->nempty > 0 && buf_slot_fill(st, st->empty[--st->nempty])) {
    }
}

/*
 * After a batch: the size of the buffers that refill the ring from now on, and the ring's
 * count of buffers. A ring that ran dry, or gave half of its buffers to one batch, doubles (up
 * to its entries), so that it holds twice what the busiest batch took. Only the kernel's taking
 * in one io_uring_enter() empties it (the slots are refilled before the next), so what a
 * loop's load needs is reached after a few batches, and a quiet loop keeps a few buffers.
 * New slots whose buffer the pool cannot give stay empty and are filled with the others.
 */
static void adapt_buffers(uring_state_t *st)
{
    bool grow = st->br_dry || st->br_taken * 2 > st->nfilled;
    /* The size of the buffers that refill the ring from now on: large while most receives
     * fill theirs, small again after SHORT_RUN batches in a row had none that did. */
    if (st->br_full * 2 > st->br_taken) {
        st->buf_size = st->stream_size;
    }
    st->short_run = st->br_full > 0 ? 0 : st->short_run + (st->br_taken > 0);
    if (st->short_run >= SHORT_RUN) {
        st->buf_size = st->small_size;
    }
    st->br_dry = false;
    st->br_taken = 0;
    st->br_full = 0;
    if (!grow || st->nempty > 0 || st->nfilled == st->nbufs) {
        return; /* (slots left empty: the budget or the pool is what limits) */
    }
    unsigned n = st->nfilled * 2 < st->nbufs ? st->nfilled * 2 : st->nbufs;
    for (unsigned i = n; i-- > st->nfilled;) {
        st->empty[st->nempty++] = (uint16_t)i; /* filled by refill_empty, lowest first */
    }
    st->nfilled = n;
}

/* The empty slots get buffers, and the kernel sees what was put in. */
static void refill_ring(uring_state_t *st)
{
    if (st->nempty > 0) {
        refill_empty(st);
    }
    if (st->br_added > 0) {
        io_uring_buf_ring_advance(st->br, (int)st->br_added);
        st->br_added = 0;
    }
}

static int uring_wait(eddy_loop_t *loop, int64_t timeout_ns)
{
    uring_state_t *st = loop->poller_data;
    if (!st->enabled) {
        /* The first wait: this thread becomes the ring's single issuer. (The register call
         * itself: Debian's liburing.so 2.3 does not export io_uring_enable_rings.) */
        int err = io_uring_register(st->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
        if (err != 0) {
            return err;
        }
        st->enabled = true;
    }
    if (st->register_fd) {
        /* Optional: a registered ring descriptor saves a file lookup per io_uring_enter().
         * The registration is the calling thread's, so the loop's thread makes it. */
        st->register_fd = false;
        io_uring_register_ring_fd(&st->ring);
    }
    if (EDDY_UNLIKELY(st->nfilled == st->nempty && st->nempty > 0)) {
        refill_ring(st); /* the first wait: the ring's first buffers come from this thread */
    }
    int64_t t0 = timeout_ns == 0 ? eddy_now_ns() : 0;
    int rc = enter(st, timeout_ns);
    if (rc < 0 && rc != -EBUSY && rc != -EAGAIN) {
        return rc;
    }
    unsigned n = 0;
    unsigned head;
    struct io_uring_cqe *cqe;
    io_uring_for_each_cqe(&st->ring, head, cqe)
    {
        if (n == 0) {
            /* Splits blocked time from I/O time. The receives and sends themselves ran in
             * the kernel inside the enter: when it did not block, all of it counts as I/O. */
            loop->poll_return_ns = timeout_ns == 0 ? t0 : eddy_now_ns();
        }
        n++;
        st->dispatched = n;
        uint64_t ud = io_uring_cqe_get_data64(cqe);
        if (ud & WATCH_TAG) {
            watch_done(loop, ud, cqe->res);
        } else if (ud != 0) {
            eddy__uring_op_t *op = (eddy__uring_op_t *)(uintptr_t)ud;
            eddy__callback_begin(loop, (eddy__fnptr_t)op->cb); /* the watchdog looks */
            op->cb(op, cqe->res, cqe->flags);
            eddy__callback_end(loop);
        }
    }
    io_uring_cq_advance(&st->ring, n);
    st->dispatched = 0;
    if (st->br_taken > 0 || st->br_dry) {
        adapt_buffers(st);
    }
    refill_ring(st);
    if (st->nlater > 0) {
        run_later(loop, st);
    }
    return (int)n;
}

static int uring_wakeup(eddy_loop_t *loop)
{
    uring_state_t *st = loop->poller_data;
    return eddy__eventfd_wake(st->wakefd);
}

static bool uring_busy(eddy_loop_t *loop)
{
    uring_state_t *st = loop->poller_data;
    return st->inflight > 0 || io_uring_sq_ready(&st->ring) > 0;
}

const eddy__poller_ops_t eddy__poller_uring = {
    .name = "io_uring",
    .model = EDDY__IO_COMPLETION,
    .init = uring_init,
    .destroy = uring_destroy,
    .update = uring_update,
    .wait = uring_wait,
    .wakeup = uring_wakeup,
    .busy = uring_busy,
};
#else
/* Not built here; ISO C wants something in every file. */
typedef int eddy__no_uring_t;
#endif /* EDDY_HAVE_IO_URING */
