/*
 * buffer/shutdown_internal.h: the buffer module's part of eddy_library_shutdown() (common.h),
 * for reactor/shutdown.c, which runs every module's part. Not installed.
 */
#ifndef EDDY_BUFFER_SHUTDOWN_INTERNAL_H
#define EDDY_BUFFER_SHUTDOWN_INTERNAL_H

/*
 * Free what the buffer module keeps for the process: the default pooled allocator (chunks,
 * arenas, stashes; threads' caches of it become orphans that their threads free), the
 * calling thread's state (caches, recycled headers), the depot of recycled headers and the
 * leak quarantine. After it the default allocator is the unpooled one. 0, or EDDY_EBUSY,
 * and nothing freed, while a buffer is alive or a block of the default pool is out. One
 * thread, with no other using buffers.
 */
int eddy__buffer_shutdown(void);

#endif /* EDDY_BUFFER_SHUTDOWN_INTERNAL_H */
