/*
 * bench_ws_loadgen: the load generator of bench/ws's echo cases (run.sh drives it against each
 * WebSocket echo server in turn). One thread, epoll, non-blocking sockets once upgraded.
 *
 * C connections each upgrade on /ws (the 101 and its Sec-WebSocket-Accept checked), then keep
 * W messages in flight: masked binary frames of S bytes of payload; whenever whole echoed
 * messages come back, as many go out again, all of a read's in one send(). The W frames of a
 * connection are built once, back to back (W + 1 copies), so whatever is owed leaves from one
 * place. Every echoed message is checked: a final binary frame of S bytes holding the
 * connection's own payload (each connection's is a different window of a pseudo-random
 * pattern), so a lost, crossed or changed byte fails the run.
 *
 * Messages are counted over --seconds after --warmup. With --pid P the server's CPU time (the
 * sum of /proc/P/task/ * /schedstat, all threads, in ns; ws_client.h) is read at both ends of
 * that window, giving CPU time per message, and its VmRSS and VmHWM (/proc/P/status) at the
 * end.
 *
 *   bench_ws_loadgen [--host A] [--port N] [--conns C] [--window W] [--size S]
 *                    [--seconds T] [--warmup W] [--cpu N] [--pid P]
 *
 * Prints one line: {"loadgen":"ws",...,"msgs_per_s":...,"cpu_ns_per_msg":...,
 * "server_rss_kb":...,"server_hwm_kb":...}. Exit status 1 on any error.
 */
#include "ws_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>

#define MAX_CONNS 4096
#define MAX_WINDOW 256
#define MAX_SIZE (1 << 20) /* eddy's and Netty's default largest frame */
#define RECV_BUF (1 << 18)
#define PAT_PERIOD 65521 /* a prime, so windows of different offsets do not line up */

typedef struct conn_s {
    int fd;
    uint8_t *frames;        /* window + 1 copies of this connection's frame, back to back */
    const uint8_t *payload; /* what every echo must hold */
    uint64_t sent;          /* bytes sent */
    uint64_t owed;          /* bytes queued, not yet sent */
    uint64_t done;          /* whole messages back */
    wsc_parser_t ps;
    bool want_out;
} conn_t;

static const char *host = "127.0.0.1";
static int port = 8008;
static int nconns = 64;
static int window = 16;
static int size = 64;
static double seconds = 2;
static double warmup = 0.5;
static int cpu = -1;
static long server_pid = -1;

static size_t frame_len;
static int ep;
static uint64_t msgs_counted;
static bool measuring;

static void set_events(conn_t *c, int idx, unsigned events, int op)
{
    struct epoll_event ev = {.events = events, .data.u32 = (uint32_t)idx};
    if (epoll_ctl(ep, op, c->fd, &ev) != 0)
        wsc_die("epoll_ctl");
}

/* Sends what is owed until done or the socket is full; EPOLLOUT only while something is left.
 * owed <= window frames, and the copies start at a frame boundary, so the bytes from the
 * current offset on are always there in one piece. */
static void flush_conn(conn_t *c, int idx)
{
    while (c->owed > 0) {
        ssize_t w = send(c->fd, c->frames + c->sent % frame_len, (size_t)c->owed,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            wsc_die("send");
        }
        c->sent += (uint64_t)w;
        c->owed -= (uint64_t)w;
    }
    bool want = c->owed > 0;
    if (want != c->want_out) {
        c->want_out = want;
        set_events(c, idx, EPOLLIN | (want ? EPOLLOUT : 0u), EPOLL_CTL_MOD);
    }
}

static void on_bytes(void *arg, uint64_t off, const uint8_t *p, size_t n)
{
    conn_t *c = arg;
    if (off + n > (uint64_t)size || memcmp(p, c->payload + off, n) != 0)
        wsc_fail("a wrong byte was echoed");
}

static void on_frame(void *arg, uint8_t opcode, uint64_t len)
{
    conn_t *c = arg;
    if (opcode != 0x2 || len != (uint64_t)size)
        wsc_fail("the echo is not the binary message sent");
    c->done++;
}

/* Reads once (level-triggered), checks the frames, sends one frame per message completed. */
static void read_conn(conn_t *c, int idx, uint8_t *in)
{
    ssize_t r = recv(c->fd, in, RECV_BUF, MSG_DONTWAIT);
    if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r == 0)
            wsc_fail("the server closed a connection");
        wsc_die("recv");
    }
    uint64_t before = c->done;
    wsc_feed(&c->ps, in, (size_t)r, on_bytes, on_frame, c);
    uint64_t done = c->done - before;
    if (done == 0)
        return;
    if (measuring)
        msgs_counted += done;
    c->owed += done * frame_len;
    flush_conn(c, idx);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_ws_loadgen [--host A] [--port N] [--conns C] [--window W] "
               "[--size S]\n"
               "                        [--seconds T] [--warmup W] [--cpu N] [--pid P]\n");
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (v == NULL) {
            usage(stderr);
            exit(2);
        }
        i++;
        if (strcmp(a, "--host") == 0) {
            host = v;
        } else if (strcmp(a, "--port") == 0 && atoi(v) > 0 && atoi(v) < 65536) {
            port = atoi(v);
        } else if (strcmp(a, "--conns") == 0 && atoi(v) >= 1 && atoi(v) <= MAX_CONNS) {
            nconns = atoi(v);
        } else if (strcmp(a, "--window") == 0 && atoi(v) >= 1 && atoi(v) <= MAX_WINDOW) {
            window = atoi(v);
        } else if (strcmp(a, "--size") == 0 && atoi(v) >= 1 && atoi(v) <= MAX_SIZE) {
            size = atoi(v);
        } else if (strcmp(a, "--seconds") == 0 && atof(v) > 0) {
            seconds = atof(v);
        } else if (strcmp(a, "--warmup") == 0 && atof(v) >= 0) {
            warmup = atof(v);
        } else if (strcmp(a, "--cpu") == 0 && atoi(v) >= 0) {
            cpu = atoi(v);
        } else if (strcmp(a, "--pid") == 0 && atol(v) > 0) {
            server_pid = atol(v);
        } else {
            usage(stderr);
            exit(2);
        }
    }
}

int main(int argc, char **argv)
{
    wsc_name = "bench_ws_loadgen";
    parse_args(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0)
            wsc_die("sched_setaffinity");
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        wsc_fail("--host must be a numeric IPv4 address");

    uint8_t *pattern = malloc(PAT_PERIOD + MAX_SIZE);
    uint8_t *in = malloc(RECV_BUF);
    conn_t *conns = calloc((size_t)nconns, sizeof(*conns));
    if (pattern == NULL || in == NULL || conns == NULL)
        wsc_fail("out of memory");
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < PAT_PERIOD + MAX_SIZE; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        pattern[i] = i < PAT_PERIOD ? (uint8_t)(seed >> 32) : pattern[i - PAT_PERIOD];
    }
    frame_len = (size_t)size + (size < 126 ? 6 : size <= 0xffff ? 8 : 14);

    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        wsc_die("epoll_create1");
    for (int i = 0; i < nconns; i++) {
        conn_t *c = &conns[i];
        c->payload = pattern + (size_t)i * 1009 % PAT_PERIOD;
        c->frames = malloc(frame_len * (size_t)(window + 1));
        if (c->frames == NULL)
            wsc_fail("out of memory");
        wsc_frame(c->frames, c->payload, (size_t)size, 0x9e3779b9u * (uint32_t)(i + 1));
        for (int k = 1; k <= window; k++)
            memcpy(c->frames + (size_t)k * frame_len, c->frames, frame_len);
        c->fd = wsc_open(&addr, 0x2545f4914f6cdd1dull + (uint64_t)i * 7919, false);
        if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) != 0)
            wsc_die("fcntl");
    }
    /* All upgraded before the first message, so no connection starts ahead of the rest. */
    for (int i = 0; i < nconns; i++) {
        set_events(&conns[i], i, EPOLLIN, EPOLL_CTL_ADD);
        conns[i].owed = (uint64_t)window * frame_len;
        flush_conn(&conns[i], i);
    }

    uint64_t t0 = wsc_now_ns();
    uint64_t t_measure = t0 + (uint64_t)(warmup * 1e9), t_begin = 0, t_end = 0;
    double srv0 = -1;
    struct timespec cpu_ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu_ts);
    double cli0 = 0;
    struct epoll_event evs[256];
    for (;;) {
        uint64_t now = wsc_now_ns();
        if (!measuring && now >= t_measure) {
            measuring = true;
            t_begin = now;
            t_end = now + (uint64_t)(seconds * 1e9);
            srv0 = wsc_proc_cpu_s(server_pid);
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu_ts);
            cli0 = (double)cpu_ts.tv_sec + (double)cpu_ts.tv_nsec * 1e-9;
        } else if (measuring && now >= t_end) {
            break;
        }
        int n = epoll_wait(ep, evs, 256, 100);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            wsc_die("epoll_wait");
        }
        for (int k = 0; k < n; k++) {
            int idx = (int)evs[k].data.u32;
            conn_t *c = &conns[idx];
            if (evs[k].events & EPOLLOUT)
                flush_conn(c, idx);
            if (evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                read_conn(c, idx, in);
        }
    }
    uint64_t t_stop = wsc_now_ns();
    double srv1 = wsc_proc_cpu_s(server_pid);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu_ts);
    double cli1 = (double)cpu_ts.tv_sec + (double)cpu_ts.tv_nsec * 1e-9;
    long rss = wsc_proc_status_kb(server_pid, "VmRSS");
    long hwm = wsc_proc_status_kb(server_pid, "VmHWM");
    for (int i = 0; i < nconns; i++) {
        close(conns[i].fd);
        free(conns[i].frames);
    }
    close(ep);

    double secs = (double)(t_stop - t_begin) * 1e-9;
    double srv = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
    double msgs = (double)msgs_counted;
    printf("{\"loadgen\":\"ws\",\"conns\":%d,\"window\":%d,\"size\":%d,\"seconds\":%.3f,"
           "\"msgs\":%llu,\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f,\"server_cpu_s\":%.3f,"
           "\"cpu_ns_per_msg\":%.1f,\"client_cpu_util\":%.3f,\"server_rss_kb\":%ld,"
           "\"server_hwm_kb\":%ld}\n",
           nconns, window, size, secs, (unsigned long long)msgs_counted, msgs / secs,
           msgs * size / secs / 1e6, srv, srv >= 0 && msgs > 0 ? srv * 1e9 / msgs : -1,
           (cli1 - cli0) / secs, rss, hwm);
    free(conns);
    free(in);
    free(pattern);
    return msgs_counted > 0 ? 0 : 1;
}
