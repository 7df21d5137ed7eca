/*
 * The epoll backend (Linux), level-triggered.
 *
 * Level-triggered because a channel that stops reading at its per-read cap, or whose reads
 * are paused (auto-read off, backpressure), must simply be told again next turn while bytes
 * remain; edge-triggered would need the channel to remember that it left data behind and to
 * re-arm. The cost is that a descriptor with unread data is reported each turn, which is what
 * the loop wants anyway. The wake-up is an eventfd.
 */
#include "eddy_config.h"

#ifdef EDDY_HAVE_EPOLL
#include "reactor/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Ready events taken per epoll_wait; more wait for the next turn (libuv takes 1024). */
#define MAX_EVENTS 1024

typedef struct epoll_data_s {
    int epfd;
    int wakefd;
    struct epoll_event events[MAX_EVENTS];
} epoll_state_t;

static int epoll_init(eddy_loop_t *loop)
{
    epoll_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return EDDY_ENOMEM;
    }
    st->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (st->epfd < 0) {
        int err = -errno;
        free(st);
        return err;
    }
    st->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (st->wakefd < 0) {
        int err = -errno;
        close(st->epfd);
        free(st);
        return err;
    }
    loop->poller_data = st;
    eddy_io_init(&loop->wake_io, loop, st->wakefd, eddy__eventfd_drain, NULL);
    int err = eddy_io_start(&loop->wake_io, EDDY_IO_READ);
    if (err != 0) {
        close(st->wakefd);
        close(st->epfd);
        free(st);
        loop->poller_data = NULL;
    }
    return err;
}

static void epoll_destroy(eddy_loop_t *loop)
{
    epoll_state_t *st = loop->poller_data;
    if (st == NULL) {
        return;
    }
    close(st->wakefd);
    close(st->epfd);
    free(st);
    loop->poller_data = NULL;
}

static int epoll_update(eddy_loop_t *loop, eddy_io_t *io, unsigned events)
{
    epoll_state_t *st = loop->poller_data;
    assert(st != NULL && io->fd >= 0 && io->_loop == loop);
    struct epoll_event ev = {0};
    ev.events = ((events & EDDY_IO_READ) ? EPOLLIN | EPOLLRDHUP : 0) |
                ((events & EDDY_IO_WRITE) ? EPOLLOUT : 0);
    /* The generation rides with the fd, so an event for a descriptor that was closed and
     * reused within one batch is dropped (nginx's "instance" bit). */
    ev.data.u64 = ((uint64_t)io->_gen << 32) | (uint32_t)io->fd;
    int op;
    if (events == 0) {
        op = EPOLL_CTL_DEL;
    } else {
        op = io->_interest == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    }
    if (epoll_ctl(st->epfd, op, io->fd, &ev) != 0) {
        /* A descriptor closed behind our back is already gone from the set. */
        if (op == EPOLL_CTL_DEL && (errno == EBADF || errno == ENOENT)) {
            return 0;
        }
        return -errno;
    }
    return 0;
}

static int epoll_wait_dispatch(eddy_loop_t *loop, int64_t timeout_ns)
{
    epoll_state_t *st = loop->poller_data;
    int timeout_ms;
    if (timeout_ns < 0) {
        timeout_ms = -1;
    } else if (timeout_ns == 0) {
        timeout_ms = 0;
    } else {
        /* Round up: waking before the deadline would only spin back into the wait. */
        int64_t ms = (timeout_ns + 999999) / 1000000;
        timeout_ms = ms > 1000000000 ? 1000000000 : (int)ms;
    }
    int n = epoll_wait(st->epfd, st->events, MAX_EVENTS, timeout_ms);
    if (n < 0) {
        return errno == EINTR ? 0 : -errno;
    }
    if (n > 0) {
        loop->poll_return_ns = eddy_now_ns(); /* splits blocked time from callback time */
    }
    for (int i = 0; i < n; i++) {
        uint32_t e = st->events[i].events;
        unsigned ready = ((e & (EPOLLIN | EPOLLRDHUP)) ? EDDY_IO_READ : 0) |
                         ((e & EPOLLOUT) ? EDDY_IO_WRITE : 0) |
                         ((e & EPOLLERR) ? EDDY_IO_ERROR : 0) | ((e & EPOLLHUP) ? EDDY_IO_HUP : 0);
        uint64_t data = st->events[i].data.u64;
        eddy__io_dispatch(loop, (int)(uint32_t)data, (uint32_t)(data >> 32), ready);
    }
    return n;
}

static int epoll_wakeup(eddy_loop_t *loop)
{
    epoll_state_t *st = loop->poller_data;
    return eddy__eventfd_wake(st->wakefd);
}

const eddy__poller_ops_t eddy__poller_epoll = {
    .name = "epoll",
    .init = epoll_init,
    .destroy = epoll_destroy,
    .update = epoll_update,
    .wait = epoll_wait_dispatch,
    .wakeup = epoll_wakeup,
    .close_unregisters = true,
};
#else
/* Not built here; ISO C wants something in every file. */
typedef int eddy__no_epoll_t;
#endif /* EDDY_HAVE_EPOLL */
