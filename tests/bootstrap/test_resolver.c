/*
 * The resolver (bootstrap/resolver.c and its backend) and Happy Eyeballs connects
 * (bootstrap/bootstrap.c) against a DNS responder inside the test: a thread answering on a
 * UDP and a TCP socket on 127.0.0.1 from a zone of eddy's DNS library (dns.h), counting the
 * queries it gets, and able to stay silent or answer late. Loops run on their own threads;
 * lookups come from the test's thread and from others. Bounded in time; everything made is
 * freed. Built with EDDY_RESOLVER=getaddrinfo, only what needs no server of ours runs (the
 * others skip).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/eddy.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEADLINE_MS 10000

#include "support/wait_util.h"

static const char zone_text[] =
    "$ORIGIN example.test.\n"
    "$TTL 300\n"
    "@ IN SOA ns.example.test. admin.example.test. 1 3600 600 86400 60\n"
    "www IN A 127.0.0.1\n"
    "www IN AAAA ::1\n"
    "v4only IN A 127.0.0.2\n"
    "short 1 IN A 127.0.0.3\n"
    "he IN A 127.0.0.1\n"
    "he IN AAAA ::1\n"
    "hole IN A 127.0.0.1\n"
    "hole IN AAAA 100::1\n" /* the discard prefix (RFC 6666): nothing answers */
    "big IN A 10.0.0.1\nbig IN A 10.0.0.2\nbig IN A 10.0.0.3\nbig IN A 10.0.0.4\n"
    "big IN A 10.0.0.5\nbig IN A 10.0.0.6\nbig IN A 10.0.0.7\nbig IN A 10.0.0.8\n"
    "big IN A 10.0.0.9\nbig IN A 10.0.0.10\nbig IN A 10.0.0.11\nbig IN A 10.0.0.12\n"
    "big IN A 10.0.0.13\nbig IN A 10.0.0.14\nbig IN A 10.0.0.15\nbig IN A 10.0.0.16\n"
    "big IN A 10.0.0.17\nbig IN A 10.0.0.18\nbig IN A 10.0.0.19\nbig IN A 10.0.0.20\n"
    "big IN A 10.0.0.21\nbig IN A 10.0.0.22\nbig IN A 10.0.0.23\nbig IN A 10.0.0.24\n"
    "big IN A 10.0.0.25\nbig IN A 10.0.0.26\nbig IN A 10.0.0.27\nbig IN A 10.0.0.28\n"
    "big IN A 10.0.0.29\nbig IN A 10.0.0.30\nbig IN A 10.0.0.31\nbig IN A 10.0.0.32\n"
    "big IN A 10.0.0.33\nbig IN A 10.0.0.34\nbig IN A 10.0.0.35\nbig IN A 10.0.0.36\n";

/* ---------------------------------------------------------------------------------------
 * The responder
 */

typedef struct responder_s {
    eddy_dns_zone_t *zone;
    int udp, tcp;
    uint16_t port;
    _Atomic bool silent; /* never answer */
    int delay_ms;     /* answer this late */
    _Atomic int udp_queries, tcp_queries;
    _Atomic bool stop;
    pthread_t thread;
} responder_t;

static void answer_tcp(responder_t *r, int fd)
{
    uint8_t in[2 + 512], out[4096];
    /* One query per connection is all c-ares sends here; a short read ends it. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    size_t got = 0;
    while (got < 2 && poll(&p, 1, 1000) == 1) {
        ssize_t n = read(fd, in + got, sizeof(in) - got);
        if (n <= 0) {
            return;
        }
        got += (size_t)n;
    }
    size_t len = got >= 2 ? ((size_t)in[0] << 8 | in[1]) : 0;
    while (got >= 2 && got < len + 2 && len + 2 <= sizeof(in) && poll(&p, 1, 1000) == 1) {
        ssize_t n = read(fd, in + got, sizeof(in) - got);
        if (n <= 0) {
            return;
        }
        got += (size_t)n;
    }
    if (got < 2 || got < len + 2) {
        return;
    }
    atomic_fetch_add(&r->tcp_queries, 1);
    size_t n;
    if (eddy_dns_answer(r->zone, in + 2, len, EDDY_DNS_TCP_MAX, out + 2, sizeof(out) - 2, &n) ==
        0) {
        out[0] = (uint8_t)(n >> 8);
        out[1] = (uint8_t)n;
        ssize_t w = write(fd, out, n + 2);
        (void)w;
    }
}

static void *responder_run(void *arg)
{
    responder_t *r = arg;
    while (!atomic_load(&r->stop)) {
        struct pollfd p[2] = {{.fd = r->udp, .events = POLLIN}, {.fd = r->tcp, .events = POLLIN}};
        if (poll(p, 2, 20) <= 0) {
            continue;
        }
        if (p[0].revents & POLLIN) {
            uint8_t in[512], out[512];
            struct sockaddr_storage from;
            socklen_t fromlen = sizeof(from);
            ssize_t n = recvfrom(r->udp, in, sizeof(in), 0, (struct sockaddr *)&from, &fromlen);
            if (n > 0) {
                atomic_fetch_add(&r->udp_queries, 1);
                size_t len;
                if (r->delay_ms > 0) {
                    usleep((useconds_t)r->delay_ms * 1000);
                }
                if (!atomic_load(&r->silent) && eddy_dns_answer(r->zone, in, (size_t)n, EDDY_DNS_UDP_MAX, out,
                                                  sizeof(out), &len) == 0) {
                    sendto(r->udp, out, len, 0, (struct sockaddr *)&from, fromlen);
                }
            }
        }
        if (p[1].revents & POLLIN) {
            int fd = accept(r->tcp, NULL, NULL);
            if (fd >= 0) {
                if (!atomic_load(&r->silent)) {
                    answer_tcp(r, fd);
                }
                close(fd);
            }
        }
    }
    return NULL;
}

static int bind_loopback(int type, uint16_t port)
{
    int fd = socket(AF_INET, type, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static uint16_t local_port(int fd)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    return ntohs(a.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port
                                         : ((struct sockaddr_in *)&a)->sin_port);
}

/* A responder on 127.0.0.1 (UDP and TCP on one ephemeral port), and the resolvers made from
 * now on asking it alone, briefly, so that a silent one costs little. */
static responder_t *responder_start(bool silent, int delay_ms)
{
    if (strcmp(eddy_resolver_backend(), "c-ares") != 0) {
        skip(); /* getaddrinfo asks resolv.conf's servers: ours cannot be named */
    }
    responder_t *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    char err[128];
    assert_int_equal(
        eddy_dns_zone_parse(&r->zone, zone_text, strlen(zone_text), NULL, err, sizeof(err)), 0);
    atomic_init(&r->silent, silent);
    r->delay_ms = delay_ms;
    r->tcp = -1;
    for (int tries = 0; r->tcp < 0 && tries < 20; tries++) {
        r->udp = bind_loopback(SOCK_DGRAM, 0);
        assert_true(r->udp >= 0);
        r->port = local_port(r->udp);
        r->tcp = bind_loopback(SOCK_STREAM, r->port);
        if (r->tcp < 0) {
            close(r->udp); /* that port is taken on TCP: another pair */
        }
    }
    assert_true(r->tcp >= 0);
    assert_int_equal(listen(r->tcp, 16), 0);
    assert_int_equal(pthread_create(&r->thread, NULL, responder_run, r), 0);
    char servers[64];
    snprintf(servers, sizeof(servers), "127.0.0.1:%u", (unsigned)r->port);
    eddy_resolver_config_t cfg = {.servers = servers, .attempt_timeout_ms = 300, .tries = 2};
    assert_int_equal(eddy_resolver_configure(&cfg), 0);
    return r;
}

static void responder_stop(responder_t *r)
{
    atomic_store(&r->stop, true);
    pthread_join(r->thread, NULL);
    close(r->udp);
    close(r->tcp);
    eddy_dns_zone_free(r->zone);
    free(r);
    assert_int_equal(eddy_resolver_configure(NULL), 0);
}

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

static eddy_loop_group_t *group_new(size_t n)
{
    eddy_loop_group_t *g = eddy_loop_group_new(n, NULL);
    assert_non_null(g);
    return g;
}

static void group_free(eddy_loop_group_t *g)
{
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

/* f's error once it completed (f kept). */
static int await(eddy_future_t *f)
{
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    return eddy_future_error(f);
}

static eddy_future_t *lookup(eddy_loop_t *loop, const char *host, eddy_resolve_family_t family)
{
    eddy_resolve_options_t o = {.family = family};
    return eddy_resolve(loop, host, 80, &o);
}

static bool list_has(const eddy_addr_list_t *l, const char *ip)
{
    for (size_t i = 0; i < l->count; i++) {
        char text[80], want[80];
        eddy_addr_t a;
        assert_int_equal(eddy_addr_ip(&a, ip, eddy_addr_port(&l->addrs[i])), 0);
        if (strcmp(eddy_addr_format(&l->addrs[i], text, sizeof(text)),
                   eddy_addr_format(&a, want, sizeof(want))) == 0) {
            return true;
        }
    }
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Lookups
 */

static void test_resolve_a_aaaa_and_both(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_loop_t *loop = eddy_loop_group_loop(g, 0);

    eddy_future_t *f = lookup(loop, "www.example.test", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), 0);
    const eddy_addr_list_t *l = eddy_resolve_result(f);
    assert_int_equal(l->count, 1);
    assert_int_equal(l->addrs[0].u.sa.sa_family, AF_INET);
    assert_int_equal(eddy_addr_port(&l->addrs[0]), 80);
    assert_true(list_has(l, "127.0.0.1"));
    eddy_future_release(f);

    f = lookup(loop, "www.example.test", EDDY_RESOLVE_V6);
    assert_int_equal(await(f), 0);
    l = eddy_resolve_result(f);
    assert_int_equal(l->count, 1);
    assert_true(list_has(l, "::1"));
    eddy_future_release(f);

    f = lookup(loop, "WWW.Example.Test", EDDY_RESOLVE_ANY);
    assert_int_equal(await(f), 0);
    l = eddy_resolve_result(f);
    assert_int_equal(l->count, 2);
    assert_true(list_has(l, "::1"));
    assert_true(list_has(l, "127.0.0.1"));
    eddy_future_release(f);

    /* A name with addresses of one family only: the other is "no such address". */
    f = lookup(loop, "v4only.example.test", EDDY_RESOLVE_V6);
    assert_int_equal(await(f), EDDY_ENOENT);
    eddy_future_release(f);
    f = lookup(loop, "v4only.example.test", EDDY_RESOLVE_ANY);
    assert_int_equal(await(f), 0);
    assert_int_equal(eddy_resolve_result(f)->count, 1);
    eddy_future_release(f);

    group_free(g);
    responder_stop(r);
}

static void test_resolve_numeric_host_needs_no_query(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_loop_t *loop = eddy_loop_group_loop(g, 0);
    eddy_future_t *f = lookup(loop, "::1", EDDY_RESOLVE_ANY);
    assert_true(eddy_future_is_done(f));
    assert_int_equal(eddy_future_error(f), 0);
    assert_true(list_has(eddy_resolve_result(f), "::1"));
    eddy_future_release(f);
    f = lookup(loop, "127.0.0.1", EDDY_RESOLVE_V6);
    assert_int_equal(await(f), EDDY_ENOENT);
    eddy_future_release(f);
    f = lookup(loop, "", EDDY_RESOLVE_ANY);
    assert_int_equal(await(f), EDDY_EINVAL);
    eddy_future_release(f);
    assert_int_equal(atomic_load(&r->udp_queries), 0);
    group_free(g);
    responder_stop(r);
}

static void test_resolve_nxdomain_fails_with_enoent_and_is_cached(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_loop_t *loop = eddy_loop_group_loop(g, 0);
    /* The final dot: no search domain of resolv.conf is tried after the NXDOMAIN. */
    eddy_future_t *f = lookup(loop, "nope.example.test.", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), EDDY_ENOENT);
    eddy_future_release(f);
    int asked = atomic_load(&r->udp_queries);
    assert_true(asked >= 1);
    f = lookup(loop, "nope.example.test.", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), EDDY_ENOENT);
    eddy_future_release(f);
    assert_int_equal(atomic_load(&r->udp_queries), asked); /* the negative answer was kept */
    group_free(g);
    responder_stop(r);
}

static void test_resolve_times_out_when_nobody_answers(void **state)
{
    (void)state;
    responder_t *r = responder_start(true, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_resolve_options_t o = {.timeout_ms = 100};
    eddy_future_t *f = eddy_resolve(eddy_loop_group_loop(g, 0), "www.example.test", 80, &o);
    assert_int_equal(await(f), EDDY_ETIMEDOUT);
    eddy_future_release(f);
    assert_true(atomic_load(&r->udp_queries) >= 1);
    /* Without a timeout of its own, c-ares's tries (2 x 300 ms here) end it. */
    o.timeout_ms = -1;
    f = eddy_resolve(eddy_loop_group_loop(g, 0), "www.example.test", 80, &o);
    assert_int_equal(await(f), EDDY_ETIMEDOUT);
    eddy_future_release(f);
    group_free(g);
    responder_stop(r);
}

static void test_resolve_cancel_fails_with_ecanceled(void **state)
{
    (void)state;
    responder_t *r = responder_start(true, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_loop_t *loop = eddy_loop_group_loop(g, 0);
    eddy_future_t *f = lookup(loop, "www.example.test", EDDY_RESOLVE_ANY);
    WAIT_FOR(atomic_load(&r->udp_queries) >= 1);
    assert_int_equal(eddy_future_cancel(f), 0);
    assert_int_equal(await(f), EDDY_ECANCELED);
    eddy_future_release(f);
    /* The loop goes on resolving once the responder answers again. */
    atomic_store(&r->silent, false);
    f = lookup(loop, "www.example.test", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), 0);
    eddy_future_release(f);
    group_free(g);
    responder_stop(r);
}

static void test_resolve_cache_honours_ttl(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_loop_t *loop = eddy_loop_group_loop(g, 0);
    int64_t t0 = now_ms();
    eddy_future_t *f = lookup(loop, "short.example.test", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), 0);
    assert_true(list_has(eddy_resolve_result(f), "127.0.0.3"));
    eddy_future_release(f);
    assert_int_equal(atomic_load(&r->udp_queries), 1);

    f = lookup(loop, "short.example.test", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), 0);
    eddy_future_release(f);
    int asked = atomic_load(&r->udp_queries);
    /* Within its TTL of 1 s the answer comes from the cache (a machine slow enough to take
     * longer than that between the two lookups asked again, which is right too). */
    if (now_ms() - t0 < 900) {
        assert_int_equal(asked, 1);
    }
    /* Past the TTL the servers are asked again. */
    usleep(1200 * 1000);
    f = lookup(loop, "short.example.test", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), 0);
    eddy_future_release(f);
    assert_int_equal(atomic_load(&r->udp_queries), asked + 1);

    /* no_cache asks even when the cache has it; a long TTL is kept. */
    eddy_resolve_options_t o = {.family = EDDY_RESOLVE_V4, .no_cache = true};
    f = eddy_resolve(loop, "www.example.test", 80, &o);
    assert_int_equal(await(f), 0);
    eddy_future_release(f);
    f = eddy_resolve(loop, "www.example.test", 80, &o);
    assert_int_equal(await(f), 0);
    eddy_future_release(f);
    assert_int_equal(atomic_load(&r->udp_queries), asked + 3);
    f = lookup(loop, "www.example.test", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), 0);
    eddy_future_release(f);
    assert_int_equal(atomic_load(&r->udp_queries), asked + 3);
    group_free(g);
    responder_stop(r);
}

static void test_resolve_lookups_of_one_name_share_a_query(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 200);
    eddy_loop_group_t *g = group_new(1);
    eddy_loop_t *loop = eddy_loop_group_loop(g, 0);
    eddy_future_t *f[8];
    for (size_t i = 0; i < 8; i++) {
        f[i] = lookup(loop, "www.example.test", EDDY_RESOLVE_V4);
    }
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(await(f[i]), 0);
        eddy_future_release(f[i]);
    }
    /* The first query is answered 200 ms late: every lookup made meanwhile waited for it. */
    assert_int_equal(atomic_load(&r->udp_queries), 1);
    group_free(g);
    responder_stop(r);
}

/* Listeners that look up again when their answer comes: the next query starts from inside
 * the backend's answer handling. */
typedef struct chain_s {
    eddy_loop_t *loop;
    int left, ok;
    eddy_promise_t *done;
} chain_t;

static void chain_next(eddy_future_t *f, void *arg)
{
    chain_t *c = arg;
    if (eddy_future_error(f) == 0 && list_has(eddy_resolve_result(f), "127.0.0.1")) {
        c->ok++;
    }
    if (--c->left == 0) {
        eddy_promise_succeed(c->done, NULL);
        return;
    }
    eddy_resolve_options_t o = {.family = EDDY_RESOLVE_V4, .no_cache = true};
    eddy_future_t *g = eddy_resolve(c->loop, "he.example.test", 80, &o);
    if (eddy_future_add_listener(g, chain_next, c) != 0) {
        eddy_promise_fail(c->done, EDDY_ENOMEM); /* no cmocka assert off the test's thread */
    }
    eddy_future_release(g);
}

static void test_resolve_listeners_look_up_again(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 0);
    eddy_loop_group_t *g = group_new(1);
    chain_t c = {.loop = eddy_loop_group_loop(g, 0), .left = 20, .done = eddy_promise_new(NULL)};
    eddy_future_t *f = lookup(c.loop, "he.example.test", EDDY_RESOLVE_V4);
    assert_int_equal(eddy_future_add_listener(f, chain_next, &c), 0);
    assert_int_equal(await(c.done), 0);
    eddy_future_release(f);
    eddy_future_release(c.done);
    assert_int_equal(c.ok, 20);
    assert_int_equal(atomic_load(&r->udp_queries), 20);
    group_free(g);
    responder_stop(r);
}

typedef struct hammer_s {
    eddy_loop_group_t *g;
    _Atomic int ok;
} hammer_t;

static void *hammer(void *arg)
{
    hammer_t *h = arg;
    static const char *const names[] = {"www.example.test", "he.example.test", "v4only.example.test"};
    for (int i = 0; i < 60; i++) {
        eddy_loop_t *loop = eddy_loop_group_next(h->g);
        eddy_future_t *f = eddy_resolve(loop, names[i % 3], 443, NULL);
        if (f != NULL && eddy_future_await(f, DEADLINE_MS) == 0 && eddy_future_error(f) == 0 &&
            eddy_resolve_result(f)->count >= 1 &&
            eddy_addr_port(&eddy_resolve_result(f)->addrs[0]) == 443) {
            atomic_fetch_add(&h->ok, 1);
        }
        eddy_future_release(f);
    }
    return NULL;
}

static void test_resolve_from_other_threads(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 0);
    hammer_t h = {.g = group_new(2)};
    pthread_t t[4];
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &h), 0);
    }
    for (size_t i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    assert_int_equal(atomic_load(&h.ok), 4 * 60);
    /* Each loop asked once per name and family at most: the rest came from its cache (or
     * joined its query). */
    assert_true(atomic_load(&r->udp_queries) <= 2 * (2 + 2 + 2));
    group_free(h.g);
    responder_stop(r);
}

static void test_resolve_loop_shutdown_fails_lookups_in_flight(void **state)
{
    (void)state;
    responder_t *r = responder_start(true, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_loop_t *loop = eddy_loop_group_loop(g, 0);
    eddy_future_t *f[4];
    f[0] = lookup(loop, "www.example.test", EDDY_RESOLVE_ANY);
    f[1] = lookup(loop, "www.example.test", EDDY_RESOLVE_ANY);
    f[2] = lookup(loop, "he.example.test", EDDY_RESOLVE_V4);
    f[3] = lookup(loop, "big.example.test", EDDY_RESOLVE_V6);
    WAIT_FOR(atomic_load(&r->udp_queries) >= 3);
    group_free(g);
    for (size_t i = 0; i < 4; i++) {
        int err = await(f[i]);
        assert_true(err == EDDY_ESHUTDOWN || err == EDDY_ECANCELED);
        eddy_future_release(f[i]);
    }
    responder_stop(r);
}

static void test_resolve_truncated_answer_is_asked_again_over_tcp(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_future_t *f = lookup(eddy_loop_group_loop(g, 0), "big.example.test", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), 0);
    assert_int_equal(eddy_resolve_result(f)->count, 36);
    assert_true(list_has(eddy_resolve_result(f), "10.0.0.36"));
    eddy_future_release(f);
    assert_int_equal(atomic_load(&r->tcp_queries), 1);
    group_free(g);
    responder_stop(r);
}

static void test_resolver_configure_refuses_bad_servers(void **state)
{
    (void)state;
    eddy_resolver_config_t cfg = {.servers = "not an address"};
    bool cares = strcmp(eddy_resolver_backend(), "c-ares") == 0;
    assert_int_equal(eddy_resolver_configure(&cfg), cares ? EDDY_EINVAL : EDDY_ENOTSUP);
    assert_int_equal(eddy_resolver_configure(NULL), 0);
}

/* /etc/hosts, with either backend and no server of ours. */
static void test_resolve_localhost_from_the_hosts_file(void **state)
{
    (void)state;
    assert_int_equal(eddy_resolver_configure(NULL), 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_future_t *f = lookup(eddy_loop_group_loop(g, 0), "localhost", EDDY_RESOLVE_V4);
    assert_int_equal(await(f), 0);
    assert_true(list_has(eddy_resolve_result(f), "127.0.0.1"));
    eddy_future_release(f);
    group_free(g);
}

/* ---------------------------------------------------------------------------------------
 * Happy Eyeballs, through eddy_bootstrap_connect
 */

static int listen_on(int family, uint16_t port)
{
    int fd = socket(family, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (family == AF_INET6) {
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
        a.sin6_addr = in6addr_loopback;
        rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
    }
    if (rc != 0 || listen(fd, 16) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The family of the address eddy_bootstrap_connect(host:port) connected to. */
static int connect_family(eddy_loop_group_t *g, const char *host, uint16_t port)
{
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    assert_non_null(b);
    assert_int_equal(eddy_bootstrap_group(b, g), 0);
    eddy_future_t *f = eddy_bootstrap_connect(b, host, port);
    int err = await(f);
    if (err != 0) {
        fprintf(stderr, "connect %s: %s\n", host, eddy_strerror(err));
    }
    assert_int_equal(err, 0);
    eddy_channel_t *ch = eddy_future_channel(f);
    int family = eddy_channel_remote_addr(ch)->u.sa.sa_family;
    /* Closed before the test closes its listener, which would reset the connection. */
    eddy_future_t *closed = eddy_channel_close_future(ch);
    eddy_channel_close(ch, NULL);
    assert_int_equal(eddy_future_await(closed, DEADLINE_MS), 0);
    eddy_future_release(f);
    eddy_bootstrap_free(b);
    return family;
}

/* name resolves to an IPv6 address that does not connect and to 127.0.0.1, which listens:
 * the connect ends on IPv4. */
static void assert_connects_over_v4(const char *name)
{
    responder_t *r = responder_start(false, 0);
    eddy_loop_group_t *g = group_new(1);
    int v4 = listen_on(AF_INET, 0);
    assert_true(v4 >= 0);
    assert_int_equal(connect_family(g, name, local_port(v4)), AF_INET);
    close(v4);
    group_free(g);
    responder_stop(r);
}

static void test_happy_eyeballs_falls_back_to_v4_when_v6_is_refused(void **state)
{
    (void)state;
    /* ::1 and 127.0.0.1; only the IPv4 one listens on the port. */
    assert_connects_over_v4("he.example.test");
}

static void test_happy_eyeballs_prefers_v6_when_both_listen(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 0);
    eddy_loop_group_t *g = group_new(1);
    int v6 = -1, v4 = -1;
    for (int tries = 0; v4 < 0 && tries < 20; tries++) {
        v6 = listen_on(AF_INET6, 0);
        if (v6 < 0) {
            group_free(g);
            responder_stop(r);
            skip(); /* no IPv6 loopback here */
        }
        v4 = listen_on(AF_INET, local_port(v6));
        if (v4 < 0) {
            close(v6);
        }
    }
    assert_true(v4 >= 0);
    assert_int_equal(connect_family(g, "he.example.test", local_port(v6)), AF_INET6);
    close(v4);
    close(v6);
    group_free(g);
    responder_stop(r);
}

static void test_happy_eyeballs_v4_wins_over_a_silent_v6(void **state)
{
    (void)state;
    /* 100::1 (discarded: the try never completes, or fails at once without an IPv6 route)
     * and 127.0.0.1: IPv4 starts after the attempt delay, and wins. The IPv6 try is closed,
     * not left to its connect timeout. */
    assert_connects_over_v4("hole.example.test");
}

static void test_connect_cancel_stops_the_lookup(void **state)
{
    (void)state;
    responder_t *r = responder_start(true, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    assert_int_equal(eddy_bootstrap_group(b, g), 0);
    eddy_future_t *f = eddy_bootstrap_connect(b, "www.example.test", 9);
    WAIT_FOR(atomic_load(&r->udp_queries) >= 1);
    assert_int_equal(eddy_future_cancel(f), 0);
    assert_int_equal(await(f), EDDY_ECANCELED);
    eddy_future_release(f);
    eddy_bootstrap_free(b);
    group_free(g);
    responder_stop(r);
}

static void test_connect_cancel_stops_every_try(void **state)
{
    (void)state;
    responder_t *r = responder_start(false, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    assert_int_equal(eddy_bootstrap_group(b, g), 0);
    /* 100::1 never answers: cancel while its try (and the delay timer) are under way. The
     * IPv4 port is nobody's (1 is tcpmux, unused here): refused, if it starts. */
    eddy_future_t *f = eddy_bootstrap_connect(b, "hole.example.test", 1);
    usleep(50 * 1000);
    eddy_future_cancel(f);
    int err = await(f);
    assert_true(err == EDDY_ECANCELED || err == EDDY_ECONNREFUSED);
    eddy_future_release(f);
    eddy_bootstrap_free(b);
    group_free(g);
    responder_stop(r);
}

/* ---------------------------------------------------------------------------------------
 * The example DNS server (examples/dns_server.c), when ctest says where it is
 */

static void test_resolve_against_eddy_dns_server(void **state)
{
    (void)state;
    const char *bin = getenv("EDDY_DNS_SERVER");
    if (bin == NULL || access(bin, X_OK) != 0 || strcmp(eddy_resolver_backend(), "c-ares") != 0) {
        skip();
    }
    char zone[] = "/tmp/eddy-resolver-zone-XXXXXX";
    int zfd = mkstemp(zone);
    assert_true(zfd >= 0);
    assert_int_equal(write(zfd, zone_text, strlen(zone_text)), (ssize_t)strlen(zone_text));
    close(zfd);
    int out[2];
    assert_int_equal(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    char a_bin[256], a_zone[] = "--zone", a_host[] = "--host", a_ip[] = "127.0.0.1",
                     a_port[] = "--port", a_zero[] = "0", a_threads[] = "--threads", a_one[] = "1";
    snprintf(a_bin, sizeof(a_bin), "%s", bin);
    char *argv[] = {a_bin, a_zone, zone, a_host, a_ip, a_port, a_zero, a_threads, a_one, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, bin, &fa, NULL, argv, NULL), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    /* "eddy-dns-server: serving example.test. (N records) on 127.0.0.1:PORT udp+tcp, ..." */
    char line[512] = {0};
    size_t got = 0;
    struct pollfd p = {.fd = out[0], .events = POLLIN};
    while (got < sizeof(line) - 1 && strchr(line, '\n') == NULL && poll(&p, 1, DEADLINE_MS) == 1) {
        ssize_t n = read(out[0], line + got, sizeof(line) - 1 - got);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    const char *at = strstr(line, " on 127.0.0.1:");
    unsigned port = 0;
    if (at == NULL || sscanf(at, " on 127.0.0.1:%u", &port) != 1) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        close(out[0]);
        unlink(zone);
        fail_msg("eddy-dns-server said: %s", line);
    }
    char servers[64];
    snprintf(servers, sizeof(servers), "127.0.0.1:%u", port);
    eddy_resolver_config_t cfg = {.servers = servers};
    assert_int_equal(eddy_resolver_configure(&cfg), 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_future_t *f = lookup(eddy_loop_group_loop(g, 0), "www.example.test", EDDY_RESOLVE_ANY);
    int err = await(f);
    bool both = err == 0 && list_has(eddy_resolve_result(f), "::1") &&
                list_has(eddy_resolve_result(f), "127.0.0.1");
    eddy_future_release(f);
    group_free(g);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    close(out[0]);
    unlink(zone);
    assert_int_equal(eddy_resolver_configure(NULL), 0);
    assert_int_equal(err, 0);
    assert_true(both);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve_a_aaaa_and_both),
        cmocka_unit_test(test_resolve_numeric_host_needs_no_query),
        cmocka_unit_test(test_resolve_nxdomain_fails_with_enoent_and_is_cached),
        cmocka_unit_test(test_resolve_times_out_when_nobody_answers),
        cmocka_unit_test(test_resolve_cancel_fails_with_ecanceled),
        cmocka_unit_test(test_resolve_cache_honours_ttl),
        cmocka_unit_test(test_resolve_lookups_of_one_name_share_a_query),
        cmocka_unit_test(test_resolve_listeners_look_up_again),
        cmocka_unit_test(test_resolve_from_other_threads),
        cmocka_unit_test(test_resolve_loop_shutdown_fails_lookups_in_flight),
        cmocka_unit_test(test_resolve_truncated_answer_is_asked_again_over_tcp),
        cmocka_unit_test(test_resolver_configure_refuses_bad_servers),
        cmocka_unit_test(test_resolve_localhost_from_the_hosts_file),
        cmocka_unit_test(test_happy_eyeballs_falls_back_to_v4_when_v6_is_refused),
        cmocka_unit_test(test_happy_eyeballs_prefers_v6_when_both_listen),
        cmocka_unit_test(test_happy_eyeballs_v4_wins_over_a_silent_v6),
        cmocka_unit_test(test_connect_cancel_stops_the_lookup),
        cmocka_unit_test(test_connect_cancel_stops_every_try),
        cmocka_unit_test(test_resolve_against_eddy_dns_server),
    };
    return cmocka_run_group_tests_name("bootstrap.resolver", tests, NULL, NULL);
}
