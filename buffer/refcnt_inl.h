/*
 * buffer/refcnt_inl.h: taking a reference that is refused rather than wrapped, for every
 * refcounted type (messages and buffers here, timers and futures in reactor/). Not installed.
 *
 * A retain on a count of 0 comes after the last release (the object is freed, or being freed
 * on another thread), one on UINT32_MAX would wrap the count to 0 and let the next release
 * free an object still in use. Netty's retain() throws IllegalReferenceCountException; here
 * the count is left as it is, the refusal reported through the log hook (common.h), and debug
 * builds abort there, where the bug is, rather than at a use after free later on.
 */
#ifndef EDDY_BUFFER_REFCNT_INL_H
#define EDDY_BUFFER_REFCNT_INL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * Add one to *cnt unless it is 0 or UINT32_MAX. false: refused, *cnt unchanged, *found the
 * count met. Relaxed, as the fetch-add it replaces: a new reference orders nothing, the final
 * release's acquire does. A compare-and-swap rather than a fetch-add, so that a refused
 * retain never makes a freed object look alive, even for a moment.
 */
static inline bool eddy__refcnt_inc(_Atomic uint32_t *cnt, uint32_t *found)
{
    uint32_t c = atomic_load_explicit(cnt, memory_order_relaxed);
    do {
        if (c == 0 || c == UINT32_MAX) {
            *found = c;
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(cnt, &c, c + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

/*
 * Report a refused retain of obj, a kind ("buffer", "message", "timer", "future") whose count
 * was count, through the log hook (EDDY_LOG_ERROR); then abort when refusals are fatal
 * (buffer/common.c). Release builds report the first refusal only.
 */
void eddy__refcnt_refused(const char *kind, const void *obj, uint32_t count);

/*
 * Whether a refused retain aborts the process: by default yes in debug builds (NDEBUG not
 * defined), no in release builds. For tests of the release behaviour; returns the setting
 * before. Any thread.
 */
bool eddy__refcnt_set_fatal(bool on);

#endif /* EDDY_BUFFER_REFCNT_INL_H */
