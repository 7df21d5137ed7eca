/*
 * eddy WebSocket (RFC 6455, with permessage-deflate of RFC 7692): the frame codec, the
 * protocol handler and the opening handshake of both sides (Netty's websocketx).
 *
 * A server adds the handshaker after its HTTP request decoder, response encoder (for the
 * pages it serves besides the socket) and aggregator:
 *
 *     eddy_ws_config_t ws = {.path = "/ws", .subprotocols = "chat", .deflate = true};
 *     EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_request_decoder(NULL),
 *                            eddy_http_response_encoder(), eddy_http_aggregator(0),
 *                            eddy_ws_server_handshaker(&ws),
 *                            eddy_handler("app", &app_ops, app_new(), app_free));
 *
 * Requests for other paths pass on to the handlers after it, so one server serves pages and
 * sockets; the responses to them need the encoder (without it their writes fail with
 * EDDY_ENOTSUP, which with no promise is raised, logged and closes the connection). A valid upgrade request on the path is answered with 101; then the HTTP handlers
 * (request decoder, aggregator, response encoder) and the handshaker leave the pipeline and
 * the WebSocket handlers take their place, named "ws_encoder", "ws_decoder", "ws_deflate"
 * (when permessage-deflate was agreed) and "ws_protocol", and the handlers after them get the
 * user event EDDY_EVENT_WS_HANDSHAKE. A bad request is answered (400, 403, 405, 426) and the
 * connection closed. A client adds eddy_ws_client_handshaker() to a connected channel: it
 * sends the request and reads the answer through the HTTP client codec (http_client.h), checks
 * it and installs the same handlers in client mode.
 *
 * After the handshake the application reads and writes eddy_ws_frame_t messages
 * (EDDY_MSG_WS_FRAME). Inbound: whole text and binary messages (fragments aggregated, text
 * checked as UTF-8, compressed ones inflated), and the peer's close frame; pings are
 * answered and pongs dropped by the protocol handler. Outbound: frames the application
 * makes; a close frame starts the closing handshake.
 *
 * Errors: the peer's protocol errors are answered with a close frame carrying the status
 * (1002 protocol error, 1007 bad UTF-8, 1009 too big), then the channel closes after it is
 * flushed; the handlers after the protocol handler see exception_caught (EDDY_EDECODE, or
 * EDDY_ETOOLONGFRAME for 1009) first. Every callback runs on the channel's loop.
 */
#ifndef EDDY_WEBSOCKET_H
#define EDDY_WEBSOCKET_H

#include <eddy/buffer.h>
#include <eddy/codec.h>
#include <eddy/common.h>
#include <eddy/pipeline.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The message type of eddy_ws_frame_t, in eddy's own range below EDDY_MSG_USER. */
enum { EDDY_MSG_WS_FRAME = 24 };

/* User events of the handshake, in eddy's range below EDDY_EVENT_USER. */
enum {
    EDDY_EVENT_WS_HANDSHAKE = 72,       /* data: const eddy_ws_handshake_event_t * */
    EDDY_EVENT_WS_HANDSHAKE_FAILED = 73 /* client only; data: const eddy_ws_handshake_event_t * */
};

/* Opcodes (RFC 6455 section 5.2). */
typedef enum {
    EDDY_WS_CONTINUATION = 0x0,
    EDDY_WS_TEXT = 0x1,
    EDDY_WS_BINARY = 0x2,
    EDDY_WS_CLOSE = 0x8,
    EDDY_WS_PING = 0x9,
    EDDY_WS_PONG = 0xA
} eddy_ws_opcode_t;

/* Close status codes (RFC 6455 section 7.4.1). 1005, 1006 and 1015 are never sent. */
enum {
    EDDY_WS_CLOSE_NORMAL = 1000,
    EDDY_WS_CLOSE_GOING_AWAY = 1001,
    EDDY_WS_CLOSE_PROTOCOL_ERROR = 1002,
    EDDY_WS_CLOSE_UNSUPPORTED = 1003,
    EDDY_WS_CLOSE_NO_STATUS = 1005,
    EDDY_WS_CLOSE_ABNORMAL = 1006,
    EDDY_WS_CLOSE_INVALID_PAYLOAD = 1007,
    EDDY_WS_CLOSE_POLICY = 1008,
    EDDY_WS_CLOSE_TOO_BIG = 1009,
    EDDY_WS_CLOSE_MANDATORY_EXT = 1010,
    EDDY_WS_CLOSE_INTERNAL_ERROR = 1011
};

/* The RSV bits of eddy_ws_frame_t.rsv, as they sit in the frame's first byte. */
enum { EDDY_WS_RSV1 = 0x40, EDDY_WS_RSV2 = 0x20, EDDY_WS_RSV3 = 0x10 };

/* Limits unless configured. */
#define EDDY_WS_MAX_FRAME_SIZE ((size_t)1 << 20)
#define EDDY_WS_MAX_MESSAGE_SIZE ((size_t)1 << 20)
#define EDDY_WS_CLOSE_TIMEOUT_MS 5000
#define EDDY_WS_HANDSHAKE_TIMEOUT_MS 10000

/* A frame, or a whole message once aggregated. Read the fields; make with the constructors. */
typedef struct eddy_ws_frame_s {
    eddy_msg_t _msg;     /* EDDY_MSG_WS_FRAME */
    uint8_t opcode;      /* eddy_ws_opcode_t */
    bool fin;            /* the last frame of its message (always, for control frames) */
    uint8_t rsv;         /* EDDY_WS_RSV1..3 bits; 0 for what the application sees */
    eddy_buf_t *payload; /* owned, unmasked; never NULL (empty: a buffer without bytes) */
} eddy_ws_frame_t;

/* What EDDY_EVENT_WS_HANDSHAKE and _FAILED carry: borrowed, valid during the event. */
typedef struct eddy_ws_handshake_event_s {
    const char *path;        /* server: the request target; client: the URI asked for */
    const char *subprotocol; /* agreed, or NULL */
    const char *extensions;  /* the agreed Sec-WebSocket-Extensions value, or NULL */
    int error;               /* _FAILED: EDDY_EDECODE (a bad answer), EDDY_ETIMEDOUT, ... */
    const char *reason;      /* _FAILED: why, for logs */
} eddy_ws_handshake_event_t;

/* Says whether a server accepts a request's Origin (origin NULL: the request had none).
 * Called on the channel's loop. */
typedef bool (*eddy_ws_origin_cb)(const char *origin, size_t len, void *arg);

/*
 * The configuration of a WebSocket endpoint, server or client; copied by the constructors
 * (strings too). Zeroed fields take the defaults.
 */
typedef struct eddy_ws_config_s {
    /* Both sides. */
    size_t max_frame_size;    /* payload of one frame (0: EDDY_WS_MAX_FRAME_SIZE): 1009;
                                 with deflate agreed, a data frame may be larger by deflate's
                                 growth of data that does not compress (1/256 and 64 bytes) */
    size_t max_message_size;  /* an aggregated or inflated message (0: ..._MESSAGE_SIZE): 1009 */
    bool no_aggregate;        /* pass data frames on as they come, fragments as fragments */
    int64_t close_timeout_ms; /* our close sent: wait this long for the peer's (0: 5000; <0:
                                 for ever), then close */
    int64_t ping_interval_ms; /* send a ping after this long without input (0: never) */
    int64_t handshake_timeout_ms; /* the server's request, or the client's answer, must come
                                     within this (0: EDDY_WS_HANDSHAKE_TIMEOUT_MS; <0: never) */
    const char *subprotocols;     /* comma-separated, in preference order (NULL: none) */
    /* permessage-deflate (RFC 7692): offered (client) or accepted (server) when deflate; in a
     * build without zlib (EDDY_WITH_ZLIB=OFF) never (the connection goes uncompressed). */
    bool deflate;
    bool server_no_context_takeover; /* the server compresses each message afresh */
    bool client_no_context_takeover; /* the client does */
    int server_max_window_bits;      /* 8 to 15 (0: 15); zlib's raw deflate cannot do 8 and
                                        compresses with 9 when 8 is agreed (as Netty and
                                        zlib-based peers do) */
    int client_max_window_bits;      /* the same for the client's compression */
    int compression_level;           /* zlib's 1 to 9 (0: 6) */

    /* Server. */
    const char *path;            /* the request path that upgrades (NULL: "/"); exact, without
                                    the query */
    eddy_ws_origin_cb origin_cb; /* NULL: every origin */
    void *origin_arg;

    /* Client. */
    const char *uri;    /* the request target (NULL: "/") */
    const char *host;   /* the Host header (required) */
    const char *origin; /* an Origin header to send (NULL: none) */
} eddy_ws_config_t;

/* ---------------------------------------------------------------------------------------
 * Frames
 */

/**
 * A frame with opcode, fin, and payload (taken over, also on failure; NULL: empty). The
 * caller owns the one reference. NULL when out of memory or opcode is not one of the six
 * (payload released).
 */
EDDY_EXTERN eddy_ws_frame_t *eddy_ws_frame_new(eddy_ws_opcode_t opcode, bool fin,
                                               eddy_buf_t *payload);
/** A final text frame holding a copy of n bytes at s (not checked as UTF-8). NULL: no
 * memory. */
EDDY_EXTERN eddy_ws_frame_t *eddy_ws_text_frame(const void *s, size_t n);
/** A final binary frame holding a copy of n bytes at p. NULL: no memory. */
EDDY_EXTERN eddy_ws_frame_t *eddy_ws_binary_frame(const void *p, size_t n);
/**
 * A close frame with status code and reason (a NUL-terminated string, NULL: none; cut to
 * the 123 bytes a close frame holds). code 0: an empty close frame (no status). NULL when
 * out of memory, or code is not one a close frame may carry (eddy_ws_close_code_valid).
 */
EDDY_EXTERN eddy_ws_frame_t *eddy_ws_close_frame(int code, const char *reason);
/** The frame behind a message of type EDDY_MSG_WS_FRAME, else NULL. Borrows. */
EDDY_EXTERN eddy_ws_frame_t *eddy_ws_frame_of(eddy_msg_t *msg);
/** The message header of f, to write it. Borrows. */
EDDY_EXTERN eddy_msg_t *eddy_ws_frame_msg(eddy_ws_frame_t *f);
/** Bytes of f's payload. */
EDDY_EXTERN size_t eddy_ws_frame_len(const eddy_ws_frame_t *f);
/** A close frame's status: EDDY_WS_CLOSE_NO_STATUS (1005) when its payload is empty, -1 for
 * a payload of one byte or a frame that is not a close frame. */
EDDY_EXTERN int eddy_ws_frame_close_code(const eddy_ws_frame_t *f);
/** A close frame's reason (not NUL-terminated, *len bytes; borrowed from f), or NULL with
 * *len 0 when it has none. */
EDDY_EXTERN const char *eddy_ws_frame_close_reason(const eddy_ws_frame_t *f, size_t *len);
/** Whether code may travel in a close frame: 1000-1003, 1007-1014, 3000-4999. */
EDDY_EXTERN bool eddy_ws_close_code_valid(int code);
/** Whether n bytes at p are valid UTF-8 (RFC 3629: no overlongs, surrogates, or code points
 * past U+10FFFF). */
EDDY_EXTERN bool eddy_ws_utf8_valid(const void *p, size_t n);

/* ---------------------------------------------------------------------------------------
 * Handlers. Each constructor copies config (borrowed; NULL: defaults) and returns a handler
 * value (pipeline.h, eddy_handler_t) whose state is freed with the handler; a failed one
 * (out of memory, invalid configuration: EDDY_ENOMEM) fails the add.
 */

/** The server's opening handshake, after the HTTP request decoder and aggregator. */
EDDY_EXTERN eddy_handler_t eddy_ws_server_handshaker(const eddy_ws_config_t *config);
/** The client's opening handshake, first in a connected channel's pipeline (config->host is
 * required). Added, it puts the HTTP client codec (http_client.h) before itself, named
 * "ws_http_codec", writes the request through it and reads the answer as the codec parses
 * any response; after a 101 it removes both. On failure (a malformed or oversized answer:
 * error EDDY_EDECODE; not a valid 101: EDDY_EDECODE; no answer in handshake_timeout_ms:
 * EDDY_ETIMEDOUT; a close before it: EDDY_ECLOSED) the handlers after it get
 * EDDY_EVENT_WS_HANDSHAKE_FAILED and the channel closes. */
EDDY_EXTERN eddy_handler_t eddy_ws_client_handshaker(const eddy_ws_config_t *config);

/**
 * The handlers installed after a handshake, for pipelines that need no handshake (tests,
 * other transports): the frame encoder and decoder, and the protocol handler (pongs, the
 * closing handshake, aggregation, UTF-8, keep-alive pings), for the client side or the
 * server's. Add them in this order: encoder, decoder, protocol. Frames are not compressed.
 */
EDDY_EXTERN eddy_handler_t eddy_ws_frame_encoder(bool client);
EDDY_EXTERN eddy_handler_t eddy_ws_frame_decoder(bool client, const eddy_ws_config_t *config);
EDDY_EXTERN eddy_handler_t eddy_ws_protocol_handler(bool client, const eddy_ws_config_t *config);

/**
 * The permessage-deflate handler, between the decoder and the protocol handler, with the
 * parameters agreed as they are in a Sec-WebSocket-Extensions response value (params:
 * "permessage-deflate; server_no_context_takeover; ..."). The decoder must then allow RSV1:
 * eddy_ws_frame_decoder_ext(). A handler whose add fails with EDDY_ENOTSUP in a build without
 * zlib (EDDY_WITH_ZLIB=OFF).
 */
EDDY_EXTERN eddy_handler_t eddy_ws_deflate_handler(bool client, const char *params,
                                                   const eddy_ws_config_t *config);
/** A frame decoder that accepts RSV1 on the first frame of a data message (deflate agreed). */
EDDY_EXTERN eddy_handler_t eddy_ws_frame_decoder_ext(bool client, const eddy_ws_config_t *config);

/** The Sec-WebSocket-Accept value for key (n bytes): base64(SHA-1(key + GUID)), 28
 * characters and a NUL into out. */
EDDY_EXTERN void eddy_ws_accept_key(const char *key, size_t n, char out[29]);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_WEBSOCKET_H */
