/*
 * What include/eddy/common.h declares: error texts, the version, and the message header's
 * reference count.
 */
#include <eddy/common.h>
#include <eddy/buffer.h>

#include "buffer/layer.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__SANITIZE_THREAD__)
char eddy__fd_order; /* the address eddy__fd_made() and eddy__fd_closing() sync on */
#endif

const char *eddy_strerror(int err)
{
    switch (err) {
#define EDDY_ERR_TEXT_(name, value, text)                                                      \
    case EDDY_##name:                                                                          \
        return text;
        EDDY_ERRNO_MAP(EDDY_ERR_TEXT_)
#undef EDDY_ERR_TEXT_
    default:
        return "unknown error";
    }
}

const char *eddy_err_name(int err)
{
    switch (err) {
#define EDDY_ERR_NAME_(name, value, text)                                                      \
    case EDDY_##name:                                                                          \
        return #name;
        EDDY_ERRNO_MAP(EDDY_ERR_NAME_)
#undef EDDY_ERR_NAME_
    default:
        return "UNKNOWN";
    }
}

const char *eddy_version(void)
{
    return EDDY_VERSION_STRING;
}

void eddy_msg_init(eddy_msg_t *msg, uint32_t type, eddy_msg_free_cb free_cb)
{
    atomic_init(&msg->_refcnt, 1);
    msg->type = type;
    msg->_free = free_cb;
}

#ifdef NDEBUG
static atomic_bool refcnt_fatal = false;
#else
static atomic_bool refcnt_fatal = true;
#endif

bool eddy__refcnt_set_fatal(bool on)
{
    return atomic_exchange(&refcnt_fatal, on);
}

void eddy__refcnt_refused(const char *kind, const void *obj, uint32_t count)
{
    bool fatal = atomic_load(&refcnt_fatal);
    static atomic_bool reported;
    if (fatal || !atomic_exchange(&reported, true)) {
        eddy__log(EDDY_LOG_ERROR, "retain of %s %p refused: its reference count is %s%s", kind,
                  obj,
                  count == 0 ? "0 (released already: a use after the last release)"
                             : "at its maximum (4294967295: one more would wrap to 0)",
                  fatal ? "; aborting (debug build)" : "; the retain returns NULL");
    }
    if (fatal) {
        abort();
    }
}

eddy_msg_t *eddy_msg_retain(eddy_msg_t *msg)
{
    if (msg->type == EDDY_MSG_BUF) {
        return eddy_buf_retain(eddy_buf_of(msg)) != NULL ? msg : NULL;
    }
    return eddy__refcnt_retain(&msg->_refcnt, "message", msg) ? msg : NULL;
}

int eddy_msg_release(eddy_msg_t *msg)
{
    /* Buffers have views that share a parent's count: their own release knows the rules. */
    if (msg->type == EDDY_MSG_BUF) {
        return eddy_buf_release(eddy_buf_of(msg));
    }
    uint32_t old = atomic_load_explicit(&msg->_refcnt, memory_order_relaxed);
    do {
        if (old == 0) {
            return EDDY_EREFCNT;
        }
        /* acq_rel: the release publishes this thread's writes to the freeing thread, the
         * acquire (when we free) pairs with every other holder's release here. */
    } while (!atomic_compare_exchange_weak_explicit(&msg->_refcnt, &old, old - 1,
                                                    memory_order_acq_rel, memory_order_relaxed));
    if (old == 1) {
        if (msg->_free) {
            msg->_free(msg);
        }
        return 1;
    }
    return 0;
}

uint32_t eddy_msg_refcnt(const eddy_msg_t *msg)
{
    if (msg->type == EDDY_MSG_BUF) {
        const char *p = (const char *)msg - offsetof(eddy_buf_t, _msg);
        return eddy_buf_refcnt((const eddy_buf_t *)(const void *)p);
    }
    return atomic_load_explicit(&msg->_refcnt, memory_order_acquire);
}

void *eddy__array_grow(void *items, size_t *cap, size_t size, size_t first)
{
    assert(size > 0 && first > 0);
    if (*cap > SIZE_MAX / 2 / size || first > SIZE_MAX / size) {
        return NULL;
    }
    size_t n = *cap != 0 ? *cap * 2 : first;
    void *grown = realloc(items, n * size);
    if (grown != NULL) {
        *cap = n;
    }
    return grown;
}
