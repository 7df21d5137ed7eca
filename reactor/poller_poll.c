/*
 * The poll(2) backend: the portable fallback, and a second implementation the loop tests run
 * against. A pollfd array with each io's slot index; removal swaps the last entry in. The
 * wake-up is a non-blocking pipe.
 */
#include "reactor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ready_s {
    int fd;
    uint32_t gen;
    unsigned events;
} ready_t;

typedef struct poll_state_s {
    struct pollfd *fds;
    eddy_io_t **ios;
    ready_t *ready;
    size_t n;
    size_t cap;
    int pipe_rd;
    int pipe_wr;
} poll_state_t;

static void on_wake(eddy_io_t *io, unsigned events, void *arg)
{
    char buf[64];
    while (read(io->fd, buf, sizeof(buf)) > 0 || errno == EINTR) {
    }
}

static int set_nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        return -errno;
    }
    return 0;
}

static int poll_init(eddy_loop_t *loop)
{
    poll_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return EDDY_ENOMEM;
    }
    int p[2];
    if (pipe(p) != 0) {
        int err = -errno;
        free(st);
        return err;
    }
    int err = set_nonblock_cloexec(p[0]);
    if (err == 0) {
        err = set_nonblock_cloexec(p[1]);
    }
    if (err != 0) {
        close(p[0]);
        close(p[1]);
        free(st);
        return err;
    }
    st->pipe_rd = p[0];
    st->pipe_wr = p[1];
    loop->poller_data = st;
    eddy_io_init(&loop->wake_io, loop, st->pipe_rd, on_wake, NULL);
    err = eddy_io_start(&loop->wake_io, EDDY_IO_READ);
    if (err != 0) {
        close(p[0]);
        close(p[1]);
        free(st->fds);
        free(st->ios);
        free(st->ready);
        free(st);
        loop->poller_data = NULL;
    }
    return err;
}

static void poll_destroy(eddy_loop_t *loop)
{
    poll_state_t *st = loop->poller_data;
    if (st == NULL) {
        return;
    }
    close(st->pipe_wr); /* the writing end first: a late writer gets EBADF, never SIGPIPE */
    close(st->pipe_rd);
    free(st->fds);
    free(st->ios);
    free(st->ready);
    free(st);
    loop->poller_data = NULL;
}

static short to_poll(unsigned events)
{
    return (short)(((events & EDDY_IO_READ) ? POLLIN : 0) |
                   ((events & EDDY_IO_WRITE) ? POLLOUT : 0));
}

static int poll_update(eddy_loop_t *loop, eddy_io_t *io, unsigned events)
{
    poll_state_t *st = loop->poller_data;
    assert(st != NULL && io->fd >= 0 && io->_loop == loop);
    if (events == 0) {
        if (io->_index >= 0 && (size_t)io->_index < st->n && st->ios[io->_index] == io) {
            size_t i = (size_t)io->_index;
            st->n--;
            if (i != st->n) {
                st->fds[i] = st->fds[st->n];
                st->ios[i] = st->ios[st->n];
                st->ios[i]->_index = (int)i;
            }
        }
        io->_index = -1;
        return 0;
    }
    if (io->_index >= 0) {
        assert((size_t)io->_index < st->n && st->ios[io->_index] == io); /* in the set */
        st->fds[io->_index].events = to_poll(events);
        return 0;
    }
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 64;
        struct pollfd *fds = realloc(st->fds, cap * sizeof(*fds));
        if (fds == NULL) {
            return EDDY_ENOMEM;
        }
        st->fds = fds;
        eddy_io_t **ios = realloc(st->ios, cap * sizeof(*ios));
        if (ios == NULL) {
            return EDDY_ENOMEM;
        }
        st->ios = ios;
        ready_t *ready = realloc(st->ready, cap * sizeof(*ready));
        if (ready == NULL) {
            return EDDY_ENOMEM;
        }
        st->ready = ready;
        st->cap = cap;
    }
    st->fds[st->n] = (struct pollfd){.fd = io->fd, .events = to_poll(events)};
    st->ios[st->n] = io;
    io->_index = (int)st->n;
    st->n++;
    return 0;
}

static int poll_wait_dispatch(eddy_loop_t *loop, int64_t timeout_ns)
{
    poll_state_t *st = loop->poller_data;
    int timeout_ms = -1;
    if (timeout_ns >= 0) {
        int64_t ms = (timeout_ns + 999999) / 1000000;
        timeout_ms = ms > 1000000000 ? 1000000000 : (int)ms;
    }
    int n = poll(st->fds, (nfds_t)st->n, timeout_ms);
    if (n < 0) {
        return errno == EINTR ? 0 : -errno;
    }
    if (n > 0) {
        loop->poll_return_ns = eddy_now_ns(); /* splits blocked time from callback time */
    }
    /* Callbacks may add and remove descriptors (moving slots): collect first, then call. */
    size_t k = 0;
    for (size_t i = 0; i < st->n && k < (size_t)n; i++) {
        short re = st->fds[i].revents;
        if (re == 0) {
            continue;
        }
        assert(st->ios[i]->_index == (int)i);
        unsigned ready = ((re & POLLIN) ? EDDY_IO_READ : 0) | ((re & POLLOUT) ? EDDY_IO_WRITE : 0) |
                         ((re & (POLLERR | POLLNVAL)) ? EDDY_IO_ERROR : 0) |
                         ((re & POLLHUP) ? EDDY_IO_HUP | EDDY_IO_READ : 0);
        st->ready[k++] = (ready_t){.fd = st->fds[i].fd, .gen = st->ios[i]->_gen, .events = ready};
    }
    for (size_t i = 0; i < k; i++) {
        eddy__io_dispatch(loop, st->ready[i].fd, st->ready[i].gen, st->ready[i].events);
    }
    return (int)k;
}

static int poll_wakeup(eddy_loop_t *loop)
{
    poll_state_t *st = loop->poller_data;
    char c = 1;
    while (write(st->pipe_wr, &c, 1) < 0) {
        if (errno == EINTR) {
            continue;
        }
        return errno == EAGAIN ? 0 : -errno; /* a full pipe wakes the loop anyway */
    }
    return 0;
}

const eddy__poller_ops_t eddy__poller_poll = {
    .name = "poll",
    .init = poll_init,
    .destroy = poll_destroy,
    .update = poll_update,
    .wait = poll_wait_dispatch,
    .wakeup = poll_wakeup,
};
