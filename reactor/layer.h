/*
 * reactor/layer.h: what the reactor layer offers the layers above it, besides its public
 * headers (docs/architecture.md, "Dependencies run downward only"). Not installed.
 *
 * - pipeline/: the checks that a caller runs as the loop (eddy__assert_on_loop); the socket
 *   error of a watcher's event and the loop's closers, for the transports; running a request
 *   on the loop that fails its promise when refused; the handler the watchdog names
 *   (pipeline.c, around every handler call); a loop's uses, for channels that outlive it;
 *   manual loops, for the embedded channel; timers with storage of their own (scoped
 *   timers); promises that own their result; and, where liburing is built, the io_uring
 *   poller's operations for the io_uring transport (reactor/uring.h, included at the end).
 * - bootstrap/: closers and storage per loop (the resolver), a loop's uses, futures born
 *   complete, whether a timer was cancelled, promises that own their result.
 * - codec/: storage per loop (the HTTP Date cache), promises that own their result.
 *
 * The loop's struct is here only because eddy__loop_handler_enter() and _leave(), inline on
 * the handler hot path, write its running_handler and running_channel; nothing above the
 * reactor reads another member. So are the types it holds by value (the closer, the timer
 * heap, the metrics); the types it only points to (the poller's ops table, overflow tasks,
 * timer entries, eddy__loop_local()'s blocks) are in reactor/internal.h, with everything else
 * that only the reactor's own files use: the pollers, the run loop's helpers, the timer heap,
 * the task queue, the watchdog, and the sequence ring's insides.
 */
#ifndef EDDY_REACTOR_LAYER_H
#define EDDY_REACTOR_LAYER_H

#include <eddy/loop.h>
#include <eddy/ring.h>

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>

/* Any function, for the stall report (function pointers do not convert to void *). */
typedef void (*eddy__fnptr_t)(void);

/* Something on the loop to close when the loop shuts down (a channel): Netty's closeAll. */
typedef struct eddy__closer_s {
    struct eddy__closer_s *prev, *next;
    void (*close)(struct eddy__closer_s *c); /* on the loop; must not re-add itself */
} eddy__closer_t;

/* The loop's timers: a binary heap of entries (timer.c, reactor/internal.h). */
typedef struct eddy__timer_heap_s {
    struct eddy__timer_entry_s *items;
    size_t n;
    size_t cap;
    uint64_t next_id;
} eddy__timer_heap_t;

/* Counters the loop writes with plain (relaxed) stores and anyone reads. */
typedef struct eddy__metrics_s {
    _Atomic uint64_t tasks_run, timers_fired, io_events, wakeups, turns;
    /* tasks_run counts queued tasks; activity (in the loop) counts every callback */
    _Atomic uint64_t poll_ns, io_ns, task_ns, lag_max_ns, lag_total_ns;
    _Atomic uint64_t stalls, last_stall_ns;
    _Atomic(eddy__fnptr_t) last_stall_fn;
    _Atomic int64_t overflow;
} eddy__metrics_t;

struct eddy_loop_s {
    /* Written by producers and the loop: each alone on its lines. */
    alignas(128) _Atomic int wake_needed; /* the loop is (about to be) blocked in its poller */
    _Atomic int waking; /* producers inside the wake-up path: freeing the loop waits for them */
    alignas(128) _Atomic int state;
    _Atomic int64_t drain_limit; /* the last slot run after shutdown; EDDY__NO_LIMIT before */
    /* What the stall watchdog reads: bumped per callback, with the callback running. */
    alignas(128) _Atomic uint64_t activity;
    _Atomic(eddy__fnptr_t) running_fn;
    _Atomic bool in_callback;
    /* Inside the callback, the pipeline handler running (pipeline.c, around every handler
     * call): its ops' name (static, as ops tables are) and its channel's id; NULL and 0
     * outside any handler. The watchdog names it rather than the transport's callback. */
    _Atomic(const char *) running_handler;
    _Atomic uint64_t running_channel;

    /* Read by producers on every task, written only at creation: a line of their own, so
     * the loop's per-task writes below do not pull it away from them. */
    alignas(128) eddy_ring_t *ring;
    eddy_sequencer_t *sequencer;
    const struct eddy__poller_ops_s *poller;
    void *poller_data;
    /* eddy_loop_in_event_loop() and the task's lag stamp read these from every producer: on
     * the loop's busy line below, each turn's writes made every producer miss there. */
    bool manual; /* driven by hand on the caller's thread (eddy__loop_new_manual) */
    _Atomic int64_t clock_offset_ns; /* added to the monotonic clock; a manual loop's time */

    alignas(128) eddy_wait_strategy_t *ws;
    eddy_sequence_t *consumed; /* the loop's sequence: gates the producers */
    int64_t next_seq;          /* the first sequence not yet run */
    struct eddy__overflow_s *overflow_head, *overflow_tail;
    int64_t last_self_seq;     /* the last ring slot the loop filled for itself */
    int64_t overflow_after;    /* overflow tasks run once the ring is read past this */

    eddy_io_t **watchers; /* by fd: the io watching it */
    size_t nwatchers;
    eddy_io_t wake_io;

    eddy__timer_heap_t timers;
    int64_t now_ns; /* read once per turn, and after long work */
    /* The owner's reference plus one per object that keeps a pointer to the loop past its
     * free (channels): the memory goes with the last (eddy__loop_release). */
    _Atomic uint32_t users;
    eddy__closer_t closers; /* sentinel of the closers' ring (the loop's thread) */
    int64_t poll_return_ns; /* when the poller's system call returned, set by the backend */
    /* The socket error that came with the event being dispatched, for io_error_fd's
     * callback (eddy__io_dispatch_error); 0 when none did. */
    int io_error, io_error_fd;

    char name[16];
    size_t index;          /* in its group; 0 outside one (set before the loop starts) */
    _Atomic(void *) data;  /* eddy_loop_set_data(): the user's, never read here */
    /* eddy__loop_local()'s blocks (the loop's thread) */
    struct eddy__local_s *locals;
    unsigned io_ratio;
    int64_t max_task_quantum_ns;
    int64_t stall_threshold_ns;
    int cpu;
    bool cpu_set;
    unsigned uring_entries, uring_buffers; /* io_uring's sizes (0: the backend's defaults) */
    uint32_t uring_buffer_size;

    pthread_t thread;
    bool own_thread;
    bool started;
    _Atomic bool thread_known;
    pthread_t loop_thread;

    int64_t quiet_ns, timeout_ns, shutdown_start_ns, last_activity_ns;
    eddy_future_t *termination;
    pthread_mutex_t shutdown_lock;

    eddy__metrics_t m;
    struct eddy_loop_s *watch_next; /* the stall watchdog's list */
    uint64_t watch_seen;            /* watchdog: activity seen last time */
    int64_t watch_since_ns;         /* watchdog: when it was first seen */
    uint64_t watch_reported;        /* watchdog: activity already reported */
};

/*
 * Debug builds (no NDEBUG) check at the entry of what only the loop may run (its timers, the
 * consumer side of its task queue, its channels' state) that the caller runs as the loop: on
 * the loop's thread, or on a thread that entered it to stand in for it (eddy__loop_enter: a
 * manual loop's driver, the creator setting the backend up, eddy_loop_free() running a
 * never-started loop's tasks or dropping a terminated one's timers, eddy__channel_on_loop()
 * after the loop terminated). A manual loop is everyone's (eddy_loop_in_event_loop()). A
 * macro, so a failure names the caller's line; the argument is not evaluated under NDEBUG.
 */
#define eddy__assert_on_loop(loop) assert(eddy_loop_in_event_loop(loop))

/* The error pending on io's socket as a negative EDDY_E*, or 0, and clear it: the one its
 * event carried when called from io's callback and the poller gave one, else SO_ERROR. */
int eddy__io_socket_error(eddy_io_t *io);

/* Register c to be closed when the loop starts shutting down, or take it off (closed
 * before). The loop's thread. */
void eddy__loop_closer_add(eddy_loop_t *loop, eddy__closer_t *c);
void eddy__loop_closer_remove(eddy__closer_t *c);

/* The handler a callback is in, for the watchdog: set around a handler's call, the one it
 * interrupts given back after (eddy__loop_handler_leave). The loop's thread. */
typedef struct eddy__running_s {
    const char *handler;
    uint64_t channel;
} eddy__running_t;

/* Stop watching io because its descriptor is about to be closed by the caller: as
 * eddy_io_stop(), but with no system call where closing removes it from the poller's set
 * (epoll and kqueue; nginx's NGX_CLOSE_EVENT), one per short connection. The descriptor must
 * be the only one for its open file (eddy never dups a socket; a fork must exec or close). */
void eddy__io_close(eddy_io_t *io);

/* The events io is watched for now (EDDY_IO_READ, EDDY_IO_WRITE), as eddy_io_start() left
 * them: a transport that keeps an interest lazily asks before it changes it. */
static inline unsigned eddy__io_interest(const eddy_io_t *io)
{
    return io->_interest;
}

static inline eddy__running_t eddy__loop_handler_enter(eddy_loop_t *loop, const char *handler,
                                                       uint64_t channel)
{
    eddy__running_t was = {
        atomic_load_explicit(&loop->running_handler, memory_order_relaxed),
        atomic_load_explicit(&loop->running_channel, memory_order_relaxed)};
    atomic_store_explicit(&loop->running_handler, handler, memory_order_relaxed);
    atomic_store_explicit(&loop->running_channel, channel, memory_order_relaxed);
    return was;
}

static inline void eddy__loop_handler_leave(eddy_loop_t *loop, eddy__running_t was)
{
    atomic_store_explicit(&loop->running_handler, was.handler, memory_order_relaxed);
    atomic_store_explicit(&loop->running_channel, was.channel, memory_order_relaxed);
}

/*
 * Run fn(req) on loop: at once on the loop's thread, else as a task. req is a malloc'd
 * request holding one reference to p, which fn drops with req. When the loop refuses the
 * task, that reference goes, req is freed and p fails with the loop's error. Any thread.
 */
void eddy__loop_run_request(eddy_loop_t *loop, eddy_task_cb fn, void *req, eddy_promise_t *p);

/*
 * A channel keeps a pointer to its loop for its whole life, and an offloaded handler or a
 * user's reference can make it outlive eddy_loop_free(). Such objects hold a use: freeing
 * the loop stops it and joins its thread, and its memory (queue, poller, timers) stays until
 * the last use is dropped. A task given to it then is refused as to any terminated loop.
 */
void eddy__loop_retain(eddy_loop_t *loop);
void eddy__loop_release(eddy_loop_t *loop);

/*
 * Manual loops, for the embedded channel: no thread, no poller wait. The caller enters the
 * loop on its own thread (eddy_loop_in_event_loop() is then true there), runs what is due by
 * hand, and moves the clock. Tasks from other threads still queue (and run at the next
 * eddy__loop_run_pending).
 */
eddy_loop_t *eddy__loop_new_manual(void);
/* Make loop the calling thread's current loop; returns the previous one for leave. */
eddy_loop_t *eddy__loop_enter(eddy_loop_t *loop);
void eddy__loop_leave(eddy_loop_t *prev);
/* Run queued tasks and due timers until none is left (tasks they queue run too); the
 * caller has entered the loop. Returns how many ran. */
size_t eddy__loop_run_pending(eddy_loop_t *loop);
/* Move the virtual clock forward by ns (>= 0). */
void eddy__loop_advance(eddy_loop_t *loop, int64_t ns);
/* Run what is pending, refuse new tasks, cancel timers, free. The caller has not entered. */
void eddy__loop_free_manual(eddy_loop_t *loop);

/* Timers (timer.c). A one-shot timer was cancelled (by a call, or dropped by its loop's
 * shutdown) rather than run: its callback never runs. eddy_timer_cancel's EDDY_EALREADY does
 * not tell the two apart. Any thread. */
bool eddy__timer_cancelled(const eddy_timer_t *t);
/* A timer whose callback's argument is extra bytes of storage inside it (eddy__timer_data),
 * aligned for any type and freed with it; dtor (may be NULL) runs on that storage at the
 * last release. Not scheduled yet: the caller fills the storage, then starts it. One
 * reference, the caller's. NULL without memory. Any thread. */
eddy_timer_t *eddy__timer_new(eddy_loop_t *loop, eddy_timer_cb cb, size_t extra,
                              void (*dtor)(void *data));
void *eddy__timer_data(eddy_timer_t *t);
/* Schedule a timer from eddy__timer_new, once: first after delay_ns (0 on the loop: due in
 * this turn's timers), then every period_ns (0: once). 0, or EDDY_ESHUTDOWN / EDDY_ENOMEM
 * with the timer cancelled (the caller's reference stays). Any thread. */
int eddy__timer_start(eddy_timer_t *t, int64_t delay_ns, int64_t period_ns);

/* Futures (future.c): succeed with a result the future owns one reference to, dropped with
 * release(result) when the future is freed, so eddy_future_result() stays valid for as long as
 * the caller holds the future. When p had completed already, release(result) runs at once and
 * EDDY_EALREADY is returned. */
int eddy__promise_succeed_owned(eddy_promise_t *p, void *result, void (*release)(void *));
/* A future born complete: failed with err (< 0), or succeeded with result, which it owns as
 * eddy__promise_succeed_owned() says (release NULL: not owned). It skips the lock completion
 * takes, as nobody can wait on it yet: for calls that know their answer at once. One
 * reference, the caller's. NULL without memory (result is not released then). Any thread. */
eddy_future_t *eddy__future_new_done(int err, void *result, void (*release)(void *));

/*
 * Storage per loop for the library's own layers above the reactor (the HTTP codec's cached
 * Date), so that they keep per-loop state without a thread-local or a look inside the loop:
 * the block that key keeps on loop, size bytes, zeroed, aligned for any type, made by the
 * first call with key and freed with the loop's memory; later calls with key return the same
 * block (and must pass the same size). key is any address unique to its user (a static
 * variable's). NULL without memory (a later call tries again). The loop's thread, or the
 * thread driving a manual loop (eddy_loop_in_event_loop()). The application's pointer is
 * eddy_loop_data().
 */
void *eddy__loop_local(eddy_loop_t *loop, const void *key, size_t size);

#endif /* EDDY_REACTOR_LAYER_H */

/* The io_uring poller's operations, for the io_uring transport (after the guard: uring.h
 * includes this header first). */
#include "reactor/uring.h"
