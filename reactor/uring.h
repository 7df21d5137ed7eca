/*
 * reactor/uring.h: what the io_uring poller (poller_uring.c) offers the completion transport
 * of the layers above (pipeline/transport/socket_uring.c). Private; built only with liburing
 * (EDDY_HAVE_IO_URING).
 *
 * A loop on io_uring still watches eddy_io_t descriptors by readiness (poll operations on
 * the same ring: the wake-up eventfd, connects, the user's watchers), and besides runs
 * operations whose completion calls back: each is an eddy__uring_op_t, whose address is the
 * operation's user_data. Everything prepared during a turn reaches the kernel in the one
 * io_uring_enter() that waits for the next completions.
 */
#ifndef EDDY_REACTOR_URING_H
#define EDDY_REACTOR_URING_H

#include "eddy_config.h"

#ifdef EDDY_HAVE_IO_URING
#include "reactor/layer.h"

#include <eddy/buffer.h>

#include <liburing.h>

/* What the 2.3 headers (Debian 12's liburing-dev) lack and the running kernel may have. */
#ifndef IORING_RECVSEND_POLL_FIRST
#define IORING_RECVSEND_POLL_FIRST (1U << 0)
#endif
#ifndef IORING_CQE_F_SOCK_NONEMPTY
#define IORING_CQE_F_SOCK_NONEMPTY (1U << 2)
#endif
#ifndef IORING_ASYNC_CANCEL_FD
#define IORING_ASYNC_CANCEL_FD (1U << 1)
#endif
#ifndef IORING_ASYNC_CANCEL_ALL
#define IORING_ASYNC_CANCEL_ALL (1U << 0)
#endif

typedef struct eddy__uring_op_s eddy__uring_op_t;

/* An operation's completion: res as the kernel gave it (a count, or -errno), and the CQE's
 * flags (IORING_CQE_F_MORE while a multishot goes on, IORING_CQE_F_BUFFER with a provided
 * buffer's id). The loop's thread, inside the poller's wait. */
typedef void (*eddy__uring_cb)(eddy__uring_op_t *op, int res, unsigned flags);

struct eddy__uring_op_s {
    eddy__uring_cb cb;
};

/* The loop runs on io_uring. */
bool eddy__uring_is(const eddy_loop_t *loop);

/*
 * A submission entry whose completion calls op->cb (op NULL: the completion is ignored),
 * zeroed but for user_data; prepare it with liburing's io_uring_prep_*() and keep
 * user_data. The queue goes to the kernel with the loop's next wait, or at once when it is
 * full. The loop's thread.
 */
struct io_uring_sqe *eddy__uring_sqe(eddy_loop_t *loop, eddy__uring_op_t *op);

/* Hand the queued entries to the kernel now, rather than with the next wait (an operation
 * that must be tried before what follows it). The loop's thread. */
void eddy__uring_submit(eddy_loop_t *loop);

/* Take op's completion out of the completion queue ahead of the batch, if it is there: its
 * result and flags, and the entry left for the dispatch to pass over (op->cb is not called
 * for it). For a close that must know what a send wrote before it fails the rest. The loop's
 * thread. */
bool eddy__uring_take_cqe(eddy_loop_t *loop, eddy__uring_op_t *op, int *res, unsigned *flags);

/* Receives end after each completion (EDDY_URING_TUNE=single-shot, for measuring what
 * multishot saves). */
bool eddy__uring_single_shot(const eddy_loop_t *loop);

/* The provided-buffer group that receives use (IOSQE_BUFFER_SELECT, sqe->buf_group). */
uint16_t eddy__uring_buf_group(const eddy_loop_t *loop);

/*
 * A completion that carried a provided buffer (IORING_CQE_F_BUFFER in flags) with res > 0
 * bytes: the buffer, its writer index past those bytes, now the caller's (one reference).
 * Its slot in the ring gets a fresh pooled buffer at once; the ring's tail is published
 * once per batch. NULL without IORING_CQE_F_BUFFER.
 */
eddy_buf_t *eddy__uring_take_buf(eddy_loop_t *loop, int res, unsigned flags);

/*
 * Call fn(arg) once the current batch of completions has been dispatched (a channel's
 * read_complete after the reads of the batch), in the order queued; the caller queues each
 * thing at most once per batch. The queue is the loop's, so that a channel needs no node of
 * its own. 0, or EDDY_ENOMEM (nothing queued) without memory to grow it. The loop's thread.
 */
int eddy__uring_later(eddy_loop_t *loop, void (*fn)(void *arg), void *arg);

/*
 * A scratch block of size bytes (one size per loop) for an operation in flight, such as a
 * send's iovec, so that idle channels hold none: from the loop's cache, else malloc'd; NULL
 * without memory. Give it back when the operation completes; the cache keeps a few and is
 * freed with the loop. The loop's thread.
 */
void *eddy__uring_block_take(eddy_loop_t *loop, size_t size);
void eddy__uring_block_give(eddy_loop_t *loop, void *block);

/* Count an operation of a channel in flight, or its completion: the loop does not terminate
 * (nor free the ring) while operations it submitted have not completed. */
void eddy__uring_inflight(eddy_loop_t *loop, int delta);

#endif /* EDDY_HAVE_IO_URING */
#endif /* EDDY_REACTOR_URING_H */
