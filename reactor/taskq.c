/*
 * The loop's task queue (docs/loop.md, "The task queue"): an MPSC queue on the
 * ring's multi-producer sequencer. Any thread queues a task (eddy_loop_execute and its
 * variants); the loop is the single consumer and runs everything available in a batch. The
 * loop's own tasks never wait: when the ring is full they go to an overflow list, which keeps
 * their order. docs/loop.md says what each step costs.
 *
 * The sequencer claims (its cursor, its view of the loop's progress); a slot publishes itself:
 * the producer stores the task's sequence in the slot after its fields, where the ring's
 * availability array would keep it apart. Each slot has a 64-byte line of its own, so two
 * producers that claim neighbouring sequences write nothing in common but the cursor; with
 * 24-byte slots and 4-byte availability words side by side, each task also moved a slot line
 * and an availability line between them, and the claim's locked instruction waited for both
 * (tasks_2p_split: 25-26 M tasks/s at 59-63 ns per task in the producers, 34-36 M at 36-40 ns
 * after; bench/RESULTS.md).
 */
#include "reactor/internal.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

/* The task deadline is checked every this many tasks, not every task (Netty does the same:
 * reading the clock costs more than a small task). */
#define DEADLINE_CHECK_EVERY 64
/* One queued task in this many carries its enqueue time, for the lag metric. */
#define LAG_SAMPLE_MASK 63

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

/* Publish a filled slot: the loop reads its fields once it sees seq (task_published). The
 * slot holds seq + 1, so that a zeroed slot is one never published. */
static inline void publish(eddy__task_slot_t *slot, int64_t seq)
{
    assert(seq >= 0 && atomic_load_explicit(&slot->seq, memory_order_relaxed) <= seq);
    atomic_store_explicit(&slot->seq, seq + 1, memory_order_release);
}

/* Whether seq's slot holds seq, published: its fields may be read. The loop's thread. */
static inline bool task_published(const eddy_loop_t *loop, int64_t seq)
{
    const eddy__task_slot_t *slot = eddy_ring_get(loop->ring, seq);
    /* Pairs with the release store in publish(). */
    return atomic_load_explicit(&slot->seq, memory_order_acquire) == seq + 1;
}

static int overflow_push(eddy_loop_t *loop, eddy_task_cb fn, void *arg)
{
    eddy__assert_on_loop(loop); /* the loop's own tasks only: other threads use the ring */
    assert((loop->overflow_head == NULL) == (loop->overflow_tail == NULL));
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

/* Wake the loop blocked in its poller. The slow path: announce ourselves before taking the
 * flag, so that freeing the loop (eddy_loop_free) either sees us and waits, or has cleared
 * the flag first and we take nothing: the poller is never used after it was destroyed. */
static __attribute__((noinline)) void wake(eddy_loop_t *loop)
{
    atomic_fetch_add_explicit(&loop->waking, 1, memory_order_seq_cst);
    if (atomic_exchange_explicit(&loop->wake_needed, 0, memory_order_seq_cst)) {
        loop->poller->wakeup(loop);
    }
    atomic_fetch_sub_explicit(&loop->waking, 1, memory_order_release);
}

/*
 * A producer about to wait for room wakes the loop if it sleeps: the tasks that filled the
 * ring may all be lazy ones (eddy_loop_lazy_execute), which never wake it, and a loop asleep
 * with a full ring would leave every producer waiting until some I/O or timer came.
 */
static void wake_for_room(eddy_loop_t *loop)
{
    if (atomic_load_explicit(&loop->wake_needed, memory_order_seq_cst)) {
        wake(loop);
    }
}

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
    assert(seq >= 0 && !eddy_loop_in_event_loop(loop)); /* the loop never waits for itself */
    for (unsigned spins = 0; !eddy__sequencer_mp_room(loop->sequencer, seq); spins++) {
        /* Acquire: pairs with the loop's release store in stop_taking_tasks(). */
        int64_t limit = atomic_load_explicit(&loop->drain_limit, memory_order_acquire);
        if (limit != EDDY__NO_LIMIT && seq > limit) {
            return EDDY_ESHUTDOWN;
        }
        wake_for_room(loop);
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
        wake_for_room(loop);
        backoff(spins);
    }
}

static int enqueue(eddy_loop_t *loop, eddy_task_cb fn, void *arg, int mode)
{
    assert(loop != NULL && fn != NULL);
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
                publish(slot, seq);
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
    publish(slot, seq);
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
        wake(loop);
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
    assert(fn != NULL);
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

void eddy__loop_run_request(eddy_loop_t *loop, eddy_task_cb fn, void *req, eddy_promise_t *p)
{
    assert(req != NULL && p != NULL && !eddy_future_is_done(p));
    if (eddy_loop_in_event_loop(loop)) {
        fn(req);
        return;
    }
    int err = eddy_loop_execute(loop, fn, req);
    if (err != 0) {
        eddy_future_release(p); /* the request's reference */
        free(req);
        eddy_promise_fail(p, err);
    }
}

bool eddy__taskq_pending(eddy_loop_t *loop)
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
void eddy__taskq_await_claimed(eddy_loop_t *loop)
{
    if (loop->overflow_head != NULL ||
        eddy_sequence_get(eddy_sequencer_cursor(loop->sequencer)) < loop->next_seq) {
        return;
    }
    for (int i = 0; i < CLAIM_SPINS; i++) {
        if (task_published(loop, loop->next_seq)) {
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
        assert(o->fn != NULL && (o->next != NULL || loop->overflow_tail == o));
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
    int64_t avail = eddy_sequence_get(eddy_sequencer_cursor(loop->sequencer));
    if (avail > limit) {
        avail = limit;
    }
    bool stopped = false;
    size_t taken = 0;
    while (loop->next_seq <= avail && task_published(loop, loop->next_seq)) {
        eddy__task_slot_t *slot = eddy_ring_get(loop->ring, loop->next_seq);
        eddy_task_cb fn = slot->fn;
        assert(fn != NULL);
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
size_t eddy__taskq_run(eddy_loop_t *loop, int64_t deadline, int64_t limit)
{
    /* The single consumer: the loop, or who stands in for it. */
    eddy__assert_on_loop(loop);
    assert((loop->overflow_head == NULL) == (loop->overflow_tail == NULL));
    assert((loop->overflow_head == NULL) ==
           (atomic_load_explicit(&loop->m.overflow, memory_order_relaxed) == 0));
    size_t ran = 0;
    if (loop->overflow_head != NULL) {
        if (run_ring(loop, loop->overflow_after, deadline, &ran) ||
            loop->next_seq <= loop->overflow_after || run_overflow(loop, deadline, &ran)) {
            return ran;
        }
    }
    run_ring(loop, limit, deadline, &ran);
    return ran;
}

void eddy__taskq_drop_overflow(eddy_loop_t *loop)
{
    eddy__overflow_t *o = loop->overflow_head;
    while (o != NULL) {
        eddy__overflow_t *next = o->next;
        free(o);
        o = next;
    }
    loop->overflow_head = loop->overflow_tail = NULL;
}
