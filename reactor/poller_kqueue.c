/*
 * The kqueue backend (FreeBSD, macOS; on Linux with libkqueue when EDDY_KQUEUE_COMPAT is on).
 * Read and write interest are separate filters, level-triggered like the epoll backend (no
 * EV_CLEAR). The wake-up is an EVFILT_USER event, so no descriptor is spent on it.
 */
#include "eddy_config.h"

#ifdef EDDY_HAVE_KQUEUE
#include "reactor/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/event.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_EVENTS 1024
#define WAKE_IDENT 1

typedef struct kq_state_s {
    int kq;
    struct kevent events[MAX_EVENTS];
} kq_state_t;

static int kq_init(eddy_loop_t *loop)
{
    kq_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return EDDY_ENOMEM;
    }
    st->kq = kqueue();
    if (st->kq < 0) {
        int err = -errno;
        free(st);
        return err;
    }
    struct kevent ev;
    EV_SET(&ev, WAKE_IDENT, EVFILT_USER, EV_ADD | EV_CLEAR, 0, 0, NULL);
    if (kevent(st->kq, &ev, 1, NULL, 0, NULL) != 0) {
        int err = -errno;
        close(st->kq);
        free(st);
        return err;
    }
    loop->poller_data = st;
    return 0;
}

static void kq_destroy(eddy_loop_t *loop)
{
    kq_state_t *st = loop->poller_data;
    if (st != NULL) {
        close(st->kq);
        free(st);
        loop->poller_data = NULL;
    }
}

static int kq_update(eddy_loop_t *loop, eddy_io_t *io, unsigned events)
{
    kq_state_t *st = loop->poller_data;
    struct kevent ch[2];
    int n = 0;
    unsigned old = io->_interest;
    /* udata carries the generation, as epoll's data does, to drop stale events. */
    void *udata = (void *)(uintptr_t)io->_gen;
    if ((events & EDDY_IO_READ) != (old & EDDY_IO_READ)) {
        EV_SET(&ch[n++], io->fd, EVFILT_READ, (events & EDDY_IO_READ) ? EV_ADD : EV_DELETE, 0, 0,
               udata);
    }
    if ((events & EDDY_IO_WRITE) != (old & EDDY_IO_WRITE)) {
        EV_SET(&ch[n++], io->fd, EVFILT_WRITE, (events & EDDY_IO_WRITE) ? EV_ADD : EV_DELETE, 0,
               0, udata);
    }
    if (n > 0 && kevent(st->kq, ch, n, NULL, 0, NULL) != 0) {
        if (events == 0 && (errno == EBADF || errno == ENOENT)) {
            return 0;
        }
        return -errno;
    }
    return 0;
}

static int kq_wait(eddy_loop_t *loop, int64_t timeout_ns)
{
    kq_state_t *st = loop->poller_data;
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000);
        ts.tv_nsec = (long)(timeout_ns % 1000000000);
        tsp = &ts;
    }
    int n = kevent(st->kq, NULL, 0, st->events, MAX_EVENTS, tsp);
    if (n < 0) {
        return errno == EINTR ? 0 : -errno;
    }
    if (n > 0) {
        loop->poll_return_ns = eddy_now_ns(); /* splits blocked time from callback time */
    }
    int handled = 0;
    for (int i = 0; i < n; i++) {
        struct kevent *ev = &st->events[i];
        if (ev->filter == EVFILT_USER) {
            continue; /* the wake-up: its job is done by returning */
        }
        unsigned ready = ev->filter == EVFILT_READ ? EDDY_IO_READ : EDDY_IO_WRITE;
        int err = 0;
        if (ev->flags & EV_ERROR) {
            ready = EDDY_IO_ERROR;
        } else if (ev->flags & EV_EOF) {
            ready |= EDDY_IO_HUP;
            /* A socket error (a refused connect, a reset) is EV_EOF with the errno in fflags.
             * BSD leaves SO_ERROR set as well; libkqueue fills fflags by reading SO_ERROR,
             * which clears it, so the error goes with the event. */
            if (ev->fflags != 0) {
                ready |= EDDY_IO_ERROR;
                err = -(int)ev->fflags;
            }
        }
        eddy__io_dispatch_error(loop, (int)ev->ident, (uint32_t)(uintptr_t)ev->udata, ready, err);
        handled++;
    }
    return handled;
}

static int kq_wakeup(eddy_loop_t *loop)
{
    kq_state_t *st = loop->poller_data;
    struct kevent ev;
    EV_SET(&ev, WAKE_IDENT, EVFILT_USER, 0, NOTE_TRIGGER, 0, NULL);
    return kevent(st->kq, &ev, 1, NULL, 0, NULL) == 0 ? 0 : -errno;
}

const eddy__poller_ops_t eddy__poller_kqueue = {
    .name = "kqueue",
    .init = kq_init,
    .destroy = kq_destroy,
    .update = kq_update,
    .wait = kq_wait,
    .wakeup = kq_wakeup,
    .close_unregisters = true,
};
#else
/* Not built here; ISO C wants something in every file. */
typedef int eddy__no_kqueue_t;
#endif /* EDDY_HAVE_KQUEUE */
