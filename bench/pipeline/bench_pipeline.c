/*
 * bench_pipeline: what a longer pipeline costs. An echo server on one eddy loop (CPU 0) with
 * either the echo handler alone (echo_1_handler, the baseline) or four pass-through handlers
 * in front of it (echo_5_handlers: every read, read_complete, write and flush visits all
 * five), driven by a load generator of ours on CPU 1: C connections, each keeping D messages
 * of S bytes in flight over epoll, every echoed byte checked. Subjects alternate round by
 * round in one run; the ratio is 5 handlers / 1 handler for messages per second and for the
 * loop thread's CPU time per message (the load generator may saturate its core first, and
 * CPU per message is what the extra handlers cost).
 *
 * Options: --rounds N (measured rounds after one warm-up of each, default 5), --seconds S
 * (per round, default 1.5), --conns C (16), --depth D (16), --size S (64), --no-pin.
 */
#include <eddy/channel.h>
#include <eddy/pipeline.h>

#include "support/bench_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 51
#define MAX_CONNS 1024

static int rounds = 5;
static double seconds = 1.5;
static int conns = 16;
static int depth = 16;
static int size = 64;
static bool pin = true;
static int cpu_server = -1, cpu_client = -1;

/* ---------------------------------------------------------------------------------------
 * The server's handlers
 */

static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_write(ctx, msg, NULL);
}

static void echo_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static const eddy_handler_ops_t echo_ops = {
    .name = "echo",
    .sharable = true,
    .channel_read = echo_read,
    .channel_read_complete = echo_read_complete,
};

/* Pass-through: implements the hot events and hands each on, as a real handler that looks
 * at every message and passes it would. The counter keeps the calls from being empty. */
typedef struct pass_s {
    uint64_t reads, writes;
} pass_t;

static void pass_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    ((pass_t *)eddy_ctx_state(ctx))->reads++;
    eddy_ctx_fire_channel_read(ctx, msg);
}

static void pass_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_fire_channel_read_complete(ctx);
}

static void pass_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    ((pass_t *)eddy_ctx_state(ctx))->writes++;
    eddy_ctx_write(ctx, msg, p);
}

static void pass_flush(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static const eddy_handler_ops_t pass_ops = {
    .name = "pass",
    .channel_read = pass_read,
    .channel_read_complete = pass_read_complete,
    .write = pass_write,
    .flush = pass_flush,
};

static int init_1(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &echo_ops, NULL, NULL);
}

static int init_5(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    for (int i = 0; i < 4; i++) {
        pass_t *st = calloc(1, sizeof(*st));
        if (st == NULL || eddy_pipeline_add_last(p, NULL, &pass_ops, st, eddy_free_state) != 0) {
            return -1;
        }
    }
    return eddy_pipeline_add_last(p, "echo", &echo_ops, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------
 * The load generator: one thread, epoll, every connection keeps `depth` messages in flight.
 */

typedef struct conn_s {
    int fd;
    uint64_t sent, received; /* bytes */
    uint8_t pattern;
} conn_t;

static void die(const char *what)
{
    fprintf(stderr, "bench_pipeline: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cpu_task(void *arg, void **result)
{
    *(double *)arg = thread_cpu_s();
    *result = NULL;
    return 0;
}

/* The loop thread's CPU time, read on the loop. */
static double loop_cpu_s(eddy_loop_t *loop)
{
    double v = 0;
    eddy_future_t *f = eddy_loop_submit(loop, cpu_task, &v);
    eddy_future_await(f, -1);
    eddy_future_release(f);
    return v;
}

typedef struct result_s {
    double msgs_per_s;
    double cpu_ns_per_msg;
} result_t;

static result_t run_round(const eddy_addr_t *addr, eddy_loop_t *loop)
{
    conn_t *c = calloc((size_t)conns, sizeof(*c));
    int ep = epoll_create1(EPOLL_CLOEXEC);
    uint8_t *out = malloc((size_t)size * (size_t)depth);
    uint8_t *in = malloc(65536);
    for (int i = 0; i < conns; i++) {
        c[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c[i].fd < 0 || connect(c[i].fd, &addr->u.sa, addr->len) != 0) {
            die("connect");
        }
        int one = 1;
        setsockopt(c[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c[i].pattern = (uint8_t)(i * 37 + 1);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev);
    }
    /* Fill the pipes: depth messages each (blocking sends; a few KiB at most). */
    for (int i = 0; i < conns; i++) {
        memset(out, c[i].pattern, (size_t)size * (size_t)depth);
        if (send(c[i].fd, out, (size_t)size * (size_t)depth, 0) != (ssize_t)size * depth) {
            die("send");
        }
        c[i].sent = (uint64_t)size * (uint64_t)depth;
    }
    double cpu0 = loop_cpu_s(loop);
    double t0 = bench_now_s();
    double until = t0 + seconds;
    uint64_t received = 0;
    struct epoll_event evs[64];
    while (bench_now_s() < until) {
        int n = epoll_wait(ep, evs, 64, 100);
        for (int k = 0; k < n; k++) {
            conn_t *cn = &c[evs[k].data.u32];
            ssize_t r = recv(cn->fd, in, 65536, MSG_DONTWAIT);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) {
                    continue;
                }
                die("recv");
            }
            for (ssize_t j = 0; j < r; j++) {
                if (in[j] != cn->pattern) {
                    fprintf(stderr, "bench_pipeline: wrong byte echoed\n");
                    exit(1);
                }
            }
            /* Send one message for every whole message that came back. */
            uint64_t before = cn->received / (uint64_t)size;
            cn->received += (uint64_t)r;
            received += (uint64_t)r;
            uint64_t msgs = cn->received / (uint64_t)size - before;
            if (msgs > 0) {
                size_t len = (size_t)msgs * (size_t)size;
                memset(out, cn->pattern, len < (size_t)size * (size_t)depth
                                             ? len
                                             : (size_t)size * (size_t)depth);
                while (len > 0) {
                    size_t chunk = len < (size_t)size * (size_t)depth
                                       ? len
                                       : (size_t)size * (size_t)depth;
                    ssize_t w = send(cn->fd, out, chunk, 0);
                    if (w <= 0) {
                        die("send");
                    }
                    len -= (size_t)w;
                    cn->sent += (uint64_t)w;
                }
            }
        }
    }
    double t1 = bench_now_s();
    double cpu1 = loop_cpu_s(loop);
    for (int i = 0; i < conns; i++) {
        close(c[i].fd);
    }
    close(ep);
    free(c);
    free(out);
    free(in);
    double msgs = (double)received / size;
    return (result_t){msgs / (t1 - t0), (cpu1 - cpu0) * 1e9 / msgs};
}

typedef struct server_s {
    eddy_loop_group_t *group;
    eddy_loop_t *loop;
    eddy_channel_t *listener;
    eddy_addr_t addr;
} server_t;

static void server_start(server_t *s, eddy_channel_init_cb init)
{
    eddy_loop_options_t lo = {.name = "bench-server", .cpu = cpu_server, .cpu_set = pin};
    s->group = eddy_loop_group_new(1, &lo);
    s->loop = eddy_loop_group_next(s->group);
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    eddy_listen_options_t o = {.loop = s->loop, .child_init = init};
    eddy_future_t *f = eddy_channel_listen(&a, &o);
    if (f == NULL || eddy_future_await(f, 5000) != 0 || eddy_future_error(f) != 0) {
        fprintf(stderr, "bench_pipeline: listen failed\n");
        exit(1);
    }
    s->listener = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    s->addr = *eddy_channel_local_addr(s->listener);
}

static void server_stop(server_t *s)
{
    eddy_channel_close(s->listener, NULL);
    eddy_future_await(eddy_channel_close_future(s->listener), 5000);
    eddy_channel_release(s->listener);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(s->group, 0, 2000), -1);
    eddy_loop_group_free(s->group);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_pipeline [--rounds N] [--seconds S] [--conns C] [--depth D] "
               "[--size S] [--no-pin]\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-pin") == 0) {
            pin = false;
            continue;
        }
        if (v == NULL) {
            usage(stderr);
            return 2;
        }
        i++;
        if (strcmp(a, "--rounds") == 0 && atoi(v) >= 1 && atoi(v) <= MAX_ROUNDS) {
            rounds = atoi(v);
        } else if (strcmp(a, "--seconds") == 0 && atof(v) > 0) {
            seconds = atof(v);
        } else if (strcmp(a, "--conns") == 0 && atoi(v) >= 1 && atoi(v) <= MAX_CONNS) {
            conns = atoi(v);
        } else if (strcmp(a, "--depth") == 0 && atoi(v) >= 1 && atoi(v) <= 1024) {
            depth = atoi(v);
        } else if (strcmp(a, "--size") == 0 && atoi(v) >= 1 && atoi(v) <= 65536) {
            size = atoi(v);
        } else {
            usage(stderr);
            return 2;
        }
    }
    bench_cpus_init(pin, &cpu_server, &cpu_client);
    bench_thread_pin(pin ? cpu_client : -1);
    char model[128];
    bench_cpu_model(model, sizeof(model));
    double load[3] = {0};
    if (getloadavg(load, 3) < 0) {
        load[0] = -1;
    }
    printf("bench pipeline: an echo server on one eddy loop, 1 handler vs 4 pass-through + echo\n");
    printf("cpu: %s; server loop on CPU %d, load generator on CPU %d; load average %.2f at start\n",
           model, cpu_server, cpu_client, load[0]);
    printf("echo_5_handlers: %d connections x depth %d x %d B, %.1f s per round, 1 warm-up + %d "
           "rounds, alternating\n",
           conns, depth, size, seconds, rounds);

    server_t one, five;
    server_start(&one, init_1);
    server_start(&five, init_5);
    double rate[2][MAX_ROUNDS], cpu[2][MAX_ROUNDS];
    for (int r = -1; r < rounds; r++) {
        for (int s = 0; s < 2; s++) {
            int subject = (r & 1) ? 1 - s : s; /* A B, then B A */
            server_t *srv = subject == 0 ? &one : &five;
            result_t res = run_round(&srv->addr, srv->loop);
            if (r >= 0) {
                rate[subject][r] = res.msgs_per_s;
                cpu[subject][r] = res.cpu_ns_per_msg;
            }
        }
    }
    server_stop(&one);
    server_stop(&five);
    bench_stats_t r1 = bench_stats(rate[0], rounds), r5 = bench_stats(rate[1], rounds);
    bench_stats_t c1 = bench_stats(cpu[0], rounds), c5 = bench_stats(cpu[1], rounds);
    printf("  subject             median msgs/s          min - max    loop CPU ns/msg (min - max)\n");
    printf("  echo_1_handler      %8.3f M   %8.3f M - %8.3f M    %7.1f (%.1f - %.1f)\n",
           r1.median / 1e6, r1.min / 1e6, r1.max / 1e6, c1.median, c1.min, c1.max);
    printf("  echo_5_handlers     %8.3f M   %8.3f M - %8.3f M    %7.1f (%.1f - %.1f)\n",
           r5.median / 1e6, r5.min / 1e6, r5.max / 1e6, c5.median, c5.min, c5.max);
    double ratio = r5.median / r1.median;
    double cpu_ratio = c5.median / c1.median;
    printf("  throughput ratio 5/1: %.3f (%.1f%% %s); loop CPU per message 5/1: %.3f\n", ratio,
           (ratio >= 1 ? ratio - 1 : 1 - ratio) * 100, ratio >= 1 ? "more" : "less", cpu_ratio);
    printf("  target: 5 handlers cost at most 10%% of throughput: %s\n",
           ratio >= 0.9 ? "met" : "NOT met");
    printf("{\"bench\":\"pipeline\",\"case\":\"echo_5_handlers\",\"subject\":\"eddy\","
           "\"baseline\":\"echo_1_handler\",\"ops_per_s\":%.0f,\"ops_per_s_min\":%.0f,"
           "\"ops_per_s_max\":%.0f,\"baseline_ops_per_s\":%.0f,\"baseline_ops_per_s_min\":%.0f,"
           "\"baseline_ops_per_s_max\":%.0f,\"ratio\":%.4f,\"cpu_ns_per_msg\":%.1f,"
           "\"baseline_cpu_ns_per_msg\":%.1f,\"cpu_ratio\":%.4f,\"rounds\":%d,\"conns\":%d,"
           "\"depth\":%d,\"size\":%d,\"target_ratio\":0.9,\"target_met\":%s}\n",
           r5.median, r5.min, r5.max, r1.median, r1.min, r1.max, ratio, c5.median, c1.median,
           cpu_ratio, rounds, conns, depth, size, ratio >= 0.9 ? "true" : "false");
    return 0;
}
