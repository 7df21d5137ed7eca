/*
 * The core the load generators share (bench/echo, bench/udp, bench/ws): the options every one
 * takes, failing with the program's name, pinning, the server's address, the byte pattern
 * whose windows the echoes are checked against, the measured window (warm-up, then the
 * server's and our own CPU time over the window), the epoll loop that runs until the window
 * closes, and non-blocking stream connections that send what they owe. What a load generator
 * sends, checks and prints stays in its own folder. Part of eddy_bench_support
 * (bench/CMakeLists.txt); benchmarks only.
 */
#ifndef EDDY_BENCH_SUPPORT_LOADGEN_H
#define EDDY_BENCH_SUPPORT_LOADGEN_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The program's name in its messages; each load generator sets it first thing. */
extern const char *bench_lg_name;

/* Prints "name: what: strerror(errno)" and exits 1. */
void bench_die(const char *what) __attribute__((noreturn));
/* Prints "name: what" and exits 1. */
void bench_fail(const char *what) __attribute__((noreturn));

/* The options every load generator takes. */
typedef struct bench_lg_opts_s {
    const char *host; /* --host, a numeric IPv4 address */
    int port;         /* --port */
    double seconds;   /* --seconds measured */
    double warmup;    /* --warmup seconds before the window opens */
    int cpu;          /* --cpu to pin to, or -1 */
    long pid;         /* --pid of the server, or -1 */
} bench_lg_opts_t;

/* What an option handler did with argument a (and v, the one after it, NULL at the end). */
enum { BENCH_OPT_NONE, BENCH_OPT_FLAG, BENCH_OPT_VALUE, BENCH_OPT_BAD };

/*
 * Parses argv into o (which holds the defaults): --help prints usage to stdout and exits 0;
 * each argument goes first to opt, the program's own options, which returns BENCH_OPT_FLAG
 * when it took a alone, BENCH_OPT_VALUE when it took a and v, BENCH_OPT_NONE when a is not
 * one of its own or v is not valid for it (BENCH_OPT_BAD: a is its own, or refused, and v is
 * not valid: no common option may take it); then to the common ones (--host, --port 1-65535,
 * --seconds > 0, --warmup >= 0, --cpu >= 0, --pid > 0). Anything else prints usage to stderr
 * and exits 2.
 */
void bench_lg_parse(int argc, char **argv, bench_lg_opts_t *o,
                    int (*opt)(const char *a, const char *v), void (*usage)(FILE *f));

/* An integer option of a load generator: its name, its range, where its value goes. */
typedef struct bench_int_opt_s {
    const char *name;
    int min, max;
    int *out;
} bench_int_opt_t;

/* For an option handler: when a is one of the n options of table and v (not NULL) is in its
 * range, stores it and returns BENCH_OPT_VALUE; else BENCH_OPT_NONE. */
int bench_opt_int(const bench_int_opt_t *table, int n, const char *a, const char *v);

/* Pins the process to cpu (dies when it cannot); nothing when cpu < 0. */
void bench_lg_pin(int cpu);

/* o's host and port as an address; fails unless the host is a numeric IPv4 address. */
struct sockaddr_in bench_lg_addr(const bench_lg_opts_t *o);

/* A byte pattern of period + extra bytes: period pseudo-random bytes (xorshift64*, a fixed
 * seed) and the first extra of them again, so a window of up to extra bytes from any offset
 * below the period is there in one piece. Fails when out of memory; free() it. */
uint8_t *bench_pattern_new(size_t period, size_t extra);

/*
 * The measured window: it opens when the warm-up after start ends (the server's CPU time and
 * ours read then), and closes after o->seconds (read again). The server's CPU time comes from
 * server_cpu_s (bench_proc_cpu_s, or bench_proc_sched_cpu_s for windows of a second or two).
 * A window given the count of what it measures (bench_window_count) stays open past its
 * length until that count is above zero, for at most BENCH_WINDOW_EMPTY_MAX_S more: a short
 * window on a loaded machine (a smoke run, a JVM still compiling) would otherwise measure
 * nothing. Rates divide by the seconds actually measured, so the extension is accounted for.
 */
#define BENCH_WINDOW_EMPTY_MAX_S 20.0

typedef struct bench_window_s {
    long pid;
    double (*server_cpu_s)(long pid);
    uint64_t t_measure, t_begin, t_end, t_stop; /* monotonic ns */
    bool measuring;                             /* the window is open: count what comes back */
    double srv0, srv1, cli0, cli1;              /* CPU seconds at both ends */
    const uint64_t *count;                      /* what it measures; NULL: time alone */
} bench_window_t;

void bench_window_init(bench_window_t *w, const bench_lg_opts_t *o, uint64_t start_ns,
                       double (*server_cpu_s)(long pid));
/* Keep the window open until *count (the caller's count of what it measured, updated while
 * w->measuring) is above zero; see above. */
void bench_window_count(bench_window_t *w, const uint64_t *count);
/* The window closed having measured nothing: says so on stderr, naming what (the counted
 * unit, "messages") and how long it waited, and returns 1 (the load generator's exit
 * status); returns 0 when something was measured. */
int bench_window_verdict(const bench_window_t *w, const char *what);
/* Opens the window when its time has come; false once it is over (closed: its figures read). */
bool bench_window_tick(bench_window_t *w, uint64_t now);
/* Seconds measured, the server's CPU seconds over them (-1: unknown) and our CPU's share. */
double bench_window_seconds(const bench_window_t *w);
double bench_window_server_cpu_s(const bench_window_t *w);
double bench_window_client_util(const bench_window_t *w);

/*
 * Runs epoll set ep until w closes: on_tick(arg, now) before each wait (may be NULL), then
 * epoll_wait for up to timeout_ms, then on_event(arg, idx, events) per ready descriptor
 * (idx: the epoll data's u32).
 */
void bench_lg_run(bench_window_t *w, int ep, int timeout_ms,
                  void (*on_event)(void *arg, uint32_t idx, uint32_t events),
                  void (*on_tick)(void *arg, uint64_t now), void *arg);

/* epoll_ctl(ep, op, fd) with events and idx as the data; dies on failure. */
void bench_epoll_set(int ep, int op, int fd, uint32_t idx, uint32_t events);

/* A non-blocking stream connection and the bytes it owes the server. */
typedef struct bench_stream_s {
    int fd;
    uint64_t sent; /* bytes sent */
    uint64_t owed; /* bytes queued, not yet sent */
    bool want_out; /* EPOLLOUT is asked for */
} bench_stream_t;

/* Where the bytes from s->sent on are, and how many of them (at most s->owed) lie there in
 * one piece. */
typedef const uint8_t *(*bench_stream_src_fn)(bench_stream_t *s, size_t *len);

/* Sends what s owes until done or the socket is full; EPOLLOUT (in ep, as idx) only while
 * something is left. */
void bench_stream_flush(int ep, bench_stream_t *s, uint32_t idx, bench_stream_src_fn src);

/* One recv() of up to cap bytes on non-blocking fd: the count, 0 when nothing is there now;
 * fails when the server closed the connection, dies on an error. */
size_t bench_stream_recv(int fd, uint8_t *in, size_t cap);

#endif /* EDDY_BENCH_SUPPORT_LOADGEN_H */
