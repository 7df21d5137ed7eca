/*
 * The library's log (common.h): one process-wide hook and a level threshold. Both are read by
 * every thread that logs and may be set by any thread, so both are atomics: the threshold an
 * int, the hook's (function, argument) pair behind a sequence lock, so that a message never
 * reaches one hook's function with another's argument. Setting is rare (start-up) and reading
 * takes no lock: a reader retries only while a setter is writing.
 */
#include "buffer/layer.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* 0 until decided: the first message (or eddy_log_level()) reads EDDY_LOG. */
static _Atomic int threshold;

/* The hook; cb NULL is the default. hook_seq is odd while a setter writes the pair. */
static _Atomic unsigned hook_seq;
static _Atomic(eddy_log_hook_cb) hook_cb;
static _Atomic(void *) hook_arg;

/* The default: what the library printed before it had a hook, the same bytes. */
static void to_stderr(eddy_log_level_t level, const char *message, void *arg)
{
    (void)level;
    (void)arg;
    fprintf(stderr, "eddy: %s\n", message);
}

void eddy_log_set_hook(eddy_log_hook_cb cb, void *arg)
{
    /* Setters take turns: the one whose CAS makes the count odd writes. Acquire: pairs with
     * the previous setter's release store below, so the pair it wrote is overwritten. */
    unsigned seq;
    do {
        seq = atomic_load_explicit(&hook_seq, memory_order_relaxed) & ~1u;
    } while (!atomic_compare_exchange_weak_explicit(&hook_seq, &seq, seq + 1, memory_order_acquire,
                                                    memory_order_relaxed));
    /* Release: a reader that sees either new value then sees the odd count (its acquire fence
     * in current_hook()) and retries. */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&hook_cb, cb, memory_order_relaxed);
    atomic_store_explicit(&hook_arg, arg, memory_order_relaxed);
    /* Release: pairs with the reader's acquire load of the count; the pair is complete. */
    atomic_store_explicit(&hook_seq, seq + 2, memory_order_release);
}

static eddy_log_hook_cb current_hook(void **arg)
{
    for (;;) {
        /* Acquire: pairs with the setter's final release store. */
        unsigned seq = atomic_load_explicit(&hook_seq, memory_order_acquire);
        eddy_log_hook_cb cb = atomic_load_explicit(&hook_cb, memory_order_relaxed);
        void *a = atomic_load_explicit(&hook_arg, memory_order_relaxed);
        /* Acquire: pairs with the setter's release fence; a torn read shows as a new count. */
        atomic_thread_fence(memory_order_acquire);
        if ((seq & 1) == 0 && atomic_load_explicit(&hook_seq, memory_order_relaxed) == seq) {
            *arg = a;
            return cb;
        }
    }
}

static int level_from_env(void)
{
    static const char *const names[] = {[EDDY_LOG_TRACE] = "trace",
                                        [EDDY_LOG_DEBUG] = "debug",
                                        [EDDY_LOG_INFO] = "info",
                                        [EDDY_LOG_WARN] = "warn",
                                        [EDDY_LOG_ERROR] = "error"};
    const char *v = getenv("EDDY_LOG");
    for (int l = EDDY_LOG_TRACE; v != NULL && l <= EDDY_LOG_ERROR; l++) {
        if (strcasecmp(v, names[l]) == 0) {
            return l;
        }
    }
    return EDDY_LOG_INFO;
}

eddy_log_level_t eddy_log_level(void)
{
    int t = atomic_load_explicit(&threshold, memory_order_relaxed);
    if (t == 0) {
        int undecided = 0;
        t = level_from_env();
        /* An eddy_log_set_level() meanwhile wins over the environment. */
        if (!atomic_compare_exchange_strong_explicit(&threshold, &undecided, t,
                                                     memory_order_relaxed, memory_order_relaxed)) {
            t = undecided;
        }
    }
    return (eddy_log_level_t)t;
}

void eddy_log_set_level(eddy_log_level_t level)
{
    int l = level < EDDY_LOG_TRACE   ? EDDY_LOG_TRACE
            : level > EDDY_LOG_ERROR ? EDDY_LOG_ERROR
                                     : level;
    atomic_store_explicit(&threshold, l, memory_order_relaxed);
}

bool eddy__log_enabled(eddy_log_level_t level)
{
    return level >= eddy_log_level();
}

static void deliver(eddy_log_level_t level, const char *message)
{
    void *arg;
    eddy_log_hook_cb cb = current_hook(&arg);
    if (cb == NULL) {
        cb = to_stderr;
    }
    cb(level, message, arg);
}

void eddy__log(eddy_log_level_t level, const char *fmt, ...)
{
    if (!eddy__log_enabled(level)) {
        return;
    }
    char text[EDDY__LOG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return; /* an encoding error: nothing sensible to say */
    }
    if ((size_t)n >= sizeof(text)) {
        memcpy(text + sizeof(text) - 4, "...", 4);
    }
    deliver(level, text);
}

void eddy__log_text(eddy_log_level_t level, const char *text)
{
    if (eddy__log_enabled(level)) {
        deliver(level, text);
    }
}
