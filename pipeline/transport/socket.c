/*
 * Stream sockets (TCP over IPv4 and IPv6, Unix domain): connected and accepted channels,
 * listening channels, and connecting (Netty's NioSocketChannel, NioServerSocketChannel and
 * their Unsafe), what every transport shares: descriptors and options, connecting, the
 * lingering close and shutting output down, accepted children, and the public listen and
 * connect. How bytes are read and written is the transport's (pipeline/transport/socket.h): readiness
 * on epoll, kqueue and poll (socket_readiness.c), completions on io_uring
 * (socket_uring.c). A channel takes its loop's transport when it is made; the pipeline
 * above does not know which it runs on.
 *
 * A connect waits for writability on every transport (an eddy_io_t watcher). SIGPIPE is never
 * raised: writes pass MSG_NOSIGNAL.
 */
#include "pipeline/transport/socket.h"
#ifdef EDDY_HAVE_IO_URING
#include "reactor/layer.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__linux__)
#include <pthread.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <time.h>
#endif

static void on_io(eddy_io_t *io, unsigned events, void *arg);

const eddy__transport_t *eddy__transport_of(const eddy_loop_t *loop)
{
#ifdef EDDY_HAVE_IO_URING
    if (eddy__uring_is(loop)) {
        return &eddy__transport_uring;
    }
#else
    (void)loop;
#endif
    return &eddy__transport_readiness;
}

/* ---------------------------------------------------------------------------------------
 * Descriptors and socket options
 */

#if !defined(SOCK_NONBLOCK) || !defined(__linux__)
int eddy__socket_nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        return -errno;
    }
    fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) {
        return -errno;
    }
    return 0;
}
#endif

static int new_socket(int family)
{
#ifdef SOCK_NONBLOCK
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    return fd >= 0 ? fd : -errno;
#else
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0) {
        return -errno;
    }
    int err = eddy__socket_nonblock_cloexec(fd);
    if (err != 0) {
        close(fd);
        return err;
    }
#ifdef SO_NOSIGPIPE
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one));
#endif
    return fd;
#endif
}

bool eddy__socket_is_ip(const eddy_channel_t *ch)
{
    sa_family_t f = ch->local_ip.sa.sa_family != AF_UNSPEC ? ch->local_ip.sa.sa_family
                                                           : ch->remote_ip.sa.sa_family;
    return f == AF_INET || f == AF_INET6;
}

static int set_int(int fd, int level, int name, int v)
{
    return setsockopt(fd, level, name, &v, sizeof(v)) == 0 ? 0 : -errno;
}

#ifndef TCP_CORK
#define TCP_CORK -1
#endif
#ifndef TCP_NOTSENT_LOWAT
#define TCP_NOTSENT_LOWAT -1
#endif
#ifndef TCP_FASTOPEN
#define TCP_FASTOPEN -1
#endif
#ifndef TCP_USER_TIMEOUT
#define TCP_USER_TIMEOUT -1
#endif
#ifndef TCP_KEEPIDLE
#define TCP_KEEPIDLE -1
#endif
#ifndef TCP_KEEPINTVL
#define TCP_KEEPINTVL -1
#endif
#ifndef TCP_KEEPCNT
#define TCP_KEEPCNT -1
#endif

/* The TCP options from EDDY_TCP_CORK on: the kernel's name (-1: not on this system), and
 * whether 0 leaves the kernel's default alone (the kernel refuses 0 for those). */
typedef struct tcp_opt_s {
    int name;
    bool zero_keeps;
} tcp_opt_t;

static const tcp_opt_t tcp_opts[] = {
    [EDDY_TCP_CORK - EDDY_TCP_CORK] = {TCP_CORK, false},
    [EDDY_TCP_NOTSENT_LOWAT - EDDY_TCP_CORK] = {TCP_NOTSENT_LOWAT, false},
    [EDDY_TCP_FASTOPEN - EDDY_TCP_CORK] = {TCP_FASTOPEN, false},
    [EDDY_TCP_USER_TIMEOUT - EDDY_TCP_CORK] = {TCP_USER_TIMEOUT, false},
    [EDDY_TCP_KEEPIDLE - EDDY_TCP_CORK] = {TCP_KEEPIDLE, true},
    [EDDY_TCP_KEEPINTVL - EDDY_TCP_CORK] = {TCP_KEEPINTVL, true},
    [EDDY_TCP_KEEPCNT - EDDY_TCP_CORK] = {TCP_KEEPCNT, true},
};
_Static_assert(sizeof(tcp_opts) / sizeof(tcp_opts[0]) == EDDY_OPTION_COUNT_ - EDDY_TCP_CORK,
               "a row per TCP option, the last options of eddy_option_t");

bool eddy__socket_is_tcp_option(eddy_option_t opt)
{
    return opt >= EDDY_TCP_CORK && opt < EDDY_OPTION_COUNT_;
}

/* A TCP option on an IP stream socket; nothing on a Unix one. */
static int tcp_option(eddy_channel_t *ch, eddy_option_t opt, int64_t value)
{
    assert(eddy__socket_is_tcp_option(opt));
    const tcp_opt_t *t = &tcp_opts[opt - EDDY_TCP_CORK];
    if (!eddy__socket_is_ip(ch) || (t->zero_keeps && value == 0)) {
        return 0;
    }
    if (t->name < 0) {
        return value != 0 ? EDDY_ENOTSUP : 0;
    }
    return set_int(ch->fd, IPPROTO_TCP, t->name, (int)value);
}

int eddy__socket_option(eddy_channel_t *ch, eddy_option_t opt, int64_t value)
{
    if (eddy__socket_is_tcp_option(opt)) {
        return tcp_option(ch, opt, value);
    }
    int fd = ch->fd;
    switch (opt) {
    case EDDY_SO_REUSEADDR:
        return set_int(fd, SOL_SOCKET, SO_REUSEADDR, (int)value);
    case EDDY_SO_REUSEPORT:
#ifdef SO_REUSEPORT
        return set_int(fd, SOL_SOCKET, SO_REUSEPORT, (int)value);
#else
        return value ? EDDY_ENOTSUP : 0;
#endif
    case EDDY_TCP_NODELAY:
        return eddy__socket_is_ip(ch) ? set_int(fd, IPPROTO_TCP, TCP_NODELAY, (int)value) : 0;
    case EDDY_SO_KEEPALIVE:
        return set_int(fd, SOL_SOCKET, SO_KEEPALIVE, (int)value);
    case EDDY_SO_RCVBUF:
        return value > 0 ? set_int(fd, SOL_SOCKET, SO_RCVBUF, (int)value) : 0;
    case EDDY_SO_SNDBUF:
        return value > 0 ? set_int(fd, SOL_SOCKET, SO_SNDBUF, (int)value) : 0;
    case EDDY_SO_LINGER: {
        struct linger l = {.l_onoff = value >= 0, .l_linger = value >= 0 ? (int)value : 0};
        return setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)) == 0 ? 0 : -errno;
    }
    default:
        return 0; /* not a socket option */
    }
}

/* One of ch's addresses as the kernel gives it (getsockname, getpeername). */
static void fill_addr(eddy_channel_t *ch, bool remote)
{
    eddy_addr_t a;
    a.len = sizeof(a.u);
    int rc = remote ? getpeername(ch->fd, &a.u.sa, &a.len) : getsockname(ch->fd, &a.u.sa, &a.len);
    if (rc != 0) {
        a.len = 0;
    }
    eddy__channel_set_addr(ch, remote, &a);
}

/* The addresses the kernel gives: local always, remote when asked (accept gave it). */
void eddy__socket_fill_addrs(eddy_channel_t *ch, bool remote)
{
    fill_addr(ch, false);
    if (remote) {
        fill_addr(ch, true);
    }
}

/* ---------------------------------------------------------------------------------------
 * Shutting the output down
 */

static void linger_after_fin(eddy_channel_t *ch, int err);

void eddy__socket_finish_shutdown_output(eddy_channel_t *ch)
{
    assert(!(ch->flags & EDDY__CH_OUTPUT_SHUTDOWN) && ch->fd >= 0); /* one FIN, on an open fd */
    ch->flags &= ~EDDY__CH_SHUTDOWN_PENDING;
    ch->flags |= EDDY__CH_OUTPUT_SHUTDOWN;
    int err = shutdown(ch->fd, SHUT_WR) == 0 ? 0 : -errno;
    if (err == 0) {
        eddy_pipeline_fire_user_event(&ch->pipeline, EDDY_EVENT_OUTPUT_SHUTDOWN, NULL);
    }
    if ((ch->flags & EDDY__CH_LINGERING) && !(ch->flags & EDDY__CH_CLOSED)) {
        linger_after_fin(ch, err);
    }
}

void eddy__socket_shutdown_output(eddy_channel_t *ch, eddy_promise_t *p)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    if (ch->flags & (EDDY__CH_OUTPUT_SHUTDOWN | EDDY__CH_SHUTDOWN_PENDING)) {
        eddy__promise_done(p, 0);
        return;
    }
    if (eddy__outbound_has_flushed(ch)) {
        ch->flags |= EDDY__CH_SHUTDOWN_PENDING; /* after what is flushed is written */
    } else {
        eddy__socket_finish_shutdown_output(ch);
    }
    /* What was written but not flushed would go after the FIN: it fails now, as later writes
     * do, rather than at a flush that would meet EPIPE and close the channel. */
    eddy__outbound_fail_unflushed(ch, EDDY_EPIPE);
    eddy__promise_done(p, 0);
}

/* ---------------------------------------------------------------------------------------
 * Close
 */

/* Most a requested close throws away before it gives up and lets the kernel reset. */
#define DISCARD_MAX (1024 * 1024)

/*
 * close() on a TCP socket with unread input sends a reset, not FIN (RFC 2525), and a reset
 * throws away what the kernel still held of our writes: a reply the application wrote and
 * saw succeed would be cut short whenever the peer had sent anything more (a pipelined
 * request behind a Connection: close, the rest of a rejected upload, TLS session tickets).
 * A requested close therefore first discards what is waiting, up to DISCARD_MAX: one
 * system call that finds nothing in the common case. What arrives after the close still
 * meets a reset; the fuller answer is the lingering close below (nginx's), which a close
 * after flush uses.
 */
void eddy__socket_discard_input(eddy_channel_t *ch)
{
    if (ch->fd < 0) {
        return;
    }
    int family = ch->local_ip.sa.sa_family;
    bool tcp = family == AF_INET || family == AF_INET6;
    char sink[4096];
    size_t left = DISCARD_MAX;
    while (left > 0) {
        ssize_t n;
        size_t len = left < sizeof(sink) ? left : sizeof(sink);
#ifdef __linux__
        if (tcp) {
            /* MSG_TRUNC on TCP drops the bytes without copying them anywhere. sink is never
             * written, but the sanitizers' recv() marks the bytes received as written to the
             * buffer: with NULL every loop wrote address 0 (a race between loops to TSan), and
             * a len past sink would overflow it (to ASan). */
            n = recv(ch->fd, sink, len, MSG_TRUNC | MSG_DONTWAIT);
        } else
#endif
        {
            (void)tcp;
            n = recv(ch->fd, sink, len, MSG_DONTWAIT);
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return; /* drained (EAGAIN), at the peer's FIN, or an error: close() decides */
        }
        left -= (size_t)n < left ? (size_t)n : left;
    }
}

/* ---------------------------------------------------------------------------------------
 * The lingering close (nginx's lingering_close): FIN after what was flushed, then read and
 * drop what the peer still sends until it closes or EDDY_LINGER_MS pass, then close. The peer
 * that sent more than we read (a pipelined request after "Connection: close", the rest of a
 * refused upload) then reads our whole answer: closing at once would answer its bytes with a
 * reset, and a reset makes its kernel throw away what it had not yet read of ours.
 */

/* The graceful close is over: the channel closes with the promise it was asked with. */
static void linger_close(eddy_channel_t *ch, int err)
{
    eddy__lingering_t *l = ch->lingering;
    eddy_promise_t *p = l->p; /* the close completes it last (eddy__socket_close_parts frees l) */
    l->p = NULL;
    eddy__channel_do_close(ch, err, p);
    eddy_future_release(p);
}

static void linger_timed_out(eddy_timer_t *t, void *arg)
{
    (void)t;
    eddy_channel_t *ch = eddy__channel_hold(arg); /* alive: the close cancels this timer */
    linger_close(ch, 0);
    eddy__channel_unhold(ch);
}

/* Our FIN went out (err 0) or could not (the peer is gone). */
static void linger_after_fin(eddy_channel_t *ch, int err)
{
    eddy__lingering_t *l = ch->lingering;
    int64_t ms = ch->opt[EDDY_LINGER_MS];
    if (err != 0 || ms <= 0 || (ch->flags & EDDY__CH_INPUT_SHUTDOWN)) {
        linger_close(ch, err); /* nothing to wait for: the peer has closed, or cannot hear */
        return;
    }
    /* Read whatever the settings said before (AUTO_READ off, paused): only the peer's FIN
     * ends the wait early. */
    ch->flags = (ch->flags | EDDY__CH_READING) & ~EDDY__CH_NO_INPUT;
    ch->ops->update_interest(ch);
    if (!(ch->flags & EDDY__CH_CLOSED) && l->timer == NULL) {
        l->timer = eddy_loop_schedule(eddy__loop_of(ch), ms, linger_timed_out, ch);
        if (l->timer == NULL) {
            linger_close(ch, 0);
        }
    }
}

bool eddy__socket_linger_input(eddy_channel_t *ch, ssize_t n)
{
    if (n > 0) {
        atomic_fetch_add_explicit(&ch->bytes_read, (uint64_t)n, memory_order_relaxed);
        return true;
    }
    if (n < 0 || (ch->flags & EDDY__CH_OUTPUT_SHUTDOWN)) {
        /* A reset, or the peer's FIN after ours: nothing more will come. */
        linger_close(ch, n < 0 ? (int)n : 0);
        return false;
    }
    /* The peer's FIN before ours (what we flushed is still going out): stop reading, and
     * close once the FIN went out, which linger_after_fin() sees. */
    ch->flags |= EDDY__CH_INPUT_SHUTDOWN;
    ch->ops->update_interest(ch);
    return false;
}

void eddy__socket_close_after_flush(eddy_channel_t *ch, eddy_promise_t *p)
{
    if (ch->flags & EDDY__CH_LINGERING) {
        /* Already closing gracefully: p completes with that close. */
        if (p != NULL &&
            eddy_future_add_listener(eddy_channel_close_future(ch), eddy__promise_done_listener,
                                     eddy_future_retain(p)) != 0) {
            eddy_future_release(p);
        }
        return;
    }
    eddy__lingering_t *l = (ch->flags & EDDY__CH_ACTIVE) && !(ch->flags & EDDY__CH_CONNECTING)
                               ? calloc(1, sizeof(*l))
                               : NULL;
    if (l == NULL) {
        eddy__channel_do_close(ch, 0, p); /* not connected, or no memory: close now */
        return;
    }
    l->p = p != NULL ? eddy_future_retain(p) : NULL;
    ch->lingering = l;
    ch->flags |= EDDY__CH_LINGERING;
    if (ch->flags & EDDY__CH_OUTPUT_SHUTDOWN) {
        linger_after_fin(ch, 0); /* the FIN went out before */
    } else {
        /* FIN now, or once what is flushed is written (eddy__socket_finish_shutdown_output goes on
         * to linger_after_fin); what was written but not flushed fails with EDDY_EPIPE. */
        eddy__socket_shutdown_output(ch, NULL);
    }
}

static eddy_promise_t *connect_end(eddy_channel_t *ch);

void eddy__socket_close_parts(eddy_channel_t *ch)
{
    assert(ch->flags & EDDY__CH_CLOSED); /* a part of eddy__channel_do_close() */
    if (ch->flags & EDDY__CH_LINGERING) {
        eddy__lingering_t *l = ch->lingering;
        assert(l != NULL);
        ch->lingering = NULL;
        ch->flags &= ~EDDY__CH_LINGERING;
        if (l->timer != NULL) {
            eddy_timer_cancel(l->timer);
            eddy_timer_release(l->timer);
        }
        /* Closed otherwise (a plain close, an error): the promise completes with the close,
         * after the handlers saw channel_inactive. */
        if (l->p != NULL && eddy_future_add_listener(eddy_channel_close_future(ch),
                                                     eddy__promise_done_listener, l->p) != 0) {
            eddy__promise_done(l->p, 0);
            eddy_future_release(l->p);
        }
        free(l);
    }
    eddy_promise_t *p = connect_end(ch); /* closed while connecting */
    if (p != NULL) {
        eddy_promise_fail(p, EDDY_ECLOSED);
        eddy_future_release(p);
    }
}

void eddy__socket_input_end(eddy_channel_t *ch, int err, bool eof)
{
    assert(err <= 0 && !(ch->flags & EDDY__CH_CLOSED));
    if (err != 0) {
        /* ECONNRESET and friends: exception_caught, then close (Netty does the same). */
        eddy_pipeline_fire_exception(&ch->pipeline, err);
        eddy__channel_do_close(ch, err, NULL);
        return;
    }
    if (!eof) {
        return;
    }
    if (!ch->opt[EDDY_ALLOW_HALF_CLOSURE]) {
        eddy__channel_do_close(ch, EDDY_EOF, NULL);
    } else if (!(ch->flags & EDDY__CH_INPUT_SHUTDOWN)) {
        ch->flags |= EDDY__CH_INPUT_SHUTDOWN;
        ch->ops->update_interest(ch);
        eddy_pipeline_fire_user_event(&ch->pipeline, EDDY_EVENT_INPUT_SHUTDOWN, NULL);
    }
}

void eddy__socket_destroy(eddy_channel_t *ch)
{
    if (ch->fd >= 0) {
        close(ch->fd); /* never registered */
        ch->fd = -1;
    }
}

/* ---------------------------------------------------------------------------------------
 * Connecting
 */

/* The connect is over: its timer stopped, its promise (NULL: none) handed to the caller. */
static eddy_promise_t *connect_end(eddy_channel_t *ch)
{
    eddy__connecting_t *c = ch->connecting;
    assert(c != NULL || !(ch->flags & EDDY__CH_CONNECTING)); /* connecting has its record */
    ch->flags &= ~EDDY__CH_CONNECTING;
    if (c == NULL) {
        return NULL;
    }
    ch->connecting = NULL;
    if (c->timer != NULL) {
        eddy_timer_cancel(c->timer);
        eddy_timer_release(c->timer);
    }
    eddy_promise_t *p = c->promise;
    free(c);
    return p;
}

static void connect_done(eddy_channel_t *ch, int err)
{
    assert(err <= 0 && !(ch->flags & EDDY__CH_ACTIVE));
    eddy_promise_t *p = connect_end(ch);
    if (err != 0) {
        if (p != NULL) {
            eddy_promise_fail(p, err);
            eddy_future_release(p);
        }
        eddy__channel_do_close(ch, err, NULL);
        return;
    }
    eddy__socket_fill_addrs(ch, true);
    ch->ops->update_interest(ch);
    if (p != NULL) {
        eddy__promise_succeed_channel(p, ch);
        eddy_future_release(p);
    }
    eddy__channel_activate(ch);
}

static void finish_connect(eddy_channel_t *ch)
{
    connect_done(ch, eddy__io_socket_error(&ch->io));
}

void eddy__socket_connected(eddy_channel_t *ch, int err)
{
    if (ch->flags & EDDY__CH_CONNECTING) {
        connect_done(ch, err);
    }
}

static void connect_timeout(eddy_timer_t *t, void *arg)
{
    (void)t;
    eddy_channel_t *ch = arg;
    if (ch->flags & EDDY__CH_CONNECTING) {
        eddy__channel_hold(ch); /* the failed connect closes it */
        connect_done(ch, EDDY_ETIMEDOUT);
        eddy__channel_unhold(ch);
    }
}

void eddy__socket_connect(eddy_channel_t *ch, const eddy_addr_t *remote, const eddy_addr_t *local,
                          eddy_promise_t *p)
{
    if (ch->flags & (EDDY__CH_ACTIVE | EDDY__CH_CONNECTING)) {
        eddy__promise_done(p, (ch->flags & EDDY__CH_ACTIVE) ? EDDY_EISCONN : EDDY_EALREADY);
        return;
    }
    if (local != NULL && local->len > 0 && bind(ch->fd, &local->u.sa, local->len) != 0) {
        int err = -errno;
        eddy__promise_done(p, err);
        eddy__channel_do_close(ch, err, NULL);
        return;
    }
    assert(ch->connecting == NULL && remote != NULL && remote->len > 0);
    eddy__connecting_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        eddy__promise_done(p, EDDY_ENOMEM);
        eddy__channel_do_close(ch, EDDY_ENOMEM, NULL);
        return;
    }
    ch->connecting = c;
    eddy__channel_set_addr(ch, true, remote);
    c->promise = p != NULL ? eddy_future_retain(p) : NULL;
    /* Interrupted, a connect goes on by itself (POSIX): calling again would only say
     * EALREADY, so EINTR waits for writability like EINPROGRESS. */
    int rc = connect(ch->fd, &remote->u.sa, remote->len);
    if (rc == 0) {
        connect_done(ch, 0);
        return;
    }
    if (errno != EINPROGRESS && errno != EINTR) {
        connect_done(ch, -errno);
        return;
    }
    ch->flags |= EDDY__CH_CONNECTING;
    ch->ops->update_interest(ch);
    int64_t ms = ch->opt[EDDY_CONNECT_TIMEOUT_MS];
    if (ms > 0) {
        c->timer = eddy_loop_schedule(eddy__loop_of(ch), ms, connect_timeout, ch);
    }
}

/* ---------------------------------------------------------------------------------------
 * The descriptor's watcher: all of the I/O of a readiness transport, a connect in progress
 * included (io_uring's channels have no watcher: eddy__socket_connected())
 */

static void on_io(eddy_io_t *io, unsigned events, void *arg)
{
    (void)io;
    eddy_channel_t *ch = eddy__channel_hold(arg); /* a handler may close it */
    if (ch->flags & EDDY__CH_CONNECTING) {
        if (events & (EDDY_IO_WRITE | EDDY_IO_ERROR | EDDY_IO_HUP)) {
            finish_connect(ch);
        }
    } else {
        eddy__readiness_on_io(ch, events);
    }
    eddy__channel_unhold(ch);
}

/* The loop is shutting down: close the channel (Netty's closeAll). */
static void close_with_loop(eddy__closer_t *c)
{
    eddy_channel_t *ch = eddy__channel_hold(EDDY_CONTAINER_OF(c, eddy_channel_t, closer));
    assert(!(ch->flags & EDDY__CH_CLOSED)); /* a closed channel left the closers' ring */
    eddy__channel_do_close(ch, EDDY_ESHUTDOWN, NULL);
    eddy__channel_unhold(ch);
}

void eddy__socket_watch(eddy_channel_t *ch, unsigned ev)
{
    int err = eddy_io_start(&ch->io, ev);
    if (err != 0) {
        eddy_pipeline_fire_exception(&ch->pipeline, err);
        eddy__channel_do_close(ch, err, NULL);
    }
}

static void flush_task(void *arg)
{
    eddy_channel_t *ch = arg;
    if (!(ch->flags & EDDY__CH_CLOSED)) {
        eddy__pipeline_enter(&ch->pipeline);
        ch->ops->flush(ch);
        eddy__pipeline_leave(&ch->pipeline);
    }
    eddy_channel_release(ch);
}

void eddy__socket_flush_later(eddy_channel_t *ch)
{
    if (eddy_loop_execute(eddy__loop_of(ch), flush_task, eddy_channel_retain(ch)) != 0) {
        eddy_channel_release(ch);
    }
}

void eddy__loop_each_hooked(eddy_loop_t *loop, const eddy__close_hook_t *hook,
                            void (*fn)(eddy_channel_t *ch, void *arg), void *arg)
{
    eddy__assert_on_loop(loop);
    size_t n = 0, cap = 0;
    eddy_channel_t **chs = NULL;
    for (eddy__closer_t *c = loop->closers.next; c != &loop->closers; c = c->next) {
        eddy_channel_t *ch = EDDY_CONTAINER_OF(c, eddy_channel_t, closer);
        if (c->close != close_with_loop || ch->close_hook != hook) {
            continue;
        }
        if (n == cap) {
            cap = cap == 0 ? 64 : 2 * cap;
            eddy_channel_t **grown = realloc(chs, cap * sizeof(*chs));
            if (grown == NULL) {
                break; /* the rest closes with the loop */
            }
            chs = grown;
        }
        chs[n++] = eddy__channel_hold(ch);
    }
    for (size_t i = 0; i < n; i++) {
        fn(chs[i], arg);
        eddy__channel_unhold(chs[i]);
    }
    free(chs);
}

/* Register a socket channel with its loop (on the loop). */
void eddy__socket_register_io(eddy_channel_t *ch, eddy_io_cb cb)
{
    if (ch->ops->state_size == 0) {
        eddy_io_init(&ch->io, eddy__loop_of(ch), ch->fd, cb, ch);
    }
    ch->closer.close = close_with_loop;
    eddy__loop_closer_add(eddy__loop_of(ch), &ch->closer);
    eddy__channel_registered(ch);
}

void eddy__socket_register(eddy_channel_t *ch)
{
    eddy__socket_register_io(ch, on_io);
}

/* ---------------------------------------------------------------------------------------
 * Listening and accepting
 */

void eddy__listener_flush(eddy_channel_t *ch)
{
    (void)ch; /* nothing to write on a listening socket */
}

void eddy__listener_destroy(eddy_channel_t *ch)
{
    eddy__socket_destroy(ch);
    eddy__listener_t *l = ch->listener;
    if (l == NULL) {
        return; /* made without memory for it */
    }
    if (l->reserve_fd >= 0) {
        close(l->reserve_fd);
    }
    eddy__options_release(l->child_opts);
    free(l);
    ch->listener = NULL;
}

void eddy__listener_close_parts(eddy_channel_t *ch)
{
    eddy__listener_t *l = ch->listener;
    if (l->reserve_fd >= 0) {
        close(l->reserve_fd);
        l->reserve_fd = -1;
    }
    if (l->accept_backoff != NULL) {
        eddy_timer_cancel(l->accept_backoff);
        eddy_timer_release(l->accept_backoff);
        l->accept_backoff = NULL;
    }
}

static void resume_accept(eddy_timer_t *t, void *arg)
{
    (void)t;
    eddy_channel_t *ch = arg;
    eddy__listener_t *l = ch->listener;
    if (l->accept_backoff != NULL) {
        eddy_timer_release(l->accept_backoff);
        l->accept_backoff = NULL;
    }
    if (!(ch->flags & EDDY__CH_CLOSED)) {
        ch->flags |= EDDY__CH_READING;
        ch->ops->update_interest(ch);
    }
}

/*
 * Out of descriptors (EMFILE, ENFILE): the pending connection would make the listening socket
 * ready forever, and a level-triggered loop would spin on it. Give the reserve descriptor
 * back, accept the connection and close it at once (the peer sees a reset rather than a
 * hang), take the reserve again, and stop accepting for a moment.
 */
void eddy__listener_out_of_descriptors(eddy_channel_t *ch, int err)
{
    eddy__listener_t *l = ch->listener;
    if (l->reserve_fd >= 0) {
        close(l->reserve_fd);
        l->reserve_fd = -1;
        int fd = accept(ch->fd, NULL, NULL);
        if (fd >= 0) {
            struct linger reset = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
            close(fd);
        }
        l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    static _Atomic int64_t last_log;
    int64_t now = eddy_now_ns();
    int64_t prev = atomic_load_explicit(&last_log, memory_order_relaxed);
    if (now - prev > 1000000000 &&
        atomic_compare_exchange_strong_explicit(&last_log, &prev, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
        eddy__log(EDDY_LOG_WARN, "listener %llu: %s; accepting pauses for 100 ms",
                  (unsigned long long)ch->id, eddy_strerror(err));
    }
    if (l->accept_backoff == NULL) {
        l->accept_backoff = eddy_loop_schedule(eddy__loop_of(ch), 100, resume_accept, ch);
    }
    if (l->accept_backoff != NULL) {
        /* Paused only with the timer that resumes it: without memory for one, accepting
         * goes on (and may spin) rather than stop for good. */
        ch->flags &= ~EDDY__CH_READING;
        ch->ops->update_interest(ch);
    }
}

typedef struct child_s {
    eddy_channel_t *ch;
    eddy_channel_init_cb init;
    void *arg;
} child_t;

static void child_start(void *arg)
{
    child_t *c = arg;
    eddy_channel_t *ch = eddy__channel_hold(c->ch); /* a close inside must not free it yet */
    eddy__socket_register(ch);
    int rc = c->init(ch, c->arg);
    if (rc != 0) {
        eddy__channel_do_close(ch, rc, NULL);
    } else {
        eddy__channel_activate(ch);
    }
    eddy__channel_unhold(ch);
    free(c);
}

/* Whether ip is one address, not a wildcard (INADDR_ANY, ::) nor unknown. */
static bool ip_is_specific(const eddy__ip_addr_t *ip)
{
    if (ip->sa.sa_family == AF_INET) {
        return ip->in4.sin_addr.s_addr != htonl(INADDR_ANY);
    }
    return ip->sa.sa_family == AF_INET6 && !IN6_IS_ADDR_UNSPECIFIED(&ip->in6.sin6_addr);
}

/* A child's local address: its listener's when that is bound to one address (accept cannot
 * give another), saving a getsockname() per connection; else the kernel's. */
static void child_local_addr(eddy_channel_t *child, const eddy_channel_t *listener)
{
    if (ip_is_specific(&listener->local_ip)) {
        child->local_ip = listener->local_ip;
    } else {
        fill_addr(child, false);
    }
}

void eddy__listener_child(eddy_channel_t *ch, int fd, const eddy_addr_t *peer)
{
    eddy__listener_t *l = ch->listener;
    eddy_loop_t *loop = l->children != NULL ? eddy_loop_group_next(l->children) : eddy__loop_of(ch);
    eddy_channel_t *child = eddy__channel_new(loop, eddy__transport_of(loop)->stream, fd);
    child_t *c = child != NULL ? malloc(sizeof(*c)) : NULL;
    if (c == NULL) {
        if (child != NULL) {
            eddy_channel_release(child); /* closes fd */
        } else {
            close(fd);
        }
        eddy_pipeline_fire_exception(&ch->pipeline, EDDY_ENOMEM);
        return;
    }
    child_local_addr(child, ch);
    if (peer != NULL) {
        eddy__channel_set_addr(child, true, peer); /* no getpeername(): accept gave the peer */
    } else {
        fill_addr(child, true); /* a multishot accept gives no address */
    }
    eddy__channel_share_config(child, l->child_opts, &l->child_config);
    if (eddy__socket_is_ip(child) && !(l->child_config.set & (1ull << EDDY_TCP_NODELAY))) {
        eddy__socket_option(child, EDDY_TCP_NODELAY, 1);
    }
    c->ch = child;
    c->init = l->child_init;
    c->arg = l->child_arg;
    if (loop == eddy__loop_of(ch)) {
        child_start(c);
    } else if (eddy_loop_execute(loop, child_start, c) != 0) {
        free(c);
        eddy_channel_release(child);
    }
}

/* ---------------------------------------------------------------------------------------
 * Public: listen and connect
 */

typedef struct listen_req_s {
    eddy_addr_t addr;
    eddy_listen_options_t opts;
    eddy_channel_config_t config;
    eddy_channel_config_t child_config;
    bool has_config;
    eddy_promise_t *p;
} listen_req_t;

static void listen_on_loop(void *arg)
{
    listen_req_t *r = arg;
    int fd = new_socket(r->addr.u.sa.sa_family);
    int err = fd < 0 ? fd : 0;
    eddy_channel_t *ch = NULL;
    if (err == 0) {
        ch = eddy__channel_new(r->opts.loop, eddy__transport_of(r->opts.loop)->listener, fd);
        if (ch == NULL) {
            close(fd);
            err = EDDY_ENOMEM;
        } else {
            ch->flags |= EDDY__CH_LISTENER;
            ch->listener = malloc(sizeof(*ch->listener));
            err = ch->listener == NULL ? EDDY_ENOMEM : 0;
        }
    }
    if (err == 0) {
        eddy__listener_t *l = ch->listener;
        eddy__channel_set_addr(ch, false, &r->addr);
        l->children = r->opts.children;
        l->child_init = r->opts.child_init;
        l->child_arg = r->opts.child_arg;
        l->child_config = r->child_config;
        l->accepts_per_wakeup = r->opts.accepts_per_wakeup;
        l->accept_backoff = NULL;
        l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        l->child_opts = eddy__options_new(&r->child_config);
        if (l->child_opts == NULL) {
            err = EDDY_ENOMEM;
        }
    }
    if (err == 0) {
        if (r->addr.u.sa.sa_family != AF_UNIX) {
            eddy_channel_set_option(ch, EDDY_SO_REUSEADDR, 1);
        }
        if (r->has_config) {
            eddy__channel_apply_config(ch, &r->config);
        }
        if (bind(fd, &r->addr.u.sa, r->addr.len) != 0 ||
            listen(fd, (int)(ch->opt[EDDY_SO_BACKLOG] > INT_MAX ? INT_MAX
                                                                : ch->opt[EDDY_SO_BACKLOG])) != 0) {
            err = -errno;
        }
    }
    if (err != 0) {
        if (ch != NULL) {
            eddy_channel_release(ch);
        }
        eddy_promise_fail(r->p, err);
    } else {
        eddy__socket_fill_addrs(ch, false);
        eddy__channel_hold(ch); /* a handler may close it while it becomes active */
        eddy__socket_register(ch);
        ch->flags |= EDDY__CH_ACTIVE;
        eddy__channel_show_state(ch);
        eddy__pipeline_fire_active(&ch->pipeline);
        ch->ops->begin_read(ch);
        eddy__pipeline_leave(&ch->pipeline);
        eddy__promise_succeed_channel(r->p, ch);
        eddy_channel_release(ch);
    }
    eddy_future_release(r->p);
    free(r);
}

eddy_future_t *eddy_channel_listen(const eddy_addr_t *addr, const eddy_listen_options_t *opts)
{
    if (opts == NULL || opts->loop == NULL) {
        return NULL;
    }
    eddy_promise_t *p = eddy_promise_new(opts->loop);
    if (p == NULL) {
        return NULL;
    }
    if (addr == NULL || addr->len == 0 || opts->child_init == NULL) {
        eddy_promise_fail(p, EDDY_EINVAL);
        return p;
    }
    listen_req_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        eddy_promise_fail(p, EDDY_ENOMEM);
        return p;
    }
    r->addr = *addr;
    r->opts = *opts;
    eddy_channel_config_init(&r->child_config);
    if (opts->child_config != NULL) {
        r->child_config = *opts->child_config;
    }
    if (opts->config != NULL) {
        r->config = *opts->config;
        r->has_config = true;
    }
    r->p = eddy_future_retain(p);
    eddy__loop_run_request(opts->loop, listen_on_loop, r, p);
    return p;
}

typedef struct connect_req_s {
    eddy_loop_t *loop;
    eddy_addr_t remote;
    eddy_channel_config_t config;
    bool has_config;
    eddy_channel_init_cb init;
    void *arg;
    eddy_promise_t *p;
} connect_req_t;

static void connect_on_loop(void *arg)
{
    connect_req_t *r = arg;
    int fd = new_socket(r->remote.u.sa.sa_family);
    eddy_channel_t *ch =
        fd >= 0 ? eddy__channel_new(r->loop, eddy__transport_of(r->loop)->stream, fd) : NULL;
    if (ch == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        eddy_promise_fail(r->p, fd < 0 ? fd : EDDY_ENOMEM);
    } else {
        eddy__channel_set_addr(ch, true, &r->remote);
        if (r->has_config) {
            eddy__channel_apply_config(ch, &r->config);
        }
        if (eddy__socket_is_ip(ch) &&
            !(r->has_config && (r->config.set & (1ull << EDDY_TCP_NODELAY)))) {
            eddy__socket_option(ch, EDDY_TCP_NODELAY, 1);
        }
        eddy__channel_hold(ch); /* a failed init or connect closes it inside */
        eddy__socket_register(ch);
        int rc = r->init != NULL ? r->init(ch, r->arg) : 0;
        if (rc != 0) {
            eddy_promise_fail(r->p, rc < 0 ? rc : EDDY_ECANCELED);
            eddy__channel_do_close(ch, rc, NULL);
        } else {
            eddy__socket_connect(ch, &r->remote, NULL, r->p);
        }
        eddy__channel_unhold(ch);
    }
    eddy_future_release(r->p);
    free(r);
}

eddy_future_t *eddy_channel_connect(eddy_loop_t *loop, const eddy_addr_t *remote,
                                    const eddy_channel_config_t *config, eddy_channel_init_cb init,
                                    void *arg)
{
    eddy_promise_t *p = eddy_promise_new(loop);
    if (p == NULL) {
        return NULL;
    }
    if (remote == NULL || remote->len == 0) {
        eddy_promise_fail(p, EDDY_EINVAL);
        return p;
    }
    connect_req_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        eddy_promise_fail(p, EDDY_ENOMEM);
        return p;
    }
    r->loop = loop;
    r->remote = *remote;
    if (config != NULL) {
        r->config = *config;
        r->has_config = true;
    }
    r->init = init;
    r->arg = arg;
    r->p = eddy_future_retain(p);
    eddy__loop_run_request(loop, connect_on_loop, r, p);
    return p;
}

eddy_channel_t *eddy_future_channel(const eddy_future_t *f)
{
    return eddy_future_is_done(f) && eddy_future_error(f) == 0 ? eddy_future_result(f) : NULL;
}

/* ---------------------------------------------------------------------------------------
 * File regions (both transports)
 */

/* The most one sendfile() call is asked to move: a region of a gigabyte to a fast peer
 * still comes back to the loop between calls (the spin count bounds the calls per flush). */
#define SENDFILE_MAX ((size_t)2 << 20)

#if defined(__linux__)
/*
 * sendfile(2) has no MSG_NOSIGNAL: to a peer that reset, it raises SIGPIPE at the calling
 * thread, whose default action ends the process (serverfuzz's http_files found it). The
 * first sendfile on a thread blocks SIGPIPE for that thread, for good (a loop's thread: the
 * application's own threads are left alone), and an EPIPE takes the signal it left pending,
 * so none is delivered should the thread unblock it. Two system calls once per thread, and
 * one per broken pipe, rather than two around every sendfile.
 */
static void sigpipe_block_once(void)
{
    static _Thread_local bool blocked;
    if (!blocked) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        blocked = pthread_sigmask(SIG_BLOCK, &set, NULL) == 0;
    }
}

static void sigpipe_take(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    struct timespec now = {0, 0};
    while (sigtimedwait(&set, NULL, &now) < 0 && errno == EINTR) {
    }
}

/* n bytes of r to the socket, in the kernel: what went, 0 for the end of the file, -errno. */
static ssize_t region_out(eddy_channel_t *ch, const eddy_file_region_t *r, size_t n)
{
    off_t off = (off_t)eddy_file_region_offset(r);
    sigpipe_block_once();
    ssize_t w = sendfile(ch->fd, eddy_file_fd(eddy_file_region_file(r)), &off, n);
    int err = w < 0 ? -errno : 0;
    if (err == -EPIPE) {
        sigpipe_take();
    }
    return w < 0 ? err : w;
}
#else
/* Without Linux's sendfile(2) (whose signature differs on the BSDs): read, then send. */
static ssize_t region_out(eddy_channel_t *ch, const eddy_file_region_t *r, size_t n)
{
    char chunk[16384];
    ssize_t got = eddy_file_region_read(r, chunk, n < sizeof(chunk) ? n : sizeof(chunk));
    if (got <= 0) {
        return got == EDDY_ETRUNCATED ? 0 : got;
    }
    ssize_t w = send(ch->fd, chunk, (size_t)got, MSG_NOSIGNAL);
    return w < 0 ? -errno : w;
}
#endif

ssize_t eddy__socket_send_region(eddy_channel_t *ch, const eddy_file_region_t *r, size_t *total)
{
    uint64_t left = eddy_file_region_remaining(r);
    *total = left < SENDFILE_MAX ? (size_t)left : SENDFILE_MAX;
    ssize_t w = region_out(ch, r, *total);
    return w == 0 ? EDDY_ETRUNCATED : w;
}

int eddy__socket_more_flag(const eddy_channel_t *ch)
{
#ifdef MSG_MORE
    return eddy__outbound_region_second(ch) ? MSG_MORE : 0;
#else
    (void)ch;
    return 0;
#endif
}
