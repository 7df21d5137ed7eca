/*
 * What the WebSocket codec's files share (not API).
 */
#ifndef EDDY_PIPELINE_CODEC_WS_INTERNAL_H
#define EDDY_PIPELINE_CODEC_WS_INTERNAL_H

#include <eddy/websocket.h>

#include "buffer/layer.h" /* eddy__random_bytes */

/* The incremental UTF-8 check (Bjoern Hoehrmann's DFA): state 0 accepts, 12 rejects; any
 * other state is inside a sequence. */
enum { EDDY__UTF8_ACCEPT = 0, EDDY__UTF8_REJECT = 12 };

/* Run n bytes at p through the DFA from *state: returns the offset of the first byte that
 * made it reject (*state is then EDDY__UTF8_REJECT), or n. */
size_t eddy__ws_utf8_step(uint32_t *state, const uint8_t *p, size_t n);

/* XOR n bytes at p with the 4-byte key starting at key byte phase (0-3), 8 bytes at a time;
 * returns the phase after the last byte. */
unsigned eddy__ws_mask(uint8_t *p, size_t n, const uint8_t key[4], unsigned phase);

/* Write len bytes of standard base64 for p into out (4 * ceil(n / 3) characters, no NUL). */
void eddy__ws_base64(const uint8_t *p, size_t n, char *out);
/* Fail the connection for a protocol error (frame.c): our close frame with code when
 * send_close, the error (EDDY_ETOOLONGFRAME for 1009, else EDDY_EDECODE) to the handlers after
 * ctx, then a close after flush unless a handler removed ctx meanwhile. */
void eddy__ws_fail_connection(eddy_ctx_t *ctx, int code, bool send_close);
/* SHA-1 of a's an bytes then b's bn (sha1.c): the handshake's accept key, nothing more. */
void eddy__ws_sha1(const void *a, size_t an, const void *b, size_t bn, uint8_t out[20]);
/* Decode n characters of padded standard base64 at s into out (room for max bytes): the
 * byte count, or -1 for invalid input or too many bytes. */
int eddy__ws_unbase64(const char *s, size_t n, uint8_t *out, size_t max);

/* Whether the comma-separated list s (n bytes) holds token, ignoring case and blanks. */
bool eddy__ws_list_has(const char *s, size_t n, const char *token);
/* Call fn(item, its length, arg) for each item of the comma-separated list s (n bytes), blanks
 * around it left out, empty ones skipped, until fn returns true: whether it did. */
typedef bool (*eddy__ws_item_fn)(const char *p, size_t n, void *arg);
bool eddy__ws_list_each(const char *s, size_t n, eddy__ws_item_fn fn, void *arg);

/* Frame decoder: client role (expects unmasked frames), the payload limit, and whether the
 * first frame of a data message may carry RSV1 (permessage-deflate agreed). */
eddy_handler_t eddy__ws_frame_decoder(bool client, size_t max_frame, bool rsv1);

/* permessage-deflate parameters, agreed, seen from one side. */
typedef struct eddy__ws_deflate_params_s {
    bool our_no_context;  /* we compress each message afresh */
    bool peer_no_context; /* the peer does: our inflater may reset per message */
    int our_window_bits;  /* our compression's window (9-15: zlib cannot do 8) */
    int peer_window_bits; /* the peer's (8-15) */
} eddy__ws_deflate_params_t;

/* Parse one permessage-deflate extension's parameters (after the name, "; a; b=1" ...) as
 * seen by a server (offer: from the client) into an answer, or by a client (response):
 * 0, or EDDY_EINVAL for an unknown, repeated or out-of-range parameter. */
int eddy__ws_deflate_negotiate_server(const char *params, size_t n, const eddy_ws_config_t *c,
                                      eddy__ws_deflate_params_t *out, char *answer, size_t cap);
int eddy__ws_deflate_accept_client(const char *params, size_t n, const eddy_ws_config_t *c,
                                   eddy__ws_deflate_params_t *out);
/* The client's offer (Sec-WebSocket-Extensions value) into out. */
void eddy__ws_deflate_offer(const eddy_ws_config_t *c, char *out, size_t cap);

eddy_handler_t eddy__ws_deflate_handler(const eddy__ws_deflate_params_t *p,
                                        const eddy_ws_config_t *c);

/* Install encoder, decoder, deflate (d non-NULL) and protocol handlers after the handler
 * called base, then fire EDDY_EVENT_WS_HANDSHAKE from the protocol handler with ev. 0 or an
 * error (the channel should then be closed). */
int eddy__ws_install(eddy_pipeline_t *p, const char *base, bool client, const eddy_ws_config_t *c,
                     const eddy__ws_deflate_params_t *d);

/* The handler-level copy of a configuration: the strings it points to are owned. */
typedef struct eddy__ws_conf_s {
    eddy_ws_config_t c;
    char *strings; /* one block holding the copied strings */
} eddy__ws_conf_t;

int eddy__ws_conf_copy(eddy__ws_conf_t *dst, const eddy_ws_config_t *src);
void eddy__ws_conf_free(eddy__ws_conf_t *c);
/* A handler's state: size bytes, zeroed, its first member an eddy__ws_conf_t copied from c
 * (NULL: the defaults). NULL without memory or for a configuration eddy__ws_conf_copy()
 * refuses. Freed with eddy__ws_state_free(), its free_state. */
void *eddy__ws_state_new(size_t size, const eddy_ws_config_t *c);
void eddy__ws_state_free(void *state);

#endif /* EDDY_PIPELINE_CODEC_WS_INTERNAL_H */
