/*
 * bench_udp_loadgen: the load generator of bench/udp (run.sh drives it against each UDP echo
 * server in turn). One thread, epoll, non-blocking connected UDP sockets.
 *
 * N sockets, each keeping a window of W datagrams of S bytes in flight: each datagram holds
 * its socket, its slot in the window and a sequence number, then a pseudo-random pattern
 * chosen by that number, so a wrong, crossed or truncated echo fails the run. Whenever an
 * echo comes back, its slot sends the next datagram; the replacements of one receive batch
 * (recvmmsg, up to 64) go out together, as one UDP_SEGMENT send (GSO: one trip through the
 * stack, the kernel cuts it into datagrams; --no-gso or a kernel without it: sendmmsg). A
 * datagram not echoed within --timeout-ms is counted lost and its slot sends a new one, so a
 * lossy run slows down but never stalls; an echo that comes back after that is counted late
 * and ignored. Latency is from send to echo, in a log-linear histogram (about 3% resolution).
 *
 * With --pid P, the server's CPU time (utime + stime of /proc/P/stat, all threads) is read at
 * the start and end of the measured window, giving CPU time per echoed datagram, and its peak
 * resident memory (VmHWM of /proc/P/status) at the end.
 *
 *   bench_udp_loadgen [--host A] [--port N] [--sockets N] [--window W] [--size S]
 *                     [--seconds T] [--warmup W] [--timeout-ms MS] [--no-gso] [--cpu N]
 *                     [--pid P]
 *
 * Prints one line: {"loadgen":"udp",...,"pkts_per_s":...,"lost":...,"p50_us":...,
 * "p99_us":...,"cpu_ns_per_pkt":...,"client_cpu_util":...}. Exit status 1 on a wrong echo or
 * when nothing came back.
 */
#include "support/bench_util.h"
#include "support/hist.h"
#include "support/loadgen.h"
#include "support/proc_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/udp.h>
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

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 /* linux/udp.h, Linux 4.18 */
#endif

#define MAX_SOCKS 1024
#define MAX_WINDOW 1024
#define MAX_SIZE 2048    /* what the servers echo */
#define HDR_SIZE 16      /* socket (4), slot (4), sequence (8) */
#define BATCH 64         /* datagrams per recvmmsg, and per send */
#define GSO_BYTES 65000  /* at most this much in one UDP_SEGMENT send (64 KiB minus headers) */
#define PAT_PERIOD 65521 /* a prime, so patterns of different numbers do not line up */
#define SCAN_NS 10000000 /* look for lost datagrams every 10 ms */

typedef struct sock_s {
    int fd;
    uint64_t *seq;     /* per slot: the number in flight */
    uint64_t *sent_ns; /* per slot: when it went */
} sock_t;

static bench_lg_opts_t opts = {
    .host = "127.0.0.1", .port = 8008, .seconds = 2, .warmup = 0.5, .cpu = -1, .pid = -1};
static int nsocks = 8;
static int window = 32;
static int size = 64;
static int timeout_ms = 100;
static bool gso = true;

static uint8_t *pattern; /* PAT_PERIOD + MAX_SIZE bytes */
static bench_hist_t hist;
static uint64_t done, lost, late, send_fails;
static bench_window_t win;
static uint64_t next_seq = 1;
static uint64_t t_scan; /* when to look for lost datagrams next */

/* Send and receive buffers, shared by the sockets: one socket's batch at a time. */
static uint8_t txbuf[BATCH * MAX_SIZE];
static struct mmsghdr txmsgs[BATCH];
static struct iovec txiovs[BATCH];
static uint8_t rxbuf[BATCH][MAX_SIZE];
static struct mmsghdr rxmsgs[BATCH];
static struct iovec rxiovs[BATCH];

/* The pattern bytes of datagram number seq. */
static const uint8_t *payload_of(uint64_t seq)
{
    return pattern + (seq * 7919) % PAT_PERIOD;
}

/* Writes datagram (sock, slot, seq) into out. */
static void fill(uint8_t *out, uint32_t sock, uint32_t slot, uint64_t seq)
{
    memcpy(out, &sock, 4);
    memcpy(out + 4, &slot, 4);
    memcpy(out + 8, &seq, 8);
    memcpy(out + HDR_SIZE, payload_of(seq), (size_t)size - HDR_SIZE);
}

/* Sends txbuf's n datagrams on s: as UDP_SEGMENT sends while the kernel takes them, else
 * with sendmmsg. A datagram the socket will not take now (EAGAIN) stays in its slot
 * unanswered: the timeout sends another. */
static void send_queued(sock_t *s, unsigned n)
{
    unsigned off = 0;
    unsigned per_send = GSO_BYTES / (unsigned)size < BATCH ? GSO_BYTES / (unsigned)size : BATCH;
    while (gso && off < n && n - off > 1) {
        unsigned k = n - off < per_send ? n - off : per_send;
        struct iovec iov = {.iov_base = txbuf + (size_t)off * (size_t)size,
                            .iov_len = (size_t)k * (size_t)size};
        union {
            char buf[CMSG_SPACE(sizeof(uint16_t))];
            struct cmsghdr align;
        } ctl;
        memset(&ctl, 0, sizeof(ctl));
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.buf,
                            .msg_controllen = sizeof(ctl.buf)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t seg = (uint16_t)size;
        memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
        if (sendmsg(s->fd, &mh, 0) >= 0) {
            off += k;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
            send_fails += n - off;
            return;
        } else if (errno != EINTR) {
            gso = false; /* EIO, EINVAL: the kernel or device cannot segment; send one by one */
        }
    }
    for (unsigned i = 0; i < n - off; i++) {
        txiovs[i] = (struct iovec){.iov_base = txbuf + (size_t)(off + i) * (size_t)size,
                                   .iov_len = (size_t)size};
        txmsgs[i].msg_hdr = (struct msghdr){.msg_iov = &txiovs[i], .msg_iovlen = 1};
    }
    unsigned left = n - off, sent = 0;
    while (sent < left) {
        int k = sendmmsg(s->fd, txmsgs + sent, left - sent, 0);
        if (k > 0) {
            sent += (unsigned)k;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
            send_fails += left - sent;
            return;
        } else if (errno == ECONNREFUSED) {
            continue; /* an ICMP error for an earlier datagram (the server gone?): go on */
        } else if (errno != EINTR) {
            bench_die("sendmmsg");
        }
    }
}

/* Queues a new datagram in slot of s at position n of txbuf. */
static void renew(sock_t *s, uint32_t id, uint32_t slot, unsigned n, uint64_t now)
{
    uint64_t seq = next_seq++;
    s->seq[slot] = seq;
    s->sent_ns[slot] = now;
    fill(txbuf + (size_t)n * (size_t)size, id, slot, seq);
}

/* Reads what came back on socket id, checks it, and sends the replacements. */
static void on_readable(sock_t *socks, uint32_t id)
{
    sock_t *s = &socks[id];
    for (int batch = 0; batch < 4; batch++) {
        for (int i = 0; i < BATCH; i++)
            rxiovs[i].iov_len = MAX_SIZE;
        int n = recvmmsg(s->fd, rxmsgs, BATCH, 0, NULL);
        if (n <= 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED)
                return;
            bench_die("recvmmsg");
        }
        uint64_t now = bench_now_ns();
        unsigned q = 0;
        for (int i = 0; i < n; i++) {
            const uint8_t *p = rxbuf[i];
            uint32_t sock, slot;
            uint64_t seq;
            if (rxmsgs[i].msg_len != (unsigned)size)
                bench_fail("an echo of the wrong length came back");
            memcpy(&sock, p, 4);
            memcpy(&slot, p + 4, 4);
            memcpy(&seq, p + 8, 8);
            if (sock != id || slot >= (uint32_t)window)
                bench_fail("an echo came back on the wrong socket or names no slot");
            if (memcmp(p + HDR_SIZE, payload_of(seq), (size_t)size - HDR_SIZE) != 0)
                bench_fail("a wrong byte was echoed");
            if (seq != s->seq[slot]) {
                late += win.measuring; /* counted lost already, its slot reused */
                continue;
            }
            if (win.measuring) {
                done++;
                bench_hist_add(&hist, now - s->sent_ns[slot]);
            }
            renew(s, id, slot, q++, now);
        }
        if (q > 0)
            send_queued(s, q);
        if (n < BATCH)
            return;
    }
}

/* Every slot whose datagram is older than the timeout sends a new one. */
static void scan_lost(sock_t *socks, uint64_t now)
{
    uint64_t limit = (uint64_t)timeout_ms * 1000000u;
    for (int id = 0; id < nsocks; id++) {
        sock_t *s = &socks[id];
        unsigned q = 0;
        for (int slot = 0; slot < window; slot++) {
            if (now - s->sent_ns[slot] <= limit)
                continue;
            lost += win.measuring;
            renew(s, (uint32_t)id, (uint32_t)slot, q++, now);
            if (q == BATCH) {
                send_queued(s, q);
                q = 0;
            }
        }
        if (q > 0)
            send_queued(s, q);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_udp_loadgen [--host A] [--port N] [--sockets N] [--window W] "
               "[--size S]\n"
               "                         [--seconds T] [--warmup W] [--timeout-ms MS] "
               "[--no-gso] [--cpu N] [--pid P]\n");
}

/* The options of this load generator (bench_lg_parse takes the common ones). */
static int option(const char *a, const char *v)
{
    if (strcmp(a, "--no-gso") == 0) {
        gso = false;
        return BENCH_OPT_FLAG;
    }
    static const bench_int_opt_t ints[] = {{"--sockets", 1, MAX_SOCKS, &nsocks},
                                           {"--window", 1, MAX_WINDOW, &window},
                                           {"--size", HDR_SIZE, MAX_SIZE, &size},
                                           {"--timeout-ms", 1, INT_MAX, &timeout_ms}};
    return bench_opt_int(ints, 4, a, v);
}

static void on_event(void *arg, uint32_t idx, uint32_t events)
{
    on_readable(arg, idx);
}

/* Looks for lost datagrams every SCAN_NS. */
static void on_tick(void *arg, uint64_t now)
{
    if (now >= t_scan) {
        scan_lost(arg, now);
        t_scan = now + SCAN_NS;
    }
}

int main(int argc, char **argv)
{
    bench_lg_name = "bench_udp_loadgen";
    bench_lg_parse(argc, argv, &opts, option, usage);
    signal(SIGPIPE, SIG_IGN);
    bench_lg_pin(opts.cpu);
    struct sockaddr_in addr = bench_lg_addr(&opts);

    pattern = bench_pattern_new(PAT_PERIOD, MAX_SIZE);
    sock_t *socks = calloc((size_t)nsocks, sizeof(*socks));
    uint64_t *slots = calloc((size_t)nsocks * (size_t)window * 2, sizeof(*slots));
    if (socks == NULL || slots == NULL)
        bench_fail("out of memory");
    for (int i = 0; i < BATCH; i++) {
        rxiovs[i] = (struct iovec){.iov_base = rxbuf[i], .iov_len = MAX_SIZE};
        rxmsgs[i].msg_hdr = (struct msghdr){.msg_iov = &rxiovs[i], .msg_iovlen = 1};
    }

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        bench_die("epoll_create1");
    uint64_t t0 = bench_now_ns();
    for (int id = 0; id < nsocks; id++) {
        sock_t *s = &socks[id];
        s->seq = slots + (size_t)id * (size_t)window * 2;
        s->sent_ns = s->seq + window;
        s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s->fd < 0 || connect(s->fd, (const struct sockaddr *)&addr, sizeof(addr)) != 0)
            bench_die("socket");
        bench_epoll_set(ep, EPOLL_CTL_ADD, s->fd, (uint32_t)id, EPOLLIN);
        unsigned q = 0;
        for (int slot = 0; slot < window; slot++) {
            renew(s, (uint32_t)id, (uint32_t)slot, q++, t0);
            if (q == BATCH) {
                send_queued(s, q);
                q = 0;
            }
        }
        if (q > 0)
            send_queued(s, q);
    }

    t_scan = t0 + SCAN_NS;
    bench_window_init(&win, &opts, t0, bench_proc_cpu_s);
    bench_window_count(&win, &done);
    bench_lg_run(&win, ep, 10, on_event, on_tick, socks);
    long hwm = bench_proc_status_kb(opts.pid, "VmHWM");
    for (int id = 0; id < nsocks; id++)
        close(socks[id].fd);
    close(ep);

    double secs = bench_window_seconds(&win);
    double srv = bench_window_server_cpu_s(&win);
    printf("{\"loadgen\":\"udp\",\"sockets\":%d,\"window\":%d,\"size\":%d,\"gso\":%s,"
           "\"seconds\":%.3f,\"pkts\":%llu,\"pkts_per_s\":%.0f,\"mb_per_s\":%.2f,\"lost\":%llu,"
           "\"late\":%llu,\"send_fails\":%llu,\"p50_us\":%.2f,\"p99_us\":%.2f,"
           "\"p999_us\":%.2f,\"server_cpu_s\":%.3f,\"cpu_ns_per_pkt\":%.1f,"
           "\"client_cpu_util\":%.3f,\"server_hwm_kb\":%ld}\n",
           nsocks, window, size, gso ? "true" : "false", secs, (unsigned long long)done,
           (double)done / secs, (double)done * size / secs / 1e6, (unsigned long long)lost,
           (unsigned long long)late, (unsigned long long)send_fails,
           bench_hist_quantile(&hist, 0.50) / 1e3, bench_hist_quantile(&hist, 0.99) / 1e3,
           bench_hist_quantile(&hist, 0.999) / 1e3, srv,
           srv >= 0 && done > 0 ? srv * 1e9 / (double)done : -1, bench_window_client_util(&win),
           hwm);
    free(slots);
    free(socks);
    free(pattern);
    return bench_window_verdict(&win, "datagram");
}
