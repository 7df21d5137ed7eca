/*
 * What the gRPC client's two files share (not API): the channel and its connections
 * (channel.c: targets, connecting, TLS, round robin, GOAWAY, keepalive, the close) and the
 * client's calls (client.c: the request head, messages held until a stream opens, the
 * response's head, messages and trailers, unary calls). Everything runs on the channel's loop
 * but for what says "any thread".
 */
#ifndef EDDY_CODEC_GRPC_CLIENT_H
#define EDDY_CODEC_GRPC_CLIENT_H

#include "internal.h"

#include <eddy/channel.h>
#include <eddy/loop.h>

#include <stdatomic.h>

typedef struct eddy__grpc_conn_s eddy__grpc_conn_t;

/* A request sent before the call's stream opened: sent when it does. */
typedef struct eddy__grpc_held_s {
    struct eddy__grpc_held_s *next;
    eddy_buf_t *msg;
    eddy_promise_t *p;
} eddy__grpc_held_t;

/* A client call. Its common part's prev and next link it on its connection: on the list of
 * calls waiting for the connection to be ready (waiting), or of those on its streams. */
typedef struct eddy__grpc_ccall_s {
    eddy_grpc_call_t c;               /* first: the call is freed as this */
    eddy_grpc_channel_t *chan;        /* NULL once ended */
    eddy__grpc_conn_t *conn;          /* the connection it waits for or travels on, or NULL */
    bool waiting;                     /* on conn's waiting list */
    bool unary;                       /* eddy_grpc_unary(): exactly one response */
    bool got_head;                    /* the response headers came */
    const eddy_grpc_client_ops_t *ops;
    eddy_http_header_t *req_md;       /* the request metadata, copied, until the head went */
    size_t nreq_md;
    eddy_buf_t *req_store;
    eddy__grpc_held_t *held, *held_tail; /* requests sent before the stream opened */
    size_t held_bytes;
    eddy_timer_t *wait_timer;         /* the deadline while no stream carries the call */
    eddy_http_header_t *tr;           /* the trailing metadata */
    size_t ntr;
    eddy_buf_t *tr_store;
    char *message;                    /* the status message once ended (owned) */
    const char *why;                  /* why a message callback stopped the call */
} eddy__grpc_ccall_t;

/* A connection's state. */
enum {
    EDDY__GRPC_CONN_NEW,        /* made for a call, not started */
    EDDY__GRPC_CONN_RESOLVING,  /* the target's host is being looked up */
    EDDY__GRPC_CONN_CONNECTING, /* TCP, then TLS and its ALPN */
    EDDY__GRPC_CONN_READY,      /* HTTP/2 is up: calls open streams on it */
    EDDY__GRPC_CONN_DRAINING,   /* the server's GOAWAY came: its calls finish, no new ones */
    EDDY__GRPC_CONN_DEAD        /* failed or closed */
};

/* One HTTP/2 connection of a channel, in a slot of it (or, draining, in chan->others). */
struct eddy__grpc_conn_s {
    eddy_grpc_channel_t *chan;
    eddy__grpc_conn_t *next;      /* in chan->others */
    uint32_t refs;                /* alive (until dead), the future waited for, the handler */
    int state;
    size_t slot;                  /* its slot, or SIZE_MAX */
    eddy_future_t *pending;       /* the lookup or connect waited for */
    eddy_addr_t *addrs;           /* the target's addresses, tried in turn */
    size_t naddrs, next_addr;
    eddy_ctx_t *ctx;              /* the "grpc-client" handler of the attempt or connection */
    bool active;                  /* ctx's channel connected */
    eddy__grpc_ccall_t *waiting, *waiting_tail;
    eddy_grpc_call_t *live;       /* the calls on its streams */
    size_t nlive;
    int err;                      /* the last error seen */
    char why[192];                /* what the calls it ends are told */
    int64_t ping_at;              /* loop ns of the keepalive PING awaiting its answer; 0 none */
    uint64_t keepalive;           /* the keepalive timer (ctx's) */
};

struct eddy_grpc_channel_s {
    eddy_loop_t *loop;
    eddy_grpc_channel_options_t o; /* defaults filled; tls retained; authority ours */
    char *target;                 /* as given */
    char *host;                   /* without brackets */
    uint16_t port;
    char *authority;              /* ":authority" (o.authority points to it) */
    char *server_name;            /* TLS's SNI */
    char user_agent[64];
    eddy_channel_config_t config; /* each connect's socket options */
    eddy__grpc_conn_t **slots;    /* o.connections of them */
    size_t rr;                    /* the round robin's next slot */
    eddy__grpc_conn_t *others;    /* connections out of their slot, until freed */
    size_t nconns;                /* connections not freed yet */
    _Atomic uint32_t tasks;       /* tasks queued that hold the channel */
    atomic_bool close_called;
    bool closing;
    eddy_promise_t *closed;       /* close's future (one reference) */
    int64_t keepalive_ms;         /* o.keepalive_ms, doubled by each too_many_pings GOAWAY */
};

/* channel.c */
/* Put cc (no connection) on one: a ready one's stream at once, else the wait of one being
 * made. cc may have ended when this returns. */
void eddy__grpc_channel_dispatch(eddy__grpc_ccall_t *cc);
/* cc's stream opened on conn: it joins conn's calls. */
void eddy__grpc_conn_add_live(eddy__grpc_conn_t *conn, eddy__grpc_ccall_t *cc);
/* cc ended: off its connection's lists. */
void eddy__grpc_conn_forget(eddy__grpc_ccall_t *cc);
/* conn refused a new stream (it is closing, or the server's GOAWAY came): no more calls on it,
 * those waiting for it go elsewhere. */
void eddy__grpc_conn_going_away(eddy__grpc_conn_t *conn);
/* The end of a channel's task that held it (chan->tasks): the channel may be freed. */
void eddy__grpc_channel_task_done(eddy_grpc_channel_t *chan);

/* client.c */
/* Open cc's stream on conn (ready): the request head, then what was held. cc may have ended
 * when this returns. */
void eddy__grpc_call_attach(eddy__grpc_ccall_t *cc, eddy__grpc_conn_t *conn);
/* A stream message (EDDY_MSG_H2_HEADERS, DATA, RESET; borrowed) of conn. */
void eddy__grpc_client_read(eddy_msg_t *msg, const eddy__grpc_conn_t *conn);

#endif /* EDDY_CODEC_GRPC_CLIENT_H */
