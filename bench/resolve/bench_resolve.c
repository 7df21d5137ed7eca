/*
 * bench_resolve: name lookups per second, and CPU time per lookup, three ways against one
 * local DNS server (bench/resolve/run.sh starts eddy-dns-server with a zone of NAMES names):
 *
 *   cache        eddy_resolve answered from the loop's cache (every name looked up once
 *                before), lookups made by a task on the loop
 *   cares_wN     eddy_resolve through c-ares to the server, the cache off, N lookups kept in
 *                flight by their own listeners on the loop (N = 4 and 64)
 *   getaddrinfo  the baseline: a pool of 4 threads each calling getaddrinfo() in turn, the
 *                server put in each thread's resolver state (_res: glibc reads no port from
 *                resolv.conf, and the application may set _res after res_init())
 *
 * Subjects alternate within each round; medians and min-max over the rounds, ratios to the
 * getaddrinfo pool, and a {"bench":"resolve",...} JSON line per comparison. CPU per lookup is
 * utime + stime of this process over the window (/proc/self/stat), so the server's is not in
 * it. Every lookup asks for IPv4 only (one A query), on both sides.
 *
 *   bench_resolve --server 127.0.0.1:PORT [--names N] [--rounds N] [--seconds S]
 */
#include <eddy/eddy.h>

#include "support/bench_util.h"
#include "support/proc_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdatomic.h>
#include <unistd.h>

#define MAX_ROUNDS 51
#define GAI_THREADS 4
#define ZONE "bench.test"

static char server_ip[64];
static unsigned server_port;
static size_t nnames = 1000;
static char **names;
static double seconds = 1.0;

typedef struct result_s {
    double ops_per_s;
    double cpu_ns_per_op;
    uint64_t errors;
} result_t;

/* ---------------------------------------------------------------------------------------
 * eddy: lookups driven on the loop
 */

typedef struct drive_s {
    eddy_loop_t *loop;
    eddy_resolve_options_t o;
    int64_t end_ns;
    size_t next, limit, inflight; /* lookups stop at end_ns or after limit */
    uint64_t done, errors;
    eddy_promise_t *finished;
} drive_t;

static void issue(drive_t *d);

static void lookup_done(eddy_future_t *f, void *arg)
{
    drive_t *d = arg;
    d->done++;
    if (eddy_future_error(f) != 0) {
        d->errors++;
    }
    eddy_future_release(f);
    if (eddy_now_ns() < d->end_ns && d->next < d->limit) {
        issue(d);
    } else if (--d->inflight == 0) {
        eddy_promise_succeed(d->finished, NULL);
    }
}

static void issue(drive_t *d)
{
    const char *name = names[d->next++ % nnames];
    eddy_future_t *f = eddy_resolve(d->loop, name, 80, &d->o);
    if (f == NULL || eddy_future_add_listener(f, lookup_done, d) != 0) {
        fprintf(stderr, "bench_resolve: out of memory\n");
        exit(1);
    }
}

static void start_window(void *arg)
{
    drive_t *d = arg;
    size_t window = d->inflight;
    for (size_t i = 0; i < window; i++) {
        issue(d);
    }
}

/* Cache hits complete inside eddy_resolve: a task makes them in batches, and queues itself
 * again until the time is up (so the loop still turns). */
static void cache_batch(void *arg)
{
    drive_t *d = arg;
    for (int i = 0; i < 256; i++) {
        eddy_future_t *f = eddy_resolve(d->loop, names[d->next++ % nnames], 80, &d->o);
        if (eddy_future_error(f) != 0) {
            d->errors++;
        }
        eddy_future_release(f);
        d->done++;
    }
    if (eddy_now_ns() < d->end_ns) {
        eddy_loop_execute(d->loop, cache_batch, d);
    } else {
        eddy_promise_succeed(d->finished, NULL);
    }
}

/* window lookups in flight (0: cache hits, made by a task) for the time given, or until
 * limit lookups were made. */
static result_t run_eddy(eddy_loop_t *loop, size_t window, bool cache, size_t limit)
{
    drive_t d = {.loop = loop, .o = {.family = EDDY_RESOLVE_V4, .timeout_ms = 5000}};
    d.inflight = window;
    d.limit = limit;
    d.finished = eddy_promise_new(NULL);
    double cpu0 = bench_proc_cpu_s(getpid());
    int64_t t0 = eddy_now_ns();
    d.end_ns = limit == SIZE_MAX ? t0 + (int64_t)(seconds * 1e9) : INT64_MAX;
    eddy_loop_execute(loop, cache ? cache_batch : start_window, &d);
    eddy_future_await(d.finished, -1);
    int64_t t1 = eddy_now_ns();
    double cpu1 = bench_proc_cpu_s(getpid());
    eddy_future_release(d.finished);
    result_t r = {
        .ops_per_s = (double)d.done / ((double)(t1 - t0) * 1e-9),
        .cpu_ns_per_op = (cpu1 - cpu0) * 1e9 / (double)d.done,
        .errors = d.errors,
    };
    return r;
}

/* ---------------------------------------------------------------------------------------
 * The baseline: getaddrinfo on a pool of threads
 */

typedef struct gai_s {
    size_t first;
    double end_s;
    uint64_t done, errors;
} gai_t;

static void *gai_thread(void *arg)
{
    gai_t *g = arg;
    /* This thread's resolver state asks our server alone, once, quickly. */
    res_init();
    _res.nscount = 1;
    _res.nsaddr_list[0].sin_family = AF_INET;
    _res.nsaddr_list[0].sin_port = htons((uint16_t)server_port);
    inet_pton(AF_INET, server_ip, &_res.nsaddr_list[0].sin_addr);
    _res.retry = 2;
    _res.retrans = 5;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    size_t i = g->first;
    while (bench_now_s() < g->end_s) {
        struct addrinfo *res = NULL;
        if (getaddrinfo(names[i++ % nnames], "80", &hints, &res) != 0) {
            g->errors++;
        } else {
            freeaddrinfo(res);
        }
        g->done++;
    }
    return NULL;
}

static result_t run_gai(void)
{
    gai_t g[GAI_THREADS];
    pthread_t t[GAI_THREADS];
    double cpu0 = bench_proc_cpu_s(getpid());
    double t0 = bench_now_s();
    for (size_t i = 0; i < GAI_THREADS; i++) {
        g[i] = (gai_t){.first = i * (nnames / GAI_THREADS), .end_s = t0 + seconds};
        pthread_create(&t[i], NULL, gai_thread, &g[i]);
    }
    uint64_t done = 0, errors = 0;
    for (size_t i = 0; i < GAI_THREADS; i++) {
        pthread_join(t[i], NULL);
        done += g[i].done;
        errors += g[i].errors;
    }
    double t1 = bench_now_s();
    double cpu1 = bench_proc_cpu_s(getpid());
    result_t r = {
        .ops_per_s = (double)done / (t1 - t0),
        .cpu_ns_per_op = (cpu1 - cpu0) * 1e9 / (double)done,
        .errors = errors,
    };
    return r;
}

/* ---------------------------------------------------------------------------------------
 * Rounds and the table
 */

enum { S_CACHE, S_CARES4, S_CARES64, S_GAI, NSUBJECTS };
static const char *const subject_names[NSUBJECTS] = {"cache", "cares_w4", "cares_w64",
                                                     "getaddrinfo_4threads"};

static void configure(bool cache)
{
    char servers[96];
    snprintf(servers, sizeof(servers), "%s:%u", server_ip, server_port);
    eddy_resolver_config_t cfg = {.servers = servers, .cache_off = !cache};
    if (eddy_resolver_configure(&cfg) != 0) {
        fprintf(stderr, "bench_resolve: bad server %s\n", servers);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    int rounds = 5;
    const char *server = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--server") == 0 && v != NULL) {
            server = v;
        } else if (strcmp(argv[i], "--names") == 0 && v != NULL) {
            nnames = strtoul(v, NULL, 10);
        } else if (strcmp(argv[i], "--rounds") == 0 && v != NULL) {
            rounds = atoi(v);
        } else if (strcmp(argv[i], "--seconds") == 0 && v != NULL) {
            seconds = atof(v);
        } else {
            fprintf(stderr, "bench_resolve: ignoring %s\n", argv[i]);
            continue;
        }
        i++;
    }
    const char *colon = server != NULL ? strrchr(server, ':') : NULL;
    if (colon == NULL || rounds < 1 || rounds > MAX_ROUNDS || nnames == 0 || seconds <= 0) {
        fprintf(stderr, "usage: bench_resolve --server IP:PORT [--names N] [--rounds N] "
                        "[--seconds S]\n");
        return 2;
    }
    snprintf(server_ip, sizeof(server_ip), "%.*s", (int)(colon - server), server);
    server_port = (unsigned)atoi(colon + 1);
    names = calloc(nnames, sizeof(*names));
    for (size_t i = 0; i < nnames; i++) {
        names[i] = malloc(64);
        snprintf(names[i], 64, "n%zu." ZONE ".", i); /* absolute: no search domains */
    }
    char cpu[128];
    bench_cpu_model(cpu, sizeof(cpu));
    printf("bench_resolve: %zu names on %s, %d rounds x %.1f s per subject, resolver %s, %s\n",
           nnames, server, rounds, seconds, eddy_resolver_backend(), cpu);

    eddy_loop_t *loop = eddy_loop_new(NULL);
    if (loop == NULL || eddy_loop_start(loop) != 0) {
        fprintf(stderr, "bench_resolve: no loop\n");
        return 1;
    }
    double ops[NSUBJECTS][MAX_ROUNDS], cpu_ns[NSUBJECTS][MAX_ROUNDS];
    uint64_t errors[NSUBJECTS] = {0};
    for (int r = 0; r < rounds; r++) {
        for (int s = 0; s < NSUBJECTS; s++) {
            result_t res;
            if (s == S_CACHE) {
                configure(true);
                /* Fill the cache: every name once, not timed. */
                res = run_eddy(loop, 64, false, nnames);
                errors[s] += res.errors;
                res = run_eddy(loop, 0, true, SIZE_MAX);
            } else if (s == S_GAI) {
                res = run_gai();
            } else {
                configure(false);
                res = run_eddy(loop, s == S_CARES4 ? 4 : 64, false, SIZE_MAX);
            }
            ops[s][r] = res.ops_per_s;
            cpu_ns[s][r] = res.cpu_ns_per_op;
            errors[s] += res.errors;
        }
    }
    eddy_future_t *t = eddy_loop_shutdown_gracefully(loop, 0, 1000);
    eddy_future_await(t, -1);
    eddy_loop_free(loop);

    bench_stats_t base = bench_stats(ops[S_GAI], rounds);
    bench_stats_t base_cpu = bench_stats(cpu_ns[S_GAI], rounds);
    printf("\n| subject | lookups/s | CPU per lookup | errors | vs getaddrinfo (lookups/s) | "
           "vs getaddrinfo (CPU) |\n|---|---|---|---|---|---|\n");
    for (int s = 0; s < NSUBJECTS; s++) {
        bench_stats_t o = bench_stats(ops[s], rounds);
        bench_stats_t c = bench_stats(cpu_ns[s], rounds);
        printf("| %s | %.0f (%.0f-%.0f) | %.0f ns (%.0f-%.0f) | %llu | %.2fx | %.2fx |\n",
               subject_names[s], o.median, o.min, o.max, c.median, c.min, c.max,
               (unsigned long long)errors[s], o.median / base.median, base_cpu.median / c.median);
    }
    printf("(ratios: lookups/s over the baseline's; CPU: the baseline's CPU per lookup over "
           "this one's, higher favours eddy)\n");
    for (int s = 0; s < NSUBJECTS; s++) {
        if (s == S_GAI) {
            continue;
        }
        bench_stats_t o = bench_stats(ops[s], rounds);
        bench_stats_t c = bench_stats(cpu_ns[s], rounds);
        printf("{\"bench\":\"resolve\",\"case\":\"%s\",\"subject\":\"eddy_%s\","
               "\"baseline\":\"getaddrinfo_4threads\",\"ops_per_s\":%.0f,"
               "\"baseline_ops_per_s\":%.0f,\"cpu_ns_per_op\":%.0f,"
               "\"baseline_cpu_ns_per_op\":%.0f,\"ratio\":%.3f,\"cpu_ratio\":%.3f}\n",
               subject_names[s], subject_names[s], o.median, base.median, c.median,
               base_cpu.median, o.median / base.median, base_cpu.median / c.median);
    }
    for (size_t i = 0; i < nnames; i++) {
        free(names[i]);
    }
    free(names);
    return errors[S_CARES4] + errors[S_CARES64] + errors[S_GAI] > 0 ? 1 : 0;
}
