/*
 * echo_server_epoll: the one-loop limit. A minimal single-threaded echo server on
 * level-triggered epoll: read into a buffer, write it straight back; if the write is short,
 * keep the rest, stop reading that connection and wait for EPOLLOUT. No allocation per
 * message, no framework: what one thread can echo, against which eddy's one loop is measured.
 *
 *   echo_server_epoll [--port N] [--cpu N]
 */
#include "server_common.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE 65536

typedef struct conn_s {
    int fd;
    size_t off, len; /* unsent bytes: buf[off, len) */
    uint8_t buf[BUF_SIZE];
} conn_t;

static int ep;

static void die(const char *what)
{
    fprintf(stderr, "echo_server_epoll: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void conn_close(conn_t *c)
{
    close(c->fd); /* also leaves the epoll set */
    free(c);
}

static void watch(conn_t *c, unsigned events, int op)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(ep, op, c->fd, &ev) != 0)
        die("epoll_ctl");
}

/* Writes buf[off, len); true when everything went (or the connection closed: *closed). */
static bool conn_flush(conn_t *c, bool *closed)
{
    while (c->off < c->len) {
        ssize_t w = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return false;
            if (errno == EINTR)
                continue;
            *closed = true;
            return false;
        }
        c->off += (size_t)w;
    }
    c->off = c->len = 0;
    return true;
}

static void on_readable(conn_t *c)
{
    ssize_t r = recv(c->fd, c->buf, BUF_SIZE, 0);
    if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        conn_close(c);
        return;
    }
    c->off = 0;
    c->len = (size_t)r;
    bool closed = false;
    if (!conn_flush(c, &closed)) {
        if (closed) {
            conn_close(c);
            return;
        }
        /* Short write: stop reading until the rest is out. */
        watch(c, EPOLLOUT, EPOLL_CTL_MOD);
    }
}

static void on_writable(conn_t *c)
{
    bool closed = false;
    if (conn_flush(c, &closed)) {
        watch(c, EPOLLIN, EPOLL_CTL_MOD);
    } else if (closed) {
        conn_close(c);
    }
}

int main(int argc, char **argv)
{
    server_args_t a;
    server_args_parse(&a, argc, argv, "echo_server_epoll");
    server_pin(a.cpu, "echo_server_epoll");
    signal(SIGPIPE, SIG_IGN);

    int one = 1;
    int lfd = server_listen(a.port, SOCK_NONBLOCK | SOCK_CLOEXEC, "echo_server_epoll");
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    /* The listener is the one entry whose data.ptr is NULL. */
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) != 0)
        die("epoll_ctl");
    server_ready(a.port, "echo_server_epoll");

    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int k = 0; k < n; k++) {
            conn_t *c = evs[k].data.ptr;
            if (c == NULL) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                    c = malloc(sizeof(*c));
                    if (c == NULL) {
                        close(fd);
                        continue;
                    }
                    c->fd = fd;
                    c->off = c->len = 0;
                    watch(c, EPOLLIN, EPOLL_CTL_ADD);
                }
                continue;
            }
            /* One event per connection per batch: a closed c is never touched again. */
            if (c->len > 0)
                on_writable(c);
            else
                on_readable(c);
        }
    }
}
