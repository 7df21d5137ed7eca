/*
 * udp_server_raw: the one-loop limit for UDP, against which eddy's datagram channel on one
 * loop is measured. A single-threaded echo server on level-triggered epoll and a
 * non-blocking socket: recvmmsg takes up to UDP_BATCH datagrams into preallocated buffers,
 * sendmmsg sends each back to its sender from the same buffers, and reading goes on until a
 * short batch (the queue is then empty, or epoll says so again). When the socket's send
 * buffer is full (EAGAIN), the datagrams not sent are copied aside, the socket stops reading
 * and waits for EPOLLOUT; nothing is dropped but what the kernel refuses outright (a
 * datagram too large, no route: that one is skipped, the rest go on) and what does not fit a
 * buffer (truncated: never echoed). No allocation per datagram, no framework.
 *
 *   udp_server_raw [--port N] [--cpu N] [--sockbuf BYTES] [--idle N]   (udp_common.h)
 */
#include "udp_common.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE 2048        /* the largest datagram echoed; the benchmark sends <= 1200 B */
#define BATCHES_PER_EVENT 16 /* full batches read per readiness event before the others */

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
            off++; /* sendmmsg failed on m[off] itself: drop it, the next ones go on */
        }
    }
    return off;
}

/* Copies m[0, n) aside and waits for EPOLLOUT instead of EPOLLIN. */
static void keep(sock_t *s, const struct mmsghdr *m, unsigned n)
{
    if (s->backlog == NULL && (s->backlog = malloc(sizeof(*s->backlog))) == NULL)
        die("malloc");
    backlog_t *b = s->backlog;
    for (unsigned i = 0; i < n; i++) {
        size_t len = m[i].msg_hdr.msg_iov->iov_len;
        memcpy(b->bufs[i], m[i].msg_hdr.msg_iov->iov_base, len);
        memcpy(&b->addrs[i], m[i].msg_hdr.msg_name, m[i].msg_hdr.msg_namelen);
        b->iovs[i] = (struct iovec){.iov_base = b->bufs[i], .iov_len = len};
        b->msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_name = &b->addrs[i],
                                                  .msg_namelen = m[i].msg_hdr.msg_namelen,
                                                  .msg_iov = &b->iovs[i],
                                                  .msg_iovlen = 1}};
    }
    b->head = 0;
    b->n = n;
    watch(s, EPOLLOUT, EPOLL_CTL_MOD);
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
    for (int batch = 0; batch < BATCHES_PER_EVENT; batch++) {
        for (unsigned i = 0; i < UDP_BATCH; i++) {
            iovs[i].iov_len = BUF_SIZE;
            msgs[i].msg_hdr.msg_namelen = sizeof(addrs[i]);
        }
        int n = recvmmsg(s->fd, msgs, UDP_BATCH, 0, NULL);
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
        unsigned sent = send_batch(s->fd, msgs, m);
        if (sent < m) {
            keep(s, msgs + sent, m - sent);
            return;
        }
        if (n < UDP_BATCH)
            return;
    }
}

int main(int argc, char **argv)
{
    udp_args_t a;
    udp_args_parse(&a, argc, argv, "udp_server_raw");
    udp_pin(a.cpu, "udp_server_raw");
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
