/*
 * eddy channel groups (Netty's ChannelGroup): a set of open channels, on any loops, that
 * forgets each channel as it closes; write, flush and close reach every member and return one
 * future for all of them, or, in their _void forms, none (Netty's void promise).
 *
 * What a group write sends is shared, not copied: each member gets a retained duplicate of a
 * buffer (its own reader index over the same memory) and a reference to any other message
 * (a composite, a codec's message), so broadcasting one message to 1,000 channels copies no
 * bytes. Messages other than buffers are therefore read, never changed, by the handlers that
 * encode them (the encoders in eddy do so).
 *
 * A member that does not keep up is the group's business, by a policy chosen per group: write
 * to it anyway (its own water marks and EDDY_MAX_PENDING_OUTBOUND bound it), skip it while it
 * is not writable, or close it. So one slow reader cannot grow a broadcasting server.
 *
 * Every function may be called from any thread. A group is freed with eddy_channel_group_free()
 * (its members stay open) and may be freed while writes to it are under way.
 */
#ifndef EDDY_CHANNEL_GROUP_H
#define EDDY_CHANNEL_GROUP_H

#include <eddy/channel.h>
#include <eddy/common.h>
#include <eddy/loop.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_channel_group_s eddy_channel_group_t;

/* What a group write does with a member that is not writable (eddy_channel_is_writable()
 * false: its pending bytes passed the high water mark). */
typedef enum {
    EDDY_GROUP_WRITE_ANYWAY = 0, /* queue it (the default): the member's own limits hold */
    EDDY_GROUP_SKIP_UNWRITABLE,  /* leave it out of this write; counted as skipped */
    /* close it (a consumer that cannot keep up is let go): nothing is written to it after
     * the write it missed, not even by its own loop before the close has run there (such a
     * write fails with EDDY_ECLOSED). */
    EDDY_GROUP_CLOSE_UNWRITABLE
} eddy_group_policy_t;

/** A new empty group; name is for logs (copied; NULL: "group"). NULL without memory. */
EDDY_EXTERN eddy_channel_group_t *eddy_channel_group_new(const char *name);
/** Forget every member (they stay open) and free the group once no write of it is under
 * way. NULL is ignored. */
EDDY_EXTERN void eddy_channel_group_free(eddy_channel_group_t *g);

/** The policy for members that are not writable (default EDDY_GROUP_WRITE_ANYWAY). */
EDDY_EXTERN void eddy_channel_group_set_policy(eddy_channel_group_t *g, eddy_group_policy_t p);

/**
 * Add ch: the group keeps a reference and drops it when ch closes (its close future) or is
 * removed. 0, EDDY_EEXIST (a member already), EDDY_ECLOSED (ch is closed: not added) or
 * EDDY_ENOMEM.
 */
EDDY_EXTERN int eddy_channel_group_add(eddy_channel_group_t *g, eddy_channel_t *ch);
/** Remove ch: true when it was a member. */
EDDY_EXTERN bool eddy_channel_group_remove(eddy_channel_group_t *g, eddy_channel_t *ch);
/** ch is a member. */
EDDY_EXTERN bool eddy_channel_group_contains(eddy_channel_group_t *g, const eddy_channel_t *ch);
/** How many members (a snapshot). */
EDDY_EXTERN size_t eddy_channel_group_size(eddy_channel_group_t *g);

/* Which members an operation reaches: true to include ch. Called on the caller's thread. */
typedef bool (*eddy_channel_matcher_cb)(eddy_channel_t *ch, void *arg);

typedef struct eddy_group_counters_s {
    uint64_t members;  /* now */
    uint64_t written;  /* member writes made (one per member per group write) */
    uint64_t skipped;  /* left out by EDDY_GROUP_SKIP_UNWRITABLE */
    uint64_t closed;   /* closed by EDDY_GROUP_CLOSE_UNWRITABLE */
} eddy_group_counters_t;

EDDY_EXTERN void eddy_channel_group_counters(eddy_channel_group_t *g, eddy_group_counters_t *c);

/**
 * Write msg (taken over) to every member matcher accepts (matcher NULL: all), flushed when
 * flush is true, each member's write travelling to its loop in order with that channel's other
 * writes. Returns a future (the caller releases it) that completes once every member's write
 * completed: with 0 when all succeeded (or there was nobody), else failed with the first
 * failure's error (EDDY_ECLOSED for a member that closed meanwhile...). Members skipped or
 * closed by the policy do not fail it. NULL only without memory (msg released).
 */
EDDY_EXTERN eddy_future_t *eddy_channel_group_write(eddy_channel_group_t *g, eddy_msg_t *msg,
                                                    eddy_channel_matcher_cb matcher, void *arg,
                                                    bool flush);
/** Flush every member matcher accepts (NULL: all). The future completes at once with 0 (a
 * flush has no outcome of its own). */
EDDY_EXTERN eddy_future_t *eddy_channel_group_flush(eddy_channel_group_t *g,
                                                    eddy_channel_matcher_cb matcher, void *arg);
/** Close every member matcher accepts (NULL: all); the future completes once all closed. */
EDDY_EXTERN eddy_future_t *eddy_channel_group_close(eddy_channel_group_t *g,
                                                    eddy_channel_matcher_cb matcher, void *arg);

/*
 * Fire-and-forget: as eddy_channel_group_write(), _flush() and _close(), with no future to
 * release. Each member is written (or closed) with a NULL promise, as eddy_channel_write(ch,
 * msg, NULL) does, and nothing is allocated for the group's outcome: a broadcast whose
 * outcome nobody reads costs neither a future for the group nor a promise per member.
 *
 * A member's failure is its own pipeline's, as for any write with no promise (pipeline.h):
 * a write it cannot queue (EDDY_ENOBUFS past EDDY_MAX_PENDING_OUTBOUND, EDDY_ENOMEM, an
 * encoder's error) raises exception_caught on that channel, and a byte stream closes after
 * what was queued before it; one that fails because the member closed meanwhile raises
 * nothing. The other members go on. The policy (eddy_channel_group_set_policy) applies as to
 * eddy_channel_group_write(). Takes ownership of msg. Any thread. When the group cannot list
 * its members (no memory), nothing is written, msg is released and the log says so.
 */
EDDY_EXTERN void eddy_channel_group_write_void(eddy_channel_group_t *g, eddy_msg_t *msg,
                                               eddy_channel_matcher_cb matcher, void *arg,
                                               bool flush);
EDDY_EXTERN void eddy_channel_group_flush_void(eddy_channel_group_t *g,
                                               eddy_channel_matcher_cb matcher, void *arg);
EDDY_EXTERN void eddy_channel_group_close_void(eddy_channel_group_t *g,
                                               eddy_channel_matcher_cb matcher, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_CHANNEL_GROUP_H */
