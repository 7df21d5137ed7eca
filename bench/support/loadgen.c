/*
 * The load generators' shared core (loadgen.h): options, failing, pinning, the pattern, the
 * measured window, the epoll loop and stream connections.
 */
#include "support/loadgen.h"

#include "support/bench_util.h"
#include "support/proc_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

const char *bench_lg_name = "loadgen";

void bench_die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", bench_lg_name, what, strerror(errno));
    exit(1);
}

void bench_fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", bench_lg_name, what);
    exit(1);
}

/* Takes a common option; false when a is none of them or v is not valid for it. */
static bool common_opt(bench_lg_opts_t *o, const char *a, const char *v)
{
    if (strcmp(a, "--host") == 0) {
        o->host = v;
    } else if (strcmp(a, "--port") == 0 && atoi(v) > 0 && atoi(v) < 65536) {
        o->port = atoi(v);
    } else if (strcmp(a, "--seconds") == 0 && atof(v) > 0) {
        o->seconds = atof(v);
    } else if (strcmp(a, "--warmup") == 0 && atof(v) >= 0) {
        o->warmup = atof(v);
    } else if (strcmp(a, "--cpu") == 0 && atoi(v) >= 0) {
        o->cpu = atoi(v);
    } else if (strcmp(a, "--pid") == 0 && atol(v) > 0) {
        o->pid = atol(v);
    } else {
        return false;
    }
    return true;
}

void bench_lg_parse(int argc, char **argv, bench_lg_opts_t *o,
                    int (*opt)(const char *a, const char *v), void (*usage)(FILE *f))
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        int took = opt(a, v);
        if (took == BENCH_OPT_FLAG)
            continue;
        if (took == BENCH_OPT_VALUE) {
            i++;
            continue;
        }
        if (took == BENCH_OPT_BAD || v == NULL || !common_opt(o, a, v)) {
            usage(stderr);
            exit(2);
        }
        i++;
    }
}

int bench_opt_int(const bench_int_opt_t *table, int n, const char *a, const char *v)
{
    for (int i = 0; v != NULL && i < n; i++) {
        if (strcmp(a, table[i].name) == 0 && atoi(v) >= table[i].min && atoi(v) <= table[i].max) {
            *table[i].out = atoi(v);
            return BENCH_OPT_VALUE;
        }
    }
    return BENCH_OPT_NONE;
}

void bench_lg_pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        bench_die("sched_setaffinity");
}

struct sockaddr_in bench_lg_addr(const bench_lg_opts_t *o)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1)
        bench_fail("--host must be a numeric IPv4 address");
    return addr;
}

uint8_t *bench_pattern_new(size_t period, size_t extra)
{
    uint8_t *p = malloc(period + extra);
    if (p == NULL)
        bench_fail("out of memory");
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < period + extra; i++)
        p[i] = i < period ? (uint8_t)bench_xorshift64s(&seed) : p[i - period];
    return p;
}

void bench_window_init(bench_window_t *w, const bench_lg_opts_t *o, uint64_t start_ns,
                       double (*server_cpu_s)(long pid))
{
    *w = (bench_window_t){.pid = o->pid, .server_cpu_s = server_cpu_s, .srv0 = -1, .srv1 = -1};
    w->t_measure = start_ns + (uint64_t)(o->warmup * 1e9);
    /* Kept as a length until the window opens. */
    w->t_end = (uint64_t)(o->seconds * 1e9);
}

void bench_window_count(bench_window_t *w, const uint64_t *count)
{
    w->count = count;
}

/* Past its length: a counted window that measured nothing yet stays open a while longer. */
static bool bench_window_wants_more(const bench_window_t *w, uint64_t now)
{
    return w->count != NULL && *w->count == 0 &&
           now < w->t_end + (uint64_t)(BENCH_WINDOW_EMPTY_MAX_S * 1e9);
}

int bench_window_verdict(const bench_window_t *w, const char *what)
{
    if (w->count == NULL || *w->count > 0)
        return 0;
    fprintf(stderr, "%s: no %s came back in the %.1f s measured (the window waited %.0f s past "
                    "its length for one)\n",
            bench_lg_name, what, bench_window_seconds(w), BENCH_WINDOW_EMPTY_MAX_S);
    return 1;
}

bool bench_window_tick(bench_window_t *w, uint64_t now)
{
    if (!w->measuring && w->t_stop == 0 && now >= w->t_measure) {
        w->measuring = true;
        w->t_begin = now;
        w->t_end += now;
        w->srv0 = w->server_cpu_s(w->pid);
        w->cli0 = bench_process_cpu_s();
    } else if (w->measuring && now >= w->t_end && !bench_window_wants_more(w, now)) {
        w->measuring = false;
        w->t_stop = bench_now_ns();
        w->srv1 = w->server_cpu_s(w->pid);
        w->cli1 = bench_process_cpu_s();
        return false;
    }
    return true;
}

double bench_window_seconds(const bench_window_t *w)
{
    return (double)(w->t_stop - w->t_begin) * 1e-9;
}

double bench_window_server_cpu_s(const bench_window_t *w)
{
    return w->srv0 >= 0 && w->srv1 >= 0 ? w->srv1 - w->srv0 : -1;
}

double bench_window_client_util(const bench_window_t *w)
{
    return (w->cli1 - w->cli0) / bench_window_seconds(w);
}

void bench_lg_run(bench_window_t *w, int ep, int timeout_ms,
                  void (*on_event)(void *arg, uint32_t idx, uint32_t events),
                  void (*on_tick)(void *arg, uint64_t now), void *arg)
{
    struct epoll_event evs[256];
    for (;;) {
        uint64_t now = bench_now_ns();
        if (!bench_window_tick(w, now))
            return;
        if (on_tick != NULL)
            on_tick(arg, now);
        int n = epoll_wait(ep, evs, 256, timeout_ms);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            bench_die("epoll_wait");
        }
        for (int k = 0; k < n; k++)
            on_event(arg, evs[k].data.u32, evs[k].events);
    }
}

void bench_epoll_set(int ep, int op, int fd, uint32_t idx, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.u32 = idx};
    if (epoll_ctl(ep, op, fd, &ev) != 0)
        bench_die("epoll_ctl");
}

void bench_stream_flush(int ep, bench_stream_t *s, uint32_t idx, bench_stream_src_fn src)
{
    while (s->owed > 0) {
        size_t len;
        const uint8_t *p = src(s, &len);
        ssize_t w = send(s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            bench_die("send");
        }
        s->sent += (uint64_t)w;
        s->owed -= (uint64_t)w;
    }
    bool want = s->owed > 0;
    if (want != s->want_out) {
        s->want_out = want;
        bench_epoll_set(ep, EPOLL_CTL_MOD, s->fd, idx, EPOLLIN | (want ? EPOLLOUT : 0u));
    }
}

size_t bench_stream_recv(int fd, uint8_t *in, size_t cap)
{
    ssize_t r = recv(fd, in, cap, MSG_DONTWAIT);
    if (r > 0)
        return (size_t)r;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (r == 0)
        bench_fail("the server closed a connection");
    bench_die("recv");
}
