/*
 * eddy_library_shutdown() (common.h). It lives in the reactor, the highest layer that keeps
 * anything for the whole process, so that it may call each layer's part; pipeline/ and
 * bootstrap/ keep nothing of their own (TLS's globals are OpenSSL's).
 */
#include <eddy/common.h>

#include "buffer/layer.h"
#include "reactor/internal.h"

int eddy_library_shutdown(void)
{
    /* The watchdog first: a running loop may still allocate buffers. */
    int err = eddy__watchdog_shutdown();
    if (err == 0) {
        err = eddy__buffer_shutdown();
    }
    return err;
}
