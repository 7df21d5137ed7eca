/*
 * The event loop: the run loop of DESIGN.md (after Netty's NioEventLoop.run), the task queue
 * on the ring, I/O registration, shutdown, metrics and the stall watchdog.
 */
#include "reactor/loop_internal.h"
#include "reactor/internal.h"
#include "buffer/log_internal.h"
#include "reactor/loop_local.h"
#include "eddy_config.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_QUEUE 16384
#define DEFAULT_IO_RATIO 50
#define DEFAULT_STALL_NS ((int64_t)100 * 1000000)
/* The task deadline is checked every this many tasks, not every task (Netty does the same:
 * reading the clock costs more than a small task). */
#define DEADLINE_CHECK_EVERY 64
/* One queued task in this many carries its enqueue time, for the lag metric. */
#define LAG_SAMPLE_MASK 63

const eddy__poller_ops_t *const eddy__pollers[] = {
#ifdef EDDY_HAVE_EPOLL
    &eddy__poller_epoll,
#endif
#ifdef EDDY_HAVE_KQUEUE
    &eddy__poller_kqueue,
#endif
    &eddy__poller_poll,
    NULL,
};

static _Thread_local eddy_loop_t *current_loop;

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

/* A block of loop_local.h: few per loop (one per module that wants one), found by a walk. */
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

void eddy_io_stop(eddy_io_t *io)
{
    eddy_loop_t *loop = io->_loop;
    if (io->_interest == 0) {
        return;
    }
    eddy__assert_on_loop(loop);
    loop->poller->update(loop, io, 0);
    io->_interest = 0;
    if (eddy__io_of(loop, io->fd) == io) {
        loop->watchers[io->fd] = NULL;
    }
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

/* ---------------------------------------------------------------------------------------
 * Creation and teardown
 */

static const eddy__poller_ops_t *find_poller(const char *name)
{
    if (name == NULL || name[0] == '\0') {
        name = getenv("EDDY_POLLER");
    }
    if (name == NULL || name[0] == '\0') {
        return eddy__pollers[0];
    }
    for (size_t i = 0; eddy__pollers[i] != NULL; i++) {
        if (strcmp(eddy__pollers[i]->name, name) == 0) {
            return eddy__pollers[i];
        }
    }
    return NULL;
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
    if (loop->barrier != NULL) {
        eddy_barrier_free(loop->barrier);
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

/* The creator sets the backend up standing in for the loop, whose thread does not run yet:
 * the backends start the wake-up io, which only the loop may do. */
static int init_poller(eddy_loop_t *loop)
{
    eddy_loop_t *prev = eddy__loop_enter(loop);
    int err = loop->poller->init(loop);
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
    size_t qsize = o.task_queue_size ? o.task_queue_size : DEFAULT_QUEUE;
    if ((qsize & (qsize - 1)) != 0 || qsize < 2) {
        return NULL;
    }
    const eddy__poller_ops_t *poller = find_poller(o.poller);
    if (poller == NULL) {
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
    loop->poller = poller;
    loop->next_seq = 0;
    loop->last_self_seq = EDDY_SEQUENCE_INITIAL;
    atomic_init(&loop->drain_limit, EDDY__NO_LIMIT);
    loop->overflow_after = EDDY_SEQUENCE_INITIAL;
    atomic_init(&loop->state, EDDY__LOOP_NEW);
    atomic_init(&loop->wake_needed, 0);
    /* The loop never waits on its barrier (it blocks in the poller), so the ring's wait
     * strategy only matters to producers on a full ring: yielding keeps them polite. */
    loop->ws = eddy_wait_strategy_yielding();
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
    }
    if (loop->sequencer == NULL ||
        eddy_sequencer_add_gating(loop->sequencer, &loop->consumed, 1) != 0 ||
        (loop->barrier = eddy_sequencer_new_barrier(loop->sequencer, NULL, 0)) == NULL ||
        init_poller(loop) != 0) {
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
    c->next = &loop->closers;
    c->prev = loop->closers.prev;
    c->prev->next = c;
    loop->closers.prev = c;
}

void eddy__loop_closer_remove(eddy__closer_t *c)
{
    if (c->next != NULL) {
        c->prev->next = c->next;
        c->next->prev = c->prev;
        c->prev = c->next = NULL;
    }
}

/* Shutdown: close what registered (channels), each once, even those a close adds. */
static void close_all(eddy_loop_t *loop)
{
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
    /* Timers a task inserted while it shut down are cancelled and released, by this thread
     * standing in for the loop, which has terminated. */
    eddy_loop_t *prev = eddy__loop_enter(loop);
    eddy__timers_cancel_all(loop);
    eddy__loop_leave(prev);
    eddy__overflow_t *o = loop->overflow_head;
    while (o != NULL) {
        eddy__overflow_t *next = o->next;
        free(o);
        o = next;
    }
    eddy__loop_release(loop);
    return 0;
}

void eddy__loop_retain(eddy_loop_t *loop)
{
    atomic_fetch_add_explicit(&loop->users, 1, memory_order_relaxed);
}

void eddy__loop_release(eddy_loop_t *loop)
{
    /* acq_rel: the last user sees every write of the others (and of the loop's thread,
     * joined by eddy_loop_free) before it frees. */
    if (atomic_fetch_sub_explicit(&loop->users, 1, memory_order_acq_rel) == 1) {
        loop_release_parts(loop);
    }
}

/* ---------------------------------------------------------------------------------------
 * The task queue
 */

/* Our task was claimed when the loop had already stopped taking tasks: it runs if the loop's
 * final look at the cursor included it. That limit is stored right after the loop stops
 * taking tasks (no quiet period in between), so the wait is short and happens only in this
 * race. */
static int claimed_after_shutdown(eddy_loop_t *loop, int64_t seq)
{
    int64_t limit;
    /* Acquire: pairs with the loop's release store of drain_limit in stop_taking_tasks(). */
    while ((limit = atomic_load_explicit(&loop->drain_limit, memory_order_acquire)) ==
           EDDY__NO_LIMIT) {
        sched_yield();
    }
    return seq <= limit ? 0 : EDDY_ESHUTDOWN;
}

static int overflow_push(eddy_loop_t *loop, eddy_task_cb fn, void *arg)
{
    eddy__assert_on_loop(loop); /* the loop's own tasks only: other threads use the ring */
    eddy__overflow_t *o = malloc(sizeof(*o));
    if (o == NULL) {
        return EDDY_ENOMEM;
    }
    o->next = NULL;
    o->fn = fn;
    o->arg = arg;
    if (loop->overflow_tail != NULL) {
        loop->overflow_tail->next = o;
    } else {
        loop->overflow_head = o;
    }
    loop->overflow_tail = o;
    atomic_store_explicit(&loop->m.overflow,
                          atomic_load_explicit(&loop->m.overflow, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return 0;
}

enum { MODE_WAIT, MODE_TRY, MODE_LAZY };

/* A producer's wait for room, round spins: spin, then yield, then sleep. */
static void backoff(unsigned spins)
{
    if (spins < 100) {
        eddy__cpu_relax();
    } else if (spins < 200) {
        sched_yield();
    } else {
        nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

/*
 * A producer's claimed seq meets a full ring: wait (spin, then yield, then sleep) until the
 * loop has run the task a lap before it. The claim cannot be handed back, and the loop's
 * drain at shutdown waits for every slot it saw claimed, so this waits for as long as the
 * loop may still read seq; it gives up, the slot left unpublished, only once the loop has
 * stopped short of seq for good (EDDY_ESHUTDOWN).
 */
static __attribute__((noinline, cold)) int wait_for_room(eddy_loop_t *loop, int64_t seq)
{
    for (unsigned spins = 0; !eddy__sequencer_mp_room(loop->sequencer, seq); spins++) {
        /* Acquire: pairs with the loop's release store in stop_taking_tasks(). */
        int64_t limit = atomic_load_explicit(&loop->drain_limit, memory_order_acquire);
        if (limit != EDDY__NO_LIMIT && seq > limit) {
            return EDDY_ESHUTDOWN;
        }
        backoff(spins);
    }
    return 0;
}

/*
 * Claim one slot with compare-and-swap, which claims only what has room: EDDY_EAGAIN at once
 * in MODE_TRY; otherwise back off while the ring is full, and give up (EDDY_ESHUTDOWN) if the
 * loop is gone rather than wait for a consumer that will not come.
 */
static __attribute__((noinline)) int64_t claim_near_full(eddy_loop_t *loop, int mode)
{
    for (unsigned spins = 0;; spins++) {
        int64_t seq = eddy_sequencer_try_next(loop->sequencer, 1);
        if (seq >= 0) {
            return seq;
        }
        if (mode == MODE_TRY) {
            return EDDY_EAGAIN;
        }
        int st = atomic_load_explicit(&loop->state, memory_order_acquire);
        if (st != EDDY__LOOP_RUNNING && st != EDDY__LOOP_NEW) {
            return EDDY_ESHUTDOWN;
        }
        backoff(spins);
    }
}

static int enqueue(eddy_loop_t *loop, eddy_task_cb fn, void *arg, int mode)
{
    bool on_loop = eddy_loop_in_event_loop(loop);
    int st = atomic_load_explicit(&loop->state, memory_order_acquire);
    /* Shutting down refuses other threads at once; the loop's own tasks are taken until
     * the quiet period or the timeout ends it (EDDY__LOOP_SHUTDOWN). */
    if (st >= EDDY__LOOP_SHUTDOWN || (st == EDDY__LOOP_SHUTTING_DOWN && !on_loop)) {
        return EDDY_ESHUTDOWN;
    }
    if (on_loop) {
        /* The loop never waits for itself: a full ring, or tasks already in the overflow
         * list (order), send the task to the overflow list. */
        if (loop->overflow_head == NULL) {
            int64_t seq = eddy_sequencer_try_next(loop->sequencer, 1);
            if (seq >= 0) {
                eddy__task_slot_t *slot = eddy_ring_get(loop->ring, seq);
                slot->fn = fn;
                slot->arg = arg;
                slot->stamp_ns = 0;
                eddy_sequencer_publish(loop->sequencer, seq);
                loop->last_self_seq = seq;
                return 0;
            }
            /* The overflow list starts: its tasks come after the loop's own ring tasks. */
            loop->overflow_after = loop->last_self_seq;
        }
        return overflow_push(loop, fn, arg);
    }
    /* One fetch-add while the ring has room to spare (no retry however many producers
     * contend); near a full ring, compare-and-swap against the room there is, so that no
     * producer holds a claim while it waits (the loop could not run past its slot). */
    int64_t seq = mode == MODE_TRY ? EDDY_EAGAIN : eddy__sequencer_mp_claim(loop->sequencer);
    if (EDDY_LIKELY(seq >= 0)) {
        if (EDDY_UNLIKELY(!eddy__sequencer_mp_room(loop->sequencer, seq))) {
            int err = wait_for_room(loop, seq);
            if (err != 0) {
                return err;
            }
        }
    } else {
        seq = claim_near_full(loop, mode);
        if (seq < 0) {
            return (int)seq;
        }
    }
    eddy__task_slot_t *slot = eddy_ring_get(loop->ring, seq);
    slot->fn = fn;
    slot->arg = arg;
    slot->stamp_ns = (seq & LAG_SAMPLE_MASK) == 0 ? eddy__loop_now(loop) : 0;
    eddy_sequencer_publish(loop->sequencer, seq);
    /*
     * Two handshakes with the loop, both Dekker-style: we wrote the cursor (the claim) and read
     * a loop word; the loop writes that word, fences, and reads the cursor. The claim (a
     * fetch-add or a compare-and-swap) is sequentially consistent and these loads are seq_cst,
     * so no fence of our own is needed (one cost a third of a task's enqueue on x86):
     * - state: while we still see the loop before EDDY__LOOP_SHUTDOWN, its final look at the
     *   cursor (stop_taking_tasks) is bound to see our claim, so the task will run;
     * - wake_needed: either the loop sees our claim before it blocks, or we see it blocking
     *   (Netty's nextWakeupNanos check). The exchange lets one producer write the eventfd.
     */
    if (EDDY_UNLIKELY(atomic_load_explicit(&loop->state, memory_order_seq_cst) >=
                      EDDY__LOOP_SHUTDOWN)) {
        return claimed_after_shutdown(loop, seq);
    }
    if (mode != MODE_LAZY && atomic_load_explicit(&loop->wake_needed, memory_order_seq_cst)) {
        /* The slow path: announce ourselves before taking the flag, so that freeing the loop
         * (eddy_loop_free) either sees us and waits, or has cleared the flag first and we
         * take nothing: the poller is never used after it was destroyed. */
        atomic_fetch_add_explicit(&loop->waking, 1, memory_order_seq_cst);
        if (atomic_exchange_explicit(&loop->wake_needed, 0, memory_order_seq_cst)) {
            loop->poller->wakeup(loop);
        }
        atomic_fetch_sub_explicit(&loop->waking, 1, memory_order_release);
    }
    return 0;
}

int eddy_loop_execute(eddy_loop_t *loop, eddy_task_cb fn, void *arg)
{
    return enqueue(loop, fn, arg, MODE_WAIT);
}

int eddy_loop_try_execute(eddy_loop_t *loop, eddy_task_cb fn, void *arg)
{
    return enqueue(loop, fn, arg, MODE_TRY);
}

int eddy_loop_lazy_execute(eddy_loop_t *loop, eddy_task_cb fn, void *arg)
{
    return enqueue(loop, fn, arg, MODE_LAZY);
}

typedef struct submit_s {
    eddy_callable_cb fn;
    void *arg;
    eddy_promise_t *p;
} submit_t;

static void run_submit(void *arg)
{
    submit_t *s = arg;
    void *result = NULL;
    int err = s->fn(s->arg, &result);
    if (err < 0) {
        eddy_promise_fail(s->p, err);
    } else {
        eddy_promise_succeed(s->p, result);
    }
    eddy_future_release(s->p);
    free(s);
}

eddy_future_t *eddy_loop_submit(eddy_loop_t *loop, eddy_callable_cb fn, void *arg)
{
    eddy_promise_t *p = eddy_promise_new(loop);
    submit_t *s = malloc(sizeof(*s));
    if (p == NULL || s == NULL) {
        eddy_future_release(p);
        free(s);
        return NULL;
    }
    s->fn = fn;
    s->arg = arg;
    s->p = eddy_future_retain(p); /* the task's reference */
    int err = eddy_loop_execute(loop, run_submit, s);
    if (err != 0) {
        eddy_future_release(s->p);
        free(s);
        eddy_promise_fail(p, err);
    }
    return p;
}

static bool tasks_pending(eddy_loop_t *loop)
{
    eddy__assert_on_loop(loop);
    return loop->overflow_head != NULL ||
           eddy_sequence_get(eddy_sequencer_cursor(loop->sequencer)) >= loop->next_seq;
}

/*
 * Spins of the loop waiting for a task slot claimed but not yet published, before it yields
 * its CPU (about 1.5 us at 20-25 ns a pause): a producer that is running publishes within
 * nanoseconds of its claim.
 */
#define CLAIM_SPINS 64

/*
 * The ring's next slot is claimed by a producer that has not published it yet: the loop
 * cannot sleep (that producer may have seen the loop running and will not wake it), and
 * polling again at once would keep it on its CPU. That producer may be waiting for this very
 * CPU, preempted between its claim and its publish (a thread pinned beside the loop), so
 * after a short spin the loop gives the CPU away once and then polls; measured as
 * tasks_2p_split in bench/reactor.
 */
static void await_claimed_task(eddy_loop_t *loop)
{
    if (loop->overflow_head != NULL ||
        eddy_sequence_get(eddy_sequencer_cursor(loop->sequencer)) < loop->next_seq) {
        return;
    }
    for (int i = 0; i < CLAIM_SPINS; i++) {
        if (eddy__sequencer_mp_is_published(loop->sequencer, loop->next_seq)) {
            return;
        }
        eddy__cpu_relax();
    }
    sched_yield();
}

static inline void run_one(eddy_loop_t *loop, eddy_task_cb fn, void *arg)
{
    eddy__callback_begin(loop, (eddy__fnptr_t)fn);
    fn(arg);
    eddy__callback_end(loop);
    eddy__stat_add(&loop->m.tasks_run, 1);
}

/* Run the overflow list's tasks that were there when this started. True when the deadline
 * (checked every 64 tasks) stopped it. */
static bool run_overflow(eddy_loop_t *loop, int64_t deadline, size_t *ran)
{
    int64_t n = atomic_load_explicit(&loop->m.overflow, memory_order_relaxed);
    while (n-- > 0 && loop->overflow_head != NULL) {
        eddy__overflow_t *o = loop->overflow_head;
        loop->overflow_head = o->next;
        if (loop->overflow_head == NULL) {
            loop->overflow_tail = NULL;
        }
        atomic_store_explicit(&loop->m.overflow,
                              atomic_load_explicit(&loop->m.overflow, memory_order_relaxed) - 1,
                              memory_order_relaxed);
        eddy_task_cb fn = o->fn;
        void *arg = o->arg;
        free(o);
        run_one(loop, fn, arg);
        if ((++*ran % DEADLINE_CHECK_EVERY) == 0 && eddy__loop_now(loop) >= deadline) {
            return true;
        }
    }
    return false;
}

/* Run published ring tasks up to sequence limit. True when the deadline stopped it. */
static bool run_ring(eddy_loop_t *loop, int64_t limit, int64_t deadline, size_t *ran)
{
    int64_t avail = eddy_barrier_peek(loop->barrier, loop->next_seq);
    if (avail > limit) {
        avail = limit;
    }
    bool stopped = false;
    size_t taken = 0;
    while (loop->next_seq <= avail) {
        eddy__task_slot_t *slot = eddy_ring_get(loop->ring, loop->next_seq);
        eddy_task_cb fn = slot->fn;
        void *arg = slot->arg;
        int64_t stamp = slot->stamp_ns;
        loop->next_seq++;
        if ((++taken % DEADLINE_CHECK_EVERY) == 0) {
            /* Free the slots already read, so producers waiting on a full ring go on. */
            eddy_sequence_set(loop->consumed, loop->next_seq - 1);
        }
        if (stamp != 0 && loop->now_ns > stamp) {
            eddy__stat_max(&loop->m.lag_max_ns, (uint64_t)(loop->now_ns - stamp));
        }
        run_one(loop, fn, arg);
        if ((++*ran % DEADLINE_CHECK_EVERY) == 0 && eddy__loop_now(loop) >= deadline) {
            stopped = true;
            break;
        }
    }
    eddy_sequence_set(loop->consumed, loop->next_seq - 1);
    return stopped;
}

/*
 * Run queued tasks until the deadline (checked every 64 tasks; INT64_MAX: no deadline), ring
 * slots up to limit. Only tasks queued before this call run, so a task that queues another
 * cannot starve I/O. The loop's own tasks keep their order: those that went to the overflow
 * list (the ring was full) run after the ring slots the loop filled before them. Returns how
 * many ran.
 */
static size_t run_tasks(eddy_loop_t *loop, int64_t deadline, int64_t limit)
{
    /* The single consumer: the loop, or who stands in for it. */
    eddy__assert_on_loop(loop);
    assert((loop->overflow_head == NULL) == (loop->overflow_tail == NULL));
    assert((loop->overflow_head == NULL) ==
           (atomic_load_explicit(&loop->m.overflow, memory_order_relaxed) == 0));
    size_t ran = 0;
    if (loop->overflow_head != NULL) {
        if (run_ring(loop, loop->overflow_after, deadline, &ran) ||
            loop->next_seq <= loop->overflow_after ||
            run_overflow(loop, deadline, &ran)) {
            return ran;
        }
    }
    run_ring(loop, limit, deadline, &ran);
    return ran;
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
    atomic_store(&loop->state, EDDY__LOOP_SHUTDOWN);
    /* Pairs with the producers' seq_cst claim and loads (see enqueue). */
    atomic_thread_fence(memory_order_seq_cst);
    int64_t limit = eddy_sequence_get(eddy_sequencer_cursor(loop->sequencer));
    atomic_store_explicit(&loop->drain_limit, limit, memory_order_release);
    while (loop->next_seq <= limit || loop->overflow_head != NULL) {
        loop->now_ns = eddy__loop_now(loop);
        if (run_tasks(loop, INT64_MAX, limit) == 0 && loop->next_seq <= limit) {
            sched_yield(); /* a producer between its claim and its publish */
        }
    }
}

/* Netty's confirmShutdown: true once the loop may terminate. */
static bool confirm_shutdown(eddy_loop_t *loop, size_t ran)
{
    int64_t now = loop->now_ns;
    if (ran > 0) {
        loop->last_activity_ns = now;
    }
    if (now - loop->shutdown_start_ns >= loop->timeout_ns) {
        return true;
    }
    if (tasks_pending(loop) || eddy__timers_next_deadline(&loop->timers) != INT64_MAX) {
        return false;
    }
    return now - loop->last_activity_ns >= loop->quiet_ns;
}

/* ---------------------------------------------------------------------------------------
 * The run loop
 */

static int64_t wait_timeout(eddy_loop_t *loop)
{
    if (tasks_pending(loop)) {
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
            if (tasks_pending(loop)) {
                timeout = 0;
            }
        }
        if (timeout == 0) {
            await_claimed_task(loop);
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
        ran += run_tasks(loop, deadline, INT64_MAX);
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
}

static int loop_run(eddy_loop_t *loop)
{
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
        ran += run_tasks(loop, INT64_MAX, INT64_MAX);
        total += ran;
        if (ran == 0 && !tasks_pending(loop)) {
            return total;
        }
    }
}

void eddy__loop_advance(eddy_loop_t *loop, int64_t ns)
{
    if (ns > 0) {
        atomic_fetch_add_explicit(&loop->clock_offset_ns, ns, memory_order_relaxed);
    }
}

void eddy__loop_free_manual(eddy_loop_t *loop)
{
    if (loop == NULL) {
        return;
    }
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

/* ---------------------------------------------------------------------------------------
 * The stall watchdog: one thread for the process, started with the first loop that wants
 * it. Every half threshold it looks at each loop: a loop still inside the same callback
 * (its activity count unchanged) for longer than the threshold has stalled, and is reported
 * once with the callback's address. It also catches a callback that never returns, which a
 * check inside the loop could not. The loop pays only a few plain stores per callback.
 *
 * While no loop needs it, it sleeps without a timeout (no wake-ups) until one does. It ends
 * only in eddy__watchdog_shutdown(), which joins it: a thread still alive at exit is memory
 * that valgrind reports as lost, and one that ended unjoined is a leak to TSan.
 */

static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cond;
static pthread_once_t wd_once = PTHREAD_ONCE_INIT;
static eddy_loop_t *wd_loops;
static size_t wd_count;
static pthread_t wd_thread;
static bool wd_started; /* wd_thread runs, joinable */
static bool wd_stop;    /* eddy__watchdog_shutdown() asks it to end */

/* A stall found in one look, logged after the lock is let go: the log hook may start or stop
 * loops, which takes the lock. A look reports at most this many; the rest wait for the next. */
#define WD_REPORTS 8
typedef struct wd_report_s {
    char name[sizeof(((eddy_loop_t *)0)->name)];
    eddy__fnptr_t fn;
    int64_t held;
} wd_report_t;

static void wd_cond_init(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wd_cond, &attr);
    pthread_condattr_destroy(&attr);
}

/* Look at loop; a new stall fills *r (NULL: no room this time) and returns true. */
static bool wd_check(eddy_loop_t *loop, int64_t now, wd_report_t *r)
{
    uint64_t act = atomic_load_explicit(&loop->activity, memory_order_relaxed);
    bool busy = atomic_load_explicit(&loop->in_callback, memory_order_relaxed);
    if (!busy || act != loop->watch_seen) {
        loop->watch_seen = act;
        loop->watch_since_ns = now;
        return false;
    }
    int64_t held = now - loop->watch_since_ns;
    if (held < loop->stall_threshold_ns || loop->watch_reported == act || r == NULL) {
        return false;
    }
    loop->watch_reported = act;
    eddy__fnptr_t fn = atomic_load_explicit(&loop->running_fn, memory_order_relaxed);
    eddy__stat_add(&loop->m.stalls, 1);
    atomic_store_explicit(&loop->m.last_stall_ns, (uint64_t)held, memory_order_relaxed);
    atomic_store_explicit(&loop->m.last_stall_fn, fn, memory_order_relaxed);
    memcpy(r->name, loop->name, sizeof(r->name));
    r->fn = fn;
    r->held = held;
    return true;
}

static void *wd_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "eddy-watchdog");
    pthread_mutex_lock(&wd_lock);
    unsigned idle = 0;
    while (!wd_stop) {
        if (wd_count == 0) {
            pthread_cond_wait(&wd_cond, &wd_lock); /* until a loop or the shutdown comes */
            idle = 0;
            continue;
        }
        int64_t period = INT64_MAX;
        int64_t now = eddy_now_ns();
        bool busy = false;
        wd_report_t reports[WD_REPORTS];
        size_t n = 0;
        for (eddy_loop_t *l = wd_loops; l != NULL; l = l->watch_next) {
            n += wd_check(l, now, n < WD_REPORTS ? &reports[n] : NULL);
            busy |= atomic_load_explicit(&l->in_callback, memory_order_relaxed);
            if (l->stall_threshold_ns / 2 < period) {
                period = l->stall_threshold_ns / 2;
            }
        }
        /* While every loop sleeps in its poller, look less often, up to 8 times less: an
         * idle process then wakes a few times a second, and a stall that starts meanwhile
         * is still reported, at most 4 thresholds late. */
        if (n > 0) {
            pthread_mutex_unlock(&wd_lock);
            for (size_t i = 0; i < n; i++) {
                /* The address as an integer: %p wants an object pointer. */
                eddy__log(EDDY_LOG_WARN,
                          "loop %s stalled: callback 0x%" PRIxPTR " has held it for %lld ms",
                          reports[i].name, (uintptr_t)reports[i].fn,
                          (long long)(reports[i].held / 1000000));
            }
            pthread_mutex_lock(&wd_lock);
        }
        idle = busy ? 0 : (idle < 3 ? idle + 1 : 3);
        period <<= idle;
        int64_t until = now + period;
        struct timespec ts = {.tv_sec = until / 1000000000, .tv_nsec = until % 1000000000};
        pthread_cond_timedwait(&wd_cond, &wd_lock, &ts);
    }
    pthread_mutex_unlock(&wd_lock);
    return NULL;
}

void eddy__watchdog_add(eddy_loop_t *loop)
{
    pthread_once(&wd_once, wd_cond_init);
    pthread_mutex_lock(&wd_lock);
    loop->watch_seen = atomic_load_explicit(&loop->activity, memory_order_relaxed);
    loop->watch_since_ns = eddy_now_ns();
    loop->watch_next = wd_loops;
    wd_loops = loop;
    bool failed = false;
    if (wd_count++ == 0 && !wd_started) {
        wd_started = pthread_create(&wd_thread, NULL, wd_main, NULL) == 0;
        failed = !wd_started;
    }
    pthread_cond_broadcast(&wd_cond);
    pthread_mutex_unlock(&wd_lock);
    if (failed) {
        eddy__log(EDDY_LOG_WARN, "no stall watchdog (thread creation failed)");
    }
}

void eddy__watchdog_remove(eddy_loop_t *loop)
{
    pthread_mutex_lock(&wd_lock);
    for (eddy_loop_t **l = &wd_loops; *l != NULL; l = &(*l)->watch_next) {
        if (*l == loop) {
            *l = loop->watch_next;
            wd_count--;
            break;
        }
    }
    pthread_cond_broadcast(&wd_cond);
    pthread_mutex_unlock(&wd_lock);
}

int eddy__watchdog_shutdown(void)
{
    pthread_mutex_lock(&wd_lock);
    if (wd_count > 0) {
        pthread_mutex_unlock(&wd_lock);
        return EDDY_EBUSY;
    }
    bool started = wd_started;
    if (started) {
        wd_stop = true;
        pthread_cond_broadcast(&wd_cond);
    }
    pthread_mutex_unlock(&wd_lock);
    if (started) {
        pthread_join(wd_thread, NULL);
        pthread_mutex_lock(&wd_lock);
        wd_started = false; /* a later loop starts another */
        wd_stop = false;
        pthread_mutex_unlock(&wd_lock);
    }
    return 0;
}
