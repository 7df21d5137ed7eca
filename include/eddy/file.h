/*
 * eddy files: an open file held by reference (eddy_file_t) and file regions, messages that
 * stand for a range of one (Netty's FileRegion / DefaultFileRegion).
 *
 * A region written to a channel reaches the socket without passing through user space where
 * the transport can: sendfile(2) on every transport (io_uring's too, a poll for POLLOUT
 * waiting when the socket is full; a read and a send where sendfile is missing); the TLS
 * handler reads it
 * in records' worth (16 KiB) and encrypts them (docs/pipeline.md, "File regions"). It keeps
 * its order among the byte buffers written before and after it, counts its length against
 * the channel's write water marks, and completes its write promise like any other message.
 *
 * A file that turns out shorter than a region while the region is sent (truncated meanwhile)
 * ends the write with EDDY_ETRUNCATED: the promise fails, the channel closes; the peer sees a
 * short stream, never bytes past the file's new end (nothing is mapped: no SIGBUS either).
 *
 * Handlers that only know byte buffers pass a region on untouched (an encoder's accept()
 * refuses it, codec.h); a handler that needs the bytes reads them with eddy_file_region_read().
 */
#ifndef EDDY_FILE_H
#define EDDY_FILE_H

#include <eddy/common.h>

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An open file descriptor with a reference count: closed when the last reference goes. */
typedef struct eddy_file_s eddy_file_t;
/* A message: length bytes of a file from offset on. Opaque. */
typedef struct eddy_file_region_s eddy_file_region_t;

/**
 * Wrap the open descriptor fd (taken over: closed with the last reference) with a count of 1.
 * NULL when out of memory (fd is closed then). Any thread.
 */
EDDY_EXTERN eddy_file_t *eddy_file_adopt(int fd);
/** Open path read-only (O_CLOEXEC) as a file with a count of 1; *out NULL on error. 0, or
 * a negative errno (EDDY_ENOENT, EDDY_EACCES, ...). Any thread. */
EDDY_EXTERN int eddy_file_open(const char *path, eddy_file_t **out);
/** Take one more reference; returns f. Any thread. */
EDDY_EXTERN eddy_file_t *eddy_file_retain(eddy_file_t *f);
/** Drop one reference; the last closes the descriptor and frees f. true when it did. Any
 * thread. */
EDDY_EXTERN bool eddy_file_release(eddy_file_t *f);
/** The descriptor (borrowed: valid while a reference is held). */
EDDY_EXTERN int eddy_file_fd(const eddy_file_t *f);

/**
 * A region of length bytes of f from offset on, as a message with a count of 1 (the caller's;
 * pass it on with eddy_file_region_msg()). Takes a reference to f of its own (the caller
 * keeps its). The file is not read here: a region past the file's end fails when written.
 * NULL when out of memory. Any thread.
 */
EDDY_EXTERN eddy_file_region_t *eddy_file_region_new(eddy_file_t *f, uint64_t offset,
                                                     uint64_t length);
/** The region behind msg, or NULL when msg is not one. Borrows. */
EDDY_EXTERN eddy_file_region_t *eddy_file_region_of(eddy_msg_t *msg);
/** The message header of r, to write it. Borrows. */
EDDY_EXTERN eddy_msg_t *eddy_file_region_msg(eddy_file_region_t *r);
/** The file (borrowed: valid while r is). */
EDDY_EXTERN eddy_file_t *eddy_file_region_file(const eddy_file_region_t *r);
/** Where the unsent part starts in the file. */
EDDY_EXTERN uint64_t eddy_file_region_offset(const eddy_file_region_t *r);
/** The bytes not sent yet (a transport that sent part of a region skips them). */
EDDY_EXTERN uint64_t eddy_file_region_remaining(const eddy_file_region_t *r);
/** Mark n bytes (at most the remaining ones) as sent: the region starts n bytes later. The
 * thread that owns the message. */
EDDY_EXTERN void eddy_file_region_skip(eddy_file_region_t *r, uint64_t n);

/**
 * Read up to cap bytes of r's unsent part into dst with pread(2), not skipping them. The
 * count read (0 when nothing remains), EDDY_ETRUNCATED when the file ends before the region
 * does, or a negative errno. The owner's thread (blocks on the disk like any pread).
 */
EDDY_EXTERN ssize_t eddy_file_region_read(const eddy_file_region_t *r, void *dst, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_FILE_H */
