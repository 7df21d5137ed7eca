/*
 * echo_server_uring: the io_uring limit, as echo_server_epoll is the epoll one. A minimal
 * single-threaded echo server on io_uring: one multishot accept on the listener, one
 * multishot recv per connection into a provided-buffer ring, and the received buffer sent
 * straight back (one send in flight per connection, the rest queued); everything a turn
 * prepares goes to the kernel in the same io_uring_enter that waits for the next
 * completions. No allocation per message, no framework.
 *
 * The ring is set up as eddy's is where the kernel allows it: one issuer, task work deferred
 * to the wait (SINGLE_ISSUER | DEFER_TASKRUN), the ring's descriptor registered.
 *
 *   echo_server_uring [--port N] [--cpu N]
 */
#include "server_common.h"

#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE 16384
#define NBUFS 1024 /* a power of two */
#define BGID 1
#define RING_ENTRIES 4096

/* What a completion is for: the kind in the low bits of user_data, the connection above. */
enum { OP_ACCEPT = 1, OP_RECV = 2, OP_SEND = 3 };

typedef struct conn_s {
    int fd;
    bool sending, closing;
    unsigned inflight; /* ops the kernel still holds: the connection is freed at 0 */
    /* Buffers received and not yet sent back, in order: ids and lengths; head is in flight. */
    uint16_t q_bid[NBUFS];
    uint32_t q_len[NBUFS];
    uint32_t q_off; /* bytes of the head already sent */
    unsigned q_head, q_n;
} conn_t;

static struct io_uring ring;
static struct io_uring_buf_ring *br;
static uint8_t *bufs;
static int lfd;

static void die(const char *what, int err)
{
    fprintf(stderr, "echo_server_uring: %s: %s\n", what, strerror(err));
    exit(1);
}

static struct io_uring_sqe *sqe_get(void)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (sqe == NULL) {
        io_uring_submit(&ring); /* the submission queue is full: hand it over, go on */
        sqe = io_uring_get_sqe(&ring);
        if (sqe == NULL)
            die("io_uring_get_sqe", EBUSY);
    }
    return sqe;
}

static void *tag(conn_t *c, int op)
{
    return (void *)((uintptr_t)c | (uintptr_t)op);
}

static void buf_recycle(uint16_t bid)
{
    io_uring_buf_ring_add(br, bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, bid,
                          io_uring_buf_ring_mask(NBUFS), 0);
    io_uring_buf_ring_advance(br, 1);
}

static void arm_accept(void)
{
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data(sqe, tag(NULL, OP_ACCEPT));
}

static void arm_recv(conn_t *c)
{
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    io_uring_sqe_set_data(sqe, tag(c, OP_RECV));
    c->inflight++;
}

static void send_head(conn_t *c)
{
    uint16_t bid = c->q_bid[c->q_head];
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_send(sqe, c->fd, bufs + (size_t)bid * BUF_SIZE + c->q_off,
                       c->q_len[c->q_head] - c->q_off, MSG_NOSIGNAL);
    io_uring_sqe_set_data(sqe, tag(c, OP_SEND));
    c->sending = true;
    c->inflight++;
}

/* Stop: give back the buffers still queued, cancel the recv; freed once nothing is held. */
static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    for (unsigned i = c->sending ? 1 : 0; i < c->q_n; i++)
        buf_recycle(c->q_bid[(c->q_head + i) % NBUFS]);
    c->q_n = c->sending ? 1 : 0;
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_cancel_fd(sqe, c->fd, 0);
    io_uring_sqe_set_data(sqe, NULL);
}

static void conn_put(conn_t *c)
{
    if (--c->inflight == 0 && c->closing) {
        close(c->fd);
        free(c);
    }
}

static void on_recv(conn_t *c, int res, unsigned flags)
{
    if (!(flags & IORING_CQE_F_MORE))
        c->inflight--; /* the multishot ended */
    if (res <= 0 || c->closing) {
        if (res > 0 && (flags & IORING_CQE_F_BUFFER))
            buf_recycle((uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT));
        if (res == -ENOBUFS && !c->closing) {
            arm_recv(c); /* the ring ran dry for a moment: buffers are back by now */
            return;
        }
        conn_close(c);
        if (c->inflight == 0) {
            c->inflight = 1;
            conn_put(c);
        }
        return;
    }
    uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
    unsigned tail = (c->q_head + c->q_n) % NBUFS;
    c->q_bid[tail] = bid;
    c->q_len[tail] = (uint32_t)res;
    c->q_n++;
    if (!c->sending)
        send_head(c);
    if (!(flags & IORING_CQE_F_MORE))
        arm_recv(c);
}

static void on_send(conn_t *c, int res)
{
    c->sending = false;
    if (res < 0 || c->closing) {
        buf_recycle(c->q_bid[c->q_head]);
        c->q_head = (c->q_head + 1) % NBUFS;
        c->q_n--;
        conn_close(c);
        conn_put(c);
        return;
    }
    c->q_off += (uint32_t)res;
    if (c->q_off == c->q_len[c->q_head]) {
        buf_recycle(c->q_bid[c->q_head]);
        c->q_head = (c->q_head + 1) % NBUFS;
        c->q_n--;
        c->q_off = 0;
    }
    if (c->q_n > 0)
        send_head(c);
    conn_put(c);
}

static void on_accept(int res, unsigned flags)
{
    if (!(flags & IORING_CQE_F_MORE))
        arm_accept();
    if (res < 0)
        return;
    int one = 1;
    setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(res);
        return;
    }
    c->fd = res;
    arm_recv(c);
}

int main(int argc, char **argv)
{
    server_args_t a;
    server_args_parse(&a, argc, argv, "echo_server_uring");
    server_pin(a.cpu, "echo_server_uring");
    signal(SIGPIPE, SIG_IGN);

    struct io_uring_params p = {0};
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
    p.cq_entries = RING_ENTRIES * 4;
    int err = io_uring_queue_init_params(RING_ENTRIES, &ring, &p);
    if (err == -EINVAL) {
        p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_CQSIZE; /* an older kernel */
        err = io_uring_queue_init_params(RING_ENTRIES, &ring, &p);
    }
    if (err < 0)
        die("io_uring_queue_init_params", -err);
    io_uring_register_ring_fd(&ring);

    size_t br_size = NBUFS * sizeof(struct io_uring_buf);
    br = mmap(NULL, br_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bufs = malloc((size_t)NBUFS * BUF_SIZE);
    if (br == MAP_FAILED || bufs == NULL)
        die("buffers", ENOMEM);
    io_uring_buf_ring_init(br);
    struct io_uring_buf_reg reg = {.ring_addr = (uintptr_t)br, .ring_entries = NBUFS, .bgid = BGID};
    if ((err = io_uring_register_buf_ring(&ring, &reg, 0)) != 0)
        die("io_uring_register_buf_ring", -err);
    for (uint16_t i = 0; i < NBUFS; i++)
        io_uring_buf_ring_add(br, bufs + (size_t)i * BUF_SIZE, BUF_SIZE, i,
                              io_uring_buf_ring_mask(NBUFS), i);
    io_uring_buf_ring_advance(br, NBUFS);

    lfd = server_listen(a.port, SOCK_CLOEXEC, "echo_server_uring");
    arm_accept();
    server_ready(a.port, "echo_server_uring");

    for (;;) {
        err = io_uring_submit_and_wait(&ring, 1);
        if (err < 0 && err != -EINTR)
            die("io_uring_submit_and_wait", -err);
        struct io_uring_cqe *cqe;
        unsigned head, n = 0;
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            n++;
            uintptr_t ud = (uintptr_t)io_uring_cqe_get_data(cqe);
            conn_t *c = (conn_t *)(ud & ~(uintptr_t)7);
            switch (ud & 7) {
            case OP_ACCEPT:
                on_accept(cqe->res, cqe->flags);
                break;
            case OP_RECV:
                on_recv(c, cqe->res, cqe->flags);
                break;
            case OP_SEND:
                on_send(c, cqe->res);
                break;
            default:
                break; /* a cancel's own completion */
            }
        }
        io_uring_cq_advance(&ring, n);
    }
}
