/*
 * eddy HTTP/1.1 client: the request encoder and response decoder as one handler (Netty's
 * HttpClientCodec), the response aggregator (HttpObjectAggregator), the exchange handler that
 * matches pipelined requests to their responses as futures, and eddy_http_client_t, which
 * fetches URLs over a keyed channel pool (channel_pool.h) with keep-alive and optional TLS,
 * and over HTTP/2 (http2.h) where the server offers it by ALPN, or by prior knowledge when
 * asked: then one connection per origin carries its requests side by side.
 *
 * What travels through a client pipeline:
 *
 *   outbound  EDDY_MSG_HTTP_CLIENT_REQUEST, an eddy_http_request_t built with
 *             eddy_http_request_new() and its setters (http.h), written as the
 *             request line, its headers, Content-Length or Transfer-Encoding: chunked, and
 *             its body; a chunked request's body follows as EDDY_MSG_HTTP_CONTENT messages
 *             (http.h's eddy_http_content_t), each one chunk, the last one the zero chunk.
 *   inbound   EDDY_MSG_HTTP_RESPONSE_HEAD, an eddy_http_response_t (http.h) whose body follows
 *             as EDDY_MSG_HTTP_CONTENT messages, the last one with last set; or
 *             EDDY_MSG_HTTP_FULL_RESPONSE, a response with its whole body (a response without
 *             a body always comes this way, and so does one whose Content-Length body, at
 *             most max_chunk_size bytes, came in the same read as its head; the aggregator
 *             makes every response one).
 *
 * The codec remembers the method of each request it wrote, so it knows which responses have
 * no body (to HEAD; 1xx, 204, 304; a 2xx to CONNECT) and matches pipelined responses to their
 * requests in order. Interim 1xx responses (100 Continue) arrive as full responses with no
 * body and do not answer a request; 101 ends HTTP on the connection (what follows passes
 * as bytes). A body is framed by Transfer-Encoding: chunked (trailers read and dropped), else
 * Content-Length, else the close of the connection (RFC 9112 section 6.3).
 *
 * Bad input from the server is an error, never a guess: a malformed status line or header, a
 * bad chunk size, conflicting Content-Length values, or a response while no request waits
 * fires exception_caught with EDDY_EDECODE; a line, header section or body over the limits
 * with EDDY_ETOOLONGFRAME; a close before the response ended (or with requests unanswered)
 * with EDDY_EOF. After an error the codec drops everything else the connection sends, and
 * the exchange handler fails every request waiting on it with that error and closes it.
 *
 * Responses point into the bytes they were decoded from (a retained slice, no copy): their
 * strings are valid while the response is, and are not NUL-terminated. Every handler callback
 * runs on the channel's loop.
 */
#ifndef EDDY_HTTP_CLIENT_H
#define EDDY_HTTP_CLIENT_H

#include <eddy/bootstrap.h>
#include <eddy/channel_pool.h>
#include <eddy/http.h>
#include <eddy/tls.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_http_client_codec_options_s {
    size_t max_initial_line; /* longest status line (0: EDDY_HTTP_MAX_INITIAL_LINE) */
    size_t max_header_size;  /* header or trailer section (0: EDDY_HTTP_MAX_HEADER_SIZE) */
    size_t max_header_count; /* headers (0: EDDY_HTTP_MAX_HEADER_COUNT) */
    size_t max_chunk_size;   /* largest content piece emitted (0: EDDY_HTTP_MAX_CHUNK_SIZE) */
} eddy_http_client_codec_options_t;

/* ---------------------------------------------------------------------------------------
 * Handlers
 */

/** The client codec (o borrowed; NULL: the defaults): request encoder and response decoder
 * in one handler, as Netty's HttpClientCodec. ops NULL when out of memory. */
EDDY_EXTERN eddy_handler_t eddy_http_client_codec(const eddy_http_client_codec_options_t *o);
/** The handler table of client codecs (state freed with eddy_free_state). */
EDDY_EXTERN const eddy_handler_ops_t *eddy_http_client_codec_ops(void);

/** After the codec: heads and their content become full responses with bodies of at most
 * max_content_length bytes (0: EDDY_HTTP_MAX_CONTENT_LENGTH); a longer body fires
 * exception_caught with EDDY_ETOOLONGFRAME and closes the channel. ops NULL without memory. */
EDDY_EXTERN eddy_handler_t eddy_http_response_aggregator(size_t max_content_length);

/**
 * Last in a client pipeline, after codec and aggregator: completes the future of each
 * eddy_http_send() with its response, in order, and fails them all (with the error that
 * stopped the connection: EDDY_EDECODE, EDDY_ETOOLONGFRAME, EDDY_EOF, EDDY_ECONNRESET...,
 * EDDY_ECLOSED when the channel closed otherwise, EDDY_ETIMEDOUT after response_timeout_ms)
 * when the connection ends. response_timeout_ms: how long the oldest request may wait for
 * its response before the connection is failed (<= 0: no limit; the wait counts from when
 * the request became the oldest). Interim 1xx responses complete nothing, but a 101 completes
 * the request that asked for the upgrade (no other answer to it will come): the exchange
 * then passes what follows on, and later sends fail with EDDY_EINVAL. A response to a request
 * written by hand (not through eddy_http_send) passes on to the next handler; an error while
 * no send waits is passed on too. ops NULL without memory.
 */
EDDY_EXTERN eddy_handler_t eddy_http_exchange(int64_t response_timeout_ms);

/**
 * Write req (taken over) on ch, whose pipeline ends with codec, aggregator and exchange, and
 * flush it. Requests may be pipelined: each future completes with its own response, in the
 * order sent. Returns a future the caller releases: it completes with the full response
 * (eddy_future_http_response(): held by the future, valid while the future is) or fails as
 * eddy_http_exchange() says; EDDY_ECLOSED when ch is closed already, EDDY_EINVAL when ch has
 * no exchange handler. Cancelling the future closes the connection (its response cannot be
 * skipped otherwise). NULL only without memory. Any thread.
 *
 * On an HTTP/2 channel, whose pipeline ends with eddy_h2_client_connection() and
 * eddy_h2_http_client_adapter() (http2.h) instead, the same: each request is a stream of its
 * own and the futures complete in whatever order the server answers (version 20 responses);
 * they fail as that adapter says (EDDY_ECONNABORTED for a request the server did not process,
 * EDDY_ECONNRESET for a reset stream...), and cancelling one resets its stream only.
 */
EDDY_EXTERN eddy_future_t *eddy_http_send(eddy_channel_t *ch, eddy_http_request_t *req);
/** The response a future of eddy_http_send() or eddy_http_client_*() completed with, else
 * NULL. Borrows: valid while f is held. */
EDDY_EXTERN eddy_http_response_t *eddy_future_http_response(const eddy_future_t *f);

/* ---------------------------------------------------------------------------------------
 * URLs
 */

/* The parts of an http, https, ws or wss URL, as a client needs them. */
typedef struct eddy_url_s {
    bool tls;             /* https or wss */
    char host[256];       /* the host, NUL-terminated, without the brackets of an IPv6 one */
    uint16_t port;        /* as given, else the scheme's (80, 443) */
    char authority[300];  /* for Host: the host (in brackets for IPv6), ":port" unless the
                             scheme's own, NUL-terminated */
    eddy_http_str_t path; /* the path and query as given, the fragment left out (points into
                             the URL parsed); empty when there is none: send "/" then */
} eddy_url_t;

/**
 * Parse url ("http://host[:port][/path][?query][#fragment]"; https, ws and wss alike; host a
 * name, an IPv4 address or an IPv6 one in brackets) into u. No user info ("user@host"). 0, or
 * EDDY_EINVAL (another scheme, an empty or too long host, a bad port). Any thread.
 */
EDDY_EXTERN int eddy_url_parse(const char *url, eddy_url_t *u);

/* ---------------------------------------------------------------------------------------
 * eddy_http_client_t: URLs over a keyed pool
 */

typedef struct eddy_http_client_s eddy_http_client_t;

/* The HTTP versions eddy_http_client_t speaks (as curl's CURLOPT_HTTP_VERSION). */
typedef enum {
    /* The default (curl's CURL_HTTP_VERSION_2TLS): https offers "h2" and "http/1.1" by ALPN
     * and speaks what the server chose; http:// speaks HTTP/1.1. */
    EDDY_HTTP_CLIENT_H2_TLS = 0,
    /* HTTP/1.1 only: https offers no ALPN (a context of yours offers what you set on it). */
    EDDY_HTTP_CLIENT_HTTP1,
    /* http:// speaks HTTP/2 from its first byte (h2c by prior knowledge, RFC 9113 section
     * 3.3; curl's --http2-prior-knowledge); https as the default. There is no Upgrade: h2c. */
    EDDY_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE
} eddy_http_client_version_t;

typedef struct eddy_http_client_options_s {
    size_t max_connections_per_host; /* per (host, port, TLS) (0: 8) */
    size_t max_pending_acquires;     /* requests waiting for a connection per host, and over
                                        HTTP/2 for a stream past the server's limit (0: no
                                        limit; past it: EDDY_EBUSY) */
    int64_t acquire_timeout_ms;      /* waiting for a pooled connection (<= 0: never) */
    int64_t connect_timeout_ms;      /* each connect (0: 10 s) */
    int64_t response_timeout_ms;     /* each response (0: 30 s; < 0: never) */
    int64_t idle_timeout_ms;         /* pooled idle connections close after (0: 60 s; < 0
                                        never), and HTTP/2 ones without a stream */
    size_t max_content_length;       /* per response body (0: EDDY_HTTP_MAX_CONTENT_LENGTH) */
    eddy_tls_context_t *tls;         /* https: a client context (retained); NULL: a default
                                        one that verifies against the system's CAs and offers
                                        ALPN as http_version says (a build without TLS: https
                                        fails with EDDY_ENOTSUP). A context of yours offers
                                        what you set on it: eddy_tls_context_alpn() with
                                        eddy_h2_alpn_protocols() for HTTP/2 */
    bool insecure;                   /* https without verifying the server (tests only) */
    eddy_http_client_version_t http_version; /* HTTP/2 or not, and how (0: by ALPN over TLS) */
    bool decompress;                 /* send "Accept-Encoding" with the codings this build has
                                        (http_coding.h's eddy_http_codings(), unless the request
                                        has one) and decompress the response's body: the
                                        header goes, content_length is the new length; at most
                                        max_content_length bytes either way (past it the future
                                        fails with EDDY_ETOOLONGFRAME, a corrupt or cut body
                                        with EDDY_EDECODE) */
} eddy_http_client_options_t;

/** A client on group g (borrowed: it must outlive the client). o NULL: the defaults. NULL
 * without memory or when a default TLS context cannot be made (one EDDY_LOG_ERROR). */
EDDY_EXTERN eddy_http_client_t *eddy_http_client_new(eddy_loop_group_t *g,
                                                     const eddy_http_client_options_t *o);

/**
 * Send req (taken over) to url ("http://host[:port]/path?q" or "https://..."; IPv6 hosts in
 * brackets): sets the request target from url and adds Host, acquires a connection from the
 * pool of (host, port, https), sends, and releases the connection to the pool once the
 * response is in (or closes it, when the response does not keep alive). Returns a future the
 * caller releases, completing as eddy_http_send()'s, or failing with EDDY_EINVAL (a URL that
 * does not parse, a scheme other than http and https), the connect's error (EDDY_ENOENT for an
 * unknown host, EDDY_ECONNREFUSED, EDDY_ETIMEDOUT, EDDY_ETLS), the pool's (EDDY_EBUSY,
 * EDDY_ETIMEDOUT). NULL only without memory. Any thread.
 *
 * Over HTTP/2 (http_version; the server's choice by ALPN for https) the connection is not
 * released per response: it is the origin's one connection, and every request goes on it
 * as a stream of its own at once (past the server's SETTINGS_MAX_CONCURRENT_STREAMS they wait
 * for a stream to end, at most max_pending_acquires of them: EDDY_EBUSY past it). Until the
 * first connection to an origin says which protocol it speaks, the requests for it wait for
 * that connection rather than each making one. A request the server did not process (its
 * GOAWAY, or REFUSED_STREAM) is sent again once on a new connection, whatever its method;
 * the connection that refused it takes no more. A future cancelled resets its stream only.
 */
EDDY_EXTERN eddy_future_t *eddy_http_client_send(eddy_http_client_t *c, const char *url,
                                                 eddy_http_request_t *req);
/** eddy_http_client_send() of a GET without a body. */
EDDY_EXTERN eddy_future_t *eddy_http_client_get(eddy_http_client_t *c, const char *url);

/** Close every pool (requests in flight fail with EDDY_ECLOSED) and free the client once they
 * are all closed: the returned future (the caller releases it) completes then. Once. */
EDDY_EXTERN eddy_future_t *eddy_http_client_close(eddy_http_client_t *c);

/* ---------------------------------------------------------------------------------------
 * Deprecated aliases, removed after the next release: the client's request and response are
 * http.h's eddy_http_request_t and eddy_http_response_t, built and read with their functions.
 */

/** Deprecated alias of eddy_http_request_t, removed after the next release. */
typedef eddy_http_request_t eddy_http_client_request_t;
/** Deprecated alias of eddy_http_response_t, removed after the next release. */
typedef eddy_http_response_t eddy_http_client_response_t;

/** Deprecated alias of eddy_http_request_new(), removed after the next release. */
static inline eddy_http_request_t *eddy_http_client_request_new(const char *method,
                                                                const char *target)
{
    return eddy_http_request_new(method, target);
}
/** Deprecated alias of eddy_http_request_add_header(), removed after the next release. */
static inline int eddy_http_client_request_add_header(eddy_http_request_t *r, const char *name,
                                                      const char *value)
{
    return eddy_http_request_add_header(r, name, value);
}
/** Deprecated alias of eddy_http_request_set_body(), removed after the next release. */
static inline void eddy_http_client_request_set_body(eddy_http_request_t *r, eddy_buf_t *b)
{
    eddy_http_request_set_body(r, b);
}
/** Deprecated alias of eddy_http_request_expect(), removed after the next release. */
static inline void eddy_http_client_request_expect(eddy_http_request_t *r, bool on)
{
    eddy_http_request_expect(r, on);
}
/** Deprecated alias of eddy_http_request_msg(), removed after the next release. */
static inline eddy_msg_t *eddy_http_client_request_msg(eddy_http_request_t *r)
{
    return eddy_http_request_msg(r);
}
/** Deprecated alias of eddy_http_request_encode(), removed after the next release. */
static inline int eddy_http_client_request_encode(const eddy_http_request_t *r, eddy_buf_t *out)
{
    return eddy_http_request_encode(r, out);
}
/** Deprecated: the built request behind a message of type EDDY_MSG_HTTP_CLIENT_REQUEST, else
 * NULL (eddy_http_request_of() takes decoded requests too). Removed after the next release. */
static inline eddy_http_request_t *eddy_http_client_request_of(eddy_msg_t *msg)
{
    return msg != NULL && msg->type == EDDY_MSG_HTTP_CLIENT_REQUEST ? eddy_http_request_of(msg)
                                                                    : NULL;
}
/** Deprecated: the decoded response behind a message of type EDDY_MSG_HTTP_RESPONSE_HEAD or
 * _FULL_RESPONSE, else NULL (eddy_http_response_of() takes built responses too). Removed
 * after the next release. */
static inline eddy_http_response_t *eddy_http_client_response_of(eddy_msg_t *msg)
{
    return msg != NULL && msg->type != EDDY_MSG_HTTP_RESPONSE ? eddy_http_response_of(msg) : NULL;
}
/** Deprecated alias of eddy_http_response_header(), removed after the next release. */
static inline const eddy_http_header_t *
eddy_http_client_response_header(const eddy_http_response_t *r, const char *name)
{
    return eddy_http_response_header(r, name);
}

#ifdef __cplusplus
}
#endif
#endif /* EDDY_HTTP_CLIENT_H */
