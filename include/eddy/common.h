/*
 * eddy: what every module shares: the export macro, error codes, the version, and the
 * refcounted message header that every pipeline message starts with.
 */
#ifndef EDDY_COMMON_H
#define EDDY_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define EDDY_EXTERN
#elif defined(__GNUC__) || defined(__clang__)
#define EDDY_EXTERN __attribute__((visibility("default")))
#else
#define EDDY_EXTERN
#endif

#define EDDY_VERSION_MAJOR 0
#define EDDY_VERSION_MINOR 1
#define EDDY_VERSION_PATCH 0
#define EDDY_VERSION_STRING "0.1.0"

/* Branch hints; use only where a benchmark shows a gain (docs/style.md, "Hot paths"). */
#if defined(__GNUC__) || defined(__clang__)
#define EDDY_LIKELY(x) __builtin_expect(!!(x), 1)
#define EDDY_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define EDDY_LIKELY(x) (x)
#define EDDY_UNLIKELY(x) (x)
#endif

/* The structure holding member ptr, from a pointer to that member. */
#define EDDY_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/*
 * Error codes. System errors keep their errno value, negated (EDDY_EAGAIN == -EAGAIN on
 * Linux); eddy's own codes sit far from errno, from -4095 up.
 */
#define EDDY_ERRNO_MAP(XX)                                                                     \
    XX(EPERM, -EPERM, "operation not permitted")                                               \
    XX(ENOENT, -ENOENT, "no such entry")                                                       \
    XX(EINTR, -EINTR, "interrupted system call")                                               \
    XX(EIO, -EIO, "i/o error")                                                                 \
    XX(EBADF, -EBADF, "bad file descriptor")                                                   \
    XX(EAGAIN, -EAGAIN, "resource temporarily unavailable")                                    \
    XX(ENOMEM, -ENOMEM, "out of memory")                                                       \
    XX(EACCES, -EACCES, "permission denied")                                                   \
    XX(EBUSY, -EBUSY, "resource busy")                                                         \
    XX(EEXIST, -EEXIST, "already exists")                                                      \
    XX(EINVAL, -EINVAL, "invalid argument")                                                    \
    XX(ENFILE, -ENFILE, "file table overflow")                                                 \
    XX(EMFILE, -EMFILE, "too many open files")                                                 \
    XX(EPIPE, -EPIPE, "broken pipe")                                                           \
    XX(ERANGE, -ERANGE, "result out of range")                                                 \
    XX(ENOSYS, -ENOSYS, "function not implemented")                                            \
    XX(ENOTSUP, -ENOTSUP, "operation not supported")                                           \
    XX(EADDRINUSE, -EADDRINUSE, "address already in use")                                      \
    XX(EADDRNOTAVAIL, -EADDRNOTAVAIL, "address not available")                                 \
    XX(ENETUNREACH, -ENETUNREACH, "network is unreachable")                                    \
    XX(ECONNABORTED, -ECONNABORTED, "connection aborted")                                      \
    XX(ECONNRESET, -ECONNRESET, "connection reset by peer")                                    \
    XX(ENOBUFS, -ENOBUFS, "no buffer space available")                                         \
    XX(ENOTCONN, -ENOTCONN, "socket is not connected")                                         \
    XX(ETIMEDOUT, -ETIMEDOUT, "operation timed out")                                           \
    XX(ECONNREFUSED, -ECONNREFUSED, "connection refused")                                      \
    XX(EHOSTUNREACH, -EHOSTUNREACH, "host is unreachable")                                     \
    XX(EALREADY, -EALREADY, "operation already in progress")                                   \
    XX(EISCONN, -EISCONN, "socket is already connected")                                       \
    XX(EINPROGRESS, -EINPROGRESS, "operation in progress")                                     \
    XX(ECANCELED, -ECANCELED, "operation canceled")                                            \
    XX(EDEADLK, -EDEADLK, "would deadlock")                                                    \
    XX(EMSGSIZE, -EMSGSIZE, "message too long")                                                \
    XX(EDESTADDRREQ, -EDESTADDRREQ, "destination address required")                            \
    XX(EAFNOSUPPORT, -EAFNOSUPPORT, "address family not supported")                            \
    XX(EOF, -4095, "end of file")                                                              \
    XX(ECLOSED, -4094, "channel closed")                                                       \
    XX(EBOUNDS, -4093, "index out of bounds")                                                  \
    XX(ECAPACITY, -4092, "would exceed the buffer's max capacity")                             \
    XX(EREFCNT, -4091, "reference count is already zero")                                      \
    XX(ESHUTDOWN, -4090, "event loop is shutting down")                                        \
    XX(ETOOLONGFRAME, -4089, "frame longer than the decoder allows")                           \
    XX(EDECODE, -4088, "malformed input")                                                      \
    XX(ETLS, -4087, "TLS failure (handshake, certificate or protocol)")                        \
    XX(ETRUNCATED, -4086, "file shorter than the region being sent")

typedef enum {
#define EDDY_ERR_ENUM_(name, value, text) EDDY_##name = (value),
    EDDY_ERRNO_MAP(EDDY_ERR_ENUM_)
#undef EDDY_ERR_ENUM_
} eddy_errno_t;

/** A human-readable text for an EDDY_E* code (or "unknown error"). Never NULL. Any thread. */
EDDY_EXTERN const char *eddy_strerror(int err);

/** The code's name ("EAGAIN"), or "UNKNOWN". Never NULL. Any thread. */
EDDY_EXTERN const char *eddy_err_name(int err);

/** The library's version as "major.minor.patch". */
EDDY_EXTERN const char *eddy_version(void);

/**
 * Give back what eddy keeps for the whole process, as libuv's uv_library_shutdown() does: the
 * default allocator's pooled memory (its chunks, and the blocks cached by every thread), the
 * calling thread's buffer caches, the recycled buffer headers, the leak detector's quarantine,
 * and the stall watchdog's thread. For programs whose memory is checked at exit (valgrind,
 * which otherwise shows the pool as "still reachable") or that unload eddy; others need not
 * call it, as the process's end returns all of it.
 *
 * Call it last, from one thread: after every loop group and loop has terminated and been
 * freed, every channel, bootstrap, carrier and TLS context freed or released, every buffer
 * released, and every other thread that used buffers has exited (a thread still alive keeps
 * its own caches and headers until it exits). Allocators made with eddy_pooled_allocator_new()
 * are the caller's to free, first; OpenSSL's memory is OpenSSL's.
 *
 * Returns 0, or EDDY_EBUSY when it finds a buffer alive (eddy_buf_live_count() is not 0) or a
 * loop running (one with the stall watchdog on, the default): then nothing is freed that the
 * library needs, it stays usable, and the call may be made again later. After 0, eddy must
 * not be used again, but for eddy_library_shutdown() itself: a second call does nothing and
 * returns 0.
 */
EDDY_EXTERN int eddy_library_shutdown(void);

/*
 * The library's log. What eddy itself has to say (a loop stalled, an error reached the end of
 * a pipeline, a task was dropped, a buffer leaked) is one message at a level, handed to one
 * process-wide hook. The default hook writes "eddy: <message>\n" to stderr in one stdio call.
 * Messages below the level threshold are dropped before they are formatted: the threshold
 * starts at EDDY_LOG_INFO, or at the level the environment variable EDDY_LOG names (trace,
 * debug, info, warn, error), read at the first message. The logging handler's entries
 * (handler.h) come here too, at the handler's level, unless it was given a sink of its own.
 */

/* Log levels, least severe first. */
typedef enum {
    EDDY_LOG_TRACE = 1,
    EDDY_LOG_DEBUG,
    EDDY_LOG_INFO,
    EDDY_LOG_WARN,
    EDDY_LOG_ERROR
} eddy_log_level_t;

/*
 * Receives each message at or above the threshold: message has no "eddy: " prefix and no final
 * newline (a leak report spans lines) and is valid during the call. Called on whatever thread
 * logs (a loop's, a carrier's, the stall watchdog's, the exiting thread's for the leak report
 * at exit), on several at once: it must be thread-safe. A loop waits while it runs, so it
 * should not block for long.
 */
typedef void (*eddy_log_hook_cb)(eddy_log_level_t level, const char *message, void *arg);

/**
 * Send the library's messages to cb(level, message, arg) from now on; cb NULL restores the
 * default (stderr). Meant for start-up, before loops run, but safe from any thread at any
 * time: a message being logged on another thread meanwhile may still reach the previous hook,
 * with its arg. The hook stays set until exit, where the leak report (buffer.h) may use it:
 * keep what arg points to alive, or restore the default first.
 */
EDDY_EXTERN void eddy_log_set_hook(eddy_log_hook_cb cb, void *arg);

/** Drop messages below level from now on (and ignore EDDY_LOG). Any thread. */
EDDY_EXTERN void eddy_log_set_level(eddy_log_level_t level);

/** The current threshold: messages at it and above are logged. Any thread. */
EDDY_EXTERN eddy_log_level_t eddy_log_level(void);

/*
 * Messages. Everything that travels through a pipeline starts with this header: a type tag,
 * an atomic reference count that starts at 1, and the function that frees the message when
 * the count reaches zero. eddy_buf_t is one; decoders define their own.
 */
typedef struct eddy_msg_s eddy_msg_t;
typedef void (*eddy_msg_free_cb)(eddy_msg_t *msg);

enum {
    EDDY_MSG_BUF = 1,       /* eddy_buf_t */
    EDDY_MSG_COMPOSITE = 2, /* eddy_composite_t */
    EDDY_MSG_DATAGRAM = 3,  /* eddy_datagram_t (datagram.h) */
    EDDY_MSG_FILE_REGION = 4, /* eddy_file_region_t (file.h) */
    EDDY_MSG_CHUNKED = 5,     /* eddy_chunked_t (handler.h) */
    EDDY_MSG_USER = 256     /* first type number free for users and codecs */
};

struct eddy_msg_s {
#ifdef __cplusplus
    uint32_t _refcnt;
#else
    _Atomic uint32_t _refcnt;
#endif
    uint32_t type;
    eddy_msg_free_cb _free;
};

/** Initialise a message header with count 1. free_cb is called once, when the count hits 0. */
EDDY_EXTERN void eddy_msg_init(eddy_msg_t *msg, uint32_t type, eddy_msg_free_cb free_cb);

/** Take one more reference to msg; returns msg, or NULL when the count cannot take one (0
 * or UINT32_MAX: refused as eddy_buf_retain() refuses, debug builds abort). Any thread. */
EDDY_EXTERN eddy_msg_t *eddy_msg_retain(eddy_msg_t *msg);

/**
 * Drop one reference. Returns 1 when this call freed msg, 0 when references remain, and
 * EDDY_EREFCNT (nothing changed) when the count was already zero. Any thread.
 */
EDDY_EXTERN int eddy_msg_release(eddy_msg_t *msg);

/** The current reference count (a snapshot; for tests and diagnostics). */
EDDY_EXTERN uint32_t eddy_msg_refcnt(const eddy_msg_t *msg);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_COMMON_H */
