/*
 * eddy-grpc-client: gRPC's interop client on eddy's gRPC client, and a load generator.
 *
 *   eddy-grpc-client --server_host H --server_port P --test_case NAME[,NAME...|all]
 *                    [--use_tls [--use_test_ca --ca FILE] [--server_host_override NAME]]
 *   eddy-grpc-client --server_host H --server_port P --load [--mode unary|server_streaming|
 *                    ping_pong] [--size BYTES] [--connections N] [--streams M]
 *                    [--duration S] [--warmup S]
 *
 * Interop: each case of grpc/grpc doc/interop-test-descriptions.md named, against any
 * server of grpc.testing.TestService; "PASS <case>" or "FAIL <case>: why" each, exit 0 when
 * all passed. The cases read as sequences (send, wait for a message, cancel...) over a small
 * blocking layer (stream_*): the calls run on the client's loop, the case on main's thread.
 *
 * Load: M calls at a time on each of N connections, each started again when it ends, for S
 * seconds after a warm-up; one line of JSON: calls (or messages) per second, p50 and p99.
 */
#include "example_util.h"

#include "grpc/testing/empty.pb-c.h"
#include "grpc/testing/messages.pb-c.h"

#include <math.h>
#include <string.h>
#include <time.h>

#define SVC "/grpc.testing.TestService/"

static eddy_loop_t *loop;
static eddy_grpc_channel_t *channel;

/* ---------------------------------------------------------------------------------------
 * Running on the loop and waiting for it
 */

typedef struct sync_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    void (*fn)(void *arg);
    void *arg;
} sync_t;

static void sync_task(void *arg)
{
    sync_t *s = arg;
    s->fn(s->arg);
    pthread_mutex_lock(&s->mu);
    s->done = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* fn(arg) on the loop; returns once it ran. */
static void on_loop(void (*fn)(void *arg), void *arg)
{
    sync_t s = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, fn, arg};
    if (eddy_loop_execute(loop, sync_task, &s) != 0) {
        return;
    }
    pthread_mutex_lock(&s.mu);
    while (!s.done) {
        pthread_cond_wait(&s.cv, &s.mu);
    }
    pthread_mutex_unlock(&s.mu);
}

/* ---------------------------------------------------------------------------------------
 * A call seen from main's thread: messages queued as they come, the status once it ends.
 */

typedef struct msg_s {
    struct msg_s *next;
    eddy_buf_t *buf;
} msg_t;

typedef struct stream_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    eddy_grpc_call_t *call;
    msg_t *head, *tail;
    bool closed;
    eddy_grpc_status_t status;
    char message[512];
    /* what starting and sending need */
    const char *path;
    eddy_grpc_call_options_t opts;
    eddy_buf_t *out;
    bool half_close;
} stream_t;

static void s_message(eddy_grpc_call_t *call, eddy_buf_t *msg)
{
    stream_t *s = eddy_grpc_call_arg(call);
    msg_t *m = malloc(sizeof(*m));
    if (m == NULL) {
        eddy_buf_release(msg);
        return;
    }
    *m = (msg_t){NULL, msg};
    pthread_mutex_lock(&s->mu);
    if (s->tail != NULL) {
        s->tail->next = m;
    } else {
        s->head = m;
    }
    s->tail = m;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void s_close(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message)
{
    stream_t *s = eddy_grpc_call_arg(call);
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    s->status = status;
    snprintf(s->message, sizeof(s->message), "%s", message);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static const eddy_grpc_client_ops_t stream_ops = {.on_message = s_message, .on_close = s_close};

static void start_task(void *arg)
{
    stream_t *s = arg;
    int err = 0;
    s->call = eddy_grpc_call_start(channel, s->path, &s->opts, &stream_ops, s, &err);
    if (s->call == NULL) {
        s->closed = true;
        s->status = EDDY_GRPC_INTERNAL;
        snprintf(s->message, sizeof(s->message), "start: %s", eddy_strerror(err));
    }
}

/* Start a call of method (a name in TestService, or a whole path) with o (may be NULL). */
static stream_t *stream_start(const char *path, const eddy_grpc_call_options_t *o)
{
    stream_t *s = calloc(1, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->path = path;
    s->opts = o != NULL ? *o : (eddy_grpc_call_options_t){0};
    on_loop(start_task, s);
    return s;
}

static void send_task(void *arg)
{
    stream_t *s = arg;
    eddy_buf_t *b = s->out;
    s->out = NULL;
    if (s->call != NULL && b != NULL) {
        eddy_grpc_call_send(s->call, b, NULL);
    } else if (b != NULL) {
        eddy_buf_release(b);
    }
    if (s->call != NULL && s->half_close) {
        eddy_grpc_call_half_close(s->call);
    }
    s->half_close = false;
}

/* Send b (taken; may be NULL), then half-close when asked. */
static void stream_send(stream_t *s, eddy_buf_t *b, bool half_close)
{
    s->out = b;
    s->half_close = half_close;
    on_loop(send_task, s);
}

static void cancel_task(void *arg)
{
    stream_t *s = arg;
    if (s->call != NULL) {
        eddy_grpc_call_cancel(s->call);
    }
}

/* The next message (the caller releases it), or NULL once the call ended without one. */
static eddy_buf_t *stream_recv(stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->head == NULL && !s->closed) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    msg_t *m = s->head;
    if (m != NULL) {
        s->head = m->next;
        s->tail = s->head != NULL ? s->tail : NULL;
    }
    pthread_mutex_unlock(&s->mu);
    eddy_buf_t *b = m != NULL ? m->buf : NULL;
    free(m);
    return b;
}

/* Wait for the status. */
static eddy_grpc_status_t stream_wait(stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    while (!s->closed) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return s->status;
}

static void release_task(void *arg)
{
    stream_t *s = arg;
    eddy_grpc_call_release(s->call);
}

static void stream_free(stream_t *s)
{
    on_loop(release_task, s);
    eddy_buf_t *b;
    while ((b = stream_recv(s)) != NULL) {
        eddy_buf_release(b);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* ---------------------------------------------------------------------------------------
 * Messages
 */

static eddy_buf_t *pack(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    eddy_buf_t *b = eddy_buf_new(n + 1);
    if (b != NULL) {
        eddy_buf_produce(b, protobuf_c_message_pack(m, eddy_buf_write_ptr(b)));
    }
    return b;
}

static uint8_t zeros[1 << 20];

/* A StreamingOutputCallRequest of inn zero bytes asking for one response of out (none when
 * out < 0), with status st (may be NULL). */
static eddy_buf_t *duplex_request(int out, int inn, Grpc__Testing__EchoStatus *st)
{
    Grpc__Testing__StreamingOutputCallRequest r = GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
    Grpc__Testing__Payload p = GRPC__TESTING__PAYLOAD__INIT;
    Grpc__Testing__ResponseParameters rp = GRPC__TESTING__RESPONSE_PARAMETERS__INIT;
    Grpc__Testing__ResponseParameters *rps[1] = {&rp};
    p.body = (ProtobufCBinaryData){(size_t)inn, zeros};
    r.payload = &p;
    rp.size = out;
    r.n_response_parameters = out >= 0 ? 1 : 0;
    r.response_parameters = rps;
    r.response_status = st;
    return pack(&r.base);
}

static eddy_buf_t *simple_request(int out, int inn, Grpc__Testing__EchoStatus *st)
{
    Grpc__Testing__SimpleRequest r = GRPC__TESTING__SIMPLE_REQUEST__INIT;
    Grpc__Testing__Payload p = GRPC__TESTING__PAYLOAD__INIT;
    p.body = (ProtobufCBinaryData){(size_t)inn, zeros};
    r.payload = &p;
    r.response_size = out;
    r.response_status = st;
    return pack(&r.base);
}

/* The payload length of a SimpleResponse or StreamingOutputCallResponse (same field), or -1. */
static long payload_len(eddy_buf_t *b, bool simple)
{
    if (b == NULL) {
        return -1;
    }
    const ProtobufCMessageDescriptor *d =
        simple ? &grpc__testing__simple_response__descriptor
               : &grpc__testing__streaming_output_call_response__descriptor;
    ProtobufCMessage *m =
        protobuf_c_message_unpack(d, NULL, eddy_buf_readable(b), eddy_buf_read_ptr(b));
    eddy_buf_release(b);
    if (m == NULL) {
        return -1;
    }
    Grpc__Testing__Payload *p = simple ? ((Grpc__Testing__SimpleResponse *)m)->payload
                                       : ((Grpc__Testing__StreamingOutputCallResponse *)m)->payload;
    long n = p != NULL ? (long)p->body.len : 0;
    protobuf_c_message_free_unpacked(m, NULL);
    return n;
}

/* ---------------------------------------------------------------------------------------
 * The cases: each returns NULL when it passed, else why.
 */

#define CHECK(cond, why)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            return why;                                                                        \
        }                                                                                      \
    } while (0)

static char why_buf[600];

static const char *status_is(stream_t *s, eddy_grpc_status_t want)
{
    eddy_grpc_status_t got = stream_wait(s);
    if (got == want) {
        return NULL;
    }
    snprintf(why_buf, sizeof(why_buf), "status %s (%s), wanted %s", eddy_grpc_status_name(got),
             s->message, eddy_grpc_status_name(want));
    return why_buf;
}

/* One unary call of path with request; its status checked against want; the response's
 * payload length in *len (simple: a SimpleResponse). */
static const char *unary(const char *path, eddy_buf_t *request, const eddy_grpc_call_options_t *o,
                         eddy_grpc_status_t want, long *len, stream_t **keep)
{
    stream_t *s = stream_start(path, o);
    stream_send(s, request, true);
    eddy_buf_t *b = stream_recv(s);
    const char *why = status_is(s, want);
    long n = b != NULL ? payload_len(b, true) : -1;
    if (len != NULL) {
        *len = n;
    }
    if (keep != NULL && why == NULL) {
        *keep = s;
    } else {
        stream_free(s);
    }
    return why;
}

static const char *empty_unary(void)
{
    Grpc__Testing__Empty e = GRPC__TESTING__EMPTY__INIT;
    stream_t *s = stream_start(SVC "EmptyCall", NULL);
    stream_send(s, pack(&e.base), true);
    eddy_buf_t *b = stream_recv(s);
    const char *why = status_is(s, EDDY_GRPC_OK);
    bool empty = b != NULL && eddy_buf_readable(b) == 0;
    if (b != NULL) {
        eddy_buf_release(b);
    }
    stream_free(s);
    CHECK(why == NULL, why);
    CHECK(empty, "no empty response");
    return NULL;
}

static const char *large_unary(void)
{
    long n = 0;
    const char *why = unary(SVC "UnaryCall", simple_request(314159, 271828, NULL), NULL,
                            EDDY_GRPC_OK, &n, NULL);
    CHECK(why == NULL, why);
    CHECK(n == 314159, "wrong response size");
    return NULL;
}

static const char *client_streaming(void)
{
    static const int sizes[] = {27182, 8, 1828, 45904};
    stream_t *s = stream_start(SVC "StreamingInputCall", NULL);
    for (int i = 0; i < 4; i++) {
        Grpc__Testing__StreamingInputCallRequest r =
            GRPC__TESTING__STREAMING_INPUT_CALL_REQUEST__INIT;
        Grpc__Testing__Payload p = GRPC__TESTING__PAYLOAD__INIT;
        p.body = (ProtobufCBinaryData){(size_t)sizes[i], zeros};
        r.payload = &p;
        stream_send(s, pack(&r.base), i == 3);
    }
    eddy_buf_t *b = stream_recv(s);
    const char *why = status_is(s, EDDY_GRPC_OK);
    Grpc__Testing__StreamingInputCallResponse *r =
        b != NULL ? grpc__testing__streaming_input_call_response__unpack(
                        NULL, eddy_buf_readable(b), eddy_buf_read_ptr(b))
                  : NULL;
    int32_t total = r != NULL ? r->aggregated_payload_size : -1;
    if (r != NULL) {
        grpc__testing__streaming_input_call_response__free_unpacked(r, NULL);
    }
    if (b != NULL) {
        eddy_buf_release(b);
    }
    stream_free(s);
    CHECK(why == NULL, why);
    CHECK(total == 74922, "wrong aggregated_payload_size");
    return NULL;
}

static const char *server_streaming(void)
{
    static const int sizes[] = {31415, 9, 2653, 58979};
    Grpc__Testing__StreamingOutputCallRequest r = GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
    Grpc__Testing__ResponseParameters rp[4], *rps[4];
    for (int i = 0; i < 4; i++) {
        grpc__testing__response_parameters__init(&rp[i]);
        rp[i].size = sizes[i];
        rps[i] = &rp[i];
    }
    r.n_response_parameters = 4;
    r.response_parameters = rps;
    stream_t *s = stream_start(SVC "StreamingOutputCall", NULL);
    stream_send(s, pack(&r.base), true);
    bool sizes_ok = true;
    for (int i = 0; i < 4; i++) {
        sizes_ok &= payload_len(stream_recv(s), false) == sizes[i];
    }
    bool more = stream_recv(s) != NULL;
    const char *why = status_is(s, EDDY_GRPC_OK);
    stream_free(s);
    CHECK(why == NULL, why);
    CHECK(sizes_ok && !more, "wrong responses");
    return NULL;
}

static const char *ping_pong(void)
{
    static const int out[] = {31415, 9, 2653, 58979}, inn[] = {27182, 8, 1828, 45904};
    stream_t *s = stream_start(SVC "FullDuplexCall", NULL);
    bool ok = true;
    for (int i = 0; i < 4 && ok; i++) {
        stream_send(s, duplex_request(out[i], inn[i], NULL), false);
        ok = payload_len(stream_recv(s), false) == out[i];
    }
    stream_send(s, NULL, true);
    bool more = ok && stream_recv(s) != NULL;
    const char *why = status_is(s, EDDY_GRPC_OK);
    stream_free(s);
    CHECK(why == NULL, why);
    CHECK(ok && !more, "wrong responses");
    return NULL;
}

static const char *empty_stream(void)
{
    stream_t *s = stream_start(SVC "FullDuplexCall", NULL);
    stream_send(s, NULL, true);
    bool any = stream_recv(s) != NULL;
    const char *why = status_is(s, EDDY_GRPC_OK);
    stream_free(s);
    CHECK(why == NULL, why);
    CHECK(!any, "a response came");
    return NULL;
}

static const char *cancel_after_begin(void)
{
    stream_t *s = stream_start(SVC "StreamingInputCall", NULL);
    on_loop(cancel_task, s);
    const char *why = status_is(s, EDDY_GRPC_CANCELLED);
    stream_free(s);
    return why;
}

static const char *cancel_after_first_response(void)
{
    stream_t *s = stream_start(SVC "FullDuplexCall", NULL);
    stream_send(s, duplex_request(31415, 27182, NULL), false);
    bool first = payload_len(stream_recv(s), false) == 31415;
    on_loop(cancel_task, s);
    const char *why = status_is(s, EDDY_GRPC_CANCELLED);
    stream_free(s);
    CHECK(first, "no first response");
    return why;
}

static const char *timeout_on_sleeping_server(void)
{
    eddy_grpc_call_options_t o = {.deadline_ms = 1};
    stream_t *s = stream_start(SVC "FullDuplexCall", &o);
    stream_send(s, duplex_request(-1, 27182, NULL), false);
    const char *why = status_is(s, EDDY_GRPC_DEADLINE_EXCEEDED);
    stream_free(s);
    return why;
}

static const char *echo_status(const char *text, bool duplex)
{
    Grpc__Testing__EchoStatus st = GRPC__TESTING__ECHO_STATUS__INIT;
    char copy[256];
    snprintf(copy, sizeof(copy), "%s", text);
    st.code = 2;
    st.message = copy;
    stream_t *s = NULL;
    const char *why = unary(SVC "UnaryCall", simple_request(0, 0, &st), NULL, EDDY_GRPC_UNKNOWN,
                            NULL, &s);
    CHECK(why == NULL, why);
    bool same = strcmp(s->message, text) == 0;
    stream_free(s);
    CHECK(same, "the status message did not come back as sent");
    if (!duplex) {
        return NULL;
    }
    s = stream_start(SVC "FullDuplexCall", NULL);
    stream_send(s, duplex_request(1, 1, &st), true);
    why = status_is(s, EDDY_GRPC_UNKNOWN);
    same = why == NULL && strcmp(s->message, text) == 0;
    stream_free(s);
    CHECK(why == NULL, why);
    CHECK(same, "the status message did not come back as sent (duplex)");
    return NULL;
}

static const char *status_code_and_message(void)
{
    return echo_status("test status message", true);
}

static const char *special_status_message(void)
{
    return echo_status("\t\ntest with whitespace\r\nand Unicode BMP \xe2\x98\xba and non-BMP "
                       "\xf0\x9f\x98\x88\t\n",
                       false);
}

/* Whether md (n fields) holds name with exactly value (len bytes). */
static bool md_has(const eddy_http_header_t *md, size_t n, const char *name, const char *value,
                   size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (md[i].name.len == strlen(name) && memcmp(md[i].name.p, name, md[i].name.len) == 0) {
            return md[i].value.len == len && memcmp(md[i].value.p, value, len) == 0;
        }
    }
    return false;
}

typedef struct md_check_s {
    stream_t *s;
    bool ok;
} md_check_t;

static void md_check_task(void *arg)
{
    md_check_t *c = arg;
    size_t n, t;
    const eddy_http_header_t *md = eddy_grpc_call_metadata(c->s->call, &n);
    const eddy_http_header_t *tr = eddy_grpc_call_trailers(c->s->call, &t);
    c->ok = md_has(md, n, "x-grpc-test-echo-initial", "test_initial_metadata_value", 27) &&
            md_has(tr, t, "x-grpc-test-echo-trailing-bin", "\xab\xab\xab", 3);
}

static const char *custom_metadata(void)
{
    eddy_http_header_t md[] = {
        {{"x-grpc-test-echo-initial", 24}, {"test_initial_metadata_value", 27}},
        {{"x-grpc-test-echo-trailing-bin", 29}, {"\xab\xab\xab", 3}}};
    eddy_grpc_call_options_t o = {.metadata = md, .metadata_count = 2};
    stream_t *s = NULL;
    const char *why = unary(SVC "UnaryCall", simple_request(314159, 271828, NULL), &o,
                            EDDY_GRPC_OK, NULL, &s);
    CHECK(why == NULL, why);
    md_check_t c = {s, false};
    on_loop(md_check_task, &c);
    stream_free(s);
    CHECK(c.ok, "metadata not echoed (unary)");
    s = stream_start(SVC "FullDuplexCall", &o);
    stream_send(s, duplex_request(314159, 271828, NULL), false);
    bool first = payload_len(stream_recv(s), false) == 314159;
    stream_send(s, NULL, true);
    why = status_is(s, EDDY_GRPC_OK);
    c = (md_check_t){s, false};
    on_loop(md_check_task, &c);
    stream_free(s);
    CHECK(why == NULL, why);
    CHECK(first && c.ok, "metadata not echoed (duplex)");
    return NULL;
}

static const char *unimplemented(const char *path)
{
    Grpc__Testing__Empty e = GRPC__TESTING__EMPTY__INIT;
    return unary(path, pack(&e.base), NULL, EDDY_GRPC_UNIMPLEMENTED, NULL, NULL);
}

static const char *unimplemented_method(void)
{
    return unimplemented(SVC "UnimplementedCall");
}

static const char *unimplemented_service(void)
{
    return unimplemented("/grpc.testing.UnimplementedService/UnimplementedCall");
}

/* grpc.health.v1.Health/Check of the server ("" service): SERVING. Not in "all". */
static const char *health_check(void)
{
    stream_t *s = stream_start("/grpc.health.v1.Health/Check", NULL);
    stream_send(s, eddy_buf_new(1), true); /* HealthCheckRequest{}: no bytes */
    eddy_buf_t *b = stream_recv(s);
    const char *why = status_is(s, EDDY_GRPC_OK);
    bool serving = b != NULL && eddy_buf_readable(b) == 2 && eddy_buf_read_ptr(b)[0] == 0x08 &&
                   eddy_buf_read_ptr(b)[1] == 1;
    if (b != NULL) {
        eddy_buf_release(b);
    }
    stream_free(s);
    CHECK(why == NULL, why);
    CHECK(serving, "not SERVING");
    return NULL;
}

static const struct {
    const char *name;
    const char *(*run)(void);
} CASES[] = {
    {"empty_unary", empty_unary},
    {"large_unary", large_unary},
    {"client_streaming", client_streaming},
    {"server_streaming", server_streaming},
    {"ping_pong", ping_pong},
    {"empty_stream", empty_stream},
    {"cancel_after_begin", cancel_after_begin},
    {"cancel_after_first_response", cancel_after_first_response},
    {"timeout_on_sleeping_server", timeout_on_sleeping_server},
    {"status_code_and_message", status_code_and_message},
    {"special_status_message", special_status_message},
    {"custom_metadata", custom_metadata},
    {"unimplemented_method", unimplemented_method},
    {"unimplemented_service", unimplemented_service},
    {"health_check", health_check}, /* only when named */
};

/* Run the cases named in list ("all", or names separated by commas): 0 when all passed. */
static int run_cases(const char *list)
{
    int failed = 0, ran = 0;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        const char *at = strstr(list, CASES[i].name);
        size_t n = strlen(CASES[i].name);
        bool named = at != NULL && (at == list || at[-1] == ',') &&
                     (at[n] == '\0' || at[n] == ',');
        named = named || (strncmp(list, "all,", 4) == 0 && strcmp(CASES[i].name, "health_check") != 0);
        bool in_all = strcmp(list, "all") == 0 && strcmp(CASES[i].name, "health_check") != 0;
        if (!in_all && !named) {
            continue;
        }
        const char *why = CASES[i].run();
        printf(why == NULL ? "PASS %s\n" : "FAIL %s: %s\n", CASES[i].name, why);
        fflush(stdout);
        failed += why != NULL;
        ran++;
    }
    if (ran == 0) {
        fprintf(stderr, "eddy-grpc-client: no test case called %s\n", list);
        return 2;
    }
    return failed == 0 ? 0 : 1;
}

/* ---------------------------------------------------------------------------------------
 * Load
 */

typedef enum { LOAD_UNARY, LOAD_SERVER_STREAMING, LOAD_PING_PONG } load_mode_t;

#define LAT_BUCKETS 4096 /* microseconds, log-linear: 64 per power of two */

typedef struct load_s {
    load_mode_t mode;
    size_t size;
    eddy_buf_t *request;  /* the request every call sends (retained per send) */
    bool counting;        /* past the warm-up */
    bool stopping;        /* the duration is over: calls are not started again */
    uint64_t calls;       /* calls ended OK while counting */
    uint64_t messages;    /* responses while counting (streaming modes) */
    uint64_t errors;
    uint64_t hist[LAT_BUCKETS];
    size_t live;          /* calls in flight */
} load_t;

static load_t load;

typedef struct load_call_s {
    eddy_grpc_call_t *call;
    int64_t sent_ns;      /* when the request (or ping) went */
} load_call_t;

static size_t lat_bucket(int64_t ns)
{
    double us = (double)ns / 1000.0;
    if (us < 1) {
        return 0;
    }
    size_t b = (size_t)(log2(us) * 64);
    return b < LAT_BUCKETS ? b : LAT_BUCKETS - 1;
}

static double lat_us(size_t bucket)
{
    return pow(2.0, (double)bucket / 64.0);
}

static double percentile(double q)
{
    uint64_t total = 0, seen = 0;
    for (size_t i = 0; i < LAT_BUCKETS; i++) {
        total += load.hist[i];
    }
    for (size_t i = 0; i < LAT_BUCKETS; i++) {
        seen += load.hist[i];
        if (total > 0 && (double)seen >= q * (double)total) {
            return lat_us(i);
        }
    }
    return 0;
}

/* A latency sample since lc's last one: a unary or server streaming call's whole, a ping
 * pong's round trip. */
static void load_sample(load_call_t *lc)
{
    int64_t now = eddy_now_ns();
    if (load.counting) {
        load.hist[lat_bucket(now - lc->sent_ns)]++;
    }
    lc->sent_ns = now;
}

static void load_start(void);

static void l_message(eddy_grpc_call_t *call, eddy_buf_t *msg)
{
    load_call_t *lc = eddy_grpc_call_user_data(call);
    eddy_buf_release(msg);
    load.messages += load.counting ? 1 : 0;
    if (load.mode != LOAD_PING_PONG) {
        return; /* sampled at the status */
    }
    load_sample(lc);
    if (!load.stopping) {
        eddy_grpc_call_send(call, eddy_buf_retain(load.request), NULL);
    } else {
        eddy_grpc_call_half_close(call);
    }
}

static void l_close(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message)
{
    (void)message;
    load_call_t *lc = eddy_grpc_call_user_data(call);
    if (status == EDDY_GRPC_OK && load.counting) {
        load.calls++;
    }
    if (status == EDDY_GRPC_OK && load.mode != LOAD_PING_PONG) {
        load_sample(lc);
    } else if (status != EDDY_GRPC_OK && load.counting && !load.stopping) {
        load.errors++;
    }
    load.live--;
    eddy_grpc_call_release(call);
    if (!load.stopping) {
        load_start();
    }
}

static const eddy_grpc_client_ops_t load_ops = {.on_message = l_message, .on_close = l_close};

static void load_start(void)
{
    static const char *const paths[] = {SVC "UnaryCall", SVC "StreamingOutputCall",
                                        SVC "FullDuplexCall"};
    load_call_t *lc = calloc(1, sizeof(*lc));
    int err = 0;
    eddy_grpc_call_t *call =
        lc != NULL ? eddy_grpc_call_start(channel, paths[load.mode], NULL, &load_ops, NULL, &err)
                   : NULL;
    if (call == NULL) {
        free(lc);
        load.errors++;
        return;
    }
    eddy_grpc_call_set_user_data(call, lc, free);
    lc->call = call;
    lc->sent_ns = eddy_now_ns();
    load.live++;
    eddy_grpc_call_send(call, eddy_buf_retain(load.request), NULL);
    if (load.mode != LOAD_PING_PONG) {
        eddy_grpc_call_half_close(call);
    }
}

typedef struct load_args_s {
    size_t n;
} load_args_t;

static void load_begin(void *arg)
{
    load_args_t *a = arg;
    for (size_t i = 0; i < a->n; i++) {
        load_start();
    }
}

static void load_mark(void *arg)
{
    bool *counting = arg;
    load.counting = *counting;
    if (!*counting) {
        load.stopping = true;
    }
}

/* The request each call of the mode sends: size bytes asked back (server streaming: that
 * many responses of size). */
static eddy_buf_t *load_request(load_mode_t mode, size_t size, size_t messages)
{
    if (mode == LOAD_UNARY) {
        return simple_request((int)size, (int)size, NULL);
    }
    if (mode == LOAD_PING_PONG) {
        return duplex_request((int)size, (int)size, NULL);
    }
    Grpc__Testing__StreamingOutputCallRequest r = GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
    Grpc__Testing__ResponseParameters rp = GRPC__TESTING__RESPONSE_PARAMETERS__INIT;
    Grpc__Testing__ResponseParameters **rps = calloc(messages, sizeof(*rps));
    rp.size = (int32_t)size;
    for (size_t i = 0; rps != NULL && i < messages; i++) {
        rps[i] = &rp;
    }
    r.n_response_parameters = rps != NULL ? messages : 0;
    r.response_parameters = rps;
    eddy_buf_t *b = pack(&r.base);
    free(rps);
    return b;
}

/* CPU seconds of process pid (utime + stime from /proc), or -1. */
static double proc_cpu(long pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(line, 1, sizeof(line) - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    line[n] = '\0';
    const char *p = strrchr(line, ')'); /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                            &ut, &st) != 2) {
        return -1;
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec d = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&d, NULL);
}

typedef struct load_plan_s {
    load_mode_t mode;
    size_t size, messages, connections, streams;
    double duration, warmup;
    long server_pid; /* 0: none */
} load_plan_t;

static int run_load(const load_plan_t *lp)
{
    load.mode = lp->mode;
    load.size = lp->size;
    load.request = load_request(lp->mode, lp->size, lp->messages);
    load_args_t a = {lp->connections * lp->streams};
    on_loop(load_begin, &a);
    sleep_s(lp->warmup);
    bool on = true, off = false;
    double server0 = lp->server_pid > 0 ? proc_cpu(lp->server_pid) : 0, self0 = self_cpu();
    on_loop(load_mark, &on);
    int64_t t0 = eddy_now_ns();
    sleep_s(lp->duration);
    on_loop(load_mark, &off);
    double secs = (double)(eddy_now_ns() - t0) / 1e9;
    double server1 = lp->server_pid > 0 ? proc_cpu(lp->server_pid) : 0, self1 = self_cpu();
    static const char *const names[] = {"unary", "server_streaming", "ping_pong"};
    uint64_t counted = lp->mode == LOAD_PING_PONG ? load.messages : load.calls;
    printf("{\"mode\":\"%s\",\"size\":%zu,\"connections\":%zu,\"streams\":%zu,"
           "\"calls\":%llu,\"seconds\":%.3f,\"calls_per_s\":%.1f,\"p50_us\":%.1f,"
           "\"p99_us\":%.1f,\"errors\":%llu,\"client_cpu_s\":%.2f",
           names[lp->mode], lp->size, lp->connections, lp->streams,
           (unsigned long long)counted, secs, (double)counted / secs, percentile(0.5),
           percentile(0.99), (unsigned long long)load.errors, self1 - self0);
    if (lp->mode == LOAD_SERVER_STREAMING) {
        printf(",\"messages\":%llu,\"messages_per_s\":%.1f", (unsigned long long)load.messages,
               (double)load.messages / secs);
    }
    if (lp->server_pid > 0) {
        printf(",\"server_cpu_s\":%.2f", server1 - server0);
    }
    printf("}\n");
    fflush(stdout);
    return counted > 0 && load.errors == 0 ? 0 : 1;
}

/* ---------------------------------------------------------------------------------------
 * The program
 */

typedef struct args_s {
    const char *host, *cases, *ca, *override, *mode;
    unsigned long port, size, connections, streams, messages, server_pid;
    double duration, warmup;
    bool tls, load;
} args_t;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: eddy-grpc-client --server_host H --server_port P --test_case NAME[,NAME|all]\n"
            "                        [--use_tls [--use_test_ca --ca FILE]"
            " [--server_host_override N]]\n"
            "       eddy-grpc-client --server_host H --server_port P --load\n"
            "                        [--mode unary|server_streaming|ping_pong] [--size BYTES]\n"
            "                        [--connections N] [--streams M] [--duration S] [--warmup S]\n"
            "                        [--messages K] [--server_pid PID]\n"
            "gRPC's interop client for grpc.testing.TestService, or a load generator printing one\n"
            "line of JSON (calls or messages per second, p50 and p99 in microseconds).\n");
}

/* One option: 1 when it took v, 0 when none, -1 when unknown or bad. */
static int option(args_t *a, const char *o, const char *v)
{
    bool flag = v == NULL || strcmp(v, "true") == 0 || strcmp(v, "false") == 0;
    if (strcmp(o, "--use_tls") == 0 || strcmp(o, "--load") == 0 ||
        strcmp(o, "--use_test_ca") == 0) {
        bool on = v == NULL || strcmp(v, "false") != 0;
        bool *slot = strcmp(o, "--use_tls") == 0 ? &a->tls
                     : strcmp(o, "--load") == 0  ? &a->load
                                                 : &on;
        *slot = on;
        return v != NULL && flag ? 1 : 0;
    }
    if (v == NULL) {
        return -1;
    }
    const char **str = strcmp(o, "--server_host") == 0            ? &a->host
                       : strcmp(o, "--test_case") == 0            ? &a->cases
                       : strcmp(o, "--ca") == 0                   ? &a->ca
                       : strcmp(o, "--server_host_override") == 0 ? &a->override
                       : strcmp(o, "--mode") == 0                 ? &a->mode
                                                                  : NULL;
    if (str != NULL) {
        *str = v;
        return 1;
    }
    double *secs = strcmp(o, "--duration") == 0 ? &a->duration
                   : strcmp(o, "--warmup") == 0 ? &a->warmup
                                                : NULL;
    if (secs != NULL) {
        char *end;
        *secs = strtod(v, &end);
        return *end == '\0' && *secs >= 0 && *secs <= 86400 ? 1 : -1;
    }
    unsigned long *num = strcmp(o, "--server_port") == 0   ? &a->port
                         : strcmp(o, "--size") == 0        ? &a->size
                         : strcmp(o, "--connections") == 0 ? &a->connections
                         : strcmp(o, "--streams") == 0     ? &a->streams
                         : strcmp(o, "--messages") == 0    ? &a->messages
                         : strcmp(o, "--server_pid") == 0  ? &a->server_pid
                                                           : NULL;
    return num != NULL && example_parse_uint(v, 1u << 30, num) ? 1 : -1;
}

static int parse(int argc, char **argv, args_t *a)
{
    *a = (args_t){.host = "127.0.0.1", .port = 50051, .mode = "unary", .size = 1024,
                  .connections = 1, .streams = 1, .duration = 10, .warmup = 1,
                  .messages = 10};
    for (int i = 1; i < argc; i++) {
        char name[40];
        const char *eq = strchr(argv[i], '=');
        int took;
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return -1;
        } else if (eq != NULL && (size_t)(eq - argv[i]) < sizeof(name)) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - argv[i]), argv[i]);
            took = option(a, name, eq + 1) >= 0 ? 0 : -1;
        } else {
            const char *v = i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 ? argv[i + 1] : NULL;
            took = option(a, argv[i], v);
        }
        if (took < 0) {
            usage(stderr);
            return 2;
        }
        i += took;
    }
    if (!a->load && a->cases == NULL) {
        usage(stderr);
        return 2;
    }
    return 0;
}

static eddy_tls_context_t *tls_context(const args_t *a)
{
    eddy_tls_context_t *c = example_tls_context(EDDY_TLS_CLIENT, "eddy-grpc-client");
    size_t n;
    const char *const *alpn = eddy_grpc_alpn_protocols(&n);
    int rc = c != NULL ? eddy_tls_context_alpn(c, alpn, n) : EDDY_ENOMEM;
    if (rc == 0 && a->ca != NULL) {
        rc = eddy_tls_context_trust_file(c, a->ca);
    }
    if (rc != 0) {
        fprintf(stderr, "eddy-grpc-client: TLS: %s\n",
                c != NULL ? eddy_tls_context_error(c) : "out of memory");
        eddy_tls_context_release(c);
        return NULL;
    }
    return c;
}

int main(int argc, char **argv)
{
    args_t a;
    int prc = parse(argc, argv, &a);
    if (prc != 0) {
        return prc < 0 ? 0 : prc;
    }
    eddy_grpc_channel_options_t o = {.connections = a.load ? a.connections : 1};
    char authority[300];
    if (a.tls && (o.tls = tls_context(&a)) == NULL) {
        return 1;
    }
    if (a.override != NULL) {
        snprintf(authority, sizeof(authority), "%s", a.override);
        o.authority = authority;
    }
    eddy_loop_options_t lo = {.name = "grpc-client"};
    eddy_loop_group_t *g = eddy_loop_group_new(1, &lo);
    loop = g != NULL ? eddy_loop_group_next(g) : NULL;
    char target[300];
    snprintf(target, sizeof(target), strchr(a.host, ':') != NULL ? "[%s]:%lu" : "%s:%lu",
             a.host, a.port);
    channel = loop != NULL ? eddy_grpc_channel_new(loop, target, &o) : NULL;
    if (channel == NULL) {
        fprintf(stderr, "eddy-grpc-client: cannot make a channel to %s\n", target);
        return 1;
    }
    load_mode_t mode = strcmp(a.mode, "server_streaming") == 0 ? LOAD_SERVER_STREAMING
                       : strcmp(a.mode, "ping_pong") == 0      ? LOAD_PING_PONG
                                                               : LOAD_UNARY;
    load_plan_t lp = {mode, a.size, a.messages, a.connections, a.streams, a.duration, a.warmup,
                      (long)a.server_pid};
    int rc = a.load ? run_load(&lp) : run_cases(a.cases);
    eddy_future_t *closed = eddy_grpc_channel_close(channel);
    eddy_future_await(closed, 5000);
    eddy_future_release(closed);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000);
    eddy_loop_group_free(g);
    if (load.request != NULL) {
        eddy_buf_release(load.request);
    }
    if (o.tls != NULL) {
        eddy_tls_context_release(o.tls);
    }
    return rc;
}
