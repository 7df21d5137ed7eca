/*
 * Leak detection, after Netty's ResourceLeakDetector at level PARANOID: every buffer records
 * the stack that allocated it and its last touches; buffers never released are reported at
 * exit or on demand. Released buffers wait in a quarantine instead of being recycled, so a
 * release below zero finds the buffer's trail and is reported with it. Reports go to the log
 * hook (common.h), one message a buffer, unless eddy_leak_report() is given a file.
 */
#include "buffer/internal.h"
#include "buffer/layer.h"
#include "eddy_config.h"

#include <stdlib.h>
#include <string.h>
#ifdef EDDY_HAVE_EXECINFO
#include <execinfo.h>
#endif

#define STACK_DEPTH 24
#define TOUCHES 6
/* Freed headers kept to recognise a double release; the oldest go back to malloc. */
#define QUARANTINE_MAX 4096

typedef struct trail_s {
    const char *what;
    int depth;
    void *stack[STACK_DEPTH];
} trail_t;

struct eddy__leak_rec_s {
    eddy_buf_t *buf;
    size_t capacity;
    trail_t alloc;
    trail_t touch[TOUCHES]; /* a ring: touch[ntouch % TOUCHES] is the next */
    unsigned ntouch;
    struct eddy__leak_rec_s *prev, *next;
};
typedef struct eddy__leak_rec_s rec_t;

#ifdef EDDY_LEAK_PARANOID_DEFAULT
_Atomic bool eddy__leak_paranoid = true;
#else
_Atomic bool eddy__leak_paranoid = false;
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static rec_t *live;              /* tracked buffers not yet freed */
static rec_t *q_head, *q_tail;   /* the quarantine, oldest first */
static size_t q_len;
static _Atomic uint64_t misuses;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void capture(trail_t *tr, const char *what)
{
    tr->what = what;
#ifdef EDDY_HAVE_EXECINFO
    tr->depth = backtrace(tr->stack, STACK_DEPTH);
#else
    tr->depth = 0;
#endif
}

static void print_trail(FILE *out, const trail_t *tr, int skip)
{
#ifdef EDDY_HAVE_EXECINFO
    char **names = backtrace_symbols(tr->stack, tr->depth);
    for (int i = skip; i < tr->depth; i++) {
        fprintf(out, "        %s\n", names != NULL ? names[i] : "?");
    }
    free(names);
#else
    fprintf(out, "        (no stack traces on this platform)\n");
#endif
}

/* The frames of capture() and of the eddy function that called it are not interesting. */
#define SKIP_FRAMES 2

static void print_rec(FILE *out, const rec_t *r)
{
    fprintf(out, "    allocated (capacity %zu) at:\n", r->capacity);
    print_trail(out, &r->alloc, SKIP_FRAMES);
    unsigned n = r->ntouch < TOUCHES ? r->ntouch : TOUCHES;
    for (unsigned k = 0; k < n; k++) {
        const trail_t *tr = &r->touch[(r->ntouch - 1 - k) % TOUCHES];
        fprintf(out, "    touch #%u (%s) at:\n", r->ntouch - k, tr->what);
        print_trail(out, tr, SKIP_FRAMES);
    }
    if (r->ntouch > TOUCHES) {
        fprintf(out, "    (%u older touches not kept)\n", r->ntouch - TOUCHES);
    }
}

/* A leaked buffer's report; prefix "eddy: " in a file, "" for the hook (which adds it). */
static void print_leak(FILE *out, const rec_t *r, const char *prefix)
{
    fprintf(out, "%sLEAK: buffer %p was not released (reference count %u)\n", prefix,
            (void *)r->buf, eddy_buf_refcnt(r->buf));
    print_rec(out, r);
}

/*
 * Reports are written into memory under the lock (which keeps the records from going) and
 * logged after it: the hook may allocate buffers, which takes the lock. One memory stream
 * holds them all, each ended by a NUL; each is one message, without its final newline.
 */
static void log_reports(char *text, size_t len)
{
    for (size_t at = 0; at < len;) {
        char *m = text + at;
        size_t n = strlen(m);
        at += n + 1;
        if (n > 0 && m[n - 1] == '\n') {
            m[n - 1] = '\0';
        }
        eddy__log_text(EDDY_LOG_ERROR, m);
    }
}

static void report_at_exit(void)
{
    eddy_leak_report(NULL);
}

static void register_exit(void)
{
    atexit(report_at_exit);
}

__attribute__((constructor)) static void leak_init(void)
{
    const char *level = getenv("EDDY_LEAK_DETECTION");
    if (level != NULL && strcmp(level, "paranoid") == 0) {
        eddy_leak_set_paranoid(true);
    } else if (atomic_load(&eddy__leak_paranoid)) {
        pthread_once(&exit_once, register_exit);
    }
}

void eddy_leak_set_paranoid(bool on)
{
    if (on) {
        pthread_once(&exit_once, register_exit);
    }
    atomic_store(&eddy__leak_paranoid, on);
}

bool eddy_leak_is_paranoid(void)
{
    return atomic_load(&eddy__leak_paranoid);
}

void eddy__leak_track(eddy_buf_t *b)
{
    rec_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return; /* tracking is best effort; the buffer works without it */
    }
    r->buf = b;
    r->capacity = b->_cap;
    capture(&r->alloc, "allocated");
    pthread_mutex_lock(&lock);
    r->next = live;
    if (live != NULL) {
        live->prev = r;
    }
    live = r;
    b->_leak = r;
    pthread_mutex_unlock(&lock);
}

void eddy__leak_record(eddy_buf_t *b, const char *what)
{
    trail_t tr;
    capture(&tr, what);
    pthread_mutex_lock(&lock);
    rec_t *r = b->_leak;
    if (r != NULL) {
        r->touch[r->ntouch % TOUCHES] = tr;
        r->ntouch++;
    }
    pthread_mutex_unlock(&lock);
}

bool eddy__leak_untrack(eddy_buf_t *b)
{
    trail_t tr;
    capture(&tr, "released to zero");
    pthread_mutex_lock(&lock);
    rec_t *r = b->_leak;
    r->touch[r->ntouch % TOUCHES] = tr;
    r->ntouch++;
    if (r->prev != NULL) {
        r->prev->next = r->next;
    } else {
        live = r->next;
    }
    if (r->next != NULL) {
        r->next->prev = r->prev;
    }
    b->_flags |= EDDY__BUF_FREED;
    r->prev = q_tail;
    r->next = NULL;
    if (q_tail != NULL) {
        q_tail->next = r;
    } else {
        q_head = r;
    }
    q_tail = r;
    rec_t *evict = NULL;
    if (++q_len > QUARANTINE_MAX) {
        evict = q_head;
        q_head = evict->next;
        q_head->prev = NULL;
        q_len--;
    }
    pthread_mutex_unlock(&lock);
    if (evict != NULL) {
        free(evict->buf);
        free(evict);
    }
    return true;
}

void eddy__leak_misuse(eddy_buf_t *b, const char *what)
{
    atomic_fetch_add(&misuses, 1);
    pthread_mutex_lock(&lock);
    rec_t *r = b->_leak;
    if (r != NULL && (b->_flags & EDDY__BUF_FREED)) {
        trail_t tr;
        capture(&tr, what);
        char *text = NULL;
        size_t len = 0;
        FILE *out = eddy__log_enabled(EDDY_LOG_ERROR) ? open_memstream(&text, &len) : NULL;
        if (out != NULL) {
            fprintf(out, "buffer %p: %s when its reference count is already zero\n", (void *)b,
                    what);
            fprintf(out, "    this %s at:\n", what);
            print_trail(out, &tr, SKIP_FRAMES);
            print_rec(out, r);
            fputc('\0', out);
        }
        pthread_mutex_unlock(&lock);
        if (out != NULL && fclose(out) == 0) {
            log_reports(text, len);
        } else {
            eddy__log(EDDY_LOG_ERROR, "buffer %p: %s when its reference count is already zero",
                      (void *)b, what);
        }
        free(text);
        return;
    }
    pthread_mutex_unlock(&lock);
#ifndef NDEBUG
    static _Atomic bool warned;
    if (!atomic_exchange(&warned, true)) {
        eddy__log(EDDY_LOG_ERROR,
                  "buffer %p: %s when its reference count is already zero "
                  "(EDDY_LEAK_DETECTION=paranoid shows its trail)",
                  (void *)b, what);
    }
#endif
}

void eddy__leak_shutdown(void)
{
    pthread_mutex_lock(&lock);
    rec_t *r = q_head;
    q_head = q_tail = NULL;
    q_len = 0;
    pthread_mutex_unlock(&lock);
    while (r != NULL) {
        rec_t *next = r->next;
        free(r->buf);
        free(r);
        r = next;
    }
}

uint64_t eddy_leak_misuse_count(void)
{
    return atomic_load(&misuses);
}

size_t eddy_leak_report(FILE *file)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = file;
    if (file == NULL && eddy__log_enabled(EDDY_LOG_ERROR)) {
        out = open_memstream(&text, &len);
    }
    size_t n = 0;
    pthread_mutex_lock(&lock);
    for (rec_t *r = live; r != NULL; r = r->next) {
        if (out != NULL) {
            print_leak(out, r, file != NULL ? "eddy: " : "");
            if (file == NULL) {
                fputc('\0', out);
            }
        }
        n++;
    }
    pthread_mutex_unlock(&lock);
    if (file != NULL) {
        fflush(file);
    } else if (out != NULL && fclose(out) == 0) {
        log_reports(text, len);
    } else if (n > 0) {
        eddy__log(EDDY_LOG_ERROR, "LEAK: %zu buffers were not released (no memory for the report)",
                  n);
    }
    free(text);
    return n;
}
