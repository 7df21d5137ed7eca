/*
 * eddy-ws-server: a chat over WebSocket (include/eddy/websocket.h), with its page.
 *
 *   eddy-ws-server [--host ADDR] [--port N] [--threads N] [--echo] [--tls CERT KEY]
 *
 *   GET /     the chat page (HTML and JavaScript, kept in this binary)
 *   GET /ws   the WebSocket: each text or binary message goes to every connected client
 *             (the sender too), or, with --echo, back to its sender only (for benchmarks)
 *   otherwise 404
 *
 * With --tls the page is served over https and the socket is wss. SIGINT or SIGTERM stop it:
 * the listener closes, every WebSocket client gets a close frame (1001, going away) and a
 * moment to answer it, then the loops close what is left; exit 0.
 *
 * The pipeline is the library's: a read timeout, the HTTP request decoder, response encoder
 * and aggregator, the WebSocket server handshaker (which swaps the HTTP handlers for the
 * WebSocket ones on an upgrade of /ws, permessage-deflate accepted), then the handler below,
 * which answers the page and, after the upgrade, passes messages on. The broadcast is one
 * eddy_channel_group_write_void() of the frame received: every member gets a reference to the
 * same frame, which each member's handlers only read. What goes out is each member's own: its
 * encoder writes the frame header and copies the payload into its outbound bytes, and with
 * permessage-deflate its deflater compresses the payload (each connection has its own
 * compression context). docs/websocket.md says what that costs.
 */
#include <eddy/eddy.h>
#include <eddy/http.h>
#include <eddy/websocket.h>

#include "example_util.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The chat page. ?name=NAME sets the name its messages carry. It keeps no state of its own:
 * what it shows is what the server broadcast, its own messages included. The tests drive it
 * through send() and read #log. */
static const char chat_page[] =
    "<!doctype html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<title>eddy chat</title>\n"
    "<style>\n"
    "body { font: 15px system-ui, sans-serif; max-width: 40em; margin: 2em auto; }\n"
    "#log { list-style: none; padding: 0; border: 1px solid #ccc; height: 20em;\n"
    "       overflow-y: auto; }\n"
    "#log li { padding: 0.2em 0.5em; overflow-wrap: anywhere; }\n"
    "#status { color: #666; }\n"
    "</style>\n"
    "</head>\n"
    "<body>\n"
    "<h1>eddy chat</h1>\n"
    "<p id=\"status\">connecting...</p>\n"
    "<ul id=\"log\"></ul>\n"
    "<form id=\"form\"><input id=\"text\" autocomplete=\"off\" size=\"50\"\n"
    " placeholder=\"say something\"> <button>Send</button></form>\n"
    "<script>\n"
    "'use strict';\n"
    "const name = new URLSearchParams(location.search).get('name') || 'guest';\n"
    "const log = document.getElementById('log');\n"
    "const status = document.getElementById('status');\n"
    "const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';\n"
    "const ws = new WebSocket(scheme + location.host + '/ws');\n"
    "function show(text) {\n"
    "  const li = document.createElement('li');\n"
    "  li.textContent = text;\n"
    "  log.appendChild(li);\n"
    "  log.scrollTop = log.scrollHeight;\n"
    "}\n"
    "function send(text) {\n"
    "  ws.send(name + ': ' + text);\n"
    "}\n"
    "ws.onopen = () => {\n"
    "  status.textContent = 'connected as ' + name;\n"
    "  document.body.dataset.state = 'open';\n"
    "};\n"
    "ws.onmessage = (e) => {\n"
    "  show(typeof e.data === 'string' ? e.data : '[' + e.data.size + ' bytes of binary]');\n"
    "};\n"
    "ws.onclose = (e) => {\n"
    "  status.textContent = 'closed (' + e.code + ')';\n"
    "  document.body.dataset.state = 'closed';\n"
    "};\n"
    "document.getElementById('form').onsubmit = (e) => {\n"
    "  e.preventDefault();\n"
    "  const t = document.getElementById('text');\n"
    "  if (t.value) {\n"
    "    send(t.value);\n"
    "    t.value = '';\n"
    "  }\n"
    "};\n"
    "</script>\n"
    "</body>\n"
    "</html>\n";

/* How long a connection may send nothing: a WebSocket client is pinged after
 * PING_INTERVAL_MS of silence and its pong counts as input, so only dead peers (and idle
 * HTTP keep-alive connections) reach this. */
#define IDLE_TIMEOUT_MS 60000
#define PING_INTERVAL_MS 20000

/* A member of the chat is let go when more than this waits for it to read: four messages
 * of the largest size a client may send (EDDY_WS_MAX_MESSAGE_SIZE, 1 MiB). */
#define HIGH_WATER_MARK (4 << 20)
#define LOW_WATER_MARK (1 << 20)

static bool echo_mode;
static eddy_channel_group_t *chat; /* every WebSocket connection, in both modes */
static _Atomic uint64_t pages, sessions, messages;

/* Per connection: whether something was written since the last flush. */
typedef struct conn_s {
    bool wrote;
} conn_t;

/* The path of a request target, without the query. */
static bool path_is(eddy_http_str_t target, const char *path)
{
    size_t n = 0;
    while (n < target.len && target.p[n] != '?') {
        n++;
    }
    return n == strlen(path) && memcmp(target.p, path, n) == 0;
}

/* The answer to a request the handshaker passed on (another path, or HTTP's rejects). */
static void serve_page(eddy_ctx_t *ctx, conn_t *c, const eddy_http_request_t *req)
{
    bool get = req->method == EDDY_HTTP_GET || req->method == EDDY_HTTP_HEAD;
    int status = 404;
    if (req->error != 0) {
        status = req->error;
    } else if (get && path_is(req->target, "/")) {
        status = 200;
    }
    eddy_http_response_t *r = eddy_http_response_new(status);
    if (r == NULL) {
        eddy_ctx_close(ctx, NULL);
        return;
    }
    r->version = req->version == 10 ? 10 : 11;
    r->keep_alive = req->keep_alive && req->error == 0;
    r->head_only = req->method == EDDY_HTTP_HEAD;
    eddy_http_response_add_header(r, "Server", "eddy");
    eddy_http_response_add_header(r, "Date", eddy_http_date(eddy_ctx_loop(ctx)));
    if (status == 200) {
        eddy_http_response_add_header(r, "Content-Type", "text/html; charset=utf-8");
        eddy_http_response_add_header(r, "Cache-Control", "no-cache");
        eddy_http_response_set_body(r, eddy_buf_from(chat_page, sizeof(chat_page) - 1));
        atomic_fetch_add_explicit(&pages, 1, memory_order_relaxed);
    } else {
        char text[64];
        snprintf(text, sizeof(text), "%s\n", eddy_http_reason(status));
        eddy_http_response_add_header(r, "Content-Type", "text/plain; charset=utf-8");
        eddy_http_response_set_body(r, eddy_buf_from_str(text));
    }
    /* The encoder closes the connection after an answer that does not keep it alive. */
    eddy_ctx_write(ctx, eddy_http_response_msg(r), NULL);
    c->wrote = true;
}

static void chat_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *c = eddy_ctx_state(ctx);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req != NULL) {
        if (msg->type == EDDY_MSG_HTTP_FULL_REQUEST) {
            serve_page(ctx, c, req);
        }
        eddy_msg_release(msg);
        return;
    }
    eddy_ws_frame_t *f = eddy_ws_frame_of(msg);
    if (f == NULL || (f->opcode != EDDY_WS_TEXT && f->opcode != EDDY_WS_BINARY)) {
        /* The peer's close frame: the protocol handler has answered it already. */
        eddy_msg_release(msg);
        return;
    }
    atomic_fetch_add_explicit(&messages, 1, memory_order_relaxed);
    if (echo_mode) {
        eddy_ctx_write(ctx, msg, NULL); /* the same frame goes back: no copy */
        c->wrote = true;
        return;
    }
    /* Every member gets a reference to this frame, flushed. A chat does not wait for all to
     * have written it, so no future: a member that cannot take it is its own pipeline's
     * business (its stream closes), as for any write with no promise. */
    eddy_channel_group_write_void(chat, msg, NULL, NULL, true);
}

/* One flush per read batch: the answers to pipelined requests, or echoes, go out together. */
static void chat_read_complete(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->wrote) {
        c->wrote = false;
        eddy_ctx_flush(ctx);
    }
}

static void chat_event(eddy_ctx_t *ctx, int event, void *data)
{
    if (event == EDDY_EVENT_WS_HANDSHAKE) {
        /* The group forgets the channel when it closes. */
        if (eddy_channel_group_add(chat, eddy_ctx_channel(ctx)) == 0) {
            atomic_fetch_add_explicit(&sessions, 1, memory_order_relaxed);
        } else {
            eddy_ctx_close(ctx, NULL);
            return;
        }
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static void chat_exception(eddy_ctx_t *ctx, int err)
{
    /* A protocol error (a frame too big, text that is not UTF-8...) was answered with a
     * close frame, and the library closes after it is flushed, reading and dropping what
     * the client still sends for a while: closing here at once could answer the rest of a
     * large message with a reset, and the client's kernel would drop our close frame before
     * the client read it (node's ws saw 1006 instead of 1009). Resets and timeouts are the
     * clients' business: close. */
    if (err != EDDY_EDECODE && err != EDDY_ETOOLONGFRAME) {
        eddy_ctx_close(ctx, NULL);
    }
}

static const eddy_handler_ops_t chat_ops = {
    .name = "chat",
    .channel_read = chat_read,
    .channel_read_complete = chat_read_complete,
    .user_event_triggered = chat_event,
    .exception_caught = chat_exception,
};

/* arg: the TLS context, or NULL. TLS goes first, nearest the socket. */
static int init_child(eddy_channel_t *ch, void *arg)
{
    eddy_tls_context_t *tls = arg;
    if (tls != NULL) {
        int rc = eddy_tls_add(ch, tls, NULL, NULL);
        if (rc != 0) {
            return rc;
        }
    }
    eddy_ws_config_t ws = {.path = "/ws", .deflate = true, .ping_interval_ms = PING_INTERVAL_MS};
    return EDDY_PIPELINE_ADD_LAST(
        eddy_channel_pipeline(ch), eddy_read_timeout_handler(IDLE_TIMEOUT_MS),
        eddy_http_request_decoder(NULL), eddy_http_response_encoder(), eddy_http_aggregator(0),
        eddy_ws_server_handshaker(&ws),
        eddy_handler("chat", &chat_ops, calloc(1, sizeof(conn_t)), eddy_free_state));
}

/* The server's TLS context from PEM files, or NULL (said on stderr). */
static eddy_tls_context_t *tls_context(const char *cert, const char *key)
{
    eddy_tls_context_t *c = example_tls_context(EDDY_TLS_SERVER, "eddy-ws-server");
    if (c == NULL) {
        return NULL;
    }
    int rc = eddy_tls_context_use_certificate_file(c, cert, key);
    if (rc != 0) {
        fprintf(stderr, "eddy-ws-server: TLS: %s: %s\n", eddy_strerror(rc),
                eddy_tls_context_error(c));
        eddy_tls_context_release(c);
        return NULL;
    }
    return c;
}

/* Say goodbye to every WebSocket client (1001) and give them up to two seconds to answer,
 * which closes each connection (the protocol handler), then leave the rest to the loops'
 * shutdown. */
static void say_goodbye(void)
{
    eddy_ws_frame_t *bye = eddy_ws_close_frame(EDDY_WS_CLOSE_GOING_AWAY, "server stopping");
    if (bye == NULL) {
        return;
    }
    eddy_future_t *f = eddy_channel_group_write(chat, eddy_ws_frame_msg(bye), NULL, NULL, true);
    eddy_future_await(f, 2000);
    eddy_future_release(f);
    for (int i = 0; i < 200 && eddy_channel_group_size(chat) > 0; i++) {
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-ws-server [--host ADDR] [--port N] [--threads N] [--echo] "
               "[--tls CERT KEY]\n"
               "  --host ADDR     address to listen on (default 127.0.0.1; 0.0.0.0 for all)\n"
               "  --port N        port (default 8081; 0 picks one)\n"
               "  --threads N     loops, one of which also accepts (default: one per CPU)\n"
               "  --echo          /ws sends each message back to its sender only\n"
               "  --tls CERT KEY  serve https and wss with this certificate chain and key (PEM)\n"
               "GET / is a chat page; /ws is its WebSocket, which sends each message to every\n"
               "client connected (a client that falls 4 MiB behind is disconnected); the rest\n"
               "is 404. SIGINT or SIGTERM stop it gracefully.\n");
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    unsigned long port = 8081, threads = 0;
    const char *tls_cert = NULL, *tls_key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--echo") == 0) {
            echo_mode = true;
            continue;
        } else if (strcmp(a, "--host") == 0 && v != NULL) {
            host = v;
        } else if (strcmp(a, "--port") == 0 && v != NULL && example_parse_uint(v, 65535, &port)) {
        } else if (strcmp(a, "--threads") == 0 && v != NULL &&
                   example_parse_uint(v, 1024, &threads)) {
        } else if (strcmp(a, "--tls") == 0 && v != NULL && i + 2 < argc) {
            tls_cert = v;
            tls_key = argv[i + 2];
            i++; /* two values */
        } else {
            usage(stderr);
            return 2;
        }
        i++;
    }
    eddy_tls_context_t *tls = NULL;
    if (tls_cert != NULL && (tls = tls_context(tls_cert, tls_key)) == NULL) {
        return 1;
    }
    eddy_stop_signals_block(); /* before any loop thread: they inherit it */

    chat = eddy_channel_group_new("chat");
    eddy_loop_options_t opts = {.name = "ws"};
    eddy_loop_group_t *loops = eddy_loop_group_new(threads, &opts);
    eddy_server_bootstrap_t *server = eddy_server_bootstrap_new();
    if (chat == NULL || loops == NULL || server == NULL) {
        fprintf(stderr, "eddy-ws-server: out of memory or threads\n");
        return 1;
    }
    /* A chat member that does not keep up is closed rather than skipped: skipping would
     * leave holes in its conversation that it cannot see, while a closed client knows and
     * can reconnect. Either way the server's memory stays bounded. */
    eddy_channel_group_set_policy(chat, EDDY_GROUP_CLOSE_UNWRITABLE);
    example_configure(server, loops, NULL, init_child, tls);
    eddy_server_bootstrap_child_option(server, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, HIGH_WATER_MARK);
    eddy_server_bootstrap_child_option(server, EDDY_WRITE_BUFFER_LOW_WATER_MARK, LOW_WATER_MARK);

    eddy_channel_t *listener = example_bind(server, host, port, "eddy-ws-server");
    if (listener == NULL) {
        return 1;
    }
    char addr[80];
    printf("eddy-ws-server: listening on %s%s, %s, %zu loops (eddy %s)\n",
           eddy_addr_format(eddy_channel_local_addr(listener), addr, sizeof(addr)),
           tls != NULL ? " with TLS" : "", echo_mode ? "echo" : "broadcast",
           eddy_loop_group_size(loops), eddy_version());
    fflush(stdout);

    int sig = eddy_stop_signals_wait(-1);
    example_unbind(listener);
    say_goodbye();
    eddy_server_counters_t c;
    eddy_server_bootstrap_counters(server, &c);
    eddy_group_counters_t gc;
    eddy_channel_group_counters(chat, &gc);
    int rc = example_shutdown(server, loops, NULL);
    eddy_channel_group_free(chat);
    eddy_tls_context_release(tls);
    printf("eddy-ws-server: stopped by %s; %llu connections, %llu pages, %llu WebSocket "
           "sessions, %llu messages, %llu clients closed for falling behind\n",
           sig == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)c.accepted,
           (unsigned long long)atomic_load(&pages), (unsigned long long)atomic_load(&sessions),
           (unsigned long long)atomic_load(&messages), (unsigned long long)gc.closed);
    return rc;
}
