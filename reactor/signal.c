/*
 * Stop signals (loop.h): SIGINT and SIGTERM blocked before the loops start, then waited for
 * with sigwait-style calls, so no handler runs on some loop's thread and no flag is polled.
 */
#include <eddy/loop.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

int eddy_stop_signals_block(void)
{
    sigset_t set;
    stop_set(&set);
    int err = pthread_sigmask(SIG_BLOCK, &set, NULL);
    return err == 0 ? 0 : -err;
}

int eddy_stop_signals_wait(int64_t timeout_ms)
{
    sigset_t set;
    stop_set(&set);
    for (;;) {
        int sig;
        if (timeout_ms < 0) {
            sig = sigwaitinfo(&set, NULL);
        } else {
            struct timespec ts = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000000};
            sig = sigtimedwait(&set, NULL, &ts);
        }
        if (sig > 0) {
            return sig;
        }
        if (errno == EAGAIN) {
            return 0; /* the time passed */
        }
        if (errno != EINTR) {
            return -errno;
        }
        /* Interrupted by another signal's handler: wait again (the whole time: rare). */
    }
}
