/*
 * ws_broadcast: the client of bench/ws's broadcast case. Opens C WebSocket connections (each
 * upgrade checked) to a server that sends each message to all of its connections, then, one
 * broadcast at a time, has one connection (a different one each time) send a message of S
 * bytes and measures the time from that send() until every connection (the sender too) has
 * received the whole message back: the time to deliver to all. --warmup broadcasts first,
 * unmeasured (a JIT compiles then), then --count measured ones, --gap-ms apart.
 *
 * Every delivery is checked: a final binary frame of S bytes whose first 8 bytes carry the
 * broadcast's number and the rest a fixed pattern; a connection that misses a broadcast, or
 * gets a wrong one, fails the run (after --timeout seconds for a missing one).
 *
 * With --pid P: the server's CPU time (the sum of /proc/P/task/ * /schedstat, proc_util.h)
 * over the measured broadcasts, per broadcast and per delivery; its VmRSS before and after
 * them (growth per broadcast: a server that keeps a copy per member shows it) and VmHWM.
 *
 *   ws_broadcast [--host A] [--port N] [--conns C] [--size S] [--count N] [--warmup N]
 *                [--gap-ms G] [--timeout T] [--cpu N] [--pid P]
 *
 * Prints one line: {"loadgen":"ws_broadcast",...,"p50_us":...,"p99_us":...}. Raise ulimit
 * -n above C first. Connections close with resets (no TIME_WAIT left).
 */
#include "ws_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/epoll.h>

#define MAX_CONNS 60000
#define MAX_COUNT 100000
#define MAX_SIZE (1 << 20)
#define RECV_BUF 65536

typedef struct conn_s {
    int fd;
    wsc_parser_t ps;
    uint8_t seq[8]; /* the first bytes of the message coming in */
    uint64_t got;   /* broadcasts received */
} conn_t;

static bench_lg_opts_t opts = {.host = "127.0.0.1", .port = 8008, .cpu = -1, .pid = -1};
static int nconns = 1000;
static int size = 64;
static int count = 100;
static int warmup = 20;
static double gap_ms = 5;
static double timeout_s = 10;

static uint8_t *pattern; /* size bytes: the payload after the number */
static uint64_t current; /* the broadcast under way */
static int arrived;      /* connections that have it */
static uint64_t t_first; /* when the first had it */

static void on_bytes(void *arg, uint64_t off, const uint8_t *p, size_t n)
{
    conn_t *c = arg;
    if (off + n > (uint64_t)size)
        bench_fail("a message longer than the one sent came");
    for (; n > 0 && off < 8; n--, off++, p++)
        c->seq[off] = *p;
    if (n > 0 && memcmp(p, pattern + off, n) != 0)
        bench_fail("a wrong byte was delivered");
}

static void on_frame(void *arg, uint8_t opcode, uint64_t len)
{
    conn_t *c = arg;
    uint64_t seq = 0;
    for (int i = 0; i < 8; i++)
        seq = seq << 8 | c->seq[i];
    if (opcode != 0x2 || len != (uint64_t)size)
        bench_fail("a delivery is not the binary message sent");
    if (seq != current || c->got != current)
        bench_fail("a connection missed a broadcast or got one twice");
    c->got++;
    if (arrived++ == 0)
        t_first = bench_now_ns();
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ws_broadcast [--host A] [--port N] [--conns C] [--size S] [--count N] "
               "[--warmup N]\n"
               "                    [--gap-ms G] [--timeout T] [--cpu N] [--pid P]\n");
}

/* The options of this client (bench_lg_parse takes --host, --port, --cpu and --pid). */
static int option(const char *a, const char *v)
{
    if (strcmp(a, "--seconds") == 0)
        return BENCH_OPT_BAD; /* broadcasts are counted, not timed */
    if (v == NULL)
        return BENCH_OPT_NONE;
    static const bench_int_opt_t ints[] = {{"--conns", 1, MAX_CONNS, &nconns},
                                           {"--size", 8, MAX_SIZE, &size},
                                           {"--count", 1, MAX_COUNT, &count},
                                           {"--warmup", 0, MAX_COUNT, &warmup}};
    if (bench_opt_int(ints, 4, a, v) == BENCH_OPT_VALUE)
        return BENCH_OPT_VALUE;
    if (strcmp(a, "--warmup") == 0)
        return BENCH_OPT_BAD; /* a count here, not the common option's seconds */
    if (strcmp(a, "--gap-ms") == 0 && atof(v) >= 0) {
        gap_ms = atof(v);
    } else if (strcmp(a, "--timeout") == 0 && atof(v) > 0) {
        timeout_s = atof(v);
    } else {
        return BENCH_OPT_NONE;
    }
    return BENCH_OPT_VALUE;
}

/* Reads what the ready connections hold, for up to wait_ms (0: only what is there now). */
static void pump(int ep, conn_t *conns, uint8_t *in, int wait_ms)
{
    struct epoll_event evs[256];
    int n = epoll_wait(ep, evs, 256, wait_ms);
    if (n < 0 && errno != EINTR)
        bench_die("epoll_wait");
    for (int k = 0; k < n; k++) {
        conn_t *c = &conns[evs[k].data.u32];
        for (;;) {
            size_t r = bench_stream_recv(c->fd, in, RECV_BUF);
            if (r == 0)
                break;
            wsc_feed(&c->ps, in, r, on_bytes, on_frame, c);
            if (r < RECV_BUF)
                break;
        }
    }
}

/* Broadcast number seq from connection seq % nconns; returns the time to deliver to all. */
static uint64_t broadcast(int ep, conn_t *conns, uint8_t *in, uint8_t *frame, uint64_t seq,
                          uint64_t *first_ns)
{
    uint8_t payload[8];
    for (int i = 0; i < 8; i++)
        payload[i] = (uint8_t)(seq >> (56 - 8 * i));
    /* Only the number changes: mask it into the frame built once (the key is fixed). */
    size_t h = (size_t)(size < 126 ? 2 : size <= 0xffff ? 4 : 10);
    const uint8_t *key = frame + h;
    for (int i = 0; i < 8; i++)
        frame[h + 4 + (size_t)i] = payload[i] ^ key[i & 3];
    size_t len = h + 4 + (size_t)size, off = 0;
    int fd = conns[seq % (uint64_t)nconns].fd;
    current = seq;
    arrived = 0;
    uint64_t t0 = bench_now_ns(), deadline = t0 + (uint64_t)(timeout_s * 1e9);
    while (off < len) {
        ssize_t w = send(fd, frame + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            bench_die("send");
        if (w > 0)
            off += (size_t)w;
        else
            pump(ep, conns, in, 1);
    }
    while (arrived < nconns) {
        pump(ep, conns, in, 10);
        if (bench_now_ns() > deadline) {
            fprintf(stderr, "ws_broadcast: broadcast %llu reached %d of %d connections in %.1f s\n",
                    (unsigned long long)seq, arrived, nconns, timeout_s);
            exit(1);
        }
    }
    uint64_t t1 = bench_now_ns();
    *first_ns = t_first - t0;
    return t1 - t0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The nearest-rank quantile q of the n sorted values. */
static double quantile_us(const uint64_t *v, int n, double q)
{
    int rank = (int)ceil(q * n);
    return (double)v[rank < 1 ? 0 : rank - 1] / 1e3;
}

int main(int argc, char **argv)
{
    bench_lg_name = "ws_broadcast";
    bench_lg_parse(argc, argv, &opts, option, usage);
    signal(SIGPIPE, SIG_IGN);
    bench_lg_pin(opts.cpu);
    struct sockaddr_in addr = bench_lg_addr(&opts);
    pattern = bench_pattern_new((size_t)size, 0);
    uint8_t *frame = malloc((size_t)size + 14), *in = malloc(RECV_BUF);
    conn_t *conns = calloc((size_t)nconns, sizeof(*conns));
    uint64_t *times = calloc((size_t)count, sizeof(*times));
    uint64_t *firsts = calloc((size_t)count, sizeof(*firsts));
    if (frame == NULL || in == NULL || conns == NULL || times == NULL || firsts == NULL)
        bench_fail("out of memory");
    wsc_frame(frame, pattern, (size_t)size, 0x5bd1e995u);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        bench_die("epoll_create1");
    uint64_t t_open = bench_now_ns();
    for (int i = 0; i < nconns; i++) {
        conns[i].fd = wsc_open(&addr, 0x2545f4914f6cdd1dull + (uint64_t)i * 7919, true);
        if (fcntl(conns[i].fd, F_SETFL, fcntl(conns[i].fd, F_GETFL) | O_NONBLOCK) != 0)
            bench_die("fcntl");
        bench_epoll_set(ep, EPOLL_CTL_ADD, conns[i].fd, (uint32_t)i, EPOLLIN);
    }
    double open_s = (double)(bench_now_ns() - t_open) * 1e-9;
    /* A server may join a connection to its group just after its 101 left (Netty does, when
     * the write completes): let the last ones in before the first broadcast. */
    struct timespec settle = {.tv_nsec = 100 * 1000000};
    nanosleep(&settle, NULL);

    struct timespec gap = {.tv_sec = (time_t)(gap_ms / 1e3),
                           .tv_nsec = (long)(fmod(gap_ms, 1e3) * 1e6)};
    uint64_t seq = 0, first;
    for (int i = 0; i < warmup; i++, seq++) {
        broadcast(ep, conns, in, frame, seq, &first);
        nanosleep(&gap, NULL);
    }
    long rss0 = bench_proc_status_kb(opts.pid, "VmRSS");
    double cpu0 = bench_proc_sched_cpu_s(opts.pid);
    for (int i = 0; i < count; i++, seq++) {
        times[i] = broadcast(ep, conns, in, frame, seq, &firsts[i]);
        nanosleep(&gap, NULL);
    }
    double cpu1 = bench_proc_sched_cpu_s(opts.pid);
    long rss1 = bench_proc_status_kb(opts.pid, "VmRSS");
    long hwm = bench_proc_status_kb(opts.pid, "VmHWM");
    for (int i = 0; i < nconns; i++)
        close(conns[i].fd);
    close(ep);

    qsort(times, (size_t)count, sizeof(*times), cmp_u64);
    qsort(firsts, (size_t)count, sizeof(*firsts), cmp_u64);
    double srv = cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1;
    printf("{\"loadgen\":\"ws_broadcast\",\"conns\":%d,\"size\":%d,\"broadcasts\":%d,"
           "\"warmup\":%d,\"open_s\":%.3f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"min_us\":%.1f,"
           "\"max_us\":%.1f,\"first_p50_us\":%.1f,\"server_cpu_s\":%.4f,"
           "\"cpu_us_per_bcast\":%.1f,\"cpu_ns_per_delivery\":%.1f,\"rss_before_kb\":%ld,"
           "\"rss_after_kb\":%ld,\"rss_growth_per_bcast_b\":%.1f,\"server_hwm_kb\":%ld}\n",
           nconns, size, count, warmup, open_s, quantile_us(times, count, 0.5),
           quantile_us(times, count, 0.99), (double)times[0] / 1e3, (double)times[count - 1] / 1e3,
           quantile_us(firsts, count, 0.5), srv, srv >= 0 ? srv * 1e6 / count : -1,
           srv >= 0 ? srv * 1e9 / count / nconns : -1, rss0, rss1,
           (double)(rss1 - rss0) * 1024.0 / count, hwm);
    free(firsts);
    free(times);
    free(conns);
    free(in);
    free(frame);
    free(pattern);
    return 0;
}
