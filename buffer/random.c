/*
 * Randomness from the kernel (buffer/layer.h): getrandom(2), which blocks only before the
 * pool is first seeded at boot, or /dev/urandom on a libc without it.
 */
#include "buffer/layer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/random.h>
#endif

/* The bytes read so far, from /dev/urandom. */
static int from_urandom(unsigned char *p, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int err = 0;
    while (n > 0 && err == 0) {
        ssize_t r = read(fd, p, n);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r == 0 || errno != EINTR) {
            err = r == 0 ? EDDY_EIO : -errno;
        }
    }
    close(fd);
    return err;
}

int eddy__random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
#if defined(__linux__)
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (errno == ENOSYS) {
            break; /* an old kernel: the device instead */
        } else if (errno != EINTR) {
            return -errno;
        }
    }
    if (n == 0) {
        return 0;
    }
#endif
    return from_urandom(p, n);
}
