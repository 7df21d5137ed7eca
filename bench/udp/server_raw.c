/*
 * udp_server_raw: the one-loop limit for UDP, against which eddy's datagram channel on one
 * loop is measured. A single-threaded echo server on level-triggered epoll and a
 * non-blocking socket: recvmmsg takes up to UDP_BATCH datagrams into preallocated buffers,
 * sendmmsg sends each back to its sender from the same buffers, and reading goes on until a
 * short batch (the queue is then empty, or epoll says so again) or --per-event datagrams. When the
 * socket's send buffer is full (EAGAIN), the datagrams not sent are copied aside, the socket stops
 * reading and waits for EPOLLOUT; nothing is dropped but what the kernel refuses outright (a
 * datagram too large, no route: that one is skipped, the rest go on) and what does not fit a
 * buffer (truncated: never echoed). No allocation per datagram, no framework.
 *
 * With --gso, what eddy's channel does by default: each run of same-size replies to one peer
 * in a batch goes out as one message of sendmmsg with UDP_SEGMENT (the kernel takes it
 * through the stack once and cuts it into datagrams), the rest one datagram each.
 *
 *   udp_server_raw [--port N] [--cpu N] [--sockbuf BYTES] [--idle N] [--per-event N] [--gso]
 *                  (udp_common.h)
 */
#include "udp_common.h"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE 2048   /* the largest datagram echoed; the benchmark sends <= 1200 B */
#define GSO_SEGMENTS 64 /* UDP_MAX_SEGMENTS of the kernels before 6.9 */
#define GSO_BYTES 65000 /* a UDP_SEGMENT send's payload: within 64 KiB with its headers */

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 /* linux/udp.h, Linux 4.18 */
#endif

/* Datagrams a full send buffer left behind: a copy, sent on EPOLLOUT. */
typedef struct backlog_s {
    unsigned head, n; /* unsent: [head, n) */
    struct mmsghdr msgs[UDP_BATCH];
    struct iovec iovs[UDP_BATCH];
    struct sockaddr_storage addrs[UDP_BATCH];
    uint8_t bufs[UDP_BATCH][BUF_SIZE];
} backlog_t;

typedef struct sock_s {
    int fd;
    backlog_t *backlog; /* made at the first EAGAIN, kept */
} sock_t;

static int ep;
/* The receive batch, shared by every socket: a batch is echoed (or copied aside) before the
 * next recvmmsg. */
static struct mmsghdr msgs[UDP_BATCH];
static struct iovec iovs[UDP_BATCH];
static struct sockaddr_storage addrs[UDP_BATCH];
static uint8_t bufs[UDP_BATCH][BUF_SIZE];
/* --gso: the batch's replies as runs, one message per run (its datagrams' iovecs in order). */
static bool gso;
static int per_event; /* --per-event */
static struct mmsghdr runs[UDP_BATCH];
static struct iovec run_iovs[UDP_BATCH];
static alignas(struct cmsghdr) char run_ctl[UDP_BATCH][CMSG_SPACE(sizeof(uint16_t))];

static void die(const char *what)
{
    fprintf(stderr, "udp_server_raw: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void watch(sock_t *s, unsigned events, int op)
{
    struct epoll_event ev = {.events = events, .data.ptr = s};
    if (epoll_ctl(ep, op, s->fd, &ev) != 0)
        die("epoll_ctl");
}

/* A UDP socket bound to 127.0.0.1:port, non-blocking, watched for EPOLLIN. */
static sock_t *sock_open(int port, int sockbuf)
{
    sock_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        die("calloc");
    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        die("socket (raise ulimit -n)");
    if (sockbuf > 0) {
        setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof(sockbuf));
        setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof(sockbuf));
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        die("bind");
    watch(s, EPOLLIN, EPOLL_CTL_ADD);
    return s;
}

/* Sends m[0, n) from their own buffers; returns how many went before EAGAIN (n: all). A
 * datagram the kernel refuses for any other reason is skipped. */
static unsigned send_batch(int fd, struct mmsghdr *m, unsigned n)
{
    unsigned off = 0;
    while (off < n) {
        int k = sendmmsg(fd, m + off, n - off, 0);
        if (k > 0) {
            off += (unsigned)k;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            break;
        } else if (errno != EINTR) {
            if (gso && m[off].msg_hdr.msg_controllen > 0 && (errno == EIO || errno == EINVAL)) {
                fprintf(stderr, "udp_server_raw: UDP_SEGMENT refused (%s): --gso off\n",
                        strerror(errno));
                gso = false;
            }
            off++; /* sendmmsg failed on m[off] itself: drop it, the next ones go on */
        }
    }
    return off;
}

/* Copies the datagrams of m[0, n) aside (one per iovec: a run's are one each) and waits for
 * EPOLLOUT instead of EPOLLIN. */
static void keep(sock_t *s, const struct mmsghdr *m, unsigned n)
{
    if (s->backlog == NULL && (s->backlog = malloc(sizeof(*s->backlog))) == NULL)
        die("malloc");
    backlog_t *b = s->backlog;
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        for (size_t j = 0; j < m[i].msg_hdr.msg_iovlen; j++, k++) {
            size_t len = m[i].msg_hdr.msg_iov[j].iov_len;
            memcpy(b->bufs[k], m[i].msg_hdr.msg_iov[j].iov_base, len);
            memcpy(&b->addrs[k], m[i].msg_hdr.msg_name, m[i].msg_hdr.msg_namelen);
            b->iovs[k] = (struct iovec){.iov_base = b->bufs[k], .iov_len = len};
            b->msgs[k] = (struct mmsghdr){.msg_hdr = {.msg_name = &b->addrs[k],
                                                      .msg_namelen = m[i].msg_hdr.msg_namelen,
                                                      .msg_iov = &b->iovs[k],
                                                      .msg_iovlen = 1}};
        }
    }
    b->head = 0;
    b->n = k;
    watch(s, EPOLLOUT, EPOLL_CTL_MOD);
}

/* --gso: msgs[0, m) as runs of same-size datagrams to one peer, into runs[]; their count. */
static unsigned make_runs(unsigned m)
{
    unsigned nr = 0;
    for (unsigned i = 0; i < m;) {
        const struct msghdr *h = &msgs[i].msg_hdr;
        size_t len = h->msg_iov->iov_len;
        unsigned k = 1;
        while (i + k < m && k < GSO_SEGMENTS && (k + 1) * len <= GSO_BYTES) {
            const struct msghdr *o = &msgs[i + k].msg_hdr;
            if (o->msg_iov->iov_len != len || o->msg_namelen != h->msg_namelen ||
                memcmp(o->msg_name, h->msg_name, h->msg_namelen) != 0)
                break;
            k++;
        }
        for (unsigned j = 0; j < k; j++)
            run_iovs[i + j] = *msgs[i + j].msg_hdr.msg_iov;
        struct msghdr *r = &runs[nr].msg_hdr;
        *r = (struct msghdr){.msg_name = h->msg_name,
                             .msg_namelen = h->msg_namelen,
                             .msg_iov = &run_iovs[i],
                             .msg_iovlen = k};
        if (k > 1) {
            r->msg_control = run_ctl[nr];
            r->msg_controllen = sizeof(run_ctl[nr]);
            struct cmsghdr *cm = CMSG_FIRSTHDR(r);
            cm->cmsg_level = SOL_UDP;
            cm->cmsg_type = UDP_SEGMENT;
            cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t seg = (uint16_t)len;
            memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
        }
        nr++;
        i += k;
    }
    return nr;
}

static void on_writable(sock_t *s)
{
    backlog_t *b = s->backlog;
    b->head += send_batch(s->fd, b->msgs + b->head, b->n - b->head);
    if (b->head == b->n) {
        b->n = 0;
        watch(s, EPOLLIN, EPOLL_CTL_MOD);
    }
}

static void on_readable(sock_t *s)
{
    for (int read = 0; read < per_event;) {
        for (unsigned i = 0; i < UDP_BATCH; i++) {
            iovs[i].iov_len = BUF_SIZE;
            msgs[i].msg_hdr.msg_namelen = sizeof(addrs[i]);
        }
        unsigned want = per_event - read < UDP_BATCH ? (unsigned)(per_event - read) : UDP_BATCH;
        int n = recvmmsg(s->fd, msgs, want, 0, NULL);
        if (n <= 0)
            return; /* EAGAIN: empty; errors of unconnected UDP sockets are not ours to act on */
        /* The reply is the request: the same buffer, its length, back to its sender. */
        unsigned m = 0;
        for (int i = 0; i < n; i++) {
            if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
                continue; /* longer than BUF_SIZE: not echoed */
            iovs[i].iov_len = msgs[i].msg_len;
            if (m != (unsigned)i) {
                struct mmsghdr t = msgs[m];
                msgs[m] = msgs[i];
                msgs[i] = t;
            }
            m++;
        }
        struct mmsghdr *out = msgs;
        if (gso && m > 1) {
            out = runs;
            m = make_runs(m);
        }
        unsigned sent = send_batch(s->fd, out, m);
        if (sent < m) {
            keep(s, out + sent, m - sent);
            return;
        }
        if ((unsigned)n < want)
            return; /* drained: no call just to see EAGAIN */
        read += n;
    }
}

int main(int argc, char **argv)
{
    udp_args_t a;
    udp_args_parse(&a, argc, argv, "udp_server_raw");
    udp_pin(a.cpu, "udp_server_raw");
    gso = a.gso == 1;
    per_event = a.per_event;
    for (unsigned i = 0; i < UDP_BATCH; i++) {
        iovs[i] = (struct iovec){.iov_base = bufs[i], .iov_len = BUF_SIZE};
        msgs[i].msg_hdr =
            (struct msghdr){.msg_name = &addrs[i], .msg_iov = &iovs[i], .msg_iovlen = 1};
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    sock_open(a.port, a.sockbuf);
    udp_ready(a.port, "udp_server_raw");
    if (a.idle > 0) {
        long before = udp_rss_kb();
        for (int i = 0; i < a.idle; i++)
            sock_open(0, 0);
        udp_idle_report("raw", a.idle, before);
    }

    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int k = 0; k < n; k++) {
            sock_t *s = evs[k].data.ptr;
            if (s->backlog != NULL && s->backlog->n > 0)
                on_writable(s);
            else
                on_readable(s);
        }
    }
}
