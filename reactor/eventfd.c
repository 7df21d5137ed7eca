/*
 * The wake-up eventfd that the epoll and io_uring backends share: producers bump its
 * counter to make a blocked wait return, and the loop drains it when it reports readable.
 */
#include "eddy_config.h"

#if defined(EDDY_HAVE_EPOLL) || defined(EDDY_HAVE_IO_URING)
#include "reactor/internal.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

void eddy__eventfd_drain(eddy_io_t *io, unsigned events, void *arg)
{
    uint64_t n;
    /* Drain the counter; EAGAIN means another turn already did. */
    while (read(io->fd, &n, sizeof(n)) < 0 && errno == EINTR) {
    }
}

int eddy__eventfd_wake(int fd)
{
    uint64_t one = 1;
    while (write(fd, &one, sizeof(one)) < 0) {
        if (errno == EINTR) {
            continue;
        }
        /* EAGAIN: the counter is saturated, so the loop is being woken anyway. */
        return errno == EAGAIN ? 0 : -errno;
    }
    return 0;
}
#else
/* Not built here; ISO C wants something in every file. */
typedef int eddy__no_eventfd_t;
#endif
