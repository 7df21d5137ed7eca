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
 * sum of /proc/P/task/ * /schedstat, all threads, in ns; bench/support/proc_util.h) is read at both
 * ends of that window, giving CPU time per message, and its VmRSS and VmHWM (/proc/P/status) at the
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
#include <signal.h>
#include <sys/epoll.h>

#define MAX_CONNS 4096
#define MAX_WINDOW 256
#define MAX_SIZE (1 << 20) /* eddy's and Netty's default largest frame */
#define RECV_BUF (1 << 18)
#define PAT_PERIOD 65521 /* a prime, so windows of different offsets do not line up */

typedef struct conn_s {
    bench_stream_t io;      /* first: the stream's source finds its connection */
    uint8_t *frames;        /* window + 1 copies of this connection's frame, back to back */
    const uint8_t *payload; /* what every echo must hold */
    uint64_t done;          /* whole messages back */
    wsc_parser_t ps;
} conn_t;

static bench_lg_opts_t opts = {
    .host = "127.0.0.1", .port = 8008, .seconds = 2, .warmup = 0.5, .cpu = -1, .pid = -1};
static int nconns = 64;
static int window = 16;
static int size = 64;

static size_t frame_len;
static int ep;
static uint64_t msgs_counted;
static bench_window_t win;
static uint8_t *in;

/* owed <= window frames, and the copies start at a frame boundary, so the bytes from the
 * current offset on are always there in one piece. */
static const uint8_t *owed_bytes(bench_stream_t *s, size_t *len)
{
    const conn_t *c = (const conn_t *)s;
    *len = (size_t)s->owed;
    return c->frames + s->sent % frame_len;
}

static void flush_conn(conn_t *c, int idx)
{
    bench_stream_flush(ep, &c->io, (uint32_t)idx, owed_bytes);
}

static void on_bytes(void *arg, uint64_t off, const uint8_t *p, size_t n)
{
    conn_t *c = arg;
    if (off + n > (uint64_t)size || memcmp(p, c->payload + off, n) != 0)
        bench_fail("a wrong byte was echoed");
}

static void on_frame(void *arg, uint8_t opcode, uint64_t len)
{
    conn_t *c = arg;
    if (opcode != 0x2 || len != (uint64_t)size)
        bench_fail("the echo is not the binary message sent");
    c->done++;
}

/* Reads once (level-triggered), checks the frames, sends one frame per message completed. */
static void read_conn(conn_t *c, int idx)
{
    size_t r = bench_stream_recv(c->io.fd, in, RECV_BUF);
    if (r == 0)
        return;
    uint64_t before = c->done;
    wsc_feed(&c->ps, in, r, on_bytes, on_frame, c);
    uint64_t done = c->done - before;
    if (done == 0)
        return;
    if (win.measuring)
        msgs_counted += done;
    c->io.owed += done * frame_len;
    flush_conn(c, idx);
}

static void on_event(void *arg, uint32_t idx, uint32_t events)
{
    conn_t *c = (conn_t *)arg + idx;
    if (events & EPOLLOUT)
        flush_conn(c, (int)idx);
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        read_conn(c, (int)idx);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_ws_loadgen [--host A] [--port N] [--conns C] [--window W] "
               "[--size S]\n"
               "                        [--seconds T] [--warmup W] [--cpu N] [--pid P]\n");
}

/* The options of this load generator (bench_lg_parse takes the common ones). */
static int option(const char *a, const char *v)
{
    static const bench_int_opt_t ints[] = {{"--conns", 1, MAX_CONNS, &nconns},
                                           {"--window", 1, MAX_WINDOW, &window},
                                           {"--size", 1, MAX_SIZE, &size}};
    return bench_opt_int(ints, 3, a, v);
}

int main(int argc, char **argv)
{
    bench_lg_name = "bench_ws_loadgen";
    bench_lg_parse(argc, argv, &opts, option, usage);
    signal(SIGPIPE, SIG_IGN);
    bench_lg_pin(opts.cpu);
    struct sockaddr_in addr = bench_lg_addr(&opts);

    uint8_t *pattern = bench_pattern_new(PAT_PERIOD, MAX_SIZE);
    in = malloc(RECV_BUF);
    conn_t *conns = calloc((size_t)nconns, sizeof(*conns));
    if (in == NULL || conns == NULL)
        bench_fail("out of memory");
    frame_len = (size_t)size + (size < 126 ? 6 : size <= 0xffff ? 8 : 14);

    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        bench_die("epoll_create1");
    for (int i = 0; i < nconns; i++) {
        conn_t *c = &conns[i];
        c->payload = pattern + (size_t)i * 1009 % PAT_PERIOD;
        c->frames = malloc(frame_len * (size_t)(window + 1));
        if (c->frames == NULL)
            bench_fail("out of memory");
        wsc_frame(c->frames, c->payload, (size_t)size, 0x9e3779b9u * (uint32_t)(i + 1));
        for (int k = 1; k <= window; k++)
            memcpy(c->frames + (size_t)k * frame_len, c->frames, frame_len);
        c->io.fd = wsc_open(&addr, 0x2545f4914f6cdd1dull + (uint64_t)i * 7919, false);
        if (fcntl(c->io.fd, F_SETFL, fcntl(c->io.fd, F_GETFL) | O_NONBLOCK) != 0)
            bench_die("fcntl");
    }
    /* All upgraded before the first message, so no connection starts ahead of the rest. */
    for (int i = 0; i < nconns; i++) {
        bench_epoll_set(ep, EPOLL_CTL_ADD, conns[i].io.fd, (uint32_t)i, EPOLLIN);
        conns[i].io.owed = (uint64_t)window * frame_len;
        flush_conn(&conns[i], i);
    }

    bench_window_init(&win, &opts, bench_now_ns(), bench_proc_sched_cpu_s);
    bench_window_count(&win, &msgs_counted);
    bench_lg_run(&win, ep, 100, on_event, NULL, conns);
    long rss = bench_proc_status_kb(opts.pid, "VmRSS");
    long hwm = bench_proc_status_kb(opts.pid, "VmHWM");
    for (int i = 0; i < nconns; i++) {
        close(conns[i].io.fd);
        free(conns[i].frames);
    }
    close(ep);

    double secs = bench_window_seconds(&win);
    double srv = bench_window_server_cpu_s(&win);
    double msgs = (double)msgs_counted;
    printf("{\"loadgen\":\"ws\",\"conns\":%d,\"window\":%d,\"size\":%d,\"seconds\":%.3f,"
           "\"msgs\":%llu,\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f,\"server_cpu_s\":%.3f,"
           "\"cpu_ns_per_msg\":%.1f,\"client_cpu_util\":%.3f,\"server_rss_kb\":%ld,"
           "\"server_hwm_kb\":%ld}\n",
           nconns, window, size, secs, (unsigned long long)msgs_counted, msgs / secs,
           msgs * size / secs / 1e6, srv, srv >= 0 && msgs > 0 ? srv * 1e9 / msgs : -1,
           bench_window_client_util(&win), rss, hwm);
    free(conns);
    free(in);
    free(pattern);
    return bench_window_verdict(&win, "message");
}
