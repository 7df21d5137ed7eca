/*
 * TLS (pipeline/tls/) on 127.0.0.1: eddy client to eddy server (ALPN, resumption, SNI with
 * the run-time self-signed helper, client certificates), eddy against the openssl tool both
 * ways, the failures (wrong CA, wrong host name, expired certificate, plaintext against TLS,
 * handshake timeouts), 16 MiB each way, half-close with close_notify and truncation. The
 * certificates come from tls_certs.sh (a ctest fixture) in EDDY_TLS_CERTS. Every test is
 * bounded in time and ends the processes it started.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/pipeline.h>
#include <eddy/tls.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEADLINE_MS 10000

#include "support/wait_util.h"
#include "pipeline/tls/internal.h" /* eddy__tls_handler_bio_capacity */

static const char *cert(const char *name)
{
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof(path[0]), "%s/%s", EDDY_TLS_CERTS, name);
    return p;
}

/* The byte at offset i of the streams the big test sends. */
static uint8_t pattern(uint64_t i)
{
    return (uint8_t)(i * 7 + (i >> 12));
}

/* ---------------------------------------------------------------------------------------
 * What one side's application handler saw (after the TLS handler). A server shares one among
 * its connections.
 */

typedef struct side_s {
    _Atomic int hs_ok, hs_failed, hs_error, close_notify, errors, last_error, inactive;
    _Atomic bool resumed;
    _Atomic uint64_t received;
    _Atomic int bad; /* bytes off the pattern */
    char reason[512], alpn[64], protocol[32], sni[64];
    bool echo;                /* write back what is read */
    bool check;               /* compare what is read with pattern() */
    bool bye_on_close_notify; /* answer the peer's close_notify with "bye", then close */
    bool truncate;            /* on the first read, drop TLS and close: no close_notify */
    char text[256];           /* what was read, when short */
} side_t;

static side_t *side_of(eddy_ctx_t *ctx)
{
    return eddy_ctx_state(ctx);
}

static void app_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    side_t *s = side_of(ctx);
    eddy_buf_t *b = eddy_buf_of(msg);
    size_t n = eddy_buf_readable(b);
    /* Only this side's loop writes received: the bytes go into text first, and the count
     * after them publishes them to the test thread that waits for it. */
    uint64_t at = atomic_load_explicit(&s->received, memory_order_relaxed);
    if (s->check) {
        const uint8_t *p = eddy_buf_read_ptr(b);
        for (size_t i = 0; i < n; i++) {
            if (p[i] != pattern(at + i)) {
                atomic_fetch_add(&s->bad, 1);
                break;
            }
        }
    } else if (at + n < sizeof(s->text)) {
        memcpy(s->text + at, eddy_buf_read_ptr(b), n);
    }
    atomic_fetch_add(&s->received, n);
    if (s->truncate) {
        eddy_msg_release(msg);
        eddy_pipeline_remove(eddy_ctx_pipeline(ctx), "tls");
        eddy_ctx_close(ctx, NULL);
        return;
    }
    if (s->echo) {
        eddy_ctx_write(ctx, msg, NULL);
    } else {
        eddy_msg_release(msg);
    }
}

static void app_read_complete(eddy_ctx_t *ctx)
{
    if (side_of(ctx)->echo) {
        eddy_ctx_flush(ctx);
    }
}

static void app_event(eddy_ctx_t *ctx, int event, void *data)
{
    side_t *s = side_of(ctx);
    if (event == EDDY_EVENT_TLS_HANDSHAKE) {
        const eddy_tls_handshake_event_t *ev = data;
        if (ev->error == 0) {
            snprintf(s->alpn, sizeof(s->alpn), "%s", ev->alpn);
            snprintf(s->protocol, sizeof(s->protocol), "%s", ev->protocol);
            eddy_tls_handler_t *h = eddy_tls_handler_of(eddy_ctx_channel(ctx));
            const char *sni = h != NULL ? eddy_tls_handler_server_name(h) : NULL;
            snprintf(s->sni, sizeof(s->sni), "%s", sni != NULL ? sni : "");
            atomic_store(&s->resumed, ev->resumed);
            atomic_fetch_add(&s->hs_ok, 1);
        } else {
            snprintf(s->reason, sizeof(s->reason), "%s", ev->reason);
            atomic_store(&s->hs_error, ev->error);
            atomic_fetch_add(&s->hs_failed, 1);
        }
    } else if (event == EDDY_EVENT_TLS_CLOSE_NOTIFY) {
        atomic_fetch_add(&s->close_notify, 1);
        if (s->bye_on_close_notify) {
            eddy_ctx_write_and_flush(ctx, eddy_buf_msg(eddy_buf_from_str("bye")), NULL);
            eddy_ctx_close(ctx, NULL);
            return;
        }
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static void app_exception(eddy_ctx_t *ctx, int err)
{
    side_t *s = side_of(ctx);
    atomic_store(&s->last_error, err);
    atomic_fetch_add(&s->errors, 1);
}

static void app_inactive(eddy_ctx_t *ctx)
{
    atomic_fetch_add(&side_of(ctx)->inactive, 1);
    eddy_ctx_fire_channel_inactive(ctx);
}

static const eddy_handler_ops_t app_ops = {
    .name = "app",
    .sharable = true,
    .channel_inactive = app_inactive,
    .channel_read = app_read,
    .channel_read_complete = app_read_complete,
    .user_event_triggered = app_event,
    .exception_caught = app_exception,
};

/* ---------------------------------------------------------------------------------------
 * An eddy TLS server on one loop, and eddy TLS clients on another.
 */

typedef struct server_s {
    eddy_loop_group_t *group;
    eddy_channel_t *listener;
    eddy_addr_t addr;
    eddy_tls_context_t *tls;
    eddy_tls_handler_options_t opts;
    eddy_channel_config_t child_config;
    side_t side;
} server_t;

static int server_init_child(eddy_channel_t *ch, void *arg)
{
    server_t *s = arg;
    int rc = eddy_tls_add(ch, s->tls, &s->opts, NULL);
    return rc != 0
               ? rc
               : eddy_pipeline_add_last(eddy_channel_pipeline(ch), "app", &app_ops, &s->side, NULL);
}

/* Start s serving with its tls context (taken over) on 127.0.0.1, port 0. */
static void server_start(server_t *s, eddy_tls_context_t *tls)
{
    s->tls = tls;
    s->group = eddy_loop_group_new(1, NULL);
    assert_non_null(s->group);
    if (s->child_config.set == 0) {
        eddy_channel_config_init(&s->child_config);
    }
    eddy_addr_t any;
    assert_int_equal(eddy_addr_ip(&any, "127.0.0.1", 0), 0);
    eddy_listen_options_t o = {
        .loop = eddy_loop_group_next(s->group),
        .child_init = server_init_child,
        .child_arg = s,
        .child_config = &s->child_config,
    };
    eddy_future_t *f = eddy_channel_listen(&any, &o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    s->listener = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    s->addr = *eddy_channel_local_addr(s->listener);
}

static void server_stop(server_t *s)
{
    eddy_channel_close(s->listener, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(s->listener), DEADLINE_MS), 0);
    eddy_channel_release(s->listener);
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(s->group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(s->group), 0);
    eddy_tls_context_release(s->tls);
}

static eddy_tls_context_t *server_context(const char *cert_name, const char *key_name)
{
    eddy_tls_context_t *c = eddy_tls_context_new(EDDY_TLS_SERVER);
    assert_non_null(c);
    assert_int_equal(eddy_tls_context_use_certificate_file(c, cert(cert_name), cert(key_name)), 0);
    return c;
}

static eddy_tls_context_t *client_context(const char *ca)
{
    eddy_tls_context_t *c = eddy_tls_context_new(EDDY_TLS_CLIENT);
    assert_non_null(c);
    if (ca != NULL) {
        assert_int_equal(eddy_tls_context_trust_file(c, cert(ca)), 0);
    }
    return c;
}

typedef struct client_s {
    eddy_tls_context_t *tls; /* borrowed */
    eddy_tls_handler_options_t opts;
    eddy_future_t *handshake; /* a reference */
    eddy_channel_t *ch;       /* retained */
    side_t side;
} client_t;

static int client_init(eddy_channel_t *ch, void *arg)
{
    client_t *c = arg;
    int rc = eddy_tls_add(ch, c->tls, &c->opts, &c->handshake);
    return rc != 0
               ? rc
               : eddy_pipeline_add_last(eddy_channel_pipeline(ch), "app", &app_ops, &c->side, NULL);
}

/* Connect c to addr on loop and wait for its handshake to end: its error (0: done). */
static int client_connect(client_t *c, eddy_loop_t *loop, const eddy_addr_t *addr)
{
    eddy_future_t *f = eddy_channel_connect(loop, addr, NULL, client_init, c);
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    c->ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    assert_non_null(c->handshake);
    assert_int_equal(eddy_future_await(c->handshake, DEADLINE_MS), 0);
    return eddy_future_error(c->handshake);
}

static void client_close(client_t *c)
{
    if (c->ch != NULL) {
        eddy_channel_close(c->ch, NULL);
        assert_int_equal(eddy_future_await(eddy_channel_close_future(c->ch), DEADLINE_MS), 0);
        eddy_channel_release(c->ch);
        c->ch = NULL;
    }
    eddy_future_release(c->handshake);
    c->handshake = NULL;
}

static void send_text(client_t *c, const char *text)
{
    eddy_channel_write_and_flush(c->ch, eddy_buf_msg(eddy_buf_from_str(text)), NULL);
}

/* One loop for the clients of a test. */
static eddy_loop_group_t *clients_new(void)
{
    eddy_loop_group_t *g = eddy_loop_group_new(1, NULL);
    assert_non_null(g);
    return g;
}

static void clients_free(eddy_loop_group_t *g)
{
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

/* ---------------------------------------------------------------------------------------
 * eddy to eddy
 */

static void test_tls_eddy_client_echoes_through_eddy_server(void **state)
{
    (void)state;
    server_t srv = {.side.echo = true};
    eddy_tls_context_t *sc = server_context("server.pem", "server.key");
    const char *server_alpn[] = {"http/1.1", "echo"};
    assert_int_equal(eddy_tls_context_alpn(sc, server_alpn, 2), 0);
    server_start(&srv, sc);

    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context("ca.pem");
    const char *client_alpn[] = {"echo", "h2"};
    assert_int_equal(eddy_tls_context_alpn(cc, client_alpn, 2), 0);
    for (int round = 0; round < 2; round++) {
        client_t c = {.tls = cc, .opts.server_name = "localhost"};
        assert_int_equal(client_connect(&c, eddy_loop_group_next(g), &srv.addr), 0);
        WAIT_FOR(atomic_load(&c.side.hs_ok) == 1);
        assert_string_equal(c.side.protocol, "TLSv1.3");
        assert_string_equal(c.side.alpn, "echo");
        /* The second connection resumes the session the first was given. */
        assert_int_equal(atomic_load(&c.side.resumed), round == 1);
        send_text(&c, "hello, tls");
        WAIT_FOR(atomic_load(&c.side.received) == 10);
        assert_string_equal(c.side.text, "hello, tls");
        client_close(&c);
        assert_int_equal(atomic_load(&c.side.errors), 0);
    }
    /* Our close sent close_notify: the server saw it, and no truncation. */
    WAIT_FOR(atomic_load(&srv.side.close_notify) == 2);
    WAIT_FOR(atomic_load(&srv.side.inactive) == 2);
    assert_int_equal(atomic_load(&srv.side.hs_ok), 2);
    assert_string_equal(srv.side.sni, "localhost");
    assert_int_equal(eddy_tls_context_alpn(sc, server_alpn, 2), EDDY_EINVAL); /* in use */
    assert_int_equal(atomic_load(&srv.side.errors), 0);
    eddy_tls_context_release(cc);
    clients_free(g);
    server_stop(&srv);
}

static void start_handshake_task(void *arg)
{
    eddy_tls_handler_handshake(eddy_tls_handler_of(arg));
}

/* start_on_demand: nothing happens until the handshake is asked for; writes wait for it. */
static void test_tls_handshake_on_demand(void **state)
{
    (void)state;
    server_t srv = {.side.echo = true};
    server_start(&srv, server_context("server.pem", "server.key"));
    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context("ca.pem");
    client_t c = {.tls = cc, .opts = {.server_name = "localhost", .start_on_demand = true}};
    eddy_loop_t *loop = eddy_loop_group_next(g);
    eddy_future_t *f = eddy_channel_connect(loop, &srv.addr, NULL, client_init, &c);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    c.ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    send_text(&c, "queued");
    usleep(100 * 1000);
    assert_false(eddy_future_is_done(c.handshake));
    assert_int_equal(atomic_load(&srv.side.received), 0);
    assert_int_equal(eddy_loop_execute(loop, start_handshake_task, c.ch), 0);
    assert_int_equal(eddy_future_await(c.handshake, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(c.handshake), 0);
    WAIT_FOR(atomic_load(&c.side.received) == 6);
    assert_string_equal(c.side.text, "queued");
    client_close(&c);
    eddy_tls_context_release(cc);
    clients_free(g);
    server_stop(&srv);
}

/* SNI picks the server's context; both certificates come from the run-time helper. */
static void test_tls_sni_chooses_context_with_self_signed_certificates(void **state)
{
    (void)state;
    eddy_tls_self_signed_t *a, *b;
    assert_int_equal(eddy_tls_self_signed_new("a.test", 0, &a), 0);
    assert_int_equal(eddy_tls_self_signed_new("b.test", 0, &b), 0);
    char certf[256], keyf[256];
    /* Per process: the test's poller runs ([poll], [io_uring]) write them at the same time. */
    snprintf(certf, sizeof(certf), "%s/ss-a-%d.pem", EDDY_TLS_CERTS, (int)getpid());
    snprintf(keyf, sizeof(keyf), "%s/ss-a-%d.key", EDDY_TLS_CERTS, (int)getpid());
    assert_int_equal(eddy_tls_self_signed_write(a, certf, keyf), 0);

    eddy_tls_context_t *sa = eddy_tls_context_new(EDDY_TLS_SERVER);
    eddy_tls_context_t *sb = eddy_tls_context_new(EDDY_TLS_SERVER);
    assert_int_equal(eddy_tls_context_use_certificate_file(sa, certf, keyf), 0);
    const char *bc = eddy_tls_self_signed_cert_pem(b), *bk = eddy_tls_self_signed_key_pem(b);
    assert_int_equal(eddy_tls_context_use_certificate_pem(sb, bc, 0, bk, 0), 0);
    assert_int_equal(eddy_tls_context_add_sni(sa, "b.test", sb), 0);
    eddy_tls_context_release(sb);
    server_t srv = {.side.echo = true};
    server_start(&srv, sa);

    eddy_loop_group_t *g = clients_new();
    const char *names[] = {"b.test", "a.test"};
    eddy_tls_self_signed_t *trust[] = {b, a};
    for (int i = 0; i < 2; i++) {
        eddy_tls_context_t *cc = eddy_tls_context_new(EDDY_TLS_CLIENT);
        assert_int_equal(eddy_tls_context_trust_pem(cc, eddy_tls_self_signed_cert_pem(trust[i]), 0),
                         0);
        client_t c = {.tls = cc, .opts.server_name = names[i]};
        assert_int_equal(client_connect(&c, eddy_loop_group_next(g), &srv.addr), 0);
        client_close(&c);
        eddy_tls_context_release(cc);
    }
    WAIT_FOR(atomic_load(&srv.side.hs_ok) == 2);
    eddy_tls_self_signed_free(a);
    eddy_tls_self_signed_free(b);
    clients_free(g);
    server_stop(&srv);
}

/* A server that requires client certificates: refused without one, served with one. */
static void test_tls_server_requires_client_certificate(void **state)
{
    (void)state;
    eddy_tls_context_t *sc = server_context("server.pem", "server.key");
    assert_int_equal(eddy_tls_context_trust_file(sc, cert("ca.pem")), 0);
    assert_int_equal(eddy_tls_context_verify(sc, EDDY_TLS_VERIFY_REQUIRE), 0);
    server_t srv = {.side.echo = true};
    server_start(&srv, sc);
    eddy_loop_group_t *g = clients_new();

    eddy_tls_context_t *anon = client_context("ca.pem");
    client_t c1 = {.tls = anon, .opts.server_name = "localhost"};
    /* TLS 1.3: the client's handshake ends before the server checks; the refusal arrives as
     * an alert on the next read. Either way the connection fails and closes. */
    int err = client_connect(&c1, eddy_loop_group_next(g), &srv.addr);
    if (err == 0) {
        send_text(&c1, "x");
        WAIT_FOR(atomic_load(&c1.side.errors) >= 1);
        assert_int_equal(atomic_load(&c1.side.last_error), EDDY_ETLS);
    }
    WAIT_FOR(atomic_load(&srv.side.hs_failed) == 1);
    assert_non_null(strstr(srv.side.reason, "certificate"));
    assert_true(eddy_future_await(eddy_channel_close_future(c1.ch), DEADLINE_MS) == 0);
    client_close(&c1);
    eddy_tls_context_release(anon);

    eddy_tls_context_t *mine = client_context("ca.pem");
    assert_int_equal(
        eddy_tls_context_use_certificate_file(mine, cert("client.pem"), cert("client.key")), 0);
    client_t c2 = {.tls = mine, .opts.server_name = "127.0.0.1"};
    assert_int_equal(client_connect(&c2, eddy_loop_group_next(g), &srv.addr), 0);
    send_text(&c2, "mutual");
    WAIT_FOR(atomic_load(&c2.side.received) == 6);
    client_close(&c2);
    eddy_tls_context_release(mine);
    clients_free(g);
    server_stop(&srv);
}

/* A client that fails verification: the future fails with OpenSSL's reason, both close. */
static void expect_client_failure(const char *server_cert, const char *server_key, const char *ca,
                                  const char *name, const char *reason)
{
    server_t srv = {.side.echo = true};
    server_start(&srv, server_context(server_cert, server_key));
    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context(ca);
    client_t c = {.tls = cc, .opts.server_name = name};
    assert_int_equal(client_connect(&c, eddy_loop_group_next(g), &srv.addr), EDDY_ETLS);
    WAIT_FOR(atomic_load(&c.side.hs_failed) == 1);
    assert_int_equal(atomic_load(&c.side.hs_error), EDDY_ETLS);
    assert_non_null(strstr(c.side.reason, reason));
    /* exception_caught comes after the handshake event, on the client's loop. */
    WAIT_FOR(atomic_load(&c.side.last_error) == EDDY_ETLS);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(c.ch), DEADLINE_MS), 0);
    /* The server learns of it from the client's alert. */
    WAIT_FOR(atomic_load(&srv.side.hs_failed) == 1);
    WAIT_FOR(atomic_load(&srv.side.inactive) == 1);
    client_close(&c);
    eddy_tls_context_release(cc);
    clients_free(g);
    server_stop(&srv);
}

static void test_tls_client_refuses_unknown_ca(void **state)
{
    (void)state;
    expect_client_failure("server.pem", "server.key", "other-ca.pem", "localhost",
                          "unable to get local issuer certificate");
}

static void test_tls_client_refuses_wrong_hostname(void **state)
{
    (void)state;
    expect_client_failure("server.pem", "server.key", "ca.pem", "wrong.example",
                          "hostname mismatch");
}

static void test_tls_client_refuses_expired_certificate(void **state)
{
    (void)state;
    expect_client_failure("expired.pem", "expired.key", "ca.pem", "localhost",
                          "certificate has expired");
}

/* ---------------------------------------------------------------------------------------
 * Raw sockets against the TLS server: plaintext, and silence
 */

static int raw_connect(const eddy_addr_t *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, &addr->u.sa, addr->len), 0);
    struct timeval tv = {DEADLINE_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Read until the peer closes: true when it did (EOF or reset) before the timeout. */
static bool raw_sees_close(int fd)
{
    char buf[4096];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return true;
        }
        if (n < 0 && errno != EINTR) {
            return false;
        }
    }
}

static void test_tls_server_refuses_plaintext_client(void **state)
{
    (void)state;
    server_t srv = {.side.echo = true};
    server_start(&srv, server_context("server.pem", "server.key"));
    int fd = raw_connect(&srv.addr);
    const char req[] = "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n";
    assert_int_equal(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(req) - 1);
    assert_true(raw_sees_close(fd));
    close(fd);
    WAIT_FOR(atomic_load(&srv.side.hs_failed) == 1);
    assert_int_equal(atomic_load(&srv.side.hs_error), EDDY_ETLS);
    assert_true(strlen(srv.side.reason) > 0);
    WAIT_FOR(atomic_load(&srv.side.inactive) == 1);
    assert_int_equal(atomic_load(&srv.side.received), 0);
    server_stop(&srv);
}

static void test_tls_server_handshake_times_out(void **state)
{
    (void)state;
    server_t srv = {.opts.handshake_timeout_ms = 200};
    server_start(&srv, server_context("server.pem", "server.key"));
    int64_t t0 = now_ms();
    int fd = raw_connect(&srv.addr);
    assert_true(raw_sees_close(fd)); /* we never say a word */
    close(fd);
    assert_true(now_ms() - t0 >= 150);
    WAIT_FOR(atomic_load(&srv.side.hs_failed) == 1);
    assert_int_equal(atomic_load(&srv.side.hs_error), EDDY_ETIMEDOUT);
    assert_non_null(strstr(srv.side.reason, "timed out"));
    assert_int_equal(atomic_load(&srv.side.last_error), EDDY_ETIMEDOUT);
    server_stop(&srv);
}

/* A listener that accepts (the kernel does) and never answers: its fd. */
static int silent_listener(eddy_addr_t *addr)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(eddy_addr_ip(addr, "127.0.0.1", 0), 0);
    assert_int_equal(bind(lfd, &addr->u.sa, addr->len), 0);
    assert_int_equal(listen(lfd, 4), 0);
    addr->len = sizeof(addr->u.in4);
    assert_int_equal(getsockname(lfd, &addr->u.sa, &addr->len), 0);
    return lfd;
}

static void test_tls_client_handshake_times_out(void **state)
{
    (void)state;
    eddy_addr_t addr;
    int lfd = silent_listener(&addr);
    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context("ca.pem");
    client_t c = {.tls = cc, .opts = {.server_name = "localhost", .handshake_timeout_ms = 200}};
    assert_int_equal(client_connect(&c, eddy_loop_group_next(g), &addr), EDDY_ETIMEDOUT);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(c.ch), DEADLINE_MS), 0);
    assert_int_equal(atomic_load(&c.side.hs_error), EDDY_ETIMEDOUT);
    client_close(&c);
    eddy_tls_context_release(cc);
    clients_free(g);
    close(lfd);
}

/* Closed by the application mid-handshake: the future fails, nothing leaks. */
static void test_tls_close_during_handshake_fails_future(void **state)
{
    (void)state;
    eddy_addr_t addr;
    int lfd = silent_listener(&addr);
    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context("ca.pem");
    client_t c = {.tls = cc, .opts.server_name = "localhost"};
    eddy_future_t *f = eddy_channel_connect(eddy_loop_group_next(g), &addr, NULL, client_init, &c);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    c.ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    /* A write queued before the handshake fails with the close. */
    eddy_promise_t *w = eddy_promise_new(NULL);
    eddy_channel_write_and_flush(c.ch, eddy_buf_msg(eddy_buf_from_str("never")), w);
    eddy_channel_close(c.ch, NULL);
    assert_int_equal(eddy_future_await(c.handshake, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(c.handshake), EDDY_ECLOSED);
    assert_int_equal(eddy_future_await(w, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(w), EDDY_ECLOSED);
    eddy_future_release(w);
    client_close(&c);
    eddy_tls_context_release(cc);
    clients_free(g);
    close(lfd);
}

/* ---------------------------------------------------------------------------------------
 * Volume, half-close, truncation
 */

#define BIG ((uint64_t)16 << 20)
#define PIECE ((size_t)64 << 10)

typedef struct sender_s {
    eddy_channel_t *ch;
} sender_t;

/* On the client's loop: all 16 MiB as 64 KiB writes, flushed every 1 MiB. */
/* Plaintext written but not flushed yet (before the handshake completes the writes wait in
 * the handler) counts in the channel's pending bytes, as without TLS: the high water mark
 * turns the channel unwritable, the hard cap refuses more with EDDY_ENOBUFS, and what was
 * queued fails with EDDY_ECLOSED at close, the count going back down. */
static void test_tls_queued_plaintext_counts_against_water_marks(void **state)
{
    (void)state;
    eddy_tls_context_t *tls = client_context(NULL);
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 1024), 0);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 4096), 0);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_MAX_PENDING_OUTBOUND, 17000), 0);
    assert_int_equal(eddy_tls_add(ch, tls, NULL, NULL), 0);
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_msg_release(m); /* the ClientHello: nobody answers it here */
    }
    static char chunk[2000];
    memset(chunk, 'p', sizeof(chunk));
    eddy_promise_t *p[9];
    for (int i = 0; i < 9; i++) {
        p[i] = eddy_promise_new(eddy_channel_loop(ch));
        eddy_channel_write(ch, eddy_buf_msg(eddy_buf_from(chunk, sizeof(chunk))), p[i]);
        if (i == 0) {
            assert_true(eddy_channel_is_writable(ch)); /* 2000 bytes < 4096 */
        }
        if (i == 2) {
            assert_false(eddy_channel_is_writable(ch)); /* 6000 bytes > 4096 */
        }
    }
    for (int i = 0; i < 8; i++) {
        assert_false(eddy_future_is_done(p[i])); /* queued for the flush after the handshake */
    }
    assert_true(eddy_future_is_done(p[8]));
    assert_int_equal(eddy_future_error(p[8]), EDDY_ENOBUFS); /* 18000 > 17000 */
    eddy_channel_close(ch, NULL);
    for (int i = 0; i < 9; i++) {
        assert_true(eddy_future_is_done(p[i]));
        if (i < 8) {
            assert_int_equal(eddy_future_error(p[i]), EDDY_ECLOSED);
        }
        eddy_future_release(p[i]);
    }
    eddy_embedded_finish(ch);
    eddy_tls_context_release(tls);
}

/* Carry what each embedded channel flushed into the other until nothing moves. */
static void pump(eddy_channel_t *a, eddy_channel_t *b)
{
    for (bool moved = true; moved;) {
        moved = false;
        eddy_msg_t *m;
        while ((m = eddy_embedded_read_outbound(a)) != NULL) {
            eddy_embedded_write_inbound(b, m);
            moved = true;
        }
        while ((m = eddy_embedded_read_outbound(b)) != NULL) {
            eddy_embedded_write_inbound(a, m);
            moved = true;
        }
    }
}

/* Plaintext that reached the tail of ch: its bytes, the messages released. */
static size_t drain_inbound(eddy_channel_t *ch)
{
    size_t n = 0;
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
        n += eddy_buf_readable(eddy_buf_of(m));
        eddy_msg_release(m);
    }
    return n;
}

/* A TLS client and server on two embedded channels, driven by pump(). */
typedef struct pair_s {
    eddy_tls_context_t *sc, *cc;
    eddy_channel_t *srv, *cli;
} pair_t;

/* The pair with its handlers added, the client's app handler (may be NULL) after its TLS
 * handler, before the handshake. */
static pair_t pair_new(bool client_half_closure, const eddy_handler_ops_t *app, void *app_state)
{
    pair_t p = {server_context("server.pem", "server.key"), client_context("ca.pem"),
                eddy_embedded_channel_new(), eddy_embedded_channel_new()};
    assert_non_null(p.srv);
    assert_non_null(p.cli);
    if (client_half_closure) {
        assert_int_equal(eddy_channel_set_option(p.cli, EDDY_ALLOW_HALF_CLOSURE, 1), 0);
    }
    assert_int_equal(eddy_tls_add(p.srv, p.sc, NULL, NULL), 0);
    eddy_tls_handler_options_t o = {.server_name = "localhost"};
    assert_int_equal(eddy_tls_add(p.cli, p.cc, &o, NULL), 0);
    if (app != NULL) {
        assert_int_equal(
            eddy_pipeline_add_last(eddy_channel_pipeline(p.cli), "app", app, app_state, NULL), 0);
    }
    return p;
}

static void pair_free(pair_t *p)
{
    eddy_embedded_finish(p->cli);
    eddy_embedded_finish(p->srv);
    eddy_tls_context_release(p->cc);
    eddy_tls_context_release(p->sc);
}

/* TLS records (application data or any) in the ciphertext the server flushed: each message
 * is a buffer of whole records (the handler emits what the write BIO holds). */
static size_t records_flushed(eddy_channel_t *ch, eddy_channel_t *to)
{
    size_t records = 0;
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        assert_non_null(b);
        const uint8_t *p = eddy_buf_read_ptr(b);
        size_t n = eddy_buf_readable(b);
        for (size_t at = 0; at < n; records++) {
            assert_true(n - at >= 5);
            at += 5 + ((size_t)p[at + 3] << 8 | p[at + 4]);
            assert_true(at <= n);
        }
        eddy_embedded_write_inbound(to, m);
    }
    return records;
}

/* Small writes of one flush (HTTP/2 frames, pipelined answers) go out as one record, each
 * promise completed; a big write among them keeps its place in the stream, the records
 * filled to 16 KiB. */
static void test_tls_small_writes_of_a_flush_share_a_record(void **state)
{
    (void)state;
    pair_t pr = pair_new(false, NULL, NULL);
    pump(pr.srv, pr.cli);
    eddy_promise_t *p[100];
    char text[100 * 41 + 1];
    for (int i = 0; i < 100; i++) {
        snprintf(text + 41 * i, 42, "frame %03d .............................\n", i);
        p[i] = eddy_promise_new(eddy_channel_loop(pr.srv));
        eddy_channel_write(pr.srv, eddy_buf_msg(eddy_buf_from(text + 41 * i, 41)), p[i]);
    }
    eddy_channel_flush(pr.srv);
    assert_int_equal(records_flushed(pr.srv, pr.cli), 1); /* 4,100 bytes: one record */
    for (int i = 0; i < 100; i++) {
        assert_true(eddy_future_is_done(p[i]) && eddy_future_error(p[i]) == 0);
        eddy_future_release(p[i]);
    }
    char got[100 * 41 + 20000 + 41];
    size_t n = 0;
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(pr.cli)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        assert_true(n + eddy_buf_readable(b) <= sizeof(got));
        memcpy(got + n, eddy_buf_read_ptr(b), eddy_buf_readable(b));
        n += eddy_buf_readable(b);
        eddy_msg_release(m);
    }
    assert_int_equal(n, 100 * 41);
    assert_memory_equal(got, text, n);
    /* small, big, small: the order holds. */
    static char big[20000];
    memset(big, 'B', sizeof(big));
    eddy_channel_write(pr.srv, eddy_buf_msg(eddy_buf_from(text, 41)), NULL);
    eddy_channel_write(pr.srv, eddy_buf_msg(eddy_buf_from(big, sizeof(big))), NULL);
    eddy_channel_write(pr.srv, eddy_buf_msg(eddy_buf_from(text + 41, 41)), NULL);
    eddy_channel_flush(pr.srv);
    /* Full records: 41 + 16343 of the big one, then its 3657 + 41. */
    assert_int_equal(records_flushed(pr.srv, pr.cli), 2);
    for (n = 0; (m = eddy_embedded_read_inbound(pr.cli)) != NULL;) {
        eddy_buf_t *b = eddy_buf_of(m);
        memcpy(got + n, eddy_buf_read_ptr(b), eddy_buf_readable(b));
        n += eddy_buf_readable(b);
        eddy_msg_release(m);
    }
    assert_int_equal(n, 41 + sizeof(big) + 41);
    assert_memory_equal(got, text, 41);
    assert_memory_equal(got + 41, big, sizeof(big));
    assert_memory_equal(got + 41 + sizeof(big), text + 41, 41);
    pair_free(&pr);
}

/* A memory BIO keeps what it grew to: after a bulk transfer the reading end holds hundreds
 * of KB of read BIO. A second after, the emptied BIO is swapped for a new one, and the
 * connection goes on working. The writing end keeps nothing once its flush went out (its
 * write BIO hands the records on). */
static void test_tls_big_bios_are_trimmed_when_idle(void **state)
{
    (void)state;
    pair_t pr = pair_new(false, NULL, NULL);
    eddy_channel_t *srv = pr.srv, *cli = pr.cli;
    pump(cli, srv);
    eddy_tls_handler_t *sh = eddy_tls_handler_of(srv), *ch = eddy_tls_handler_of(cli);
    assert_true(eddy_tls_handler_is_handshake_done(sh));
    assert_true(eddy_tls_handler_is_handshake_done(ch));
    drain_inbound(srv);

    size_t big = (size_t)1 << 20;
    eddy_buf_t *b = eddy_buf_new(big);
    memset(eddy_buf_write_ptr(b), 'b', big);
    eddy_buf_produce(b, big);
    eddy_embedded_write_outbound(cli, eddy_buf_msg(b));
    pump(cli, srv);
    assert_int_equal(drain_inbound(srv), big);
    /* The server's read BIO holds what it was fed; the client's write side nothing. */
    assert_true(eddy__tls_handler_bio_capacity(ch) <= (size_t)64 << 10);
    assert_true(eddy__tls_handler_bio_capacity(sh) > (size_t)128 << 10);

    eddy_embedded_advance_time(cli, 1000);
    eddy_embedded_advance_time(srv, 1000);
    assert_true(eddy__tls_handler_bio_capacity(ch) <= (size_t)64 << 10);
    assert_true(eddy__tls_handler_bio_capacity(sh) <= (size_t)64 << 10);

    /* Still a working connection, both ways. */
    eddy_embedded_write_outbound(cli, eddy_buf_msg(eddy_buf_from_str("after")));
    pump(cli, srv);
    assert_int_equal(drain_inbound(srv), 5);
    eddy_embedded_write_outbound(srv, eddy_buf_msg(eddy_buf_from_str("back")));
    pump(cli, srv);
    assert_int_equal(drain_inbound(cli), 4);
    pair_free(&pr);
}

static uint64_t pending_of(eddy_channel_t *ch)
{
    eddy_channel_counters_t c;
    eddy_channel_counters(ch, &c);
    return c.pending_outbound_bytes;
}

/* The channel closing by itself (the peer's FIN) with writes still queued in the handler:
 * they fail, and their bytes leave the count once, not twice. */
static void test_tls_queued_plaintext_leaves_the_count_once_at_close(void **state)
{
    (void)state;
    eddy_tls_context_t *tls = client_context(NULL);
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(eddy_tls_add(ch, tls, NULL, NULL), 0);
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_msg_release(m);
    }
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    eddy_channel_write(ch, eddy_buf_msg(eddy_buf_from("0123456789", 10)), p);
    assert_int_equal(pending_of(ch), 10);
    eddy_embedded_shutdown_input(ch); /* no half-closure: the channel closes */
    assert_true(eddy_future_is_done(p));
    assert_int_equal(eddy_future_error(p), EDDY_ECLOSED);
    assert_int_equal(pending_of(ch), 0);
    eddy_future_release(p);
    /* A write after the close is refused, not queued. */
    p = eddy_promise_new(eddy_channel_loop(ch));
    eddy_channel_write(ch, eddy_buf_msg(eddy_buf_from("x", 1)), p);
    assert_int_equal(eddy_future_error(p), EDDY_ECLOSED);
    assert_int_equal(pending_of(ch), 0);
    eddy_future_release(p);
    eddy_embedded_finish(ch);
    eddy_tls_context_release(tls);
}

/* An application that writes and flushes again from the writability event a big flush
 * fires: its second write goes out after the first whole, and the count ends at zero. */
typedef struct rewriter_s {
    int rewrites;
} rewriter_t;

static void rewrite_on_writable(eddy_ctx_t *ctx)
{
    rewriter_t *r = eddy_ctx_state(ctx);
    if (eddy_channel_is_writable(eddy_ctx_channel(ctx)) && r->rewrites++ == 0) {
        eddy_buf_t *b = eddy_buf_new(1000);
        memset(eddy_buf_write_ptr(b), 'z', 1000);
        eddy_buf_produce(b, 1000);
        eddy_ctx_write_and_flush(ctx, eddy_buf_msg(b), NULL);
    }
    eddy_ctx_fire_channel_writability_changed(ctx);
}

static const eddy_handler_ops_t rewriter_ops = {
    .name = "rewriter",
    .channel_writability_changed = rewrite_on_writable,
};

static void test_tls_flush_from_a_writability_event_keeps_order(void **state)
{
    (void)state;
    rewriter_t r = {0};
    pair_t pr = pair_new(false, &rewriter_ops, &r);
    eddy_channel_t *srv = pr.srv, *cli = pr.cli;
    pump(cli, srv);
    assert_true(eddy_tls_handler_is_handshake_done(eddy_tls_handler_of(cli)));
    drain_inbound(srv);
    assert_int_equal(eddy_channel_set_option(cli, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 1 << 20), 0);
    assert_int_equal(eddy_channel_set_option(cli, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 512 << 10), 0);
    /* Two 1 MiB writes: 2 MiB pending, unwritable; the flush hands records on in 256 KiB
     * buffers, and the count passing under the low mark makes the channel writable again in
     * the middle of the flush: the rewriter writes and flushes 1000 bytes of 'z' there. */
    size_t big = (size_t)1 << 20;
    for (int i = 0; i < 2; i++) {
        eddy_buf_t *b = eddy_buf_new(big);
        memset(eddy_buf_write_ptr(b), 'a' + i, big);
        eddy_buf_produce(b, big);
        eddy_channel_write(cli, eddy_buf_msg(b), NULL);
    }
    assert_false(eddy_channel_is_writable(cli));
    eddy_channel_flush(cli);
    assert_int_equal(r.rewrites, 1);
    pump(cli, srv);
    /* The server got 'a' * 1 MiB, 'b' * 1 MiB, then 'z' * 1000, in that order. */
    size_t at = 0;
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(srv)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        const uint8_t *d = eddy_buf_read_ptr(b);
        for (size_t i = 0; i < eddy_buf_readable(b); i++, at++) {
            char want = at < big ? 'a' : at < 2 * big ? 'b' : 'z';
            if (d[i] != (uint8_t)want) {
                fail_msg("byte %zu is %c, not %c", at, d[i], want);
            }
        }
        eddy_msg_release(m);
    }
    assert_int_equal(at, 2 * big + 1000);
    assert_int_equal(pending_of(cli), 0);
    assert_true(eddy_channel_is_writable(cli));
    pair_free(&pr);
}

/* The error text stays valid once given out: an application that keeps it from
 * exception_caught (a truncation, with half-closure) reads it again in channel_inactive,
 * after the end of the connection gave the handler a second reason. */
typedef struct keeper_s {
    const char *text;
    char copy[512];
    bool checked;
} keeper_t;

static void keep_error(eddy_ctx_t *ctx, int err)
{
    (void)err;
    keeper_t *k = eddy_ctx_state(ctx);
    if (k->text == NULL) { /* the first failure's text, kept */
        k->text = eddy_tls_handler_error(eddy_tls_handler_of(eddy_ctx_channel(ctx)));
        snprintf(k->copy, sizeof(k->copy), "%s", k->text);
    }
}

static void check_error(eddy_ctx_t *ctx)
{
    keeper_t *k = eddy_ctx_state(ctx);
    if (k->text != NULL) {
        assert_string_equal(k->text, k->copy);
        k->checked = true;
    }
    eddy_ctx_fire_channel_inactive(ctx);
}

static const eddy_handler_ops_t keeper_ops = {
    .name = "keeper",
    .exception_caught = keep_error,
    .channel_inactive = check_error,
};

static void test_tls_error_text_stays_valid(void **state)
{
    (void)state;
    keeper_t k = {0};
    pair_t pr = pair_new(true, &keeper_ops, &k);
    eddy_channel_t *srv = pr.srv, *cli = pr.cli;
    pump(cli, srv);
    assert_true(eddy_tls_handler_is_handshake_done(eddy_tls_handler_of(cli)));
    eddy_embedded_shutdown_input(cli); /* FIN without close_notify: truncation */
    assert_non_null(k.text);
    assert_true(k.copy[0] != '\0');
    eddy_embedded_error(cli);
    /* Then the connection ends without our close (no close_notify of ours either): the
     * handler finds a second reason at channel_inactive. */
    assert_int_equal(eddy_channel_set_option(cli, EDDY_ALLOW_HALF_CLOSURE, 0), 0);
    eddy_embedded_shutdown_input(cli);
    assert_true(k.checked);
    pair_free(&pr);
}

/* An application that ends TLS from the unwritable event a big flush fires while the
 * handler is still sealing (a "close slow consumers" policy): a close, the handler's removal,
 * or close_notify. Nothing crashes, every promise completes, the count ends at zero; a close
 * or close_notify comes after everything that was flushed. */
typedef enum { END_CLOSE, END_REMOVE, END_CLOSE_OUTBOUND } end_how_t;

typedef struct ender_s {
    end_how_t how;
    int ended;
    eddy_promise_t *cn; /* close_outbound's */
} ender_t;

static void end_on_unwritable(eddy_ctx_t *ctx)
{
    ender_t *e = eddy_ctx_state(ctx);
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    if (!eddy_channel_is_writable(ch) && e->ended++ == 0) {
        if (e->how == END_CLOSE) {
            eddy_channel_close(ch, NULL);
        } else if (e->how == END_REMOVE) {
            assert_int_equal(eddy_pipeline_remove(eddy_channel_pipeline(ch), "tls"), 0);
        } else {
            e->cn = eddy_promise_new(eddy_channel_loop(ch));
            eddy_tls_handler_close_outbound(eddy_tls_handler_of(ch), e->cn);
        }
    }
    eddy_ctx_fire_channel_writability_changed(ctx);
}

static const eddy_handler_ops_t ender_ops = {
    .name = "ender",
    .channel_writability_changed = end_on_unwritable,
};

/* Write A, B and C, unflushed, with the high water mark at exactly their plaintext: A and B
 * seal to more than COALESCE_MAX of records, handed on while C still waits, and those records
 * pass the mark. Returns A + B + C. */
static size_t write_abc_past_the_mark(eddy_channel_t *ch, eddy_promise_t *p[3])
{
    size_t sizes[3] = {160 << 10, 96 << 10, 1000}, total = 0;
    for (int i = 0; i < 3; i++) {
        total += sizes[i];
    }
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, (int64_t)total),
                     0);
    for (int i = 0; i < 3; i++) {
        eddy_buf_t *b = eddy_buf_new(sizes[i]);
        memset(eddy_buf_write_ptr(b), 'a' + i, sizes[i]);
        eddy_buf_produce(b, sizes[i]);
        p[i] = eddy_promise_new(eddy_channel_loop(ch));
        eddy_channel_write(ch, eddy_buf_msg(b), p[i]);
    }
    return total;
}

static void end_tls_mid_seal(end_how_t how)
{
    ender_t e = {.how = how};
    pair_t pr = pair_new(true, &ender_ops, &e);
    eddy_channel_t *srv = pr.srv, *cli = pr.cli;
    pump(cli, srv);
    drain_inbound(srv);
    eddy_embedded_events(srv, (int[8]){0}, 8);
    eddy_promise_t *p[3];
    size_t total = write_abc_past_the_mark(cli, p);
    assert_true(eddy_channel_is_writable(cli));
    eddy_channel_flush(cli);
    assert_int_equal(e.ended, 1);
    pump(cli, srv);
    for (int i = 0; i < 3; i++) {
        assert_true(eddy_future_is_done(p[i]));
    }
    assert_int_equal(pending_of(cli), 0);
    size_t got = drain_inbound(srv);
    int events[8];
    size_t nev = eddy_embedded_events(srv, events, 8);
    bool cn = false;
    for (size_t i = 0; i < nev; i++) {
        cn |= events[i] == EDDY_EVENT_TLS_CLOSE_NOTIFY;
    }
    if (how == END_REMOVE) {
        /* Sealing stopped with the SSL gone: C never went out, and says so. */
        assert_int_equal(eddy_future_error(p[2]), EDDY_ECLOSED);
        assert_true(got < total);
    } else {
        /* The close or close_notify waited for the sealing: all of A, B, C, then it. */
        for (int i = 0; i < 3; i++) {
            assert_int_equal(eddy_future_error(p[i]), 0);
        }
        assert_int_equal(got, total);
        assert_true(cn);
    }
    if (e.cn != NULL) {
        assert_true(eddy_future_is_done(e.cn));
        assert_int_equal(eddy_future_error(e.cn), 0);
        eddy_future_release(e.cn);
    }
    for (int i = 0; i < 3; i++) {
        eddy_future_release(p[i]);
    }
    eddy_embedded_error(cli);
    eddy_embedded_error(srv);
    pair_free(&pr);
}

static void test_tls_close_from_an_event_mid_seal(void **state)
{
    (void)state;
    end_tls_mid_seal(END_CLOSE);
}

static void test_tls_removal_from_an_event_mid_seal(void **state)
{
    (void)state;
    end_tls_mid_seal(END_REMOVE);
}

static void test_tls_close_outbound_from_an_event_mid_seal(void **state)
{
    (void)state;
    end_tls_mid_seal(END_CLOSE_OUTBOUND);
}

/* Closing with writes queued in the handler past the high water mark: they fail, and no
 * writability event invites new writes into the closing channel. */
static void count_writability(eddy_ctx_t *ctx)
{
    (*(int *)eddy_ctx_state(ctx))++;
    eddy_ctx_fire_channel_writability_changed(ctx);
}

static const eddy_handler_ops_t writability_counter_ops = {
    .name = "counter",
    .channel_writability_changed = count_writability,
};

static void test_tls_close_fires_no_writability_event(void **state)
{
    (void)state;
    int events = 0;
    pair_t pr = pair_new(false, &writability_counter_ops, &events);
    pump(pr.cli, pr.srv);
    assert_int_equal(eddy_channel_set_option(pr.cli, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 1000), 0);
    assert_int_equal(eddy_channel_set_option(pr.cli, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 2000), 0);
    static char chunk[3000];
    memset(chunk, 'w', sizeof(chunk));
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(pr.cli));
    eddy_channel_write(pr.cli, eddy_buf_msg(eddy_buf_from(chunk, sizeof(chunk))), p);
    assert_false(eddy_channel_is_writable(pr.cli));
    assert_int_equal(events, 1); /* unwritable */
    eddy_channel_close(pr.cli, NULL);
    assert_int_equal(eddy_future_error(p), EDDY_ECLOSED);
    assert_int_equal(events, 1); /* nothing more while closing */
    eddy_future_release(p);
    pump(pr.cli, pr.srv);
    eddy_embedded_error(pr.srv);
    pair_free(&pr);
}

static void send_big(void *arg)
{
    sender_t *s = arg;
    for (uint64_t off = 0; off < BIG; off += PIECE) {
        eddy_buf_t *b = eddy_buf_new(PIECE);
        for (size_t i = 0; i < PIECE; i++) {
            eddy_buf_write_u8(b, pattern(off + i));
        }
        eddy_channel_write(s->ch, eddy_buf_msg(b), NULL);
        if ((off + PIECE) % ((uint64_t)1 << 20) == 0) {
            eddy_channel_flush(s->ch);
        }
    }
}

static void test_tls_streams_16_mib_each_way(void **state)
{
    (void)state;
    server_t srv = {.side.echo = true, .side.check = true};
    server_start(&srv, server_context("server.pem", "server.key"));
    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context("ca.pem");
    client_t c = {.tls = cc, .opts.server_name = "localhost", .side.check = true};
    eddy_loop_t *loop = eddy_loop_group_next(g);
    assert_int_equal(client_connect(&c, loop, &srv.addr), 0);
    sender_t s = {.ch = c.ch};
    int64_t t0 = now_ms();
    assert_int_equal(eddy_loop_execute(loop, send_big, &s), 0);
    int64_t until = now_ms() + 20000;
    while (atomic_load(&c.side.received) < BIG && now_ms() < until) {
        usleep(2000);
    }
    assert_int_equal(atomic_load(&srv.side.received), BIG);
    assert_int_equal(atomic_load(&c.side.received), BIG);
    assert_int_equal(atomic_load(&srv.side.bad), 0);
    assert_int_equal(atomic_load(&c.side.bad), 0);
    print_message("16 MiB each way in %lld ms\n", (long long)(now_ms() - t0));
    client_close(&c);
    eddy_tls_context_release(cc);
    clients_free(g);
    server_stop(&srv);
}

typedef struct closer_arg_s {
    eddy_channel_t *ch;
    eddy_promise_t *p;
} closer_arg_t;

static void close_outbound(void *arg)
{
    closer_arg_t *a = arg;
    eddy_tls_handler_close_outbound(eddy_tls_handler_of(a->ch), a->p);
}

/* The client says close_notify and keeps reading; the server answers "bye" and its own. */
static void test_tls_half_close_with_close_notify(void **state)
{
    (void)state;
    server_t srv = {.side.echo = true, .side.bye_on_close_notify = true};
    eddy_channel_config_init(&srv.child_config);
    eddy_channel_config_set(&srv.child_config, EDDY_ALLOW_HALF_CLOSURE, 1);
    server_start(&srv, server_context("server.pem", "server.key"));
    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context("ca.pem");
    client_t c = {.tls = cc, .opts.server_name = "localhost"};
    eddy_loop_t *loop = eddy_loop_group_next(g);
    assert_int_equal(client_connect(&c, loop, &srv.addr), 0);
    eddy_channel_write(c.ch, eddy_buf_msg(eddy_buf_from_str("last words, ")), NULL);
    closer_arg_t a = {.ch = c.ch, .p = eddy_promise_new(NULL)};
    assert_int_equal(eddy_loop_execute(loop, close_outbound, &a), 0);
    assert_int_equal(eddy_future_await(a.p, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(a.p), 0);
    eddy_future_release(a.p);
    WAIT_FOR(atomic_load(&srv.side.close_notify) == 1);
    WAIT_FOR(atomic_load(&c.side.close_notify) == 1);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(c.ch), DEADLINE_MS), 0);
    assert_string_equal(c.side.text, "last words, bye");
    assert_int_equal(atomic_load(&c.side.errors), 0);
    WAIT_FOR(atomic_load(&srv.side.inactive) == 1);
    assert_int_equal(atomic_load(&srv.side.errors), 0);
    client_close(&c);
    eddy_tls_context_release(cc);
    clients_free(g);
    server_stop(&srv);
}

/* close_outbound called from a task, outside any pipeline event, on a socket channel: the
 * sealing of queued writes passes the high water mark, and the writability event it fires
 * removes the TLS handler or closes the channel. The handler holds the pipeline, so it is not
 * freed under close_outbound (the embedded cases above run inside an event and cannot reach
 * this). */
typedef struct task_end_s {
    eddy_channel_t *ch;
    ender_t e;
    eddy_promise_t *cn;
    eddy_promise_t *p[3];
    size_t total;
    _Atomic int done;
} task_end_t;

static void close_outbound_after_queued_writes(void *arg)
{
    task_end_t *t = arg;
    eddy_channel_t *ch = t->ch;
    assert_int_equal(
        eddy_pipeline_add_last(eddy_channel_pipeline(ch), "ender", &ender_ops, &t->e, NULL), 0);
    t->total = write_abc_past_the_mark(ch, t->p);
    t->cn = eddy_promise_new(eddy_channel_loop(ch));
    eddy_tls_handler_close_outbound(eddy_tls_handler_of(ch), t->cn);
    atomic_store(&t->done, 1);
}

static void end_tls_from_a_task(end_how_t how)
{
    server_t srv = {0};
    server_start(&srv, server_context("server.pem", "server.key"));
    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context("ca.pem");
    /* TLS 1.2: no session tickets after the handshake. One arriving after our close would
     * meet a reset, which drops what the kernel still held of A, B and C (TCP, not eddy). */
    assert_int_equal(eddy_tls_context_versions(cc, EDDY_TLS_1_2, EDDY_TLS_1_2), 0);
    client_t c = {.tls = cc, .opts.server_name = "localhost"};
    eddy_loop_t *loop = eddy_loop_group_next(g);
    assert_int_equal(client_connect(&c, loop, &srv.addr), 0);
    task_end_t t = {.ch = c.ch, .e.how = how};
    assert_int_equal(eddy_loop_execute(loop, close_outbound_after_queued_writes, &t), 0);
    WAIT_FOR(atomic_load(&t.done) == 1);
    assert_int_equal(t.e.ended, 1);
    assert_int_equal(eddy_future_await(t.cn, DEADLINE_MS), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(eddy_future_await(t.p[i], DEADLINE_MS), 0);
    }
    if (how == END_REMOVE) {
        /* The SSL went with the handler: C and close_notify never went out, and say so. */
        assert_int_equal(eddy_future_error(t.p[2]), EDDY_ECLOSED);
        assert_int_equal(eddy_future_error(t.cn), EDDY_ECLOSED);
        assert_null(eddy_tls_handler_of(c.ch));
    } else {
        /* The close waited for the sealing: A, B and C went, then the channel closed. The
         * close_notify asked for after it finds the channel closing. */
        for (int i = 0; i < 3; i++) {
            assert_int_equal(eddy_future_error(t.p[i]), 0);
        }
        assert_int_equal(eddy_future_await(eddy_channel_close_future(c.ch), DEADLINE_MS), 0);
        WAIT_FOR(atomic_load(&srv.side.received) == t.total);
    }
    for (int i = 0; i < 3; i++) {
        eddy_future_release(t.p[i]);
    }
    eddy_future_release(t.cn);
    client_close(&c);
    eddy_tls_context_release(cc);
    clients_free(g);
    server_stop(&srv);
}

static void test_tls_removal_mid_seal_of_close_outbound_from_a_task(void **state)
{
    (void)state;
    end_tls_from_a_task(END_REMOVE);
}

static void test_tls_close_mid_seal_of_close_outbound_from_a_task(void **state)
{
    (void)state;
    end_tls_from_a_task(END_CLOSE);
}

/* A peer that drops the connection without close_notify: a truncation error, not an end. */
static void test_tls_close_without_close_notify_is_truncation(void **state)
{
    (void)state;
    server_t srv = {.side.truncate = true};
    server_start(&srv, server_context("server.pem", "server.key"));
    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context("ca.pem");
    client_t c = {.tls = cc, .opts.server_name = "localhost"};
    assert_int_equal(client_connect(&c, eddy_loop_group_next(g), &srv.addr), 0);
    send_text(&c, "bye?");
    assert_int_equal(eddy_future_await(eddy_channel_close_future(c.ch), DEADLINE_MS), 0);
    WAIT_FOR(atomic_load(&c.side.errors) == 1);
    assert_int_equal(atomic_load(&c.side.last_error), EDDY_ECONNABORTED);
    assert_int_equal(atomic_load(&c.side.close_notify), 0);
    client_close(&c);
    eddy_tls_context_release(cc);
    clients_free(g);
    server_stop(&srv);
}

/* A write that fails inside the flush of a handshake flight (the peer reset: the socket
 * closes the channel there) frees the SSL under the handshake step, which must not use it
 * after. The killer, nearest the head, plays the socket whose write fails. */
typedef struct killer_s {
    bool armed;
} killer_t;

static void kill_on_flush(eddy_ctx_t *ctx)
{
    killer_t *k = eddy_ctx_state(ctx);
    if (k->armed) {
        eddy_ctx_close(ctx, NULL); /* as a write meeting ECONNRESET closes the channel */
        return;
    }
    eddy_ctx_flush(ctx);
}

static const eddy_handler_ops_t killer_ops = {
    .name = "killer",
    .flush = kill_on_flush,
};

/* What from flushed, into to. */
static void carry(eddy_channel_t *from, eddy_channel_t *to)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(from)) != NULL) {
        eddy_embedded_write_inbound(to, m);
    }
}

/* The server's write fails after flights round trips: 0, its first flight (the handshake
 * goes on); 1, the flight after the client's Finished (the handshake is complete). */
static void server_write_fails_in_handshake(int flights)
{
    pair_t pr = pair_new(false, NULL, NULL);
    killer_t k = {.armed = false};
    assert_int_equal(eddy_pipeline_add_first(eddy_channel_pipeline(pr.srv), "killer",
                                             &killer_ops, &k, NULL),
                     0);
    for (int i = 0; i < flights; i++) {
        carry(pr.cli, pr.srv);
        carry(pr.srv, pr.cli);
    }
    k.armed = true;
    carry(pr.cli, pr.srv);
    assert_false(eddy_channel_is_active(pr.srv));
    pair_free(&pr);
}

static void test_tls_write_failure_in_the_first_flight(void **state)
{
    (void)state;
    server_write_fails_in_handshake(0);
}

static void test_tls_write_failure_in_the_last_flight(void **state)
{
    (void)state;
    server_write_fails_in_handshake(1);
}

/* The peer's last data and its close_notify in one read: the answers written to that data
 * are flushed (the read gets its read_complete first) before our close_notify and close, as
 * data and a FIN in one read are answered on a plain channel. */
static void test_tls_close_notify_after_data_in_one_read_flushes_answers(void **state)
{
    (void)state;
    side_t side = {.echo = true};
    pair_t pr = pair_new(true, NULL, NULL);
    assert_int_equal(
        eddy_pipeline_add_last(eddy_channel_pipeline(pr.srv), "app", &app_ops, &side, NULL), 0);
    pump(pr.cli, pr.srv);
    assert_true(eddy_tls_handler_is_handshake_done(eddy_tls_handler_of(pr.srv)));
    eddy_embedded_write_outbound(pr.cli, eddy_buf_msg(eddy_buf_from_str("last words")));
    eddy_tls_handler_close_outbound(eddy_tls_handler_of(pr.cli), NULL);
    /* Both records in one buffer, as one read from the socket. */
    eddy_buf_t *all = eddy_buf_new(4096);
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(pr.cli)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        assert_true(eddy_buf_readable(b) <= eddy_buf_writable(all));
        memcpy(eddy_buf_write_ptr(all), eddy_buf_read_ptr(b), eddy_buf_readable(b));
        eddy_buf_produce(all, eddy_buf_readable(b));
        eddy_msg_release(m);
    }
    eddy_embedded_write_inbound(pr.srv, eddy_buf_msg(all));
    assert_int_equal(atomic_load(&side.close_notify), 1);
    assert_int_equal(atomic_load(&side.received), 10);
    pump(pr.cli, pr.srv);
    assert_int_equal(drain_inbound(pr.cli), 10);
    pair_free(&pr);
}

/* ---------------------------------------------------------------------------------------
 * The openssl tool as the peer
 */

typedef struct child_s {
    pid_t pid;
    int in, out; /* its stdin (we write), its stdout and stderr (we read) */
} child_t;

static void child_start(child_t *c, const char *const argv[])
{
    int in[2], out[2];
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(out[1], 2);
        char *args[32]; /* exec wants them writable (-Wwrite-strings): copies */
        size_t n = 0;
        for (; argv[n] != NULL && n < 31; n++) {
            args[n] = strdup(argv[n]);
        }
        args[n] = NULL;
        execvp(args[0], args);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->in = in[1];
    c->out = out[0];
}

/* Read c's output until it contains needle (true) or ms pass or it ends (false). */
static bool child_expect(child_t *c, const char *needle, int64_t ms)
{
    char buf[8192];
    size_t len = 0;
    int64_t until = now_ms() + ms;
    while (now_ms() < until && len < sizeof(buf) - 1) {
        struct pollfd pfd = {.fd = c->out, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0) {
            continue;
        }
        ssize_t n = read(c->out, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0) {
            break;
        }
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, needle) != NULL) {
            return true;
        }
    }
    buf[len] = '\0';
    print_message("openssl said: %s\n", buf);
    return false;
}

/* Wait for c to exit (up to ms), then kill it regardless; its exit status or -1. */
static int child_finish(child_t *c, int64_t ms)
{
    int status = -1;
    int64_t until = now_ms() + ms;
    while (waitpid(c->pid, &status, WNOHANG) == 0) {
        if (now_ms() >= until) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            status = -1;
            break;
        }
        usleep(5000);
    }
    if (c->in >= 0) {
        close(c->in);
    }
    close(c->out);
    return status;
}

static void test_tls_openssl_s_client_to_eddy_server(void **state)
{
    (void)state;
    server_t srv = {.side.echo = true};
    server_start(&srv, server_context("server.pem", "server.key"));
    char connect[64];
    snprintf(connect, sizeof(connect), "127.0.0.1:%u", eddy_addr_port(&srv.addr));
    const char *const argv[] = {"openssl",
                                "s_client",
                                "-connect",
                                connect,
                                "-CAfile",
                                cert("ca.pem"),
                                "-verify_return_error",
                                "-verify_hostname",
                                "localhost",
                                "-quiet",
                                "-no_ign_eof",
                                NULL};
    child_t c;
    child_start(&c, argv);
    const char line[] = "ping from openssl\n";
    assert_int_equal(write(c.in, line, sizeof(line) - 1), (ssize_t)sizeof(line) - 1);
    assert_true(child_expect(&c, "ping from openssl", DEADLINE_MS));
    close(c.in); /* s_client ends on EOF, with close_notify */
    c.in = -1;
    assert_int_equal(child_finish(&c, DEADLINE_MS), 0);
    WAIT_FOR(atomic_load(&srv.side.inactive) == 1);
    assert_int_equal(atomic_load(&srv.side.hs_ok), 1);
    assert_int_equal(atomic_load(&srv.side.close_notify), 1);
    assert_int_equal(atomic_load(&srv.side.errors), 0);
    server_stop(&srv);
}

/* A free port: bound to 0 and let go (s_server binds it a moment later). */
static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    assert_int_equal(bind(fd, &a.u.sa, a.len), 0);
    assert_int_equal(getsockname(fd, &a.u.sa, &a.len), 0);
    close(fd);
    return eddy_addr_port(&a);
}

/* Start `openssl s_server -rev` for one connection on a free port; returns the port. The port
 * is free when chosen but may be taken before s_server binds it (tests run side by side):
 * then s_server exits, and another port is tried. */
static uint16_t s_server_start(child_t *child)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        uint16_t port = free_port();
        char accept[64];
        snprintf(accept, sizeof(accept), "127.0.0.1:%u", port);
        const char *const argv[] = {
            "openssl", "s_server",         "-accept",  accept, "-cert", cert("server.pem"),
            "-key",    cert("server.key"), "-naccept", "1",    "-rev",  NULL};
        child_start(child, argv);
        if (child_expect(child, "ACCEPT", DEADLINE_MS)) {
            return port;
        }
        child_finish(child, DEADLINE_MS);
    }
    fail_msg("openssl s_server did not start on any of five ports");
    return 0;
}

static void test_tls_eddy_client_to_openssl_s_server(void **state)
{
    (void)state;
    child_t child;
    uint16_t port = s_server_start(&child);

    eddy_loop_group_t *g = clients_new();
    eddy_tls_context_t *cc = client_context("ca.pem");
    client_t c = {.tls = cc, .opts.server_name = "localhost"};
    eddy_addr_t addr;
    eddy_addr_ip(&addr, "127.0.0.1", port);
    assert_int_equal(client_connect(&c, eddy_loop_group_next(g), &addr), 0);
    send_text(&c, "olleh\n");
    WAIT_FOR(atomic_load(&c.side.received) >= 6);
    assert_non_null(strstr(c.side.text, "hello"));
    client_close(&c);
    child_finish(&child, 2000);
    eddy_tls_context_release(cc);
    clients_free(g);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_eddy_client_echoes_through_eddy_server),
        cmocka_unit_test(test_tls_handshake_on_demand),
        cmocka_unit_test(test_tls_small_writes_of_a_flush_share_a_record),
        cmocka_unit_test(test_tls_sni_chooses_context_with_self_signed_certificates),
        cmocka_unit_test(test_tls_server_requires_client_certificate),
        cmocka_unit_test(test_tls_client_refuses_unknown_ca),
        cmocka_unit_test(test_tls_client_refuses_wrong_hostname),
        cmocka_unit_test(test_tls_client_refuses_expired_certificate),
        cmocka_unit_test(test_tls_server_refuses_plaintext_client),
        cmocka_unit_test(test_tls_server_handshake_times_out),
        cmocka_unit_test(test_tls_client_handshake_times_out),
        cmocka_unit_test(test_tls_close_during_handshake_fails_future),
        cmocka_unit_test(test_tls_queued_plaintext_counts_against_water_marks),
        cmocka_unit_test(test_tls_big_bios_are_trimmed_when_idle),
        cmocka_unit_test(test_tls_queued_plaintext_leaves_the_count_once_at_close),
        cmocka_unit_test(test_tls_flush_from_a_writability_event_keeps_order),
        cmocka_unit_test(test_tls_error_text_stays_valid),
        cmocka_unit_test(test_tls_close_from_an_event_mid_seal),
        cmocka_unit_test(test_tls_removal_from_an_event_mid_seal),
        cmocka_unit_test(test_tls_close_outbound_from_an_event_mid_seal),
        cmocka_unit_test(test_tls_close_fires_no_writability_event),
        cmocka_unit_test(test_tls_streams_16_mib_each_way),
        cmocka_unit_test(test_tls_half_close_with_close_notify),
        cmocka_unit_test(test_tls_removal_mid_seal_of_close_outbound_from_a_task),
        cmocka_unit_test(test_tls_close_mid_seal_of_close_outbound_from_a_task),
        cmocka_unit_test(test_tls_close_without_close_notify_is_truncation),
        cmocka_unit_test(test_tls_write_failure_in_the_first_flight),
        cmocka_unit_test(test_tls_write_failure_in_the_last_flight),
        cmocka_unit_test(test_tls_close_notify_after_data_in_one_read_flushes_answers),
        cmocka_unit_test(test_tls_openssl_s_client_to_eddy_server),
        cmocka_unit_test(test_tls_eddy_client_to_openssl_s_server),
    };
    return cmocka_run_group_tests_name("pipeline.tls", tests, NULL, NULL);
}
