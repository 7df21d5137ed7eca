/*
 * Datagram channels (include/eddy/datagram.h): UDP and Unix datagram sockets, and the packets
 * they carry.
 *
 * The channel is watched through its loop's readiness watchers on every poller (io_uring
 * loops poll it too): datagrams are many small messages each complete in itself, which
 * recvmmsg and sendmmsg already batch, so a completion transport would add operations to
 * track without saving a system call. Reads take up to EDDY_MAX_MESSAGES_PER_READ datagrams
 * per readiness event, asking recvmmsg for as many as the previous batch found (doubling
 * while batches come back full). Writes gather the flushed packets into one sendmmsg, a run
 * of same-size packets to one peer as one UDP_SEGMENT send (GSO).
 */
#include "pipeline/transport/socket.h"

#include <eddy/datagram.h>

#include <errno.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef SOL_UDP
#define SOL_UDP 17
#endif

/* Datagrams per recvmmsg and per sendmmsg: the stack arrays below. */
#define MAX_BATCH 64
/* Iovecs per sendmmsg, over all its messages (a composite packet takes several). */
#define MAX_IOV 256
/* A GSO send: at most this many segments and bytes (the kernel's UDP_MAX_SEGMENTS and a
 * datagram's 64 KiB). */
#define GSO_MAX_SEGMENTS 64
#define GSO_MAX_BYTES 65000
/* A receive with UDP_GRO on may hold this much. */
#define GRO_RECV_SIZE 65536

/* ---------------------------------------------------------------------------------------
 * Packets
 */

struct eddy_datagram_s {
    eddy_msg_t msg; /* first: a packet is its message */
    eddy_buf_t *content;
    eddy_addr_t sender, recipient;
};

static void datagram_free(eddy_msg_t *msg)
{
    assert(msg->type == EDDY_MSG_DATAGRAM);
    eddy_datagram_t *d = (eddy_datagram_t *)msg;
    if (d->content != NULL) {
        eddy_buf_release(d->content);
    }
    eddy__recycle_put(EDDY__RECYCLE_PACKET, d);
}

/* Copy what a is (its length's bytes), or a zero length for NULL. */
static void addr_copy(eddy_addr_t *to, const eddy_addr_t *a)
{
    if (a == NULL || a->len == 0 || a->len > sizeof(to->u)) {
        to->len = 0;
        to->u.sa.sa_family = AF_UNSPEC;
        return;
    }
    memcpy(&to->u, &a->u, a->len);
    to->len = a->len;
}

eddy_datagram_t *eddy_datagram_new(eddy_buf_t *content, const eddy_addr_t *recipient,
                                   const eddy_addr_t *sender)
{
    eddy_datagram_t *d = eddy__recycle_get(EDDY__RECYCLE_PACKET, sizeof(*d));
    if (d == NULL) {
        if (content != NULL) {
            eddy_buf_release(content);
        }
        return NULL;
    }
    eddy_msg_init(&d->msg, EDDY_MSG_DATAGRAM, datagram_free);
    d->content = content;
    addr_copy(&d->recipient, recipient);
    addr_copy(&d->sender, sender);
    return d;
}

eddy_datagram_t *eddy_datagram_reply(const eddy_datagram_t *d, eddy_buf_t *content)
{
    return eddy_datagram_new(content, &d->sender, &d->recipient);
}

eddy_datagram_t *eddy_datagram_turn(eddy_datagram_t *d, eddy_buf_t *content)
{
    assert(eddy_msg_refcnt(&d->msg) == 1); /* nobody else sees it change */
    eddy_addr_t to = d->sender;
    d->sender = d->recipient;
    d->recipient = to;
    if (content != NULL) {
        if (d->content != NULL) {
            eddy_buf_release(d->content);
        }
        d->content = content;
    }
    return d;
}

eddy_msg_t *eddy_datagram_msg(eddy_datagram_t *d)
{
    return &d->msg;
}

eddy_datagram_t *eddy_datagram_of(eddy_msg_t *msg)
{
    return msg != NULL && msg->type == EDDY_MSG_DATAGRAM ? (eddy_datagram_t *)msg : NULL;
}

eddy_datagram_t *eddy_datagram_retain(eddy_datagram_t *d)
{
    return eddy_msg_retain(&d->msg) != NULL ? d : NULL;
}

void eddy_datagram_release(eddy_datagram_t *d)
{
    if (d != NULL) {
        eddy_msg_release(&d->msg);
    }
}

eddy_buf_t *eddy_datagram_content(const eddy_datagram_t *d)
{
    return d->content;
}

eddy_buf_t *eddy_datagram_take_content(eddy_datagram_t *d)
{
    eddy_buf_t *b = d->content;
    d->content = NULL;
    return b;
}

const eddy_addr_t *eddy_datagram_sender(const eddy_datagram_t *d)
{
    return &d->sender;
}

const eddy_addr_t *eddy_datagram_recipient(const eddy_datagram_t *d)
{
    return &d->recipient;
}

/* ---------------------------------------------------------------------------------------
 * Interest
 */

static void update_interest(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    if (ch->flags & EDDY__CH_CLOSED) {
        return;
    }
    assert(ch->fd >= 0); /* datagram_do_close() lets go of it at close */
    unsigned ev = 0;
    if ((ch->flags & EDDY__CH_READING) && !(ch->flags & EDDY__CH_NO_INPUT)) {
        ev |= EDDY_IO_READ;
    }
    if (ch->flags & EDDY__CH_WRITE_WAIT) {
        ev |= EDDY_IO_WRITE;
    }
    eddy__socket_watch(ch, ev);
}

static void begin_read(eddy_channel_t *ch)
{
    if (!(ch->flags & EDDY__CH_ACTIVE)) {
        return;
    }
    ch->flags |= EDDY__CH_READING;
    update_interest(ch);
}

/* ---------------------------------------------------------------------------------------
 * Reading
 */

/* The segment size of a coalesced (GRO) receive, or 0. */
static size_t gro_segment(struct msghdr *mh)
{
#ifdef UDP_GRO
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int seg;
            memcpy(&seg, CMSG_DATA(c), sizeof(seg));
            return seg > 0 ? (size_t)seg : 0;
        }
    }
#else
    (void)mh;
#endif
    return 0;
}

/* Hand one received payload on as a packet from sender to self (the channel's address);
 * false when the channel closed. */
static bool deliver(eddy_channel_t *ch, eddy_buf_t *buf, const eddy_addr_t *sender,
                    const eddy_addr_t *self)
{
    eddy_datagram_t *d = eddy_datagram_new(buf, self, sender);
    if (d == NULL) {
        eddy_pipeline_fire_exception(&ch->pipeline, EDDY_ENOMEM);
    } else {
        atomic_fetch_add_explicit(&ch->msgs_read, 1, memory_order_relaxed);
        eddy_pipeline_fire_channel_read(&ch->pipeline, eddy_datagram_msg(d));
    }
    return !(ch->flags & EDDY__CH_CLOSED);
}

/* A received datagram of n bytes in buf: passed on, split when the kernel coalesced several
 * (GRO), or reported when truncated. False when the channel closed. */
static bool received(eddy_channel_t *ch, eddy_buf_t *buf, size_t n, struct msghdr *mh,
                     const eddy_addr_t *sender, const eddy_addr_t *self)
{
    atomic_fetch_add_explicit(&ch->bytes_read, n, memory_order_relaxed);
    if (mh->msg_flags & MSG_TRUNC) {
        /* Longer than EDDY_DATAGRAM_RECV_SIZE: never passed on as if whole. */
        eddy_buf_release(buf);
        eddy_pipeline_fire_exception(&ch->pipeline, EDDY_EMSGSIZE);
        return !(ch->flags & EDDY__CH_CLOSED);
    }
    assert(n <= eddy_buf_capacity(buf)); /* not truncated: it fit the buffer */
    eddy_buf_set_writer_index(buf, n);
    size_t seg = gro_segment(mh);
    if (seg == 0 || seg >= n) {
        return deliver(ch, buf, sender, self);
    }
    bool open = true;
    for (size_t off = 0; off < n && open; off += seg) {
        size_t len = n - off < seg ? n - off : seg;
        eddy_buf_t *part = eddy_buf_retained_slice(buf, off, len);
        if (part == NULL) {
            eddy_pipeline_fire_exception(&ch->pipeline, EDDY_ENOMEM);
            break;
        }
        open = deliver(ch, part, sender, self);
    }
    eddy_buf_release(buf);
    return open;
}

/* How many datagrams the next recvmmsg asks for: what the last batch found, doubled when it
 * came back full, within the per-read cap. */
static unsigned batch_size(const eddy_channel_t *ch, int64_t left)
{
    assert(left > 0);
    unsigned want = ch->recv_index ? ch->recv_index : 1;
    if (want > MAX_BATCH) {
        want = MAX_BATCH;
    }
    return (int64_t)want < left ? want : (unsigned)left;
}

static void record_batch(eddy_channel_t *ch, unsigned asked, unsigned got)
{
    assert(got <= asked && asked <= MAX_BATCH);
    unsigned next = got >= asked ? asked * 2 : got + 1;
    ch->recv_index = (uint8_t)(next > MAX_BATCH ? MAX_BATCH : next < 1 ? 1 : next);
}

static void datagram_read(eddy_channel_t *ch)
{
    eddy_pipeline_t *p = &ch->pipeline;
    int64_t left = ch->opt[EDDY_MAX_MESSAGES_PER_READ];
    bool gro = ch->opt[EDDY_UDP_GRO] != 0;
    size_t size = gro ? GRO_RECV_SIZE : (size_t)ch->opt[EDDY_DATAGRAM_RECV_SIZE];
    eddy_allocator_t *alloc = eddy_allocator_default();
    bool one_batch = !ch->opt[EDDY_AUTO_READ];
    if (one_batch) {
        ch->flags &= ~EDDY__CH_READING;
    }
    const eddy_addr_t *self = eddy_channel_local_addr(ch); /* every packet's recipient */
    while (left > 0 && !(ch->flags & (EDDY__CH_CLOSED | EDDY__CH_NO_INPUT))) {
        struct mmsghdr mm[MAX_BATCH];
        struct iovec iov[MAX_BATCH];
        eddy_addr_t from[MAX_BATCH];
        eddy_buf_t *bufs[MAX_BATCH];
        _Alignas(struct cmsghdr) char ctl[MAX_BATCH][CMSG_SPACE(sizeof(int))];
        unsigned want = batch_size(ch, left), k = 0;
        for (; k < want; k++) {
            bufs[k] = eddy_buf_alloc(alloc, size, size);
            if (bufs[k] == NULL) {
                break;
            }
            iov[k].iov_base = eddy_buf_write_ptr(bufs[k]);
            iov[k].iov_len = size;
            memset(&mm[k].msg_hdr, 0, sizeof(mm[k].msg_hdr));
            mm[k].msg_hdr.msg_name = &from[k].u;
            mm[k].msg_hdr.msg_namelen = sizeof(from[k].u);
            mm[k].msg_hdr.msg_iov = &iov[k];
            mm[k].msg_hdr.msg_iovlen = 1;
            if (gro) {
                mm[k].msg_hdr.msg_control = ctl[k];
                mm[k].msg_hdr.msg_controllen = sizeof(ctl[k]);
            }
        }
        if (k == 0) {
            eddy_pipeline_fire_exception(p, EDDY_ENOMEM);
            break;
        }
        int n = recvmmsg(ch->fd, mm, k, MSG_DONTWAIT, NULL);
        int err = n < 0 ? -errno : 0;
        unsigned got = n > 0 ? (unsigned)n : 0;
        bool open = true;
        for (unsigned i = 0; i < k; i++) {
            if (i >= got || !open) {
                eddy_buf_release(bufs[i]);
                continue;
            }
            from[i].len = mm[i].msg_hdr.msg_namelen;
            if (from[i].len > sizeof(from[i].u)) {
                from[i].len = 0;
            }
            open = received(ch, bufs[i], mm[i].msg_len, &mm[i].msg_hdr, &from[i], self);
        }
        if (open && got > 0) {
            /* One batch per recvmmsg: the answers go out (a flush in read_complete) while
             * the batch's buffers are still in the cache, before the next batch is read. */
            eddy_pipeline_fire_channel_read_complete(p);
            open = !(ch->flags & EDDY__CH_CLOSED);
        }
        if (!open) {
            return;
        }
        if (err == EDDY_EINTR) {
            continue;
        }
        if (err != 0) {
            if (err != EDDY_EAGAIN && err != -EWOULDBLOCK) {
                /* An ICMP error a connected socket received (ECONNREFUSED), or a socket
                 * error: reported, and the channel goes on; the error is consumed. */
                eddy_pipeline_fire_exception(p, err);
                left--;
                continue;
            }
            break;
        }
        record_batch(ch, k, got);
        left -= got;
        if (got < k) {
            break; /* drained: no call just to see EAGAIN */
        }
    }
    if (ch->flags & EDDY__CH_CLOSED) {
        return;
    }
    if (one_batch && !(ch->flags & EDDY__CH_READING)) {
        update_interest(ch); /* one batch per eddy_channel_read() */
    }
}

/* ---------------------------------------------------------------------------------------
 * Writing
 */

/* The payload and the recipient of a queued message (a packet, or bytes on a connected
 * channel). */
static eddy_buf_t *msg_buf(eddy_msg_t *msg)
{
    return msg->type == EDDY_MSG_DATAGRAM ? eddy_datagram_of(msg)->content
           : msg->type == EDDY_MSG_BUF    ? eddy_buf_of(msg)
                                          : NULL;
}

static const eddy_addr_t *msg_recipient(eddy_msg_t *msg)
{
    eddy_datagram_t *d = eddy_datagram_of(msg);
    return d != NULL ? &d->recipient : NULL;
}

/* msg's payload into iov (up to max): how many iovecs, 0 for an empty payload, -1 when it
 * does not fit. */
static int msg_iovec(eddy_msg_t *msg, struct iovec *iov, int max)
{
    eddy_buf_t *b = msg_buf(msg);
    if (b != NULL) {
        if (eddy_buf_readable(b) == 0) {
            return 0;
        }
        if (max < 1) {
            return -1;
        }
        iov[0].iov_base = (void *)(uintptr_t)eddy_buf_read_ptr(b);
        iov[0].iov_len = eddy_buf_readable(b);
        return 1;
    }
    if (msg->type == EDDY_MSG_COMPOSITE) {
        eddy_composite_t *c = eddy_composite_of(msg);
        size_t total = eddy_composite_readable(c);
        int got = eddy_composite_iovec(c, iov, max);
        size_t sum = 0;
        for (int i = 0; i < got; i++) {
            sum += iov[i].iov_len;
        }
        return sum == total ? got : -1;
    }
    return 0; /* a packet without content: an empty datagram */
}

static bool same_addr(const eddy_addr_t *a, const eddy_addr_t *b)
{
    return a->len == b->len && memcmp(&a->u, &b->u, a->len) == 0;
}

/* One sendmmsg's worth: headers, their iovecs and GSO control blocks, and how many queued
 * messages each header carries. */
typedef struct send_batch_s {
    struct mmsghdr mm[MAX_BATCH];
    struct iovec iov[MAX_IOV];
    _Alignas(struct cmsghdr) char ctl[MAX_BATCH][CMSG_SPACE(sizeof(uint16_t))];
    unsigned msgs[MAX_BATCH];
    unsigned n;
} send_batch_t;

/* Whether msgs[i] may join the GSO run that header h started with msgs[first]: same peer,
 * same size (the last may be shorter, then the run ends), within the kernel's limits. */
static bool joins_run(eddy_msg_t **msgs, size_t first, size_t i, size_t seg, size_t run_bytes,
                      unsigned count)
{
    if (count >= GSO_MAX_SEGMENTS || msgs[i]->type == EDDY_MSG_COMPOSITE) {
        return false;
    }
    eddy_buf_t *b = msg_buf(msgs[i]);
    size_t len = b != NULL ? eddy_buf_readable(b) : 0;
    if (len == 0 || len > seg || run_bytes + len > GSO_MAX_BYTES) {
        return false;
    }
    const eddy_addr_t *ra = msg_recipient(msgs[first]), *rb = msg_recipient(msgs[i]);
    return (ra == NULL) == (rb == NULL) && (ra == NULL || same_addr(ra, rb));
}

/* Fill b from msgs[0..n): returns how many messages it took; 0 when the first one is in more
 * pieces than a send takes. */
static size_t batch_fill(eddy_channel_t *ch, send_batch_t *b, eddy_msg_t **msgs, size_t n)
{
    bool connected = (ch->flags & EDDY__CH_DGRAM_CONNECTED) != 0;
    bool gso = ch->opt[EDDY_UDP_GSO] && !(ch->flags & EDDY__CH_DGRAM_NO_GSO) &&
               eddy__socket_is_ip(ch); /* IP, not Unix */
    size_t i = 0;
    int used = 0;
    b->n = 0;
    while (i < n && b->n < MAX_BATCH) {
        struct mmsghdr *m = &b->mm[b->n];
        memset(&m->msg_hdr, 0, sizeof(m->msg_hdr));
        int got = msg_iovec(msgs[i], b->iov + used, MAX_IOV - used);
        if (got < 0) {
            break; /* the next batch starts with it; alone, it has too many pieces */
        }
        m->msg_hdr.msg_iov = b->iov + used;
        m->msg_hdr.msg_iovlen = (size_t)got;
        const eddy_addr_t *to = msg_recipient(msgs[i]);
        if (!connected && to != NULL && to->len > 0) {
            m->msg_hdr.msg_name = (void *)(uintptr_t)&to->u;
            m->msg_hdr.msg_namelen = to->len;
        }
        used += got;
        unsigned count = 1;
        size_t seg = got == 1 ? b->iov[used - 1].iov_len : 0;
        size_t run = seg;
        if (gso && seg > 0) {
            /* A run of same-size packets to the same peer: one GSO send. */
            while (i + count < n && used < MAX_IOV &&
                   joins_run(msgs, i, i + count, seg, run, count)) {
                eddy_buf_t *nb = msg_buf(msgs[i + count]);
                size_t len = eddy_buf_readable(nb);
                b->iov[used].iov_base = (void *)(uintptr_t)eddy_buf_read_ptr(nb);
                b->iov[used].iov_len = len;
                used++;
                run += len;
                count++;
                if (len < seg) {
                    break; /* a shorter one ends the run */
                }
            }
        }
#ifdef UDP_SEGMENT
        if (count > 1) {
            m->msg_hdr.msg_iovlen = count;
            m->msg_hdr.msg_control = b->ctl[b->n];
            m->msg_hdr.msg_controllen = sizeof(b->ctl[b->n]);
            struct cmsghdr *c = CMSG_FIRSTHDR(&m->msg_hdr);
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t s = (uint16_t)seg;
            memcpy(CMSG_DATA(c), &s, sizeof(s));
        }
#endif
        b->msgs[b->n++] = count;
        i += count;
        if (used >= MAX_IOV) {
            break;
        }
    }
    return i;
}

/* A send refused outright: the error of the first header's packets, or a reason to stop. */
typedef enum { SEND_OK, SEND_BLOCKED, SEND_RETRY } send_outcome_t;

static send_outcome_t send_failed(eddy_channel_t *ch, const send_batch_t *b, int err)
{
    if (err == EDDY_EINTR) {
        return SEND_RETRY;
    }
    if (err == EDDY_EAGAIN || err == -EWOULDBLOCK || err == EDDY_ENOBUFS) {
        return SEND_BLOCKED; /* the socket buffer (or the device queue) is full */
    }
    if (b->mm[0].msg_hdr.msg_controllen > 0 && (err == EDDY_EIO || err == EDDY_EINVAL ||
                                                err == -EOPNOTSUPP)) {
        /* The kernel or the device does not take GSO here: send one by one from now on. */
        ch->flags |= EDDY__CH_DGRAM_NO_GSO;
        eddy__log(EDDY_LOG_DEBUG, "channel %llu: UDP GSO refused (%s); sending unsegmented",
                  (unsigned long long)ch->id, eddy_err_name(err));
        return SEND_RETRY;
    }
    /* This datagram cannot go (EMSGSIZE, no route, a peer's ICMP error on a connected
     * socket): its promise fails, the next ones go on. */
    eddy__outbound_complete(ch, b->msgs[0], err);
    return SEND_OK;
}

static void datagram_flush(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    if ((ch->flags & (EDDY__CH_FLUSHING | EDDY__CH_CLOSED | EDDY__CH_WRITE_WAIT)) ||
        !(ch->flags & EDDY__CH_ACTIVE)) {
        return; /* nested, closed, or the socket is full: the write-ready event flushes */
    }
    ch->flags |= EDDY__CH_FLUSHING;
    int64_t spins = ch->opt[EDDY_WRITE_SPIN_COUNT];
    bool blocked = false;
    send_batch_t b;
    while (spins-- > 0 && !(ch->flags & EDDY__CH_CLOSED)) {
        eddy_msg_t *msgs[MAX_BATCH * 4];
        size_t n = eddy__outbound_flushed_msgs(ch, msgs, sizeof(msgs) / sizeof(msgs[0]));
        if (n == 0) {
            break;
        }
        if (batch_fill(ch, &b, msgs, n) == 0) {
            eddy__outbound_complete(ch, 1, EDDY_EMSGSIZE);
            continue;
        }
        int sent = sendmmsg(ch->fd, b.mm, b.n, MSG_NOSIGNAL);
        if (sent <= 0) {
            send_outcome_t o = send_failed(ch, &b, sent < 0 ? -errno : EDDY_EAGAIN);
            if (o == SEND_BLOCKED) {
                blocked = true;
                break;
            }
            spins += o == SEND_RETRY;
            continue;
        }
        size_t done = 0;
        for (int i = 0; i < sent; i++) {
            done += b.msgs[i];
        }
        eddy__outbound_complete(ch, done, 0);
        /* Fewer sent than asked: the next header met an error, which the next call reports
         * (or the socket filled up, and it finds EAGAIN). */
    }
    assert(ch->flags & EDDY__CH_FLUSHING);
    ch->flags &= ~EDDY__CH_FLUSHING;
    if (ch->flags & EDDY__CH_CLOSED) {
        return;
    }
    if (blocked) {
        ch->flags |= EDDY__CH_WRITE_WAIT;
        update_interest(ch);
    } else if (eddy__outbound_has_flushed(ch)) {
        /* Spun enough: let the loop serve others, and come back. */
        eddy__socket_flush_later(ch);
    }
}

static int datagram_accepts(const eddy_channel_t *ch, const eddy_msg_t *msg)
{
    if (msg->type == EDDY_MSG_DATAGRAM) {
        const eddy_datagram_t *d = (const eddy_datagram_t *)msg;
        return (ch->flags & EDDY__CH_DGRAM_CONNECTED) || d->recipient.len > 0
                   ? 0
                   : EDDY_EDESTADDRREQ;
    }
    if (msg->type == EDDY_MSG_BUF || msg->type == EDDY_MSG_COMPOSITE) {
        /* Bytes go to the connected peer; an unconnected channel needs packets. */
        return (ch->flags & EDDY__CH_DGRAM_CONNECTED) ? 0 : EDDY_EDESTADDRREQ;
    }
    return EDDY_ENOTSUP; /* an encoder is missing from the pipeline */
}

/* ---------------------------------------------------------------------------------------
 * Events, options, closing
 */

static void on_io(eddy_io_t *io, unsigned events, void *arg)
{
    (void)io;
    eddy_channel_t *ch = eddy__channel_hold(arg); /* a handler may close it */
    if ((events & EDDY_IO_WRITE) && !(ch->flags & EDDY__CH_CLOSED)) {
        ch->flags &= ~EDDY__CH_WRITE_WAIT;
        datagram_flush(ch);
        update_interest(ch);
    }
    if ((events & (EDDY_IO_READ | EDDY_IO_ERROR | EDDY_IO_HUP)) &&
        !(ch->flags & EDDY__CH_CLOSED)) {
        if (ch->flags & EDDY__CH_READING) {
            datagram_read(ch);
        } else if (events & EDDY_IO_ERROR) {
            /* Not reading, and a pending socket error (an ICMP one): consume and report it,
             * or the level-triggered watcher fires again at once. */
            int err = eddy__io_socket_error(&ch->io);
            if (err != 0) {
                eddy_pipeline_fire_exception(&ch->pipeline, err);
            }
        }
    }
    eddy__channel_unhold(ch);
}

static int family_of(const eddy_channel_t *ch)
{
    return ch->local_ip.sa.sa_family != AF_UNSPEC ? ch->local_ip.sa.sa_family
                                                  : ch->remote_ip.sa.sa_family;
}

static int set_int(int fd, int level, int name, int v)
{
    return setsockopt(fd, level, name, &v, sizeof(v)) == 0 ? 0 : -errno;
}

static int datagram_option(eddy_channel_t *ch, eddy_option_t opt, int64_t value)
{
    int fd = ch->fd;
    bool v6 = family_of(ch) == AF_INET6;
    bool ip = eddy__socket_is_ip(ch); /* IP (UDP), not Unix */
    switch (opt) {
    case EDDY_SO_BROADCAST:
        return set_int(fd, SOL_SOCKET, SO_BROADCAST, (int)value);
    case EDDY_IP_MULTICAST_LOOP:
        return !ip ? 0
               : v6 ? set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, (int)value)
                    : set_int(fd, IPPROTO_IP, IP_MULTICAST_LOOP, (int)value);
    case EDDY_IP_MULTICAST_TTL:
        return !ip ? 0
               : v6 ? set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, (int)value)
                    : set_int(fd, IPPROTO_IP, IP_MULTICAST_TTL, (int)value);
    case EDDY_IP_MULTICAST_IF:
        if (!ip) {
            return 0;
        }
        if (v6) {
            return set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, (int)value);
        } else {
            struct ip_mreqn m = {.imr_ifindex = (int)value};
            return setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof(m)) == 0 ? 0 : -errno;
        }
    case EDDY_UDP_GRO:
#ifdef UDP_GRO
        return ip ? set_int(fd, SOL_UDP, UDP_GRO, (int)value) : 0;
#else
        return value ? EDDY_ENOTSUP : 0;
#endif
    case EDDY_TCP_NODELAY:
    case EDDY_SO_KEEPALIVE:
    case EDDY_SO_LINGER:
        return 0; /* stream options: nothing on a datagram socket */
    default:
        return eddy__socket_is_tcp_option(opt) ? 0 : eddy__socket_option(ch, opt, value);
    }
}

static void datagram_do_close(eddy_channel_t *ch)
{
    if (ch->fd >= 0) {
        eddy__io_close(&ch->io);
        eddy__fd_close(ch->fd);
        ch->fd = -1;
    }
}

static const eddy__channel_ops_t datagram_ops = {
    .kind = "datagram",
    .begin_read = begin_read,
    .update_interest = update_interest,
    .flush = datagram_flush,
    .do_close = datagram_do_close,
    .set_socket_option = datagram_option,
    .destroy = eddy__socket_destroy,
    .accepts = datagram_accepts,
    .write_dropped = eddy__write_dropped, /* a datagram is whole or absent: the rest go on */
};

bool eddy_channel_is_datagram(const eddy_channel_t *ch)
{
    return ch->ops == &datagram_ops;
}

/* ---------------------------------------------------------------------------------------
 * Opening
 */

typedef struct open_req_s {
    eddy_addr_t local, remote; /* zero lengths: not given */
    eddy_loop_t *loop;
    eddy_channel_config_t config;
    bool has_config;
    eddy_channel_init_cb init;
    void *arg;
    eddy_promise_t *p;
} open_req_t;

/* Bind and connect the new channel's socket as asked: 0 or -errno. */
static int open_socket(eddy_channel_t *ch, const open_req_t *r)
{
    if (r->local.len > 0 && bind(ch->fd, &r->local.u.sa, r->local.len) != 0) {
        return -errno;
    }
    if (r->remote.len > 0) {
        if (connect(ch->fd, &r->remote.u.sa, r->remote.len) != 0) {
            return -errno;
        }
        ch->flags |= EDDY__CH_DGRAM_CONNECTED;
    }
    eddy__socket_fill_addrs(ch, r->remote.len > 0);
    return 0;
}

static void open_on_loop(void *arg)
{
    open_req_t *r = arg;
    const eddy_addr_t *a = r->local.len > 0 ? &r->local : &r->remote;
    int fd = socket(a->u.sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    eddy_channel_t *ch = fd >= 0 ? eddy__channel_new(r->loop, &datagram_ops, fd) : NULL;
    int err = fd < 0 ? -errno : ch == NULL ? EDDY_ENOMEM : 0;
    if (ch == NULL && fd >= 0) {
        close(fd);
    }
    if (err == 0) {
        /* The addresses first (the options look at the family), then the options (SO_REUSEPORT
         * before bind), then bind and connect. */
        eddy__channel_set_addr(ch, false, a);
        /* A datagram is one small message, a stream read up to 64 KiB: 16 per wake-up, the
         * streams' default, cost a DNS server 5% more CPU per query in epoll_wait calls
         * (bench/dns). One recvmmsg batch instead, unless the config says otherwise. */
        eddy__channel_use_datagram_defaults(ch);
        if (r->has_config) {
            eddy__channel_apply_config(ch, &r->config);
        }
        err = open_socket(ch, r);
    }
    if (err != 0) {
        if (ch != NULL) {
            eddy_channel_release(ch); /* never registered: destroy closes fd */
        }
        eddy_promise_fail(r->p, err);
    } else {
        eddy__channel_hold(ch); /* a failed init closes it inside */
        eddy__socket_register_io(ch, on_io);
        int rc = r->init != NULL ? r->init(ch, r->arg) : 0;
        if (rc != 0) {
            eddy_promise_fail(r->p, rc < 0 ? rc : EDDY_ECANCELED);
            eddy__channel_do_close(ch, rc, NULL);
        } else {
            eddy__channel_activate(ch);
            if (ch->flags & EDDY__CH_CLOSED) {
                eddy_promise_fail(r->p, EDDY_ECLOSED);
            } else {
                eddy__promise_succeed_channel(r->p, ch);
            }
        }
        eddy__channel_unhold(ch);
    }
    eddy_future_release(r->p);
    free(r);
}

eddy_future_t *eddy_datagram_open(const eddy_addr_t *local, const eddy_datagram_options_t *opts)
{
    if (opts == NULL || opts->loop == NULL) {
        return NULL;
    }
    eddy_promise_t *p = eddy_promise_new(opts->loop);
    if (p == NULL) {
        return NULL;
    }
    bool has_local = local != NULL && local->len > 0;
    bool has_remote = opts->remote != NULL && opts->remote->len > 0;
    if ((!has_local && !has_remote) ||
        (has_local && has_remote && local->u.sa.sa_family != opts->remote->u.sa.sa_family)) {
        eddy_promise_fail(p, EDDY_EINVAL);
        return p;
    }
    open_req_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        eddy_promise_fail(p, EDDY_ENOMEM);
        return p;
    }
    addr_copy(&r->local, has_local ? local : NULL);
    addr_copy(&r->remote, has_remote ? opts->remote : NULL);
    r->loop = opts->loop;
    if (opts->config != NULL) {
        r->config = *opts->config;
        r->has_config = true;
    }
    r->init = opts->init;
    r->arg = opts->arg;
    r->p = eddy_future_retain(p);
    eddy__loop_run_request(opts->loop, open_on_loop, r, p);
    return p;
}

/* ---------------------------------------------------------------------------------------
 * Multicast
 */

typedef struct group_req_s {
    bool join;
    unsigned ifindex;
    eddy_addr_t group, source; /* source: zero length for any */
    eddy_promise_t *p;
} group_req_t;

static int is_multicast(const eddy_addr_t *a)
{
    if (a->u.sa.sa_family == AF_INET) {
        return IN_MULTICAST(ntohl(a->u.in4.sin_addr.s_addr));
    }
    return a->u.sa.sa_family == AF_INET6 && IN6_IS_ADDR_MULTICAST(&a->u.in6.sin6_addr);
}

static int group_change(eddy_channel_t *ch, const group_req_t *g)
{
    if (ch->flags & EDDY__CH_CLOSED) {
        return EDDY_ECLOSED;
    }
    if (!eddy_channel_is_datagram(ch) || !is_multicast(&g->group) ||
        (g->source.len > 0 && g->source.u.sa.sa_family != g->group.u.sa.sa_family)) {
        return EDDY_EINVAL;
    }
    int level = family_of(ch) == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
    if (g->source.len == 0) {
        struct group_req gr;
        memset(&gr, 0, sizeof(gr));
        gr.gr_interface = g->ifindex;
        memcpy(&gr.gr_group, &g->group.u, g->group.len);
        int name = g->join ? MCAST_JOIN_GROUP : MCAST_LEAVE_GROUP;
        return setsockopt(ch->fd, level, name, &gr, sizeof(gr)) == 0 ? 0 : -errno;
    }
    struct group_source_req gs;
    memset(&gs, 0, sizeof(gs));
    gs.gsr_interface = g->ifindex;
    memcpy(&gs.gsr_group, &g->group.u, g->group.len);
    memcpy(&gs.gsr_source, &g->source.u, g->source.len);
    int name = g->join ? MCAST_JOIN_SOURCE_GROUP : MCAST_LEAVE_SOURCE_GROUP;
    return setsockopt(ch->fd, level, name, &gs, sizeof(gs)) == 0 ? 0 : -errno;
}

static void group_on_loop(eddy_channel_t *ch, void *arg)
{
    group_req_t *g = arg;
    eddy__promise_done(g->p, group_change(ch, g));
    eddy_future_release(g->p);
    free(g);
}

static eddy_future_t *group_request(eddy_channel_t *ch, bool join, const eddy_addr_t *group,
                                    unsigned ifindex, const eddy_addr_t *source)
{
    eddy_promise_t *p = eddy_promise_new(eddy__loop_of(ch));
    if (p == NULL) {
        return NULL;
    }
    group_req_t *g = group != NULL && group->len > 0 ? calloc(1, sizeof(*g)) : NULL;
    if (g == NULL) {
        eddy_promise_fail(p, group == NULL || group->len == 0 ? EDDY_EINVAL : EDDY_ENOMEM);
        return p;
    }
    g->join = join;
    g->ifindex = ifindex;
    addr_copy(&g->group, group);
    addr_copy(&g->source, source);
    g->p = eddy_future_retain(p);
    eddy__channel_on_loop(ch, group_on_loop, g);
    return p;
}

eddy_future_t *eddy_datagram_join_group(eddy_channel_t *ch, const eddy_addr_t *group,
                                        unsigned ifindex, const eddy_addr_t *source)
{
    return group_request(ch, true, group, ifindex, source);
}

eddy_future_t *eddy_datagram_leave_group(eddy_channel_t *ch, const eddy_addr_t *group,
                                         unsigned ifindex, const eddy_addr_t *source)
{
    return group_request(ch, false, group, ifindex, source);
}
