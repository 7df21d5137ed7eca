/*
 * What the HTTP/2 codec's files share (not API): the connection handler's state, the stream
 * object, and the functions between them.
 */
#ifndef EDDY_CODEC_HTTP2_INTERNAL_H
#define EDDY_CODEC_HTTP2_INTERNAL_H

#include <eddy/http2.h>

#include "layer.h"

#include <nghttp2/nghttp2.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct eddy__h2_conn_s eddy__h2_conn_t;

/* A block of nghttp2's on pages of its own, given back while the connection is idle. */
typedef struct eddy__h2_paged_s {
    void *p;
    uint32_t n;
    bool frames; /* mem_send's frames come from it: nothing in it lives past the last one */
} eddy__h2_paged_t;

/* A piece of a stream's outbound body, queued until DATA frames carry it. */
typedef struct eddy__h2_chunk_s {
    struct eddy__h2_chunk_s *next;
    eddy_buf_t *data;    /* the bytes not sent yet (its reader index moves) */
    eddy_promise_t *p;   /* completes when the last byte went; may be NULL */
} eddy__h2_chunk_t;

/* A stream timer (eddy_h2_stream_schedule), kept on its stream until it ran or was
 * cancelled, so the stream's end cancels it. */
typedef struct eddy__h2_timer_s {
    struct eddy__h2_timer_s *next;
    eddy_h2_stream_t *stream;
    void (*cb)(eddy_h2_stream_t *s, void *arg);
    void *arg;
    uint64_t id;
} eddy__h2_timer_t;

struct eddy_h2_stream_s {
    _Atomic uint32_t refs;   /* the session's one while open, the messages', the application's */
    int32_t id;
    eddy__h2_conn_t *conn;   /* NULL once closed */
    void *user_data;
    struct eddy_h2_stream_s *prev, *next; /* the connection's open streams */

    /* The header block being received. */
    eddy_buf_t *hbuf;        /* names and values, copied, one after the other */
    uint32_t *hidx;          /* per field: name offset, name length, value offset, length */
    uint32_t hcount;         /* fields so far (the header list's size bounds them) */
    uint32_t hcap;           /* fields hidx has room for */
    size_t hsize;            /* their size as SETTINGS_MAX_HEADER_LIST_SIZE counts it */
    int reject;              /* 431 or 400: the request is refused, the fields dropped */
    bool refused;            /* ... and its head was answered with that status */
    bool head_received;      /* the first block came (later ones are trailers) */

    /* Sending. */
    bool head_sent;          /* the response's (or request's) head was submitted */
    bool body_ended;         /* end_stream was queued: nothing more may be sent */
    bool provider_on;        /* nghttp2 has our data provider for the stream */
    bool deferred;           /* ... and it returned NGHTTP2_ERR_DEFERRED */
    bool writable;           /* what eddy_h2_stream_is_writable() said last time we fired */
    bool closed;
    bool reset_by_peer;      /* an RST_STREAM came for it */
    bool end_early;          /* once our END_STREAM is out, RST_STREAM NO_ERROR if the peer's
                                side is still open (layer.h) */
    eddy__h2_chunk_t *head, *tail; /* the body queued */
    size_t pending;          /* bytes in that queue */
    size_t pending_cap;      /* writable while pending is below (0: max_stream_pending / 2) */
    nghttp2_nv *trailers;    /* submitted once the body is out (nghttp2#269) */
    size_t trailer_count;
    eddy_buf_t *trailer_buf; /* their names and values */
    int64_t stalled_since;   /* loop ns when bytes were queued and the peer's window was 0 */

    eddy__h2_timer_t *timers;
};

struct eddy__h2_conn_s {
    nghttp2_session *session;
    eddy_ctx_t *ctx;
    eddy_h2_options_t o;
    nghttp2_mem mem;
    size_t mem_used;          /* bytes nghttp2 holds now */
    eddy__h2_paged_t paged[2]; /* nghttp2's blocks on pages of their own (session.c) */
    size_t streams_open;
    size_t streams_blocked;   /* streams whose writable is false: waiting for the event */
    eddy_h2_stream_t *streams; /* open streams, newest first */

    /* Inbound. */
    eddy_buf_t *in;           /* the buffer mem_recv is reading (data slices come from it) */
    eddy_msg_t **events;      /* messages made while mem_recv ran, fired after it */
    size_t nevents, cap_events;
    bool in_recv;             /* inside mem_recv: sends wait until it returns */
    uint32_t corked;          /* eddy__h2_stream_cork() depth: sends wait until it is 0 */
    void (*ping_cb)(void *arg); /* eddy__h2_on_ping()'s hook, and its arg */
    void *ping_arg;
    bool firing;              /* events_fire is passing them on */
    bool events_task;         /* a task will fire what was made outside a read */
    bool in_read_batch;       /* between channel_read and channel_read_complete: one flush */
    bool writability_dirty;   /* a window or the channel changed: look at the streams */
    bool in_session_new;      /* inside nghttp2_session_*_new3: the paged blocks are coming */
    bool trimmed;             /* the idle trim ran: nothing was read or sent since */
    bool drained;             /* the last mem_send said nothing more: no frame half out */
    size_t buffered;          /* DATA bytes passed on and not yet consumed */
    uint32_t empty_frames;    /* consecutive DATA frames with no byte and no END_STREAM */
    uint32_t reset_floor;     /* the highest stream id we sent RST_STREAM on (server) */
    int64_t header_block_since; /* loop ns when the block being received began; 0: none */

    /* Outbound. */
    eddy_buf_t *out;          /* frames being gathered for one write */
    bool wrote;               /* something was written since the last flush */
    bool sending;             /* inside conn_send */
    bool fatal;               /* a connection error: GOAWAY out, then close */
    bool fatal_goaway;        /* ... whose GOAWAY nghttp2 took (nghttp2_submit_goaway) */
    bool fatal_out;           /* ... and that GOAWAY left nghttp2 (on_frame_send) */
    uint64_t data_out;        /* DATA bytes (frame headers too) handed to the channel */
    bool closing;             /* the close was passed on */
    bool close_task;          /* a task will close it (conn_send found it done) */
    bool flush_task;          /* a task will flush what sends outside a read wrote */
    bool paused;              /* reading stopped while the channel is unwritable */
    bool closed;              /* the channel went inactive or the handler was removed */
    bool goaway_sent;         /* graceful shutdown began */
    eddy_promise_t *close_promise; /* the close that waits for streams to end */
    bool goaway_received;     /* the peer's GOAWAY, fired as EDDY_EVENT_H2_GOAWAY */
    uint32_t goaway_last_id;
    uint32_t goaway_code;

    /* Limits. */
    uint32_t resets_sent;     /* RST_STREAMs sent in the window starting at resets_since */
    int64_t resets_since;
    uint64_t reset_tokens;    /* RST_STREAMs the peer may still send (reset_burst, reset_rate) */
    int64_t reset_tokens_at;  /* loop ns the bucket was last refilled */
    int64_t settings_sent_at; /* loop ns; 0: acknowledged */
    int64_t last_activity;    /* loop ns of the last read, or of the last open stream's end */
    int64_t last_read;        /* loop ns of the last read (eddy__h2_last_read) */
    int64_t shutdown_at;      /* loop ns the graceful shutdown began */
    uint64_t timer;           /* the housekeeping timer (eddy_ctx_schedule_at_fixed_rate) */

    /* Client (client.c). */
    bool server;              /* eddy_h2_connection(); false: eddy_h2_client_connection() */
    bool refused;             /* client: a GOAWAY came: no stream opens any more */
};

/* The connection handler's ops (connection.c): the adapter and the upgrade find it by them. */
extern const eddy_handler_ops_t eddy__h2_connection_ops;

/* Streams (stream.c). */
eddy_h2_stream_t *eddy__h2_stream_new(eddy__h2_conn_t *c, int32_t id);
/* The stream's end: called from nghttp2's on_stream_close (or at the connection's end):
 * fails what is queued, cancels its timers, unlinks it, drops the session's reference. */
void eddy__h2_stream_closed(eddy_h2_stream_t *s, uint32_t error_code);
/* What was sent of the body: n bytes from the head of the queue, as retained slices, written
 * after the 9-byte frame header (send_data_callback). */
int eddy__h2_stream_write_data(eddy_h2_stream_t *s, const uint8_t *framehd, size_t n);
/* eddy_h2_stream_send_data(), past max_stream_pending when not capped: for bodies that are
 * whole in memory already (the adapter's), which queueing costs nothing more. */
int eddy__h2_stream_send(eddy_h2_stream_t *s, eddy_buf_t *data, bool end_stream,
                         eddy_promise_t *p, bool capped);
/* Whether the n bytes at name name a connection-specific field (RFC 9113 section 8.2.2:
 * connection, keep-alive, proxy-connection, transfer-encoding, upgrade), any case. */
bool eddy__h2_connection_specific(const char *name, size_t n);
/* The stream looked up by id in c's session, or NULL. */
eddy_h2_stream_t *eddy__h2_stream_get(eddy__h2_conn_t *c, int32_t id);
/* Note that streams' writability may have changed (inside mem_recv: nothing fires there). */
void eddy__h2_streams_writability(eddy__h2_conn_t *c);
/* s cannot take more now (its window, its queue, the channel): it hears
 * EDDY_EVENT_H2_STREAM_WRITABLE when it can. A stream whose body ended waits for nothing. */
void eddy__h2_stream_block(eddy_h2_stream_t *s);
/* Say s is writable only while fewer than bytes are queued on it: a body pulled from a
 * source (a file, a chunked input) needs no deeper queue than a piece ahead, where one
 * written whole may queue up to half of max_stream_pending. */
void eddy__h2_stream_cap_pending(eddy_h2_stream_t *s, size_t bytes);
/* Fire EDDY_EVENT_H2_STREAM_WRITABLE for the streams that became writable since. */
void eddy__h2_streams_fire_writable(eddy__h2_conn_t *c);
/* The frames gathered for the next write: append bytes, write them. */
int eddy__h2_out_append(eddy__h2_conn_t *c, const void *p, size_t n);
void eddy__h2_out_write(eddy__h2_conn_t *c);

/* The connection (connection.c). */
/* Send what nghttp2 has queued, unless inside mem_recv (it runs when that returns). */
void eddy__h2_conn_send(eddy__h2_conn_t *c);
/* Queue an inbound message to fire once mem_recv returns. Takes msg. */
void eddy__h2_conn_emit(eddy__h2_conn_t *c, eddy_msg_t *msg);
/* A connection error of ours: GOAWAY with code and the reason in its debug data, a line in
 * the log, and close once it is out. */
void eddy__h2_conn_fail(eddy__h2_conn_t *c, uint32_t code, const char *why);
/* Count an RST_STREAM we sent, against max_resets_sent. */
void eddy__h2_conn_count_reset(eddy__h2_conn_t *c);
/* Count an RST_STREAM the peer sent, against reset_burst and reset_rate: false when the
 * bucket was empty, and the connection failed (GOAWAY ENHANCE_YOUR_CALM). */
bool eddy__h2_conn_reset_received(eddy__h2_conn_t *c);
/* The connection handler state of the pipeline p, or NULL. */
eddy__h2_conn_t *eddy__h2_conn_of(eddy_pipeline_t *p);
/* Make stream 1 from an HTTP/1.1 Upgrade (settings: the HTTP2-Settings payload, decoded;
 * head_request: the request was HEAD). 0 or an EDDY_E code. */
int eddy__h2_conn_upgrade(eddy__h2_conn_t *c, const uint8_t *settings, size_t len,
                          bool head_request);

/* nghttp2's callbacks (session.c). */
int eddy__h2_session_new(eddy__h2_conn_t *c);
/* mem_send returned frames at data (its frame buffer: session.c gives its pages back). */
void eddy__h2_session_sent(eddy__h2_conn_t *c, const uint8_t *data);
/* An idle connection gives back the pages of c->paged that hold nothing (the frame buffer's
 * when c->drained, the others' all-zero ones): once until a read or a frame sent. */
void eddy__h2_session_trim(eddy__h2_conn_t *c);

/* Messages (message.c). */
eddy_msg_t *eddy__h2_headers_new(eddy_h2_stream_t *s, bool end_stream, bool trailers);
eddy_msg_t *eddy__h2_data_new(eddy_h2_stream_t *s, eddy_buf_t *data, bool end_stream);
eddy_msg_t *eddy__h2_reset_new(eddy_h2_stream_t *s, uint32_t code, bool by_peer);
/* v in decimal, written at the end of buf (cap bytes, enough for it): a field's value
 * (:status, content-length) without a format string. */
eddy_http_str_t eddy__h2_decimal(size_t v, char *buf, size_t cap);
/* The bytes h's fields point into, retained. */
eddy_buf_t *eddy__h2_headers_storage(eddy_h2_headers_t *h);

/* The adapter (adapter.c): after an Upgrade, serve req (taken) as stream s's request, fired
 * from the adapter of pipeline p. 0, or EDDY_ENOENT (no adapter), EDDY_ENOMEM. */
int eddy__h2_adapter_upgraded(eddy_pipeline_t *p, eddy_http_request_t *req, eddy_h2_stream_t *s);

/* The client side (client.c): what the shared files call when !c->server. */
/* A response header block of s was received whole: whether it is an interim (1xx) head,
 * after which the final head is still to come. */
bool eddy__h2_client_interim(const eddy_h2_stream_t *s);
/* The peer's GOAWAY: no more streams; those still queued end (REFUSED_STREAM). */
void eddy__h2_client_goaway(eddy__h2_conn_t *c);
/* eddy_h2_stream_reset() of a stream whose HEADERS have not gone out: they never will, and
 * the stream ends now. Whether s was such a stream. */
bool eddy__h2_client_reset_queued(eddy_h2_stream_t *s, uint32_t error_code);

/* Header fields as nghttp2's pairs, pointing at the caller's bytes (nghttp2 copies them as
 * it submits), names with capitals lowered: on the caller's stack for a usual head, on the
 * heap past it. Fill: 0, EDDY_EINVAL (a field HTTP/2 cannot carry), EDDY_ENOMEM; release
 * after the submit, whatever fill said. */
typedef struct eddy__h2_nvs_s {
    nghttp2_nv *nv;  /* stack, or a block of the heap */
    char *scratch;   /* the lowered names past lowered[], or NULL */
    nghttp2_nv stack[32];
    char lowered[256];
} eddy__h2_nvs_t;
int eddy__h2_nvs_fill(eddy__h2_nvs_t *v, const eddy_http_header_t *f, size_t n);
void eddy__h2_nvs_release(eddy__h2_nvs_t *v);
/* The data provider that sends a stream's queued body (client.c's requests). */
nghttp2_data_provider eddy__h2_stream_provider(eddy_h2_stream_t *s);

/* The loop's clock. */
int64_t eddy__h2_now(const eddy__h2_conn_t *c);

#endif /* EDDY_CODEC_HTTP2_INTERNAL_H */
