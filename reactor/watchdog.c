/*
 * The stall watchdog: one thread for the process, started with the first loop that wants
 * it. Every half threshold it looks at each loop: a loop still inside the same callback
 * (its activity count unchanged) for longer than the threshold has stalled, and is reported
 * once: with the pipeline handler running in it and its channel's id, when a channel's event
 * stalled (the pipeline says which, loop->running_handler), else with the callback's address. It also catches a callback that never returns, which a
 * check inside the loop could not. The loop pays only a few plain stores per callback.
 *
 * While no loop needs it, it sleeps without a timeout (no wake-ups) until one does. It ends
 * only in eddy__watchdog_shutdown(), which joins it: a thread still alive at exit is memory
 * that valgrind reports as lost, and one that ended unjoined is a leak to TSan.
 */
#include "reactor/internal.h"
#include "buffer/layer.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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
    const char *handler; /* static: an ops table's name; NULL when no handler was running */
    uint64_t channel;
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
    r->handler = atomic_load_explicit(&loop->running_handler, memory_order_relaxed);
    r->channel = atomic_load_explicit(&loop->running_channel, memory_order_relaxed);
    r->held = held;
    return true;
}

static void wd_log(const wd_report_t *r)
{
    if (r->handler != NULL) {
        eddy__log(EDDY_LOG_WARN,
                  "loop %s stalled: handler '%s' of channel %llu has held it for %lld ms",
                  r->name, r->handler, (unsigned long long)r->channel,
                  (long long)(r->held / 1000000));
        return;
    }
    /* The address as an integer: %p wants an object pointer. */
    eddy__log(EDDY_LOG_WARN, "loop %s stalled: callback 0x%" PRIxPTR " has held it for %lld ms",
              r->name, (uintptr_t)r->fn, (long long)(r->held / 1000000));
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
                wd_log(&reports[i]);
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
    for (const eddy_loop_t *l = wd_loops; l != NULL; l = l->watch_next) {
        assert(l != loop); /* watched once: a loop runs once */
    }
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
            assert(wd_count > 0);
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
