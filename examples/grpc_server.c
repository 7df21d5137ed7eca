/*
 * eddy-grpc-server: gRPC's interop TestService (grpc/testing/test.proto, from Debian's
 * grpc-proto, compiled with protobuf-c at build time) on eddy's gRPC server, for gRPC's
 * interop clients and load tests.
 *
 *   eddy-grpc-server [--port P] [--host H] [--threads N] [--use_tls --cert F --key F]
 *                    [--tls CERT KEY]
 *
 * --port 0 listens on a free port and prints "PORT <n>" first. Every method of TestService
 * but HalfDuplexCall and UnimplementedCall, with the interop cases' "Echo Status" and "Echo
 * Metadata", and grpc.health.v1.Health. The library does the protocol: this file reads and
 * writes messages.
 */
#include "example_util.h"

#include "grpc/testing/empty.pb-c.h"
#include "grpc/testing/messages.pb-c.h"

#include <string.h>

#define SVC "/grpc.testing.TestService/"

/* ---------------------------------------------------------------------------------------
 * Messages: protobuf-c to and from eddy buffers
 */

/* A buffer holding m packed. */
static eddy_buf_t *pack(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    eddy_buf_t *b = eddy_buf_new(n > 0 ? n : 1);
    if (b != NULL) {
        protobuf_c_message_pack(m, eddy_buf_write_ptr(b));
        eddy_buf_produce(b, n);
    }
    return b;
}

/* The message of type d in b (released), or NULL after finishing call INVALID_ARGUMENT. */
static ProtobufCMessage *unpack(eddy_grpc_call_t *call, const ProtobufCMessageDescriptor *d,
                               eddy_buf_t *b)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, eddy_buf_readable(b),
                                                    eddy_buf_read_ptr(b));
    eddy_buf_release(b);
    if (m == NULL) {
        eddy_grpc_call_finish(call, EDDY_GRPC_INVALID_ARGUMENT, "cannot parse the request",
                              NULL, 0);
    }
    return m;
}

/* A payload of size zeros, packed in a response message by fill. */
static eddy_buf_t *payload_response(int32_t size, bool streaming)
{
    size_t n = size > 0 ? (size_t)size : 0;
    uint8_t *zeros = calloc(1, n + 1);
    if (zeros == NULL) {
        return NULL;
    }
    Grpc__Testing__Payload p = GRPC__TESTING__PAYLOAD__INIT;
    p.body = (ProtobufCBinaryData){n, zeros};
    eddy_buf_t *b;
    if (streaming) {
        Grpc__Testing__StreamingOutputCallResponse r =
            GRPC__TESTING__STREAMING_OUTPUT_CALL_RESPONSE__INIT;
        r.payload = &p;
        b = pack(&r.base);
    } else {
        Grpc__Testing__SimpleResponse r = GRPC__TESTING__SIMPLE_RESPONSE__INIT;
        r.payload = &p;
        b = pack(&r.base);
    }
    free(zeros);
    return b;
}

/* ---------------------------------------------------------------------------------------
 * Echo Metadata and Echo Status: the interop cases' features
 */

static void echo_initial(eddy_grpc_call_t *call)
{
    const eddy_http_header_t *f = eddy_grpc_call_metadata_get(call, "x-grpc-test-echo-initial");
    if (f != NULL) {
        eddy_grpc_call_send_headers(call, f, 1);
    }
}

/* Finish with status (the request's EchoStatus when it has one) and the echoed trailer. */
static void finish(eddy_grpc_call_t *call, const Grpc__Testing__EchoStatus *st)
{
    const eddy_http_header_t *t =
        eddy_grpc_call_metadata_get(call, "x-grpc-test-echo-trailing-bin");
    eddy_grpc_status_t code = st != NULL ? (eddy_grpc_status_t)st->code : EDDY_GRPC_OK;
    code = code <= EDDY_GRPC_UNAUTHENTICATED ? code : EDDY_GRPC_UNKNOWN;
    eddy_grpc_call_finish(call, code, st != NULL ? st->message : NULL, t, t != NULL ? 1 : 0);
}

/* ---------------------------------------------------------------------------------------
 * EmptyCall, UnaryCall, StreamingInputCall
 */

static void empty_call(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    eddy_buf_release(req);
    Grpc__Testing__Empty e = GRPC__TESTING__EMPTY__INIT;
    echo_initial(call);
    eddy_grpc_call_send(call, pack(&e.base), NULL);
    finish(call, NULL);
}

static void unary_call(eddy_grpc_call_t *call, eddy_buf_t *b)
{
    Grpc__Testing__SimpleRequest *req =
        (Grpc__Testing__SimpleRequest *)unpack(call, &grpc__testing__simple_request__descriptor, b);
    if (req == NULL) {
        return;
    }
    if (req->response_compressed != NULL && req->response_compressed->value) {
        eddy_grpc_call_set_compression(call, "gzip"); /* before the echo sends the headers */
    }
    echo_initial(call);
    if (req->response_status != NULL && req->response_status->code != 0) {
        finish(call, req->response_status);
    } else {
        eddy_grpc_call_send(call, payload_response(req->response_size, false), NULL);
        finish(call, NULL);
    }
    protobuf_c_message_free_unpacked(&req->base, NULL);
}

static void input_message(eddy_grpc_call_t *call, eddy_buf_t *b)
{
    Grpc__Testing__StreamingInputCallRequest *req =
        (Grpc__Testing__StreamingInputCallRequest *)unpack(
            call, &grpc__testing__streaming_input_call_request__descriptor, b);
    if (req != NULL) {
        size_t *sum = eddy_grpc_call_user_data(call);
        *sum += req->payload != NULL ? req->payload->body.len : 0;
        protobuf_c_message_free_unpacked(&req->base, NULL);
    }
}

static void input_start(eddy_grpc_call_t *call)
{
    eddy_grpc_call_set_user_data(call, calloc(1, sizeof(size_t)), free);
    if (eddy_grpc_call_user_data(call) == NULL) {
        eddy_grpc_call_finish(call, EDDY_GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
    }
}

static void input_done(eddy_grpc_call_t *call)
{
    size_t *sum = eddy_grpc_call_user_data(call);
    Grpc__Testing__StreamingInputCallResponse r =
        GRPC__TESTING__STREAMING_INPUT_CALL_RESPONSE__INIT;
    r.aggregated_payload_size = (int32_t)*sum;
    eddy_grpc_call_reply(call, pack(&r.base));
}

/* ---------------------------------------------------------------------------------------
 * StreamingOutputCall and FullDuplexCall: responses as each request's parameters say, one at
 * a time as the stream takes them, after interval_us each; a duplex call's requests answered
 * in order, each once those before it are (a request asking a status finishes the call then).
 */

typedef struct queued_s {
    struct queued_s *next;
    Grpc__Testing__StreamingOutputCallRequest *req;
} queued_t;

typedef struct out_s {
    queued_t *head, *tail; /* the requests to answer, in order; the first is being answered */
    size_t next;           /* the first's next response_parameters */
    bool timer;            /* its interval is being waited */
    bool due;              /* the interval passed: the response goes once the call takes it */
    bool half_closed;      /* no request will come */
} out_t;

static void out_pump(eddy_grpc_call_t *call);

static void out_timer(eddy_grpc_call_t *call, void *arg)
{
    (void)arg;
    out_t *o = eddy_grpc_call_user_data(call);
    o->timer = false;
    o->due = true;
    out_pump(call);
}

static void out_pop(out_t *o)
{
    queued_t *q = o->head;
    o->head = q->next;
    if (o->head == NULL) {
        o->tail = NULL;
    }
    protobuf_c_message_free_unpacked(&q->req->base, NULL);
    free(q);
    o->next = 0;
}

static void out_free(void *arg)
{
    out_t *o = arg;
    while (o->head != NULL) {
        out_pop(o);
    }
    free(o);
}

/* Send what the requests still ask while the call takes it; finish once all is sent and no
 * more requests come. */
static void out_pump(eddy_grpc_call_t *call)
{
    out_t *o = eddy_grpc_call_user_data(call);
    while (!eddy_grpc_call_is_done(call) && o->head != NULL && !o->timer) {
        Grpc__Testing__StreamingOutputCallRequest *req = o->head->req;
        if (req->response_status != NULL && req->response_status->code != 0) {
            finish(call, req->response_status);
            return;
        }
        if (o->next == req->n_response_parameters) {
            out_pop(o);
            continue;
        }
        Grpc__Testing__ResponseParameters *p = req->response_parameters[o->next];
        if (!o->due && p->interval_us > 0) {
            o->timer = eddy_grpc_call_schedule(call, (p->interval_us + 999) / 1000, out_timer,
                                               NULL) != 0;
            if (o->timer) {
                return;
            }
        }
        if (!eddy_grpc_call_is_writable(call)) {
            return; /* on_writable comes back here */
        }
        o->due = false;
        o->next++;
        eddy_grpc_call_send(call, payload_response(p->size, true), NULL);
    }
    if (!eddy_grpc_call_is_done(call) && o->head == NULL && o->half_closed) {
        finish(call, NULL);
    }
}

static void out_request(eddy_grpc_call_t *call, eddy_buf_t *b)
{
    out_t *o = eddy_grpc_call_user_data(call);
    queued_t *q = malloc(sizeof(*q));
    if (q == NULL) {
        eddy_buf_release(b);
        eddy_grpc_call_finish(call, EDDY_GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        return;
    }
    q->req = (Grpc__Testing__StreamingOutputCallRequest *)unpack(
        call, &grpc__testing__streaming_output_call_request__descriptor, b);
    if (q->req == NULL) {
        free(q);
        return;
    }
    q->next = NULL;
    if (o->tail != NULL) {
        o->tail->next = q;
    } else {
        o->head = q;
    }
    o->tail = q;
    out_pump(call);
}

static void out_start(eddy_grpc_call_t *call)
{
    out_t *o = calloc(1, sizeof(*o));
    eddy_grpc_call_set_user_data(call, o, out_free); /* freed with the call, however it ends */
    if (o == NULL) {
        eddy_grpc_call_finish(call, EDDY_GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        return;
    }
    echo_initial(call);
}

/* StreamingOutputCall: one request, then its responses. */
static void output_call(eddy_grpc_call_t *call, eddy_buf_t *b)
{
    out_start(call);
    out_t *o = eddy_grpc_call_user_data(call);
    if (o != NULL) {
        o->half_closed = true;
        out_request(call, b);
    } else {
        eddy_buf_release(b);
    }
}

static void duplex_half_close(eddy_grpc_call_t *call)
{
    out_t *o = eddy_grpc_call_user_data(call);
    o->half_closed = true;
    out_pump(call);
}

static const eddy_grpc_method_ops_t empty_ops = {.on_request = empty_call};
static const eddy_grpc_method_ops_t unary_ops = {.on_request = unary_call};
static const eddy_grpc_method_ops_t input_ops = {.on_start = input_start,
                                                 .on_message = input_message,
                                                 .on_half_close = input_done};
static const eddy_grpc_method_ops_t output_ops = {.on_request = output_call,
                                                  .on_writable = out_pump};
static const eddy_grpc_method_ops_t duplex_ops = {.on_start = out_start,
                                                  .on_message = out_request,
                                                  .on_half_close = duplex_half_close,
                                                  .on_writable = out_pump};

/* UnaryCall and StreamingInputCall run on carrier when there is one (--offload): what a
 * method that blocks would do, the loop serving on meanwhile. */
static int add_methods(eddy_grpc_server_t *g, eddy_carrier_t *carrier)
{
    int rc = eddy_grpc_server_add_method(g, SVC "EmptyCall", EDDY_GRPC_UNARY, &empty_ops, NULL);
    rc = rc ? rc : eddy_grpc_server_add_method_on(g, SVC "UnaryCall", EDDY_GRPC_UNARY,
                                                  &unary_ops, NULL, carrier);
    rc = rc ? rc : eddy_grpc_server_add_method_on(g, SVC "StreamingInputCall",
                                                  EDDY_GRPC_CLIENT_STREAMING, &input_ops, NULL,
                                                  carrier);
    rc = rc ? rc : eddy_grpc_server_add_method(g, SVC "StreamingOutputCall",
                                               EDDY_GRPC_SERVER_STREAMING, &output_ops, NULL);
    rc = rc ? rc : eddy_grpc_server_add_method(g, SVC "FullDuplexCall",
                                               EDDY_GRPC_BIDI_STREAMING, &duplex_ops, NULL);
    return rc ? rc : eddy_grpc_server_add_health(g);
}

/* ---------------------------------------------------------------------------------------
 * The program
 */

typedef struct server_s {
    eddy_grpc_server_t *grpc;
    eddy_tls_context_t *tls;
} server_t;

static int init_child(eddy_channel_t *ch, void *arg)
{
    server_t *s = arg;
    int rc = s->tls != NULL ? eddy_tls_add(ch, s->tls, NULL, NULL) : 0;
    return rc != 0 ? rc : eddy_grpc_server_init_channel(ch, s->grpc);
}

static eddy_tls_context_t *tls_context(const char *cert, const char *key)
{
    eddy_tls_context_t *c = example_tls_context(EDDY_TLS_SERVER, "eddy-grpc-server");
    size_t n;
    const char *const *alpn = eddy_grpc_alpn_protocols(&n);
    int rc = c != NULL ? eddy_tls_context_use_certificate_file(c, cert, key) : EDDY_ENOMEM;
    rc = rc != 0 ? rc : eddy_tls_context_alpn(c, alpn, n);
    if (rc != 0) {
        fprintf(stderr, "eddy-grpc-server: TLS: %s\n",
                c != NULL ? eddy_tls_context_error(c) : "out of memory");
        eddy_tls_context_release(c);
        return NULL;
    }
    return c;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: eddy-grpc-server [--port P] [--host H] [--threads N] [--offload N]\n"
                "                        [--use_tls --cert FILE --key FILE] [--tls CERT KEY]\n"
                "  --offload N  run UnaryCall and StreamingInputCall on N threads of their own\n"
                "               (as methods that block would), each call's callbacks in order\n"
                "gRPC's interop TestService and grpc.health.v1.Health; --port 0 picks a free\n"
                "port and prints \"PORT <n>\". SIGINT or SIGTERM stop it gracefully.\n");
}

typedef struct args_s {
    const char *host, *cert, *key;
    unsigned long port, threads, offload;
    bool use_tls;
} args_t;

/* One option (name, with value or NULL) into a: 1 when it took the value, 0 when it took
 * none, -1 when it is not one of ours. */
static int option(args_t *a, const char *o, const char *v)
{
    if (strcmp(o, "--use_tls") == 0) { /* alone, or with true or false */
        bool given = v != NULL && (strcmp(v, "true") == 0 || strcmp(v, "false") == 0);
        a->use_tls = !given || strcmp(v, "true") == 0;
        return given ? 1 : 0;
    }
    if (v == NULL) {
        return -1;
    }
    if (strcmp(o, "--port") == 0) {
        return example_parse_uint(v, 65535, &a->port) ? 1 : -1;
    }
    if (strcmp(o, "--threads") == 0) {
        return example_parse_uint(v, 256, &a->threads) ? 1 : -1;
    }
    if (strcmp(o, "--offload") == 0) {
        return example_parse_uint(v, EDDY_CARRIER_MAX_THREADS, &a->offload) ? 1 : -1;
    }
    const char **slot = strcmp(o, "--host") == 0   ? &a->host
                        : strcmp(o, "--cert") == 0 ? &a->cert
                        : strcmp(o, "--key") == 0  ? &a->key
                                                   : NULL;
    if (slot == NULL) {
        return -1;
    }
    *slot = v;
    return 1;
}

/* 0, -1 after --help, or the exit status for a bad command line (usage printed). Options
 * come as "--name value" or "--name=value" (gRPC's interop programs use the latter). */
static int parse(int argc, char **argv, args_t *a)
{
    *a = (args_t){.host = "127.0.0.1", .port = 50051};
    for (int i = 1; i < argc; i++) {
        char name[32];
        const char *eq = strchr(argv[i], '=');
        int took;
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return -1;
        } else if (strcmp(argv[i], "--tls") == 0 && i + 2 < argc) {
            a->use_tls = true;
            a->cert = argv[++i];
            a->key = argv[++i];
            continue;
        } else if (eq != NULL && (size_t)(eq - argv[i]) < sizeof(name)) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - argv[i]), argv[i]);
            took = option(a, name, eq + 1) == 1 ? 0 : -1;
        } else {
            took = option(a, argv[i], i + 1 < argc ? argv[i + 1] : NULL);
        }
        if (took < 0) {
            usage(stderr);
            return 2;
        }
        i += took;
    }
    if (a->use_tls && (a->cert == NULL || a->key == NULL)) {
        fprintf(stderr, "eddy-grpc-server: --use_tls needs --cert and --key\n");
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    args_t a;
    int prc = parse(argc, argv, &a);
    if (prc != 0) {
        return prc < 0 ? 0 : prc;
    }
    eddy_stop_signals_block(); /* before any thread (the loops', the carrier's): they inherit it */
    server_t s = {.grpc = eddy_grpc_server_new(NULL)};
    if (a.use_tls && (s.tls = tls_context(a.cert, a.key)) == NULL) {
        return 1;
    }
    eddy_carrier_t *carrier = NULL;
    if (a.offload > 0) {
        eddy_carrier_options_t co;
        eddy_carrier_options_init(&co);
        co.consumers = (unsigned)a.offload;
        co.partitions = (unsigned)a.offload * 4;
        co.partitioner = EDDY_CARRIER_BY_KEY;
        co.mode = EDDY_CARRIER_ORDERED;
        if (eddy_carrier_new(&carrier, &co, NULL, NULL) != 0) {
            fprintf(stderr, "eddy-grpc-server: cannot start the offload threads\n");
            return 1;
        }
    }
    if (s.grpc == NULL || add_methods(s.grpc, carrier) != 0) {
        fprintf(stderr, "eddy-grpc-server: out of memory\n");
        return 1;
    }
    eddy_loop_options_t opts = {.name = "grpc"};
    eddy_loop_group_t *loops = eddy_loop_group_new(a.threads, &opts);
    eddy_server_bootstrap_t *b = eddy_server_bootstrap_new();
    if (loops == NULL || b == NULL) {
        fprintf(stderr, "eddy-grpc-server: out of memory or threads\n");
        return 1;
    }
    example_configure(b, loops, NULL, init_child, &s);
    eddy_channel_t *listener = example_bind(b, a.host, a.port, "eddy-grpc-server");
    if (listener == NULL) {
        return 1;
    }
    if (a.port == 0) {
        printf("PORT %u\n", (unsigned)eddy_addr_port(eddy_channel_local_addr(listener)));
    }
    printf("eddy-grpc-server: listening, %zu loops (eddy %s)\n", eddy_loop_group_size(loops),
           eddy_version());
    fflush(stdout);
    eddy_stop_signals_wait(-1);
    example_unbind(listener);
    eddy_future_t *closed = eddy_server_bootstrap_shutdown(b);
    eddy_future_await(closed, 5000);
    eddy_future_release(closed);
    int rc = example_shutdown(b, loops, NULL);
    if (carrier != NULL) {
        eddy_carrier_shutdown(carrier, EDDY_CARRIER_DRAIN);
        eddy_carrier_free(carrier);
    }
    eddy_grpc_server_free(s.grpc);
    if (s.tls != NULL) {
        eddy_tls_context_release(s.tls);
    }
    return rc;
}
