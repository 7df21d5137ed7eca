/*
 * eddy loops: event loops (Netty's NioEventLoop), loop groups, cross-thread tasks, timers and
 * futures.
 *
 * A loop is one thread that waits in its poller (epoll, io_uring, kqueue or poll), handles
 * the I/O that became ready (or completed), then runs queued tasks and due timers within a
 * time budget (io_ratio). Other threads hand it work through its task queue, an MPSC queue
 * on the sequence ring buffer (ring.h): a task costs one claim and one publish, and the loop
 * is woken (an eventfd write) only when it is blocked or about to block.
 */
#ifndef EDDY_LOOP_H
#define EDDY_LOOP_H

#include <eddy/common.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_loop_s eddy_loop_t;
typedef struct eddy_loop_group_s eddy_loop_group_t;
typedef struct eddy_timer_s eddy_timer_t;
typedef struct eddy_future_s eddy_future_t;
/* The writable side of a future: the same object, named for the one who completes it. */
typedef struct eddy_future_s eddy_promise_t;
typedef struct eddy_io_s eddy_io_t;

typedef void (*eddy_task_cb)(void *arg);
/* A task with a result for eddy_loop_submit(): 0 and *result, or a negative EDDY_E*. */
typedef int (*eddy_callable_cb)(void *arg, void **result);
typedef void (*eddy_timer_cb)(eddy_timer_t *t, void *arg);
typedef void (*eddy_future_cb)(eddy_future_t *f, void *arg);
typedef void (*eddy_io_cb)(eddy_io_t *io, unsigned events, void *arg);

/** Monotonic time in nanoseconds (CLOCK_MONOTONIC): the clock of deadlines. Any thread. */
EDDY_EXTERN int64_t eddy_now_ns(void);

/**
 * The loop's clock in nanoseconds: eddy_now_ns() for a running loop; for the loop of an
 * embedded channel (channel.h), a virtual clock its test moves forward. Timers and handlers
 * that measure time (idle, timeouts) read this one. Any thread.
 */
EDDY_EXTERN int64_t eddy_loop_now_ns(const eddy_loop_t *loop);

/* ---------------------------------------------------------------------------------------
 * Loops
 */

typedef struct eddy_loop_options_s {
    const char *name;            /* thread name (15 chars shown); NULL: "eddy-loop" */
    const char *poller;          /* "epoll", "io_uring", "kqueue" or "poll", or a list
                                    to try in order ("io_uring,epoll"); NULL: $EDDY_POLLER
                                    (the same forms), else the default: io_uring where
                                    the kernel has what eddy uses, else epoll (docs/loop.md) */
    unsigned io_ratio;           /* percent of a turn for I/O, 1..100 (100: run every task
                                    after the I/O); 0: 50 */
    int64_t max_task_quantum_ns; /* stop running tasks after this long in one turn, whatever
                                    io_ratio allows (Netty 4.2); 0: no such limit */
    size_t task_queue_size;      /* ring slots (64 B each, resident once first used), a
                                    power of two; 0: 8192 */
    int64_t stall_threshold_ns;  /* report a task or callback that holds the loop longer;
                                    0: 100 ms; negative: off */
    int cpu;                     /* pin the thread to this CPU; -1 (or 0 fields): no pinning;
                                    set cpu_set to use it */
    bool cpu_set;
    /* io_uring only (0: the defaults, 1024, 512 and 16384): submission queue entries (the
     * completion queue gets four times as many), and the count and size of the provided
     * buffers receives land in. By default the buffers are 64 KiB while receives fill
     * theirs (a stream) and 16 KiB otherwise; a size given here is kept. */
    unsigned uring_entries;
    unsigned uring_buffers; /* a power of two, at most 32768 */
    uint32_t uring_buffer_size;
} eddy_loop_options_t;

/**
 * A loop, not yet running: run it on a thread of yours with eddy_loop_run(), or on a thread
 * of its own with eddy_loop_start(). opts may be NULL (defaults). NULL on bad options (an
 * unknown poller, a queue size or uring_buffers that is not a power of two, io_ratio > 100)
 * or when the poller or memory cannot be had: a poller asked for by name (the option or
 * $EDDY_POLLER) that cannot be made here fails the loop; a list of names tries each in turn,
 * and the default tries every one built (docs/loop.md, "Pollers"); a fallback is said once
 * in the log. Free with eddy_loop_free() after it terminated.
 */
EDDY_EXTERN eddy_loop_t *eddy_loop_new(const eddy_loop_options_t *opts);

/**
 * Run the loop on the calling thread until it has shut down (eddy_loop_shutdown_gracefully).
 * 0, or EDDY_EBUSY when it already runs or ran.
 */
EDDY_EXTERN int eddy_loop_run(eddy_loop_t *loop);

/** Run the loop on a new thread of its own. 0, EDDY_EBUSY, or the thread creation error. */
EDDY_EXTERN int eddy_loop_start(eddy_loop_t *loop);

/**
 * Begin shutting down: from now on tasks from other threads are refused with EDDY_ESHUTDOWN
 * (tasks the loop gives itself are still taken), pending timers are cancelled, and every task
 * already accepted runs. The loop then goes on until no task ran for quiet_ms, or timeout_ms
 * passed, and terminates. Returns the termination future (borrowed: valid until
 * eddy_loop_free). Any thread; later calls return the same future.
 */
EDDY_EXTERN eddy_future_t *eddy_loop_shutdown_gracefully(eddy_loop_t *loop, int64_t quiet_ms,
                                                         int64_t timeout_ms);

/** The future completed when the loop has terminated. Borrowed. Any thread. */
EDDY_EXTERN eddy_future_t *eddy_loop_termination_future(eddy_loop_t *loop);

EDDY_EXTERN bool eddy_loop_is_shutting_down(const eddy_loop_t *loop);
EDDY_EXTERN bool eddy_loop_is_terminated(const eddy_loop_t *loop);

/**
 * Free a loop: EDDY_EBUSY while it runs or has not terminated (a loop never run may be freed
 * at once: the tasks it accepted run first, on the calling thread, as at its shutdown); joins
 * its own thread. The loop's futures and timers handed out stay valid until
 * released, and channels of the loop still referenced (by the caller, or by an offloaded
 * handler still running) keep its memory until their last release: an operation on them is
 * then refused or fails as on a closed channel, never a use after free. Not from the loop
 * itself.
 */
EDDY_EXTERN int eddy_loop_free(eddy_loop_t *loop);

/** True when the calling thread is loop's thread. */
EDDY_EXTERN bool eddy_loop_in_event_loop(const eddy_loop_t *loop);

/** The loop running on the calling thread, or NULL. */
EDDY_EXTERN eddy_loop_t *eddy_loop_current(void);

/** The name of the poller backend the loop uses ("epoll", "io_uring", "kqueue", "poll"). */
EDDY_EXTERN const char *eddy_loop_poller(const eddy_loop_t *loop);

/**
 * The loop's index in its group (eddy_loop_group_loop(g, i) is loop for i = the index), so a
 * server keeps per-loop state in an array of eddy_loop_group_size() entries without searching
 * the group. A loop not in a group (eddy_loop_new, an embedded channel's) is the one loop of
 * its own: 0. Fixed before the loop starts. Any thread.
 */
EDDY_EXTERN size_t eddy_loop_index(const eddy_loop_t *loop);

/**
 * Per-loop user data (libuv's uv_loop_t.data): a pointer the library stores and never reads,
 * frees or passes anywhere. NULL until set. Any thread: the set is a release and the read an
 * acquire, so what data points to, written before the set, is seen by a thread that reads
 * data. The loop's own thread is the usual reader (eddy_loop_data(eddy_loop_current())).
 * Freeing the loop leaves data to its owner.
 */
EDDY_EXTERN void eddy_loop_set_data(eddy_loop_t *loop, void *data);
/** The pointer eddy_loop_set_data() last stored, or NULL. Any thread. */
EDDY_EXTERN void *eddy_loop_data(const eddy_loop_t *loop);

/* ---------------------------------------------------------------------------------------
 * Tasks. Tasks given from one thread run in the order given. fn runs on the loop's thread.
 */

/**
 * Run fn(arg) on the loop soon, waking it if it sleeps. 0: accepted (it will run, also if the
 * loop shuts down meanwhile); EDDY_ESHUTDOWN: refused, the loop is shutting down. From other
 * threads, waits while the queue is full; on the loop itself it never waits (the task goes to
 * an overflow list). Any thread.
 */
EDDY_EXTERN int eddy_loop_execute(eddy_loop_t *loop, eddy_task_cb fn, void *arg);

/** eddy_loop_execute() that returns EDDY_EAGAIN instead of waiting when the queue is full. */
EDDY_EXTERN int eddy_loop_try_execute(eddy_loop_t *loop, eddy_task_cb fn, void *arg);

/**
 * eddy_loop_execute() without the wake-up: fn runs at the loop's next turn, whenever
 * something else wakes it (I/O, a timer, another task). For work that can wait.
 */
EDDY_EXTERN int eddy_loop_lazy_execute(eddy_loop_t *loop, eddy_task_cb fn, void *arg);

/**
 * Run fn(arg, &result) on the loop; the returned future completes with result, or fails with
 * fn's error, or with EDDY_ESHUTDOWN when refused. The caller owns one reference to the
 * future (eddy_future_release). NULL only when out of memory. Any thread.
 */
EDDY_EXTERN eddy_future_t *eddy_loop_submit(eddy_loop_t *loop, eddy_callable_cb fn, void *arg);

/* ---------------------------------------------------------------------------------------
 * Timers. A timer runs its callback on the loop, as a task, once its deadline passed. Every
 * schedule call returns a handle holding one reference for the caller: cancel with it, and
 * release it when done (releasing does not cancel). NULL when out of memory or the loop shuts
 * down. Any thread; from other threads the timer reaches the loop through the task queue.
 */

EDDY_EXTERN eddy_timer_t *eddy_loop_schedule(eddy_loop_t *loop, int64_t delay_ms,
                                             eddy_timer_cb cb, void *arg);
/** At a deadline of eddy_now_ns()'s clock. */
EDDY_EXTERN eddy_timer_t *eddy_loop_schedule_at(eddy_loop_t *loop, int64_t deadline_ns,
                                                eddy_timer_cb cb, void *arg);
/** First after initial_ms, then every period_ms from the first deadline (late runs catch up
 * without piling: a run that is more than a period late is not repeated). */
EDDY_EXTERN eddy_timer_t *eddy_loop_schedule_at_fixed_rate(eddy_loop_t *loop, int64_t initial_ms,
                                                           int64_t period_ms, eddy_timer_cb cb,
                                                           void *arg);
/** First after initial_ms, then delay_ms after each run ends. */
EDDY_EXTERN eddy_timer_t *eddy_loop_schedule_with_fixed_delay(eddy_loop_t *loop,
                                                              int64_t initial_ms,
                                                              int64_t delay_ms, eddy_timer_cb cb,
                                                              void *arg);
/** The ns variant of eddy_loop_schedule(), for sub-millisecond delays. */
EDDY_EXTERN eddy_timer_t *eddy_loop_schedule_ns(eddy_loop_t *loop, int64_t delay_ns,
                                                eddy_timer_cb cb, void *arg);

/**
 * Cancel t: its callback will not run (again). 0 when this call cancelled it; EDDY_EALREADY
 * when it had already fired (one-shot) or been cancelled. Any thread; cheap on the loop
 * (a heap removal), a task from other threads.
 */
EDDY_EXTERN int eddy_timer_cancel(eddy_timer_t *t);

/** Take one more reference; returns t. Any thread. Refused at UINT32_MAX (one more would wrap
 * to 0) or 0 (released already), as eddy_buf_retain() refuses (buffer.h): debug builds abort,
 * release builds leave the count and return NULL. */
EDDY_EXTERN eddy_timer_t *eddy_timer_retain(eddy_timer_t *t);
/** Drop a reference; the timer stays scheduled. NULL is ignored. */
EDDY_EXTERN void eddy_timer_release(eddy_timer_t *t);
/** True once a one-shot timer ran or any timer was cancelled. */
EDDY_EXTERN bool eddy_timer_is_done(const eddy_timer_t *t);

/* ---------------------------------------------------------------------------------------
 * Futures and promises. A future completes once: with a result (a pointer, possibly NULL) or
 * an error code. Listeners run on the owner loop (at once when added to a completed future on
 * that loop); a future without an owner runs them on the completing thread.
 *
 * Owned or borrowed, by name: a function that starts work and returns its future (submit,
 * listen, connect, bind, execute, eddy_promise_new) or says retain
 * (eddy_tls_handler_retain_handshake) gives the caller one reference, to release. A future
 * that belongs to an object is borrowed: the accessors named *_future
 * (eddy_channel_close_future, eddy_loop_termination_future) and the *_shutdown_gracefully
 * functions, which return that termination future as Netty's shutdownGracefully() does.
 * Never release a borrowed future; retain it to keep it past its owner.
 *
 * The eddy_future_* functions accept NULL, the future a call returns when it could not make
 * one without memory: it reads as failed with EDDY_ENOMEM (done; error and await return
 * EDDY_ENOMEM; add_listener returns EDDY_ENOMEM and never calls cb; result and loop NULL).
 */

/** A new incomplete future owned by loop (may be NULL). The caller holds one reference. */
EDDY_EXTERN eddy_promise_t *eddy_promise_new(eddy_loop_t *loop);

/** Take one more reference; returns f (NULL for NULL). Any thread. Refused at UINT32_MAX or 0,
 * as eddy_timer_retain(): debug builds abort, release builds return NULL, which reads as a
 * failed future. */
EDDY_EXTERN eddy_future_t *eddy_future_retain(eddy_future_t *f);
/** Drop a reference. NULL is ignored. */
EDDY_EXTERN void eddy_future_release(eddy_future_t *f);

/** Complete with result: 0, or EDDY_EALREADY when already complete. Any thread. */
EDDY_EXTERN int eddy_promise_succeed(eddy_promise_t *p, void *result);
/** Fail with err (negative): 0, EDDY_EALREADY, EDDY_EINVAL for err >= 0. Any thread. */
EDDY_EXTERN int eddy_promise_fail(eddy_promise_t *p, int err);
/** Fail with EDDY_ECANCELED unless already complete: 0 or EDDY_EALREADY. Any thread. */
EDDY_EXTERN int eddy_future_cancel(eddy_future_t *f);

EDDY_EXTERN bool eddy_future_is_done(const eddy_future_t *f);
/** 0 after success, the error after failure, EDDY_EAGAIN while incomplete. */
EDDY_EXTERN int eddy_future_error(const eddy_future_t *f);
/** The result after success, else NULL. */
EDDY_EXTERN void *eddy_future_result(const eddy_future_t *f);
EDDY_EXTERN eddy_loop_t *eddy_future_loop(const eddy_future_t *f);

/**
 * Call cb(f, arg) once f completes, on the owner loop. 0 or EDDY_ENOMEM. Any thread.
 * Listeners run in the order added: one added after completion runs at once on the owner
 * loop's thread, else as a task, and always behind listeners not yet run (one added inside a
 * listener runs after that listener returns). A future holds its owner loop's memory, so it
 * stays usable after eddy_loop_free(); its listeners then run on the completing thread.
 */
EDDY_EXTERN int eddy_future_add_listener(eddy_future_t *f, eddy_future_cb cb, void *arg);

/**
 * Block until f completes or timeout_ms passes (negative: no limit): 0 when it completed
 * (look at eddy_future_error), EDDY_ETIMEDOUT, or EDDY_EDEADLK when called on the owner
 * loop's thread (it would wait for itself; nothing is waited).
 */
EDDY_EXTERN int eddy_future_await(eddy_future_t *f, int64_t timeout_ms);

/* ---------------------------------------------------------------------------------------
 * I/O readiness, for the channel layer: a file descriptor watched by one loop. The struct is
 * the caller's storage; fields are private.
 */

enum {
    EDDY_IO_READ = 1u << 0,
    EDDY_IO_WRITE = 1u << 1,
    EDDY_IO_ERROR = 1u << 2, /* delivered, never requested */
    EDDY_IO_HUP = 1u << 3    /* delivered, never requested */
};

struct eddy_io_s {
    int fd;
    unsigned _interest;
    uint32_t _gen;
    int _index; /* the poll backend's slot */
    eddy_loop_t *_loop;
    eddy_io_cb _cb;
    void *_arg;
};

/** Prepare io to watch fd on loop; nothing is watched until eddy_io_start(). */
EDDY_EXTERN void eddy_io_init(eddy_io_t *io, eddy_loop_t *loop, int fd, eddy_io_cb cb, void *arg);

/**
 * Watch for events (EDDY_IO_READ | EDDY_IO_WRITE), replacing the previous interest; 0 stops
 * watching. Level-triggered: cb(io, ready, arg) is called every turn while the condition
 * holds. 0 or a negative EDDY_E* from the poller. The loop's thread only.
 */
EDDY_EXTERN int eddy_io_start(eddy_io_t *io, unsigned events);

/** Stop watching and forget fd (call before closing it). The loop's thread only. */
EDDY_EXTERN void eddy_io_stop(eddy_io_t *io);

/* ---------------------------------------------------------------------------------------
 * Stop signals: how a server waits for SIGINT or SIGTERM. A signal goes to any thread that
 * does not block it, so blocked on the main thread alone it may land on a loop's thread, where
 * nothing waits for it. Block them first thing in main(), before any loop group exists (its
 * threads inherit the mask), then wait for them on the main thread:
 *
 *     int main(void)
 *     {
 *         eddy_stop_signals_block();
 *         eddy_loop_group_t *g = eddy_loop_group_new(0, NULL);
 *         ... bind, serve ...
 *         int sig = eddy_stop_signals_wait(-1);
 *         ... close the listener, shut the group down gracefully, free ...
 *     }
 */

/** Block SIGINT and SIGTERM on the calling thread (pthread_sigmask): threads it creates
 * afterwards inherit the block. 0, or a negative EDDY_E*. */
EDDY_EXTERN int eddy_stop_signals_block(void);

/** Wait up to timeout_ms (negative: no limit) for SIGINT or SIGTERM, blocked with
 * eddy_stop_signals_block(): the signal's number, 0 when the time passed first, or a negative
 * EDDY_E*. The calling thread (one thread at a time waits). */
EDDY_EXTERN int eddy_stop_signals_wait(int64_t timeout_ms);

/* ---------------------------------------------------------------------------------------
 * Metrics: per loop, updated by the loop with plain stores and read by any thread without
 * locks; a group sums its loops (maxima are the maximum).
 */

typedef struct eddy_loop_metrics_s {
    int64_t task_queue_depth;   /* tasks queued and not yet run (ring plus overflow) */
    uint64_t tasks_run;
    uint64_t timers_fired;
    uint64_t io_events;         /* ready descriptors handled */
    uint64_t wakeups;           /* eventfd writes by other threads (elided ones not counted) */
    uint64_t turns;             /* loop iterations */
    uint64_t poll_ns;           /* time blocked in the poller */
    uint64_t io_ns;             /* time in I/O callbacks */
    uint64_t task_ns;           /* time in tasks and timers */
    uint64_t lag_max_ns;        /* latest start of a due timer or queued task */
    uint64_t lag_total_ns;      /* sum of timer lags, for the mean with timers_fired */
    uint64_t stalls;            /* tasks or callbacks longer than the stall threshold */
    uint64_t last_stall_ns;
    void (*last_stall_fn)(void); /* the function that stalled (cast), for a symbol lookup */
} eddy_loop_metrics_t;

/** Fill m with loop's counters. Any thread. */
EDDY_EXTERN void eddy_loop_metrics(const eddy_loop_t *loop, eddy_loop_metrics_t *m);

/* ---------------------------------------------------------------------------------------
 * Loop groups
 */

/**
 * n loops (0: one per online CPU), each on its own thread named "<name>-<i>", pinned to CPU i
 * when opts->cpu_set. Options as for eddy_loop_new (opts->cpu is ignored). NULL on failure.
 */
EDDY_EXTERN eddy_loop_group_t *eddy_loop_group_new(size_t n, const eddy_loop_options_t *opts);

/**
 * The next loop by the group's chooser (round robin; a mask when n is a power of two). Any
 * thread, any number at once: one atomic increment, so concurrent callers share the turns and
 * each loop gets its turn once per n calls, whoever makes them.
 */
EDDY_EXTERN eddy_loop_t *eddy_loop_group_next(eddy_loop_group_t *g);

/**
 * Run fn(arg) on the group's next loop (Netty's EventLoopGroup.execute): eddy_loop_execute()
 * on eddy_loop_group_next(g). 0: accepted; EDDY_ESHUTDOWN: that loop is shutting down. Waits
 * while that loop's queue is full, except on that loop itself. Any thread.
 */
EDDY_EXTERN int eddy_loop_group_execute(eddy_loop_group_t *g, eddy_task_cb fn, void *arg);
EDDY_EXTERN size_t eddy_loop_group_size(const eddy_loop_group_t *g);
EDDY_EXTERN eddy_loop_t *eddy_loop_group_loop(const eddy_loop_group_t *g, size_t i);

/**
 * Shut every loop down gracefully (see eddy_loop_shutdown_gracefully). Returns the group's
 * termination future, complete when all loops terminated. Borrowed. Any thread.
 */
EDDY_EXTERN eddy_future_t *eddy_loop_group_shutdown_gracefully(eddy_loop_group_t *g,
                                                               int64_t quiet_ms,
                                                               int64_t timeout_ms);
EDDY_EXTERN eddy_future_t *eddy_loop_group_termination_future(eddy_loop_group_t *g);

/** Free the group and its loops: EDDY_EBUSY until it terminated. Not from one of its loops. */
EDDY_EXTERN int eddy_loop_group_free(eddy_loop_group_t *g);

/** The sum of the loops' metrics. */
EDDY_EXTERN void eddy_loop_group_metrics(const eddy_loop_group_t *g, eddy_loop_metrics_t *m);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_LOOP_H */
