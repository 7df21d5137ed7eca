/*
 * What the HTTP/2 codec offers the protocols built on its streams (codec/grpc): a few stream
 * controls that http2.h leaves out because an HTTP application never needs them. Not API.
 * The loop's thread.
 */
#ifndef EDDY_CODEC_HTTP2_LAYER_H
#define EDDY_CODEC_HTTP2_LAYER_H

#include <eddy/http2.h>

/* Hold s's connection's frames until the matching uncork (they nest), so a head, a message
 * sent in two pieces and trailers leave as one write even outside a read (from a timer). */
void eddy__h2_stream_cork(eddy_h2_stream_t *s);
void eddy__h2_stream_uncork(eddy_h2_stream_t *s);

/* eddy_h2_stream_send_data(), past max_stream_pending unless capped: for bytes whole in
 * memory already that must follow what was just queued (a gRPC message behind its prefix). */
int eddy__h2_stream_send(eddy_h2_stream_t *s, eddy_buf_t *data, bool end_stream,
                         eddy_promise_t *p, bool capped);

/* Once s's END_STREAM has gone out, reset it with NO_ERROR if the peer has not ended its side:
 * "a complete response prior to the client sending an entire request" (RFC 9113 section
 * 8.1), which gRPC asks after an early status. Not counted as a reset we make for an error.
 * Called before the END_STREAM is queued: outside a read (a timer) it may go at once. */
void eddy__h2_stream_end_early(eddy_h2_stream_t *s);

/* Bytes queued on s that nghttp2 has not taken yet (they wait for the peer's window). */
size_t eddy__h2_stream_pending(const eddy_h2_stream_t *s);

/* Whether the peer has ended its side of s (its END_STREAM came), or s is closed. */
bool eddy__h2_stream_remote_ended(const eddy_h2_stream_t *s);

/* Called with each PING frame the peer sends (not its ACKs to ours), on the loop; arg is
 * what was given. One hook per connection; NULL removes it. The pipeline of ch holds the
 * connection handler, or nothing happens. */
void eddy__h2_on_ping(eddy_pipeline_t *p, void (*cb)(void *arg), void *arg);

/* A connection error: GOAWAY with code (not NO_ERROR) and the debug text why, then close. */
void eddy__h2_fail(eddy_pipeline_t *p, uint32_t code, const char *why);

/* Send a PING of ours (a keepalive: nghttp2 reads the peer's ACK). 0, or EDDY_ECLOSED (no
 * connection handler in p, or it is closing), EDDY_ENOMEM. */
int eddy__h2_ping(eddy_pipeline_t *p);
/* The loop's ns when p's connection last read bytes (its start before the first; 0 without a
 * connection handler). */
int64_t eddy__h2_last_read(eddy_pipeline_t *p);

#endif /* EDDY_CODEC_HTTP2_LAYER_H */
