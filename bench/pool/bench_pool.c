/*
 * bench_pool: what acquiring and releasing a pooled channel costs (eddy_channel_pool_t, #19).
 * The pool holds C connections to a local eddy echo server, made and released before the
 * rounds, so every acquire finds an idle channel: what is measured is the pool's hand-out and
 * take-back, no connect. The baseline is a mutex-guarded list of the same channels (lock, pop,
 * unlock; lock, push, unlock), doing the same pairs in the same run.
 *
 * Cases: 1t_foreign (one thread that is not a loop, on the second CPU), 2t_foreign (two such
 * threads, one per CPU, sharing the pool), 1t_loop (the client loop's own thread, on the first
 * CPU, in one task). Subjects alternate round by round; ops/s counts acquire+release pairs
 * (all threads together), ns per pair is its inverse per thread, the ratio is eddy / mutex.
 *
 * Options: --ops N (pairs per thread per round, k/m suffixes, default 200k), --rounds N
 * (measured rounds after one warm-up of each, default 5), --conns C (idle channels, 8),
 * --case NAME, --no-pin.
 */
#include <eddy/eddy.h>

#include "support/bench_util.h"
#include "support/machine_costs.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUNDS 51
#define MAX_CONNS 256

static uint64_t ops = 200000;
static int rounds = 5;
static int conns = 8;
static bool pin = true;
static int cpu_a = -1, cpu_b = -1;

typedef enum { SUBJECT_EDDY, SUBJECT_MUTEX } subject_t;

static eddy_channel_pool_t *pool;

/* The baseline: the same channels on a stack under a mutex. */
static struct {
    pthread_mutex_t lock;
    eddy_channel_t *chans[MAX_CONNS];
    int n;
} list = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic uint64_t failures;

/* n pairs on this thread: seconds taken. */
static double run_pairs(subject_t s, uint64_t n)
{
    double t0 = bench_now_s();
    if (s == SUBJECT_EDDY) {
        for (uint64_t i = 0; i < n; i++) {
            eddy_future_t *f = eddy_channel_pool_acquire(pool);
            /* Idle channels are there: the future is complete on return. */
            eddy_channel_t *ch = eddy_future_is_done(f) ? eddy_future_channel(f) : NULL;
            if (ch == NULL) {
                atomic_fetch_add(&failures, 1);
                eddy_future_release(f);
                continue;
            }
            eddy_future_release(eddy_channel_pool_release(pool, ch));
            eddy_future_release(f);
        }
    } else {
        for (uint64_t i = 0; i < n; i++) {
            pthread_mutex_lock(&list.lock);
            eddy_channel_t *ch = list.n > 0 ? list.chans[--list.n] : NULL;
            pthread_mutex_unlock(&list.lock);
            if (ch == NULL) {
                atomic_fetch_add(&failures, 1);
                continue;
            }
            pthread_mutex_lock(&list.lock);
            list.chans[list.n++] = ch;
            pthread_mutex_unlock(&list.lock);
        }
    }
    return bench_now_s() - t0;
}

/* ---------------------------------------------------------------------------------------
 * The cases: each returns pairs per second, all threads together
 */

typedef struct job_s {
    subject_t s;
    int cpu;
    double secs;
    pthread_barrier_t *start;
    sem_t done;
} job_t;

static void *foreign_thread(void *arg)
{
    job_t *j = arg;
    bench_thread_pin(j->cpu);
    pthread_barrier_wait(j->start);
    j->secs = run_pairs(j->s, ops);
    return NULL;
}

static double run_foreign(subject_t s, int threads)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    job_t jobs[2];
    pthread_t t[2];
    for (int i = 0; i < threads; i++) {
        jobs[i] = (job_t){
            .s = s, .cpu = threads == 1 ? cpu_b : (i == 0 ? cpu_a : cpu_b), .start = &start};
        pthread_create(&t[i], NULL, foreign_thread, &jobs[i]);
    }
    double secs = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        secs = jobs[i].secs > secs ? jobs[i].secs : secs;
    }
    pthread_barrier_destroy(&start);
    return (double)ops * threads / secs;
}

static void loop_task(void *arg)
{
    job_t *j = arg;
    j->secs = run_pairs(j->s, ops);
    sem_post(&j->done);
}

static eddy_loop_t *client_loop;

static double run_loop(subject_t s, int threads)
{
    (void)threads;
    job_t j = {.s = s};
    sem_init(&j.done, 0, 0);
    if (eddy_loop_execute(client_loop, loop_task, &j) != 0) {
        fprintf(stderr, "bench_pool: the loop refused the task\n");
        exit(1);
    }
    sem_wait(&j.done);
    sem_destroy(&j.done);
    return (double)ops / j.secs;
}

typedef struct case_s {
    const char *name;
    int threads;
    double (*run)(subject_t s, int threads);
} case_t;

static const case_t cases[] = {
    {"1t_foreign", 1, run_foreign},
    {"2t_foreign", 2, run_foreign},
    {"1t_loop", 1, run_loop},
};

/* ---------------------------------------------------------------------------------------
 * The echo server and the warm pool
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

static int init_echo(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &echo_ops, NULL, NULL);
}

static eddy_channel_t *await_channel(eddy_future_t *f, const char *what)
{
    if (f == NULL || eddy_future_await(f, 10000) != 0 || eddy_future_error(f) != 0) {
        fprintf(stderr, "bench_pool: %s failed\n", what);
        exit(1);
    }
    eddy_channel_t *ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    return ch;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_pool [--ops N] [--rounds N] [--conns C] [--case NAME] [--no-pin]\n"
            "  --ops N      acquire+release pairs per thread per round (default 200k)\n"
            "  --rounds N   measured rounds after one warm-up (default 5, max %d)\n"
            "  --conns C    idle channels in the pool and the list (default 8, max %d)\n"
            "  --case NAME  1t_foreign, 2t_foreign or 1t_loop (default: all)\n"
            "  --no-pin     leave threads where the scheduler puts them\n",
            MAX_ROUNDS, MAX_CONNS);
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-pin") == 0) {
            pin = false;
            continue;
        } else if (strcmp(a, "--ops") == 0 && v != NULL && bench_parse_count(v, &ops)) {
        } else if (strcmp(a, "--rounds") == 0 && v != NULL && (rounds = atoi(v)) >= 1 &&
                   rounds <= MAX_ROUNDS) {
        } else if (strcmp(a, "--conns") == 0 && v != NULL && (conns = atoi(v)) >= 2 &&
                   conns <= MAX_CONNS) {
        } else if (strcmp(a, "--case") == 0 && v != NULL) {
            only = v;
        } else {
            usage(a[0] == '-' && a[1] == 'h' ? stdout : stderr);
            return a[0] == '-' && a[1] == 'h' ? 0 : 2;
        }
        i++;
    }
    bench_cpus_init(pin, &cpu_a, &cpu_b);
    bench_thread_pin(cpu_a);

    eddy_loop_options_t so = {.name = "pool-server"};
    eddy_loop_options_t co = {.name = "pool-client", .cpu = cpu_a, .cpu_set = cpu_a >= 0};
    eddy_loop_group_t *sg = eddy_loop_group_new(1, &so);
    eddy_loop_group_t *cg = eddy_loop_group_new(1, &co);
    eddy_server_bootstrap_t *sb = eddy_server_bootstrap_new();
    eddy_bootstrap_t *cb = eddy_bootstrap_new();
    if (sg == NULL || cg == NULL || sb == NULL || cb == NULL) {
        fprintf(stderr, "bench_pool: out of memory or threads\n");
        return 1;
    }
    eddy_server_bootstrap_group(sb, sg, NULL);
    eddy_server_bootstrap_child_init(sb, init_echo, NULL);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0), "bind");
    uint16_t port = eddy_addr_port(eddy_channel_local_addr(server));
    eddy_bootstrap_group(cb, cg);
    client_loop = eddy_loop_group_next(cg);
    eddy_channel_pool_options_t po = {.max_connections = (size_t)conns};
    pool = eddy_channel_pool_new(cb, "127.0.0.1", port, &po);
    if (pool == NULL) {
        fprintf(stderr, "bench_pool: no pool\n");
        return 1;
    }
    /* Warm: every connection made, then all idle; the list holds the same channels. */
    eddy_future_t *held[MAX_CONNS];
    for (int i = 0; i < conns; i++) {
        held[i] = eddy_channel_pool_acquire(pool);
        list.chans[list.n++] = await_channel(eddy_future_retain(held[i]), "connect");
    }
    for (int i = 0; i < conns; i++) {
        eddy_future_release(eddy_channel_pool_release(pool, eddy_future_channel(held[i])));
        eddy_future_release(held[i]);
    }

    bench_machine_costs_print("pool", cpu_a, cpu_b);
    printf("acquire+release of an idle pooled channel (%d connections warm), %llu pairs per "
           "thread per round, %d rounds after a warm-up, CPUs %d (loop) and %d\n",
           conns, (unsigned long long)ops, rounds, cpu_a, cpu_b);
    printf("%-11s | %-28s | %-28s | %-9s | %s\n", "case", "eddy pool M pairs/s (min-max)",
           "mutex list M pairs/s (min-max)", "ns/pair", "ratio");
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const case_t *k = &cases[c];
        if (only != NULL && strcmp(only, k->name) != 0) {
            continue;
        }
        double v[2][MAX_ROUNDS];
        k->run(SUBJECT_EDDY, k->threads); /* warm-up */
        k->run(SUBJECT_MUTEX, k->threads);
        for (int r = 0; r < rounds; r++) {
            /* Alternate which goes first, so neither always follows the other. */
            subject_t first = r % 2 ? SUBJECT_MUTEX : SUBJECT_EDDY;
            v[first][r] = k->run(first, k->threads);
            v[!first][r] = k->run(!first, k->threads);
        }
        bench_stats_t e = bench_stats(v[SUBJECT_EDDY], rounds);
        bench_stats_t m = bench_stats(v[SUBJECT_MUTEX], rounds);
        double ratio = e.median / m.median;
        double ns_e = 1e9 * k->threads / e.median, ns_m = 1e9 * k->threads / m.median;
        printf("%-11s | %7.2f (%6.2f-%6.2f)      | %7.2f (%6.2f-%6.2f)      | %4.0f/%-4.0f | "
               "%.3f\n",
               k->name, e.median / 1e6, e.min / 1e6, e.max / 1e6, m.median / 1e6, m.min / 1e6,
               m.max / 1e6, ns_e, ns_m, ratio);
        printf("{\"bench\":\"pool\",\"case\":\"%s\",\"subject\":\"eddy\",\"baseline\":"
               "\"mutex_list\",\"ops_per_s\":%.4g,\"ops_per_s_min\":%.4g,\"ops_per_s_max\":%.4g,"
               "\"ns_per_pair\":%.1f,\"baseline_ops_per_s\":%.4g,\"baseline_ns_per_pair\":%.1f,"
               "\"ratio\":%.3f}\n",
               k->name, e.median, e.min, e.max, ns_e, m.median, ns_m, ratio);
        fflush(stdout);
    }
    if (atomic_load(&failures) != 0) {
        fprintf(stderr, "bench_pool: %llu acquires found no idle channel\n",
                (unsigned long long)atomic_load(&failures));
    }

    for (int i = 0; i < conns; i++) {
        eddy_channel_release(list.chans[i]);
    }
    eddy_future_t *closed = eddy_channel_pool_close(pool);
    eddy_future_await(closed, 10000);
    eddy_future_release(closed);
    eddy_bootstrap_free(cb);
    eddy_channel_close(server, NULL);
    eddy_future_await(eddy_channel_close_future(server), 10000);
    eddy_channel_release(server);
    eddy_server_bootstrap_free(sb);
    eddy_loop_group_t *groups[] = {cg, sg};
    for (int i = 0; i < 2; i++) {
        eddy_future_t *t = eddy_loop_group_shutdown_gracefully(groups[i], 0, 2000);
        eddy_future_await(t, 10000);
        eddy_future_release(t);
    }
    eddy_loop_group_free(cg);
    eddy_loop_group_free(sg);
    return atomic_load(&failures) == 0 ? 0 : 1;
}
