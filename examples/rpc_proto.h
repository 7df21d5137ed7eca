/*
 * The wire format eddy-rpc-server and eddy-rpc-client share (#7). Frames are a 4-byte big
 * endian length, then that many payload bytes: Netty's LengthFieldBasedFrameDecoder(max, 0,
 * 4, 0, 4) and LengthFieldPrepender(4) read and write the same stream.
 *
 *   request payload    u64 id, u8 method length, the method name, the body
 *   response payload   u64 id (the request's), u8 status, the body
 *
 * Methods: "echo" returns its body; "add" takes two big endian i64 and returns their sum
 * (wrapping); "sleep" takes a big endian u32 of milliseconds and returns an empty body.
 */
#ifndef EDDY_EXAMPLES_RPC_PROTO_H
#define EDDY_EXAMPLES_RPC_PROTO_H

#include "example_util.h"
#include <eddy/eddy.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

enum {
    RPC_OK = 0,
    RPC_UNKNOWN_METHOD = 1,
    RPC_BAD_REQUEST = 2,
    RPC_SERVER_ERROR = 3,
};

#define RPC_DEFAULT_PORT 9000
#define RPC_DEFAULT_MAX_FRAME ((size_t)1 << 20) /* length field included, as in Netty */
#define RPC_HEADER 9                            /* id and method length, or id and status */

/** The big endian u64 at p. */
static inline uint64_t rpc_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

/**
 * Add the framing handlers to p, then app: the message deadline (a frame must arrive whole
 * within frame_timeout_ms of its first bytes, however slowly they trickle; 0: no limit), the
 * length field decoder (frames of at most max_frame bytes with their length field, which it
 * strips) and the prepender. 0, or the pipeline's error with none of them added
 * (eddy_pipeline_add_handlers).
 */
static inline int rpc_add_framing(eddy_pipeline_t *p, size_t max_frame, int64_t frame_timeout_ms,
                                  eddy_handler_t app)
{
    return EDDY_PIPELINE_ADD_LAST(p, eddy_message_deadline_handler(frame_timeout_ms),
                                  eddy_length_field_decoder(max_frame, 0, 4, 0, 4),
                                  eddy_length_field_prepender(4), app);
}

#endif /* EDDY_EXAMPLES_RPC_PROTO_H */
