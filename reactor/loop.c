/*
 * The event loop: the run loop of docs/loop.md (after Netty's NioEventLoop.run), I/O
 * registration, shutdown and metrics. Its task queue is taskq.c, its stall watchdog
 * watchdog.c.
 */
#include "reactor/internal.h"
#include "buffer/layer.h"
#include "eddy_config.h"

#include <errno.h>
#include <stddef.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_QUEUE 8192
#define DEFAULT_IO_RATIO 50
#define DEFAULT_STALL_NS ((int64_t)100 * 1000000)

/* The default is the first that can be set up here (docs/loop.md, "Pollers"): io_uring
 * where the kernel has everything eddy uses of it (its init probes), else epoll. */
const eddy__poller_ops_t *const eddy__pollers[] = {
#ifdef EDDY_HAVE_IO_URING
    &eddy__poller_uring,
#endif
#ifdef EDDY_HAVE_EPOLL
    &eddy__poller_epoll,
#endif
#ifdef EDDY_HAVE_KQUEUE
    &eddy__poller_kqueue,
#endif
    &eddy__poller_poll,
    NULL,
};

/* What every producer reads per task shares one line that the loop writes only at creation
 * (reactor/layer.h): a field there that moved to a line the loop writes each turn made every
 * producer miss once per turn (tasks_1p fell from 42 to 16-28 M tasks/s on one VM). */
#define SAME_LINE(a, b) \
    (offsetof(struct eddy_loop_s, a) / 128 == offsetof(struct eddy_loop_s, b) / 128)
_Static_assert(SAME_LINE(ring, sequencer) && SAME_LINE(ring, poller) &&
                   SAME_LINE(ring, manual) && SAME_LINE(ring, clock_offset_ns),
               "the producers' read-mostly fields share one line");
_Static_assert(!SAME_LINE(ring, ws) && !SAME_LINE(ring, now_ns) &&
                   !SAME_LINE(ring, state) && !SAME_LINE(ring, wake_needed),
               "nothing the loop or producers write sits on the producers' read-mostly line");
#undef SAME_LINE

/* initial-exec, as buffer/alloc.c's: one %fs-relative load instead of a __tls_get_addr call
 * in every eddy_loop_in_event_loop(), which each task a producer queues and each channel
 * operation asks. */
static __attribute__((tls_model("initial-exec"))) _Thread_local eddy_loop_t *current_loop;

int64_t eddy_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t eddy_loop_now_ns(const eddy_loop_t *loop)
{
    return eddy__loop_now(loop);
}

eddy_loop_t *eddy_loop_current(void)
{
    return current_loop;
}

bool eddy_loop_in_event_loop(const eddy_loop_t *loop)
{
    /* A manual loop (the embedded channel's) belongs to whoever drives it, as Netty's
     * EmbeddedEventLoop: it is used from one thread. */
    return current_loop == loop || (loop != NULL && loop->manual);
}

const char *eddy_loop_poller(const eddy_loop_t *loop)
{
    return loop->poller->name;
}

/* A block of eddy__loop_local(): few per loop (one per module that wants one), found by a walk. */
struct eddy__local_s {
    eddy__local_t *next;
    const void *key;
    max_align_t data[];
};

void *eddy__loop_local(eddy_loop_t *loop, const void *key, size_t size)
{
    for (eddy__local_t *l = loop->locals; l != NULL; l = l->next) {
        if (l->key == key) {
            return l->data;
        }
    }
    if (size > SIZE_MAX - sizeof(eddy__local_t)) {
        return NULL;
    }
    eddy__local_t *l = calloc(1, sizeof(*l) + size);
    if (l == NULL) {
        return NULL;
    }
    l->key = key;
    l->next = loop->locals;
    loop->locals = l;
    return l->data;
}

size_t eddy_loop_index(const eddy_loop_t *loop)
{
    return loop->index;
}

void eddy_loop_set_data(eddy_loop_t *loop, void *data)
{
    /* Release: pairs with eddy_loop_data()'s acquire, so what data points to travels too. */
    atomic_store_explicit(&loop->data, data, memory_order_release);
}

void *eddy_loop_data(const eddy_loop_t *loop)
{
    return atomic_load_explicit(&loop->data, memory_order_acquire);
}

/* ---------------------------------------------------------------------------------------
 * I/O registration
 */

void eddy_io_init(eddy_io_t *io, eddy_loop_t *loop, int fd, eddy_io_cb cb, void *arg)
{
    io->fd = fd;
    io->_interest = 0;
    io->_gen = 0;
    io->_index = -1;
    io->_loop = loop;
    io->_cb = cb;
    io->_arg = arg;
}

static int watchers_grow(eddy_loop_t *loop, int fd)
{
    size_t n = loop->nwatchers ? loop->nwatchers : 64;
    while (n <= (size_t)fd) {
        n *= 2;
    }
    eddy_io_t **w = realloc(loop->watchers, n * sizeof(*w));
    if (w == NULL) {
        return EDDY_ENOMEM;
    }
    memset(w + loop->nwatchers, 0, (n - loop->nwatchers) * sizeof(*w));
    loop->watchers = w;
    loop->nwatchers = n;
    return 0;
}

int eddy_io_start(eddy_io_t *io, unsigned events)
{
    eddy_loop_t *loop = io->_loop;
    eddy__assert_on_loop(loop);
    events &= EDDY_IO_READ | EDDY_IO_WRITE;
    if (events == 0) {
        eddy_io_stop(io);
        return 0;
    }
    if (io->fd < 0) {
        return EDDY_EBADF;
    }
    if ((size_t)io->fd >= loop->nwatchers) {
        int err = watchers_grow(loop, io->fd);
        if (err != 0) {
            return err;
        }
    }
    if (events == io->_interest && loop->watchers[io->fd] == io) {
        return 0; /* unchanged: no system call */
    }
    if (io->_interest == 0) {
        static _Atomic uint32_t gens;
        io->_gen = atomic_fetch_add_explicit(&gens, 1, memory_order_relaxed);
    }
    int err = loop->poller->update(loop, io, events);
    if (err != 0) {
        return err;
    }
    io->_interest = events;
    loop->watchers[io->fd] = io;
    return 0;
}

/* Stop watching io; tell the poller unless closing its descriptor will. */
static void io_unwatch(eddy_io_t *io, bool closing)
{
    eddy_loop_t *loop = io->_loop;
    if (io->_interest == 0) {
        return;
    }
    eddy__assert_on_loop(loop);
    if (!closing || !loop->poller->close_unregisters) {
        loop->poller->update(loop, io, 0);
    }
    io->_interest = 0;
    if (eddy__io_of(loop, io->fd) == io) {
        loop->watchers[io->fd] = NULL;
    }
}

void eddy_io_stop(eddy_io_t *io)
{
    io_unwatch(io, false);
}

void eddy__io_close(eddy_io_t *io)
{
    io_unwatch(io, true);
}

void eddy__io_dispatch(eddy_loop_t *loop, int fd, uint32_t gen, unsigned events)
{
    eddy_io_t *io = eddy__io_of(loop, fd);
    if (io == NULL || io->_gen != gen) {
        return; /* stopped, or the descriptor was reused, earlier in this batch */
    }
    /* Report only what was asked for, plus errors and hang-ups. */
    events &= io->_interest | EDDY_IO_ERROR | EDDY_IO_HUP;
    if (events == 0) {
        return;
    }
    eddy__stat_add(&loop->m.io_events, 1);
    eddy__callback_begin(loop, (eddy__fnptr_t)io->_cb);
    io->_cb(io, events, io->_arg);
    eddy__callback_end(loop);
}

void eddy__io_dispatch_error(eddy_loop_t *loop, int fd, uint32_t gen, unsigned events, int err)
{
    assert(err < 0 && loop->io_error == 0);
    loop->io_error = err;
    loop->io_error_fd = fd;
    eddy__io_dispatch(loop, fd, gen, events);
    loop->io_error = 0;
}

int eddy__io_socket_error(eddy_io_t *io)
{
    eddy_loop_t *loop = io->_loop;
    if (loop->io_error != 0 && loop->io_error_fd == io->fd) {
        int err = loop->io_error;
        loop->io_error = 0; /* taken, as reading SO_ERROR clears it */
        return err;
    }
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) {
        soerr = errno;
    }
    return -soerr;
}

/* ---------------------------------------------------------------------------------------
 * Creation and teardown
 */

/* The poller asked for, by option or $EDDY_POLLER; NULL when none is. */
static const char *asked_poller(const char *name)
{
    if (name == NULL || name[0] == '\0') {
        name = getenv("EDDY_POLLER");
    }
    return name == NULL || name[0] == '\0' ? NULL : name;
}

#define MAX_CHOICES 4

/*
 * The backends to try, in order, into out: those named (one name, or a comma-separated list
 * such as "io_uring,epoll": the first the kernel takes), or (names NULL) every one built, the
 * default first. Their count; 0 when a name is not built here or the list is too long.
 */
static size_t poller_choices(const char *names, const eddy__poller_ops_t *out[MAX_CHOICES])
{
    size_t n = 0;
    if (names == NULL) {
        for (size_t i = 0; eddy__pollers[i] != NULL && n < MAX_CHOICES; i++) {
            out[n++] = eddy__pollers[i];
        }
        return n;
    }
    for (const char *p = names;; p++) {
        size_t len = strcspn(p, ",");
        const eddy__poller_ops_t *found = NULL;
        for (size_t i = 0; eddy__pollers[i] != NULL && found == NULL; i++) {
            if (strlen(eddy__pollers[i]->name) == len &&
                strncmp(eddy__pollers[i]->name, p, len) == 0) {
                found = eddy__pollers[i];
            }
        }
        if (found == NULL || n == MAX_CHOICES) {
            return 0;
        }
        out[n++] = found;
        p += len;
        if (*p == '\0') {
            return n;
        }
    }
}

static void loop_release_parts(eddy_loop_t *loop)
{
    /* A producer that saw the loop running may still be on its way to the wake-up: clear the
     * flag, then wait for those already inside (see enqueue). */
    atomic_store_explicit(&loop->wake_needed, 0, memory_order_seq_cst);
    while (atomic_load_explicit(&loop->waking, memory_order_seq_cst) != 0) {
        sched_yield();
    }
    if (loop->poller_data != NULL) {
        loop->poller->destroy(loop);
    }
    if (loop->sequencer != NULL) {
        eddy_sequencer_free(loop->sequencer);
    }
    if (loop->ws != NULL) {
        eddy_wait_strategy_free(loop->ws);
    }
    eddy_ring_free(loop->ring);
    eddy_sequence_free(loop->consumed);
    eddy__timers_destroy(&loop->timers);
    while (loop->locals != NULL) {
        eddy__local_t *next = loop->locals->next;
        free(loop->locals);
        loop->locals = next;
    }
    free(loop->watchers);
    eddy_future_release(loop->termination);
    pthread_mutex_destroy(&loop->shutdown_lock);
    free(loop);
}

/* The kernel refuses the backend here (io_uring: a seccomp filter or
 * kernel.io_uring_disabled says EPERM, an old kernel ENOSYS or EINVAL, a low memlock limit
 * ENOMEM), rather than failing for a reason the next backend would meet too. */
static bool refused(int err)
{
    return err == EDDY_EPERM || err == EDDY_ENOSYS || err == EDDY_EINVAL || err == EDDY_ENOMEM;
}

/*
 * Set the backend up: the first of the choices the kernel takes, trying the next when it
 * refuses one (said once per process in the log); a single choice fails when refused. The
 * creator stands in for the loop, whose thread does not run yet: the backends start the
 * wake-up io, which only the loop may do.
 */
static int init_poller(eddy_loop_t *loop, const eddy__poller_ops_t *const *choices, size_t n)
{
    static _Atomic bool told;
    assert(n > 0 && n <= MAX_CHOICES);
    eddy_loop_t *prev = eddy__loop_enter(loop);
    loop->poller = choices[0];
    int err = loop->poller->init(loop);
    for (size_t i = 1; err != 0 && refused(err) && i < n; i++) {
        if (!atomic_exchange_explicit(&told, true, memory_order_relaxed)) {
            eddy__log(EDDY_LOG_INFO, "%s cannot be used here (%s): loops use %s",
                      loop->poller->name, eddy_strerror(err), choices[i]->name);
        }
        loop->poller = choices[i];
        err = loop->poller->init(loop);
    }
    eddy__loop_leave(prev);
    return err;
}

eddy_loop_t *eddy_loop_new(const eddy_loop_options_t *opts)
{
    eddy_loop_options_t o = {0};
    if (opts != NULL) {
        o = *opts;
    }
    if (o.io_ratio > 100) {
        return NULL;
    }
    if ((o.uring_buffers & (o.uring_buffers - 1)) != 0 || o.uring_buffers > 32768) {
        return NULL; /* a provided-buffer ring's size is a power of two, at most 32768 */
    }
    size_t qsize = o.task_queue_size ? o.task_queue_size : DEFAULT_QUEUE;
    if ((qsize & (qsize - 1)) != 0 || qsize < 2) {
        return NULL;
    }
    const eddy__poller_ops_t *choices[MAX_CHOICES];
    size_t nchoices = poller_choices(asked_poller(o.poller), choices);
    if (nchoices == 0) {
        return NULL;
    }
    eddy_loop_t *loop = aligned_alloc(128, (sizeof(*loop) + 127) / 128 * 128);
    if (loop == NULL) {
        return NULL;
    }
    memset(loop, 0, sizeof(*loop));
    pthread_mutex_init(&loop->shutdown_lock, NULL);
    snprintf(loop->name, sizeof(loop->name), "%s", o.name ? o.name : "eddy-loop");
    loop->io_ratio = o.io_ratio ? o.io_ratio : DEFAULT_IO_RATIO;
    loop->max_task_quantum_ns = o.max_task_quantum_ns;
    loop->stall_threshold_ns = o.stall_threshold_ns ? o.stall_threshold_ns : DEFAULT_STALL_NS;
    loop->cpu = o.cpu;
    loop->cpu_set = o.cpu_set;
    loop->uring_entries = o.uring_entries;
    loop->uring_buffers = o.uring_buffers;
    loop->uring_buffer_size = o.uring_buffer_size;
    loop->poller = choices[0];
    loop->next_seq = 0;
    loop->last_self_seq = EDDY_SEQUENCE_INITIAL;
    atomic_init(&loop->drain_limit, EDDY__NO_LIMIT);
    loop->overflow_after = EDDY_SEQUENCE_INITIAL;
    atomic_init(&loop->state, EDDY__LOOP_NEW);
    atomic_init(&loop->wake_needed, 0);
    /* The loop never waits through the ring (it blocks in the poller, and reads a task once
     * its slot shows its sequence: taskq.c), so the wait strategy only matters to producers
     * on a full ring: yielding keeps them polite. */
    loop->ws = eddy_wait_strategy_yielding();
    /* Zeroed slots are unpublished (taskq.c stores seq + 1), so the ring needs no pass over
     * it: its pages are touched only as tasks use them. */
    loop->ring = eddy_ring_new(qsize, sizeof(eddy__task_slot_t), NULL, NULL);
    loop->consumed = eddy_sequence_new(EDDY_SEQUENCE_INITIAL);
    loop->termination = eddy__future_new_unowned();
    if (loop->ws == NULL || loop->ring == NULL || loop->consumed == NULL ||
        loop->termination == NULL || eddy__timers_init(&loop->timers) != 0) {
        loop_release_parts(loop);
        return NULL;
    }
    loop->sequencer = eddy_sequencer_new_multi(qsize, loop->ws);
    if (loop->sequencer != NULL) {
        eddy_sequencer_set_ring(loop->sequencer, loop->ring);
        eddy__sequencer_drop_availability(loop->sequencer); /* slots publish themselves */
    }
    if (loop->sequencer == NULL ||
        eddy_sequencer_add_gating(loop->sequencer, &loop->consumed, 1) != 0 ||
        init_poller(loop, choices, nchoices) != 0) {
        loop_release_parts(loop);
        return NULL;
    }
    loop->closers.prev = loop->closers.next = &loop->closers;
    atomic_init(&loop->users, 1); /* the owner's, dropped by eddy_loop_free */
    loop->now_ns = eddy__loop_now(loop);
    return loop;
}

void eddy__loop_closer_add(eddy_loop_t *loop, eddy__closer_t *c)
{
    eddy__assert_on_loop(loop);
    assert(c->next == NULL && c->close != NULL); /* on no ring yet */
    c->next = &loop->closers;
    c->prev = loop->closers.prev;
    c->prev->next = c;
    loop->closers.prev = c;
}

void eddy__loop_closer_remove(eddy__closer_t *c)
{
    if (c->next != NULL) {
        assert(c->prev->next == c && c->next->prev == c);
        c->prev->next = c->next;
        c->next->prev = c->prev;
        c->prev = c->next = NULL;
    }
}

/* Shutdown: close what registered (channels), each once, even those a close adds. */
static void close_all(eddy_loop_t *loop)
{
    eddy__assert_on_loop(loop);
    while (loop->closers.next != &loop->closers) {
        eddy__closer_t *c = loop->closers.next;
        eddy__loop_closer_remove(c);
        c->close(c);
    }
}

int eddy_loop_free(eddy_loop_t *loop)
{
    if (loop == NULL) {
        return 0;
    }
    if (current_loop == loop) {
        return EDDY_EDEADLK;
    }
    int st = atomic_load(&loop->state);
    if (st != EDDY__LOOP_NEW && st != EDDY__LOOP_TERMINATED) {
        return EDDY_EBUSY;
    }
    if (loop->own_thread) {
        pthread_join(loop->thread, NULL);
        loop->own_thread = false;
    }
    if (st == EDDY__LOOP_NEW) {
        /* Never ran: shut it down as eddy_loop_shutdown_gracefully() does such a loop. The
         * tasks it accepted run here, this thread standing in for the loop (a timer's
         * insertion, a submitted task whose future someone awaits: dropping them lost both),
         * and from then on tasks are refused as on any terminated loop, whose memory may stay
         * (futures and channels hold uses). */
        eddy_loop_shutdown_gracefully(loop, 0, 0);
    }
    assert(atomic_load(&loop->state) == EDDY__LOOP_TERMINATED);
    /* Timers a task inserted while it shut down are cancelled and released, by this thread
     * standing in for the loop, which has terminated. */
    eddy_loop_t *prev = eddy__loop_enter(loop);
    eddy__timers_cancel_all(loop);
    eddy__loop_leave(prev);
    eddy__taskq_drop_overflow(loop);
    eddy__loop_release(loop);
    return 0;
}

void eddy__loop_retain(eddy_loop_t *loop)
{
    eddy__refcnt_add(&loop->users);
}

void eddy__loop_release(eddy_loop_t *loop)
{
    /* acq_rel: the last user sees every write of the others (and of the loop's thread,
     * joined by eddy_loop_free) before it frees. */
    if (eddy__refcnt_sub(&loop->users, 1)) {
        loop_release_parts(loop);
    }
}

/* ---------------------------------------------------------------------------------------
 * Shutdown
 */

static void stop_taking_tasks(eddy_loop_t *loop);

eddy_future_t *eddy_loop_shutdown_gracefully(eddy_loop_t *loop, int64_t quiet_ms,
                                             int64_t timeout_ms)
{
    pthread_mutex_lock(&loop->shutdown_lock);
    int st = atomic_load(&loop->state);
    if (st == EDDY__LOOP_NEW || st == EDDY__LOOP_RUNNING) {
        loop->quiet_ns = (quiet_ms > 0 ? quiet_ms : 0) * 1000000;
        loop->timeout_ns = (timeout_ms > 0 ? timeout_ms : 0) * 1000000;
        if (loop->timeout_ns < loop->quiet_ns) {
            loop->timeout_ns = loop->quiet_ns;
        }
        loop->shutdown_start_ns = eddy__loop_now(loop);
        /* seq_cst: pairs with the producers' fence after their claim (see enqueue). */
        atomic_store(&loop->state, EDDY__LOOP_SHUTTING_DOWN);
        if (st == EDDY__LOOP_NEW) {
            /* Never ran, but tasks may have been accepted: run them here, as the loop (the
             * calling thread stands in for it), so nothing accepted is lost. */
            loop->started = true;
            pthread_mutex_unlock(&loop->shutdown_lock);
            eddy_loop_t *prev = current_loop;
            current_loop = loop;
            close_all(loop);
            eddy__timers_cancel_all(loop);
            stop_taking_tasks(loop);
            current_loop = prev;
            atomic_store(&loop->state, EDDY__LOOP_TERMINATED);
            eddy_promise_succeed(loop->termination, NULL);
            return loop->termination;
        }
        loop->poller->wakeup(loop);
    }
    pthread_mutex_unlock(&loop->shutdown_lock);
    return loop->termination;
}

eddy_future_t *eddy_loop_termination_future(eddy_loop_t *loop)
{
    return loop->termination;
}

bool eddy_loop_is_shutting_down(const eddy_loop_t *loop)
{
    return atomic_load(&loop->state) >= EDDY__LOOP_SHUTTING_DOWN;
}

bool eddy_loop_is_terminated(const eddy_loop_t *loop)
{
    return atomic_load(&loop->state) == EDDY__LOOP_TERMINATED;
}

/*
 * Stop taking tasks (EDDY__LOOP_SHUTDOWN) and run every task accepted before: the loop's own
 * (ring and overflow list) and every slot claimed before the final look at the cursor, waiting
 * for producers between their claim and their publish. Claims after that look are refused:
 * their producers read drain_limit (claimed_after_shutdown).
 */
static void stop_taking_tasks(eddy_loop_t *loop)
{
    eddy__assert_on_loop(loop);
    atomic_store(&loop->state, EDDY__LOOP_SHUTDOWN);
    /* Pairs with the producers' seq_cst claim and loads (see enqueue). */
    atomic_thread_fence(memory_order_seq_cst);
    int64_t limit = eddy_sequence_get(eddy_sequencer_cursor(loop->sequencer));
    atomic_store_explicit(&loop->drain_limit, limit, memory_order_release);
    while (loop->next_seq <= limit || loop->overflow_head != NULL) {
        loop->now_ns = eddy__loop_now(loop);
        if (eddy__taskq_run(loop, INT64_MAX, limit) == 0 && loop->next_seq <= limit) {
            sched_yield(); /* a producer between its claim and its publish */
        }
    }
}

/* Netty's confirmShutdown: true once the loop may terminate. */
/* The longest the loop waits at its end for the backend's operations to complete. */
#define SETTLE_NS ((int64_t)1000000000)

/*
 * At the loop's end: the backend hands the kernel what the last tasks prepared (a
 * completion backend's cancels of closed channels' operations, without which their sockets
 * stay open until the loop is freed) and reaps the completions, which let go of those
 * channels.
 */
static void settle_poller(eddy_loop_t *loop)
{
    int64_t end = eddy__loop_now(loop) + SETTLE_NS;
    while (loop->poller->busy != NULL && loop->poller->busy(loop) &&
           eddy__loop_now(loop) < end) {
        loop->poller->wait(loop, 1000000);
    }
}

static bool confirm_shutdown(eddy_loop_t *loop, size_t ran)
{
    assert(atomic_load(&loop->state) == EDDY__LOOP_SHUTTING_DOWN);
    int64_t now = loop->now_ns;
    if (ran > 0) {
        loop->last_activity_ns = now;
    }
    if (now - loop->shutdown_start_ns >= loop->timeout_ns) {
        return true;
    }
    if (eddy__taskq_pending(loop) || eddy__timers_next_deadline(&loop->timers) != INT64_MAX) {
        return false;
    }
    if (loop->poller->busy != NULL && loop->poller->busy(loop)) {
        return false; /* operations of closed channels still to complete */
    }
    return now - loop->last_activity_ns >= loop->quiet_ns;
}

/* ---------------------------------------------------------------------------------------
 * The run loop
 */

static int64_t wait_timeout(eddy_loop_t *loop)
{
    if (eddy__taskq_pending(loop)) {
        return 0;
    }
    int64_t deadline = eddy__timers_next_deadline(&loop->timers);
    /* Acquire: pairs with the store in eddy_loop_shutdown_gracefully(), after which
     * quiet_ns and the other shutdown fields are readable. */
    if (atomic_load_explicit(&loop->state, memory_order_acquire) == EDDY__LOOP_SHUTTING_DOWN) {
        /* Look again when the quiet period or the timeout may have ended. */
        int64_t check = loop->now_ns + (loop->quiet_ns > 0 ? loop->quiet_ns / 2 + 1 : 1000000);
        if (check < deadline) {
            deadline = check;
        }
    }
    if (deadline == INT64_MAX) {
        return -1;
    }
    return deadline > loop->now_ns ? deadline - loop->now_ns : 0;
}

static void loop_body(eddy_loop_t *loop)
{
    bool shutting = false;
    for (;;) {
        loop->now_ns = eddy__loop_now(loop);
        int64_t timeout = wait_timeout(loop);
        if (timeout != 0) {
            atomic_store_explicit(&loop->wake_needed, 1, memory_order_relaxed);
            /* Pairs with the producers' seq_cst claim and loads (see enqueue). */
            atomic_thread_fence(memory_order_seq_cst);
            if (eddy__taskq_pending(loop)) {
                timeout = 0;
            }
        }
        if (timeout == 0) {
            eddy__taskq_await_claimed(loop);
        }
        int64_t t0 = eddy__loop_now(loop);
        loop->poll_return_ns = 0;
        int n = loop->poller->wait(loop, timeout);
        if (timeout != 0 &&
            !atomic_exchange_explicit(&loop->wake_needed, 0, memory_order_relaxed)) {
            eddy__stat_add(&loop->m.wakeups, 1); /* a producer took the flag: it woke us */
        }
        int64_t t1 = eddy__loop_now(loop);
        loop->now_ns = t1;
        eddy__stat_add(&loop->m.turns, 1);
        /* The backends dispatch inside wait() and stamp the moment their system call
         * returned: before it the loop was blocked, after it handling I/O. */
        int64_t io_ns = 0;
        if (n > 0 && loop->poll_return_ns >= t0) {
            io_ns = t1 - loop->poll_return_ns;
            eddy__stat_add(&loop->m.poll_ns, (uint64_t)(loop->poll_return_ns - t0));
            eddy__stat_add(&loop->m.io_ns, (uint64_t)io_ns);
        } else {
            eddy__stat_add(&loop->m.poll_ns, (uint64_t)(t1 - t0));
        }
        int64_t deadline;
        if (loop->io_ratio >= 100) {
            deadline = INT64_MAX;
        } else {
            int64_t budget = io_ns * (100 - loop->io_ratio) / loop->io_ratio;
            /* With no I/O this turn the budget would be zero: give tasks at least a small
             * slice so a quiet loop still runs them in batches. */
            if (budget < 50000) {
                budget = 50000;
            }
            deadline = t1 + budget;
        }
        if (loop->max_task_quantum_ns > 0 && t1 + loop->max_task_quantum_ns < deadline) {
            deadline = t1 + loop->max_task_quantum_ns;
        }
        size_t ran = eddy__timers_run_due(loop, deadline);
        ran += eddy__taskq_run(loop, deadline, INT64_MAX);
        int64_t t2 = eddy__loop_now(loop);
        loop->now_ns = t2;
        if (ran > 0) {
            eddy__stat_add(&loop->m.task_ns, (uint64_t)(t2 - t1));
        }
        if (atomic_load_explicit(&loop->state, memory_order_acquire) ==
            EDDY__LOOP_SHUTTING_DOWN) {
            if (!shutting) {
                shutting = true;
                loop->last_activity_ns = t2;
                close_all(loop);
                eddy__timers_cancel_all(loop);
            }
            if (confirm_shutdown(loop, ran)) {
                break;
            }
        }
    }
    /* From here every new task is refused, the loop's own too, so the drain ends even if a
     * task keeps queueing itself (Netty's ST_SHUTDOWN). */
    stop_taking_tasks(loop);
    settle_poller(loop);
}

static int loop_run(eddy_loop_t *loop)
{
    assert(loop->started && !loop->manual);
    current_loop = loop;
    loop->loop_thread = pthread_self();
    if (loop->stall_threshold_ns > 0) {
        eddy__watchdog_add(loop);
    }
    loop_body(loop);
    if (loop->stall_threshold_ns > 0) {
        eddy__watchdog_remove(loop);
    }
    /* Once TERMINATED shows, another thread may free the loop: hold a use until the
     * termination future, read from the loop, is completed. */
    eddy__loop_retain(loop);
    atomic_store(&loop->state, EDDY__LOOP_TERMINATED);
    current_loop = NULL;
    eddy_promise_succeed(loop->termination, NULL);
    eddy__loop_release(loop);
    return 0;
}

static bool claim_run(eddy_loop_t *loop)
{
    pthread_mutex_lock(&loop->shutdown_lock);
    bool ok = !loop->started && atomic_load(&loop->state) == EDDY__LOOP_NEW;
    if (ok) {
        loop->started = true;
        atomic_store(&loop->state, EDDY__LOOP_RUNNING);
    }
    pthread_mutex_unlock(&loop->shutdown_lock);
    return ok;
}

int eddy_loop_run(eddy_loop_t *loop)
{
    if (!claim_run(loop)) {
        return EDDY_EBUSY;
    }
    return loop_run(loop);
}

static void *loop_thread(void *arg)
{
    eddy_loop_t *loop = arg;
    pthread_setname_np(pthread_self(), loop->name);
    if (loop->cpu_set && loop->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(loop->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    loop_run(loop);
    return NULL;
}

int eddy_loop_start(eddy_loop_t *loop)
{
    if (!claim_run(loop)) {
        return EDDY_EBUSY;
    }
    int err = pthread_create(&loop->thread, NULL, loop_thread, loop);
    if (err != 0) {
        atomic_store(&loop->state, EDDY__LOOP_TERMINATED);
        eddy_promise_succeed(loop->termination, NULL);
        return -err;
    }
    loop->own_thread = true;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Manual loops (the embedded channel's): driven by hand on the caller's thread
 */

eddy_loop_t *eddy__loop_new_manual(void)
{
    /* poll(2): the cheapest backend to create; nothing waits on it. */
    /* A small ring: the test's own tasks that do not fit go to the overflow list. */
    eddy_loop_options_t o = {.name = "eddy-embedded",
                             .poller = "poll",
                             .stall_threshold_ns = -1,
                             .task_queue_size = 256};
    eddy_loop_t *loop = eddy_loop_new(&o);
    if (loop == NULL) {
        return NULL;
    }
    atomic_store_explicit(&loop->clock_offset_ns, eddy_now_ns(), memory_order_relaxed);
    loop->manual = true;
    loop->started = true;
    atomic_store(&loop->state, EDDY__LOOP_RUNNING);
    return loop;
}

eddy_loop_t *eddy__loop_enter(eddy_loop_t *loop)
{
    eddy_loop_t *prev = current_loop;
    current_loop = loop;
    return prev;
}

void eddy__loop_leave(eddy_loop_t *prev)
{
    current_loop = prev;
}

size_t eddy__loop_run_pending(eddy_loop_t *loop)
{
    assert(loop->manual);
    size_t total = 0;
    for (;;) {
        loop->now_ns = eddy__loop_now(loop);
        size_t ran = eddy__timers_run_due(loop, INT64_MAX);
        ran += eddy__taskq_run(loop, INT64_MAX, INT64_MAX);
        total += ran;
        if (ran == 0 && !eddy__taskq_pending(loop)) {
            return total;
        }
    }
}

void eddy__loop_advance(eddy_loop_t *loop, int64_t ns)
{
    assert(loop->manual); /* only a virtual clock moves by hand */
    if (ns > 0) {
        atomic_fetch_add_explicit(&loop->clock_offset_ns, ns, memory_order_relaxed);
    }
}

void eddy__loop_free_manual(eddy_loop_t *loop)
{
    if (loop == NULL) {
        return;
    }
    assert(loop->manual);
    eddy_loop_t *prev = eddy__loop_enter(loop);
    eddy__loop_run_pending(loop);
    eddy__timers_cancel_all(loop);
    stop_taking_tasks(loop);
    eddy__loop_leave(prev);
    atomic_store(&loop->state, EDDY__LOOP_TERMINATED);
    eddy_promise_succeed(loop->termination, NULL);
    eddy_loop_free(loop);
}

/* ---------------------------------------------------------------------------------------
 * Metrics
 */

void eddy_loop_metrics(const eddy_loop_t *loop, eddy_loop_metrics_t *m)
{
    const eddy__metrics_t *s = &loop->m;
    memset(m, 0, sizeof(*m));
    int64_t cursor = eddy_sequence_get(eddy_sequencer_cursor(loop->sequencer));
    int64_t consumed = eddy_sequence_get(loop->consumed);
    m->task_queue_depth = (cursor > consumed ? cursor - consumed : 0) +
                          atomic_load_explicit(&s->overflow, memory_order_relaxed);
    m->tasks_run = atomic_load_explicit(&s->tasks_run, memory_order_relaxed);
    m->timers_fired = atomic_load_explicit(&s->timers_fired, memory_order_relaxed);
    m->io_events = atomic_load_explicit(&s->io_events, memory_order_relaxed);
    m->wakeups = atomic_load_explicit(&s->wakeups, memory_order_relaxed);
    m->turns = atomic_load_explicit(&s->turns, memory_order_relaxed);
    m->poll_ns = atomic_load_explicit(&s->poll_ns, memory_order_relaxed);
    m->io_ns = atomic_load_explicit(&s->io_ns, memory_order_relaxed);
    m->task_ns = atomic_load_explicit(&s->task_ns, memory_order_relaxed);
    m->lag_max_ns = atomic_load_explicit(&s->lag_max_ns, memory_order_relaxed);
    m->lag_total_ns = atomic_load_explicit(&s->lag_total_ns, memory_order_relaxed);
    m->stalls = atomic_load_explicit(&s->stalls, memory_order_relaxed);
    m->last_stall_ns = atomic_load_explicit(&s->last_stall_ns, memory_order_relaxed);
    m->last_stall_fn = atomic_load_explicit(&s->last_stall_fn, memory_order_relaxed);
}
