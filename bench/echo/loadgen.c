/*
 * bench_echo_loadgen: the load generator of bench/echo (run.sh drives it against each echo
 * server in turn). One thread, epoll, non-blocking sockets.
 *
 * Pipelined mode: C connections, each keeping D messages of S bytes in flight; whenever a
 * whole message comes back, the next one goes out. Churn mode (--churn): C connections at a
 * time each connect, send D messages of S bytes, wait for every byte back and close, then
 * start over with a new connection.
 *
 * Every echoed byte is checked: connection i's byte stream is a fixed pseudo-random pattern
 * read from an offset of its own, so a lost, duplicated, reordered or crossed byte fails the
 * run. Latency is from the moment a message is queued for sending (churn: from connect())
 * to the moment its last byte is back, in a log-linear histogram (about 3% resolution).
 *
 * Idle mode (--idle N, needs --pid): N connections each echo one message of S bytes, so the
 * server has accepted and served every one, then stay open and quiet; the server's resident
 * memory (VmRSS) before the first and after the last, settled, gives its bytes per idle
 * connection. The connections close with a reset (no TIME_WAIT left behind).
 *
 * With --pid P, the server's CPU time (utime + stime of /proc/P/stat, all threads) is read at
 * the start and end of the measured window, giving CPU time per message, and its peak
 * resident memory (VmHWM of /proc/P/status) at the end.
 *
 *   bench_echo_loadgen [--host A] [--port N] [--conns C] [--depth D] [--size S]
 *                      [--seconds T] [--warmup W] [--churn] [--rst] [--cpu N] [--pid P]
 *   bench_echo_loadgen --idle N --pid P [--host A] [--port N] [--size S] [--cpu N]
 *
 * Prints one line: {"loadgen":"echo",...,"msgs_per_s":...,"mb_per_s":...,"p50_us":...,
 * "p99_us":...,"p999_us":...,"cpu_ns_per_msg":...,"server_hwm_kb":...}; idle mode
 * {"loadgen":"echo","mode":"idle",...,"bytes_per_conn":...}. Exit status 1 on any error
 * (wrong byte, reset...).
 */
#include "support/bench_util.h"
#include "support/hist.h"
#include "support/loadgen.h"
#include "support/proc_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 4096
#define MAX_IDLE 60000
#define MAX_DEPTH 1024
#define MAX_SIZE (1 << 20)
#define CHUNK 65536      /* largest single send() and recv() */
#define PAT_PERIOD 65521 /* a prime, so streams of different offsets do not line up */

enum { CONN_IDLE, CONN_CONNECTING, CONN_OPEN };

typedef struct conn_s {
    bench_stream_t io; /* first: the stream's source finds its connection */
    int state;
    uint64_t base;     /* offset of this stream in the pattern */
    uint64_t received; /* bytes received */
    uint64_t t_start;  /* churn: when connect() was called */
    uint64_t *stamps;  /* ring of queue times of the messages in flight (depth entries) */
    uint32_t head, count;
} conn_t;

static bench_lg_opts_t opts = {
    .host = "127.0.0.1", .port = 8007, .seconds = 2, .warmup = 0.5, .cpu = -1, .pid = -1};
static int nconns = 64;
static int depth = 16;
static int size = 64;
static bool churn;
static bool rst;
static int idle_conns; /* --idle N: idle mode */

static uint8_t *pattern; /* PAT_PERIOD + CHUNK bytes: any offset below the period has CHUNK */
static bench_hist_t hist;
static uint64_t msgs_done, bytes_done, conns_done;
static bench_window_t win;
static int ep;
static struct sockaddr_in addr;
static uint64_t next_base;
static uint8_t *in;

static void record(uint64_t latency_ns)
{
    if (win.measuring)
        bench_hist_add(&hist, latency_ns);
}

/* The owed bytes of a connection's stream: its pattern from where it has got to. */
static const uint8_t *owed_bytes(bench_stream_t *s, size_t *len)
{
    const conn_t *c = (const conn_t *)s;
    *len = s->owed < CHUNK ? (size_t)s->owed : CHUNK;
    return pattern + (s->sent + c->base) % PAT_PERIOD;
}

static void flush_conn(conn_t *c, int idx)
{
    bench_stream_flush(ep, &c->io, (uint32_t)idx, owed_bytes);
}

/* Queue n more messages, stamped now. */
static void queue_msgs(conn_t *c, uint64_t n, uint64_t now)
{
    for (uint64_t i = 0; i < n; i++) {
        c->stamps[(c->head + c->count) % (uint32_t)depth] = now;
        c->count++;
    }
    c->io.owed += n * (uint64_t)size;
}

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Churn: start a connection in slot idx. */
static void churn_start(conn_t *c, int idx)
{
    c->io.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->io.fd < 0)
        bench_die("socket");
    if (rst) {
        /* close() sends a reset and leaves no TIME_WAIT behind. */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(c->io.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    set_nodelay(c->io.fd);
    if ((ntohl(addr.sin_addr.s_addr) >> 24) == 127) {
        /* Clients close first and keep TIME_WAIT for a minute: from one source address the
         * 28k ephemeral ports run out within seconds and connect() then spends its time
         * searching for one to reuse (the first round was twice as fast as later ones). On
         * loopback, spread the sources over 127.0.1.1-250; the port is picked at connect(). */
        static uint32_t next_src;
        int one = 1;
        setsockopt(c->io.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        struct sockaddr_in src = {.sin_family = AF_INET};
        src.sin_addr.s_addr = htonl(0x7f000101u + next_src);
        next_src = (next_src + 1) % 250;
        if (bind(c->io.fd, (const struct sockaddr *)&src, sizeof(src)) != 0)
            bench_die("bind");
    }
    c->base = next_base;
    next_base = (next_base + 1009) % PAT_PERIOD;
    c->io.sent = c->received = c->io.owed = 0;
    c->head = c->count = 0;
    c->t_start = bench_now_ns();
    c->io.want_out = true;
    int r = connect(c->io.fd, (const struct sockaddr *)&addr, sizeof(addr));
    if (r != 0 && errno != EINPROGRESS)
        bench_die("connect");
    c->state = CONN_CONNECTING;
    bench_epoll_set(ep, EPOLL_CTL_ADD, c->io.fd, (uint32_t)idx, EPOLLOUT);
}

static void churn_connected(conn_t *c, int idx)
{
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c->io.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
        errno = err;
        bench_die("connect");
    }
    c->state = CONN_OPEN;
    c->io.want_out = true;
    bench_epoll_set(ep, EPOLL_CTL_MOD, c->io.fd, (uint32_t)idx, EPOLLIN | EPOLLOUT);
    queue_msgs(c, (uint64_t)depth, c->t_start);
    flush_conn(c, idx);
}

/* Reads once (the sockets are level-triggered), checks the bytes, completes messages. */
static void read_conn(conn_t *c, int idx)
{
    size_t r = bench_stream_recv(c->io.fd, in, CHUNK);
    if (r == 0)
        return;
    if (c->received + (uint64_t)r > c->io.sent)
        bench_fail("more bytes came back than were sent");
    if (memcmp(in, pattern + (c->received + c->base) % PAT_PERIOD, r) != 0)
        bench_fail("a wrong byte was echoed");
    uint64_t before = c->received / (uint64_t)size;
    c->received += (uint64_t)r;
    uint64_t done = c->received / (uint64_t)size - before;
    if (win.measuring)
        bytes_done += (uint64_t)r;
    if (done == 0)
        return;
    uint64_t now = bench_now_ns();
    if (win.measuring)
        msgs_done += done;
    if (churn) {
        c->head = (c->head + (uint32_t)done) % (uint32_t)depth;
        c->count -= (uint32_t)done;
        if (c->count > 0)
            return;
        record(now - c->t_start);
        if (win.measuring)
            conns_done++;
        close(c->io.fd); /* also leaves the epoll set */
        churn_start(c, idx);
        return;
    }
    for (uint64_t i = 0; i < done; i++) {
        record(now - c->stamps[c->head]);
        c->head = (c->head + 1) % (uint32_t)depth;
        c->count--;
    }
    queue_msgs(c, done, now);
    flush_conn(c, idx);
}

static void on_event(void *arg, uint32_t idx, uint32_t events)
{
    conn_t *c = (conn_t *)arg + idx;
    if (c->state == CONN_CONNECTING) {
        churn_connected(c, (int)idx);
        return;
    }
    if (events & EPOLLOUT)
        flush_conn(c, (int)idx);
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        read_conn(c, (int)idx);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_echo_loadgen [--host A] [--port N] [--conns C] [--depth D] "
               "[--size S]\n"
               "                          [--seconds T] [--warmup W] [--churn] [--rst] "
               "[--cpu N] [--pid P]\n"
               "       bench_echo_loadgen --idle N --pid P [--host A] [--port N] [--size S] "
               "[--cpu N]\n");
}

/* The options of this load generator (bench_lg_parse takes the common ones). */
static int option(const char *a, const char *v)
{
    if (strcmp(a, "--churn") == 0) {
        churn = true;
        return BENCH_OPT_FLAG;
    }
    if (strcmp(a, "--rst") == 0) {
        rst = true;
        return BENCH_OPT_FLAG;
    }
    static const bench_int_opt_t ints[] = {{"--conns", 1, MAX_CONNS, &nconns},
                                           {"--depth", 1, MAX_DEPTH, &depth},
                                           {"--size", 1, MAX_SIZE, &size},
                                           {"--idle", 1, MAX_IDLE, &idle_conns}};
    return bench_opt_int(ints, 4, a, v);
}

/* Sends all of buf on blocking socket fd and reads it back, checking it. */
static void echo_once(int fd, const uint8_t *buf, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t w = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            bench_die("send");
        off += (size_t)w;
    }
    for (size_t off = 0; off < len;) {
        ssize_t r = recv(fd, in + off, len - off, 0);
        if (r == 0)
            bench_fail("the server closed an idle connection");
        if (r < 0)
            bench_die("recv");
        off += (size_t)r;
    }
    if (memcmp(buf, in, len) != 0)
        bench_fail("a wrong byte was echoed");
}

/* Idle mode: the server's resident bytes per open, quiet connection. */
static int run_idle(void)
{
    long server_pid = opts.pid;
    if (server_pid < 0)
        bench_fail("--idle needs --pid");
    int *fds = malloc((size_t)idle_conns * sizeof(*fds));
    if (fds == NULL)
        bench_fail("out of memory");
    size_t len = (size_t)size < CHUNK ? (size_t)size : CHUNK;
    long before = bench_proc_status_kb(server_pid, "VmRSS");
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < idle_conns; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0)
            bench_die("socket (raise ulimit -n)");
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        if (connect(fds[i], (const struct sockaddr *)&addr, sizeof(addr)) != 0)
            bench_die("connect");
        set_nodelay(fds[i]);
        echo_once(fds[i], pattern + (size_t)i % PAT_PERIOD, len);
    }
    double open_s = (double)(bench_now_ns() - t0) * 1e-9;
    /* Let the server finish whatever it defers (buffer caches, trimming) before reading. */
    struct timespec settle = {.tv_sec = 1};
    nanosleep(&settle, NULL);
    long after = bench_proc_status_kb(server_pid, "VmRSS");
    /* Every connection still works: one more echo on a few of them. */
    for (int i = 0; i < idle_conns; i += idle_conns / 8 + 1)
        echo_once(fds[i], pattern, len);
    long hwm = bench_proc_status_kb(server_pid, "VmHWM");
    for (int i = 0; i < idle_conns; i++)
        close(fds[i]);
    free(fds);
    if (before < 0 || after < 0)
        bench_fail("cannot read the server's /proc/PID/status");
    printf("{\"loadgen\":\"echo\",\"mode\":\"idle\",\"conns\":%d,\"size\":%d,"
           "\"open_s\":%.3f,\"rss_before_kb\":%ld,\"rss_after_kb\":%ld,"
           "\"bytes_per_conn\":%.1f,\"server_hwm_kb\":%ld}\n",
           idle_conns, size, open_s, before, after,
           (double)(after - before) * 1024.0 / (double)idle_conns, hwm);
    return 0;
}

int main(int argc, char **argv)
{
    bench_lg_name = "bench_echo_loadgen";
    bench_lg_parse(argc, argv, &opts, option, usage);
    signal(SIGPIPE, SIG_IGN);
    bench_lg_pin(opts.cpu);
    addr = bench_lg_addr(&opts);

    pattern = bench_pattern_new(PAT_PERIOD, CHUNK);
    in = malloc(CHUNK);
    conn_t *conns = calloc((size_t)nconns, sizeof(*conns));
    uint64_t *stamps = calloc((size_t)nconns * (size_t)depth, sizeof(*stamps));
    if (in == NULL || conns == NULL || stamps == NULL)
        bench_fail("out of memory");

    if (idle_conns > 0) {
        int rc = run_idle();
        free(stamps);
        free(conns);
        free(in);
        free(pattern);
        return rc;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        bench_die("epoll_create1");
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < nconns; i++) {
        conn_t *c = &conns[i];
        c->stamps = stamps + (size_t)i * (size_t)depth;
        if (churn) {
            churn_start(c, i);
            continue;
        }
        c->io.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->io.fd < 0 || connect(c->io.fd, (const struct sockaddr *)&addr, sizeof(addr)) != 0)
            bench_die("connect");
        set_nodelay(c->io.fd);
        if (fcntl(c->io.fd, F_SETFL, fcntl(c->io.fd, F_GETFL) | O_NONBLOCK) != 0)
            bench_die("fcntl");
        c->state = CONN_OPEN;
        c->base = next_base;
        next_base = (next_base + 1009) % PAT_PERIOD;
        bench_epoll_set(ep, EPOLL_CTL_ADD, c->io.fd, (uint32_t)i, EPOLLIN);
        queue_msgs(c, (uint64_t)depth, bench_now_ns());
        flush_conn(c, i);
    }

    bench_window_init(&win, &opts, t0, bench_proc_cpu_s);
    bench_window_count(&win, churn ? &conns_done : &msgs_done);
    bench_lg_run(&win, ep, 100, on_event, NULL, conns);
    long hwm = bench_proc_status_kb(opts.pid, "VmHWM");
    for (int i = 0; i < nconns; i++)
        close(conns[i].io.fd);
    close(ep);

    double secs = bench_window_seconds(&win);
    double srv = bench_window_server_cpu_s(&win);
    double msgs = (double)msgs_done;
    printf("{\"loadgen\":\"echo\",\"mode\":\"%s\",\"conns\":%d,\"depth\":%d,\"size\":%d,"
           "\"seconds\":%.3f,\"msgs\":%llu,\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f,"
           "\"conns_per_s\":%.0f,\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,"
           "\"server_cpu_s\":%.3f,\"cpu_ns_per_msg\":%.1f,\"client_cpu_util\":%.3f,"
           "\"server_hwm_kb\":%ld}\n",
           churn ? "churn" : "pipelined", nconns, depth, size, secs, (unsigned long long)msgs_done,
           msgs / secs, (double)bytes_done / secs / 1e6, (double)conns_done / secs,
           bench_hist_quantile(&hist, 0.50) / 1e3, bench_hist_quantile(&hist, 0.99) / 1e3,
           bench_hist_quantile(&hist, 0.999) / 1e3, srv,
           srv >= 0 && msgs > 0 ? srv * 1e9 / msgs : -1, bench_window_client_util(&win), hwm);
    free(stamps);
    free(conns);
    free(in);
    free(pattern);
    return bench_window_verdict(&win, churn ? "connection" : "message");
}
