/*
 * bench_ring: events (longs) through eddy's ring, after the Disruptor's own perf tests, against
 * a mutex/condition-variable bounded queue (Java's ArrayBlockingQueue in C) and
 * concurrencykit's ck_ring, alternating in the same run (docs/style.md, "Benchmarks"). The Java
 * Disruptor (java/RingBench.java) runs as a co-process given with --java (run.sh compiles and
 * passes it): its 1p1c and 2p1c runs take their turn in every round like the others.
 *
 * Cases (ring and queues 65536 slots):
 *   1p1c       one producer, one consumer (SP sequencer). Producer on CPU 0, consumer on CPU 1.
 *   2p1c       two producers, one consumer (MP sequencer). 3 threads on 2 cores: unpinned.
 *   pipeline3  one producer, three consumers in a pipeline. 4 threads on 2 cores: unpinned.
 *   diamond    one producer; A and B, then C. 4 threads on 2 cores: unpinned.
 * Each eddy case runs with the busy-spin, yielding and blocking wait strategies. The producer
 * claims and publishes one event at a time; consumers are batch processors summing the values.
 * The baselines move the same longs through one queue per edge of the same graph (the
 * diamond feeds A and B through a queue each, and C takes one from each of theirs); ck_ring
 * (non-blocking) waits by spinning 100 times, then yielding. ck_ring has no diamond here.
 *
 * Options: --events N (per eddy run, k/m suffixes; default 50m for 1p1c/2p1c, 10m for the
 * oversubscribed cases), --baseline-events N (mutex queue: default 5m, it is slow; ck_ring
 * runs the eddy count), --rounds N (default 3, after one warm-up round), --case NAME,
 * --java CMD, --no-pin.
 */
#include <eddy/ring.h>

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/bench_util.h"
#include "support/machine_costs.h"

#ifdef EDDY_BENCH_HAVE_CK
#include <ck_ring.h>
#endif

#define RING_SIZE 65536
#define MAX_ROUNDS 51
_Static_assert(MAX_ROUNDS <= BENCH_MAX_ROUNDS, "bench_stats sorts at most BENCH_MAX_ROUNDS");

enum { C_1P1C, C_2P1C, C_PIPE, C_DIAMOND, C_N };
static const char *const case_names[C_N] = {"1p1c", "2p1c", "pipeline3", "diamond"};
enum { W_BUSY, W_YIELD, W_BLOCK, W_N };
static const char *const ws_names[W_N] = {"busyspin", "yielding", "blocking"};
enum { B_MUTEX, B_CK, B_N };
static const char *const base_names[B_N] = {"mutex_queue", "ck_ring"};

static bool pin = true;
static bool costs = true; /* measure and print the machine's costs first (--no-costs) */
static int cpus[2] = {0, 1};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void set_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu < 0) {
        for (int i = 0; i < CPU_SETSIZE; i++)
            CPU_SET(i, &set);
    } else {
        CPU_SET(cpu, &set);
    }
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The last consumer counts events and notes the time it handled the last one. */
typedef struct {
    alignas(128) int64_t target;
    int64_t count;
    int64_t sum;
    int64_t end_ns;
    _Atomic int done;
    int cpu; /* -1: unpinned */
    char pad[128];
} sink_t;

static void sink_init(sink_t *s, int64_t target, int cpu)
{
    memset(s, 0, sizeof *s);
    s->target = target;
    s->cpu = cpu;
}

static inline void sink_take(sink_t *s, int64_t v)
{
    s->sum += v;
    if (++s->count == s->target) {
        s->end_ns = now_ns();
        atomic_store_explicit(&s->done, 1, memory_order_release);
    }
}

static void sink_wait(sink_t *s)
{
    while (!atomic_load_explicit(&s->done, memory_order_acquire))
        nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
}

/* ---------------------------------------------------------------------------------------
 * eddy
 */

/* Each stage on lines of its own: a consumer writes its sum on every event. */
typedef struct {
    alignas(128) int64_t sum;
    sink_t *sink; /* NULL for stages that are not last */
    int cpu;
} stage_t;

static int stage_event(void *slot, int64_t seq, bool end_of_batch, void *arg)
{
    stage_t *st = arg;
    int64_t v = *(int64_t *)slot;
    if (st->sink != NULL)
        sink_take(st->sink, v);
    else
        st->sum += v;
    return 0;
}

static void stage_start(void *arg)
{
    stage_t *st = arg;
    if (pin && st->cpu >= 0)
        set_cpu(st->cpu);
}

static const eddy_event_handler_ops_t stage_ops = {
    .name = "bench", .on_event = stage_event, .on_start = stage_start};

typedef struct {
    eddy_sequencer_t *seqr;
    eddy_ring_t *ring;
    int64_t from, n;
} producer_t;

static void *eddy_produce(void *arg)
{
    producer_t *p = arg;
    eddy_sequencer_t *s = p->seqr;
    eddy_ring_t *ring = p->ring;
    int64_t end = p->from + p->n;
    for (int64_t i = p->from; i < end; i++) {
        int64_t seq = eddy_sequencer_next(s, 1);
        *(int64_t *)eddy_ring_get(ring, seq) = i;
        eddy_sequencer_publish(s, seq);
    }
    return NULL;
}

static eddy_wait_strategy_t *make_ws(int w)
{
    if (w == W_BUSY)
        return eddy_wait_strategy_busy_spin();
    return w == W_YIELD ? eddy_wait_strategy_yielding() : eddy_wait_strategy_blocking();
}

static double run_eddy(int c, int w, int64_t n)
{
    eddy_wait_strategy_t *ws = make_ws(w);
    eddy_disruptor_t *d =
        eddy_disruptor_new(RING_SIZE, sizeof(int64_t), NULL, NULL, c == C_2P1C, ws);
    /* Static, 128-byte aligned: on the stack they would share lines with the producer's
     * locals, and the consumer writes them on every event. */
    static sink_t sink;
    sink_init(&sink, n, c == C_1P1C ? cpus[1] : -1);
    static stage_t st[3];
    for (int i = 0; i < 3; i++)
        st[i] = (stage_t){.cpu = -1};
    eddy_event_handler_t h[3] = {{&stage_ops, &st[0]}, {&stage_ops, &st[1]}, {&stage_ops, &st[2]}};
    if (c == C_1P1C || c == C_2P1C) {
        st[0].sink = &sink;
        st[0].cpu = sink.cpu;
        eddy_disruptor_handle_events_with(d, h, 1);
    } else if (c == C_PIPE) {
        st[2].sink = &sink;
        eddy_group_then(eddy_group_then(eddy_disruptor_handle_events_with(d, &h[0], 1), &h[1], 1),
                        &h[2], 1);
    } else {
        st[2].sink = &sink;
        eddy_group_then(eddy_disruptor_handle_events_with(d, h, 2), &h[2], 1);
    }
    if (eddy_disruptor_start(d) != 0) {
        fprintf(stderr, "bench_ring: eddy_disruptor_start failed\n");
        exit(1);
    }
    set_cpu(c == C_1P1C && pin ? cpus[0] : -1);
    int64_t t0 = now_ns();
    if (c == C_2P1C) {
        producer_t p[2] = {{eddy_disruptor_sequencer(d), eddy_disruptor_ring(d), 0, n / 2},
                           {eddy_disruptor_sequencer(d), eddy_disruptor_ring(d), n / 2, n - n / 2}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, eddy_produce, &p[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    } else {
        producer_t p = {eddy_disruptor_sequencer(d), eddy_disruptor_ring(d), 0, n};
        eddy_produce(&p);
    }
    sink_wait(&sink);
    double ops = (double)n * 1e9 / (double)(sink.end_ns - t0);
    eddy_disruptor_shutdown(d);
    eddy_disruptor_free(d);
    eddy_wait_strategy_free(ws);
    set_cpu(-1);
    if (sink.sum != (n - 1) * n / 2) {
        fprintf(stderr, "bench_ring: eddy %s lost events\n", case_names[c]);
        exit(1);
    }
    return ops;
}

/* ---------------------------------------------------------------------------------------
 * Baselines: a mutex/condvar bounded queue, and ck_ring
 */

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    int64_t *buf;
    size_t head, tail, count;
} mq_t;

typedef struct {
    int kind; /* B_MUTEX or B_CK */
    bool mp;  /* several producers */
    mq_t mq;
#ifdef EDDY_BENCH_HAVE_CK
    ck_ring_t ck;
    ck_ring_buffer_t *ckbuf;
#endif
} queue_t;

static void q_init(queue_t *q, int kind, bool mp)
{
    memset(q, 0, sizeof *q);
    q->kind = kind;
    q->mp = mp;
    if (kind == B_MUTEX) {
        pthread_mutex_init(&q->mq.lock, NULL);
        pthread_cond_init(&q->mq.not_empty, NULL);
        pthread_cond_init(&q->mq.not_full, NULL);
        q->mq.buf = malloc(RING_SIZE * sizeof(int64_t));
    }
#ifdef EDDY_BENCH_HAVE_CK
    if (kind == B_CK) {
        q->ckbuf = aligned_alloc(128, RING_SIZE * sizeof(ck_ring_buffer_t));
        ck_ring_init(&q->ck, RING_SIZE);
    }
#endif
}

static void q_destroy(queue_t *q)
{
    if (q->kind == B_MUTEX) {
        pthread_mutex_destroy(&q->mq.lock);
        pthread_cond_destroy(&q->mq.not_empty);
        pthread_cond_destroy(&q->mq.not_full);
        free(q->mq.buf);
    }
#ifdef EDDY_BENCH_HAVE_CK
    free(q->ckbuf);
#endif
}

static inline void backoff(int *spins)
{
    if (*spins < 100) {
        (*spins)++;
        __builtin_ia32_pause();
    } else {
        sched_yield();
    }
}

static inline void q_put(queue_t *q, int64_t v)
{
    if (q->kind == B_MUTEX) {
        mq_t *m = &q->mq;
        pthread_mutex_lock(&m->lock);
        while (m->count == RING_SIZE)
            pthread_cond_wait(&m->not_full, &m->lock);
        m->buf[m->tail] = v;
        m->tail = (m->tail + 1) & (RING_SIZE - 1);
        m->count++;
        pthread_cond_signal(&m->not_empty);
        pthread_mutex_unlock(&m->lock);
        return;
    }
#ifdef EDDY_BENCH_HAVE_CK
    int spins = 0;
    void *p = (void *)(intptr_t)v;
    if (q->mp) {
        while (!ck_ring_enqueue_mpsc(&q->ck, q->ckbuf, p))
            backoff(&spins);
    } else {
        while (!ck_ring_enqueue_spsc(&q->ck, q->ckbuf, p))
            backoff(&spins);
    }
#endif
}

static inline int64_t q_take(queue_t *q)
{
    if (q->kind == B_MUTEX) {
        mq_t *m = &q->mq;
        pthread_mutex_lock(&m->lock);
        while (m->count == 0)
            pthread_cond_wait(&m->not_empty, &m->lock);
        int64_t v = m->buf[m->head];
        m->head = (m->head + 1) & (RING_SIZE - 1);
        m->count--;
        pthread_cond_signal(&m->not_full);
        pthread_mutex_unlock(&m->lock);
        return v;
    }
    void *p = NULL;
#ifdef EDDY_BENCH_HAVE_CK
    int spins = 0;
    if (q->mp) {
        while (!ck_ring_dequeue_mpsc(&q->ck, q->ckbuf, &p))
            backoff(&spins);
    } else {
        while (!ck_ring_dequeue_spsc(&q->ck, q->ckbuf, &p))
            backoff(&spins);
    }
#endif
    return (int64_t)(intptr_t)p;
}

typedef struct {
    queue_t *in, *in2, *out, *out2; /* in2: C of the diamond; out2: the diamond's producer */
    int64_t from, n;
    sink_t *sink;
    int cpu;
} qstage_t;

static void *q_stage(void *arg)
{
    qstage_t *st = arg;
    if (pin && st->cpu >= 0)
        set_cpu(st->cpu);
    int64_t n = st->n;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = q_take(st->in);
        if (st->in2 != NULL)
            q_take(st->in2);
        if (st->out != NULL)
            q_put(st->out, v);
        else
            sink_take(st->sink, v);
    }
    return NULL;
}

static void *q_produce(void *arg)
{
    qstage_t *st = arg;
    int64_t end = st->from + st->n;
    for (int64_t i = st->from; i < end; i++) {
        q_put(st->out, i);
        if (st->out2 != NULL)
            q_put(st->out2, i);
    }
    return NULL;
}

static double run_queue(int c, int kind, int64_t n)
{
    queue_t q[4];
    for (int i = 0; i < 4; i++)
        q_init(&q[i], kind, c == C_2P1C && i == 0);
    static sink_t sink;
    sink_init(&sink, n, -1);
    qstage_t st[3];
    memset(st, 0, sizeof st);
    int nst = 0;
    qstage_t prod = {.out = &q[0], .from = 0, .n = n};
    if (c == C_1P1C || c == C_2P1C) {
        int cpu = c == C_1P1C ? cpus[1] : -1;
        st[nst++] = (qstage_t){.in = &q[0], .n = n, .sink = &sink, .cpu = cpu};
    } else if (c == C_PIPE) {
        st[nst++] = (qstage_t){.in = &q[0], .out = &q[1], .n = n, .cpu = -1};
        st[nst++] = (qstage_t){.in = &q[1], .out = &q[2], .n = n, .cpu = -1};
        st[nst++] = (qstage_t){.in = &q[2], .n = n, .sink = &sink, .cpu = -1};
    } else {
        prod.out2 = &q[1];
        st[nst++] = (qstage_t){.in = &q[0], .out = &q[2], .n = n, .cpu = -1};
        st[nst++] = (qstage_t){.in = &q[1], .out = &q[3], .n = n, .cpu = -1};
        st[nst++] = (qstage_t){.in = &q[2], .in2 = &q[3], .n = n, .sink = &sink, .cpu = -1};
    }
    pthread_t t[3];
    for (int i = 0; i < nst; i++)
        pthread_create(&t[i], NULL, q_stage, &st[i]);
    set_cpu(c == C_1P1C && pin ? cpus[0] : -1);
    int64_t t0 = now_ns();
    if (c == C_2P1C) {
        qstage_t p2[2] = {{.out = &q[0], .from = 0, .n = n / 2},
                          {.out = &q[0], .from = n / 2, .n = n - n / 2}};
        pthread_t pt[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&pt[i], NULL, q_produce, &p2[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(pt[i], NULL);
    } else {
        q_produce(&prod);
    }
    sink_wait(&sink);
    double ops = (double)n * 1e9 / (double)(sink.end_ns - t0);
    for (int i = 0; i < nst; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++)
        q_destroy(&q[i]);
    set_cpu(-1);
    if (sink.sum != (n - 1) * n / 2) {
        fprintf(stderr, "bench_ring: %s %s lost events\n", base_names[kind], case_names[c]);
        exit(1);
    }
    return ops;
}

/* ---------------------------------------------------------------------------------------
 * Statistics, the Java figures, and the report
 */

typedef struct {
    double v[MAX_ROUNDS];
    int n;
} samples_t;

/*
 * The Java Disruptor, as a co-process: `RingBench --serve` (java/RingBench.java) reads
 * "CASE STRATEGY EVENTS" lines and answers each with the ops/s of one run. Its runs alternate
 * with ours round by round; between them the JVM waits on its stdin, its JIT warm.
 */
static FILE *java_in, *java_out;
static pid_t java_pid;

static bool java_start(const char *cmd)
{
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) {
        perror("bench_ring: pipe");
        return false;
    }
    java_pid = fork();
    if (java_pid < 0) {
        perror("bench_ring: fork");
        return false;
    }
    if (java_pid == 0) {
        dup2(to[0], STDIN_FILENO);
        dup2(from[1], STDOUT_FILENO);
        close(to[0]), close(to[1]), close(from[0]), close(from[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    java_in = fdopen(to[1], "w");
    java_out = fdopen(from[0], "r");
    return java_in != NULL && java_out != NULL;
}

/* One run of the JVM's; 0 when it did not answer (then the Java figures are left out). */
static double run_java(int c, int w, int64_t n)
{
    if (java_in == NULL)
        return 0;
    fprintf(java_in, "%s %s %lld\n", case_names[c], ws_names[w], (long long)n);
    fflush(java_in);
    char line[128];
    double v = 0;
    if (fgets(line, sizeof line, java_out) == NULL || (v = strtod(line, NULL)) <= 0) {
        fprintf(stderr, "bench_ring: the Java Disruptor did not answer; going on without it\n");
        fclose(java_in);
        java_in = NULL;
        return 0;
    }
    return v;
}

static void java_stop(void)
{
    if (java_pid <= 0)
        return;
    if (java_in != NULL)
        fclose(java_in); /* end of input: the JVM returns from main */
    fclose(java_out);
    waitpid(java_pid, NULL, 0);
}

static int64_t parse_count(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'k' || *end == 'K')
        v *= 1e3;
    else if (*end == 'm' || *end == 'M')
        v *= 1e6;
    return (int64_t)v;
}

static void json_line(const char *cname, const char *baseline, bench_stats_t e, bench_stats_t b,
                      int rounds, int64_t n, int64_t bn)
{
    printf("{\"bench\":\"ring\",\"case\":\"%s\",\"subject\":\"eddy\",\"baseline\":\"%s\","
           "\"ops_per_s\":%.4g,\"min\":%.4g,\"max\":%.4g,\"baseline_ops_per_s\":%.4g,"
           "\"baseline_min\":%.4g,\"baseline_max\":%.4g,\"ratio\":%.3f,\"rounds\":%d,"
           "\"events\":%lld,\"baseline_events\":%lld}\n",
           cname, baseline, e.median, e.min, e.max, b.median, b.min, b.max, e.median / b.median,
           rounds, (long long)n, (long long)bn);
}

int main(int argc, char **argv)
{
    int64_t events = 0, base_events = 5000000;
    int rounds = 5; /* #21's targets are read over at least five rounds */
    int only = -1;
    const char *java_cmd = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "--events") == 0) {
            events = parse_count(v), i++;
        } else if (strcmp(argv[i], "--baseline-events") == 0) {
            base_events = parse_count(v), i++;
        } else if (strcmp(argv[i], "--rounds") == 0) {
            rounds = atoi(v), i++;
        } else if (strcmp(argv[i], "--case") == 0) {
            for (int c = 0; c < C_N; c++)
                if (strcmp(v, case_names[c]) == 0)
                    only = c;
            if (only < 0) {
                fprintf(stderr, "bench_ring: unknown case %s\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(argv[i], "--java") == 0) {
            java_cmd = v, i++;
        } else if (strcmp(argv[i], "--no-pin") == 0) {
            pin = false;
        } else if (strcmp(argv[i], "--no-costs") == 0) {
            costs = false;
        } else if (strcmp(argv[i], "--ops") == 0) {
            events = parse_count(v), i++; /* bench/run.sh passes the same flags to all */
        } else {
            fprintf(stderr, "usage: bench_ring [--events N] [--baseline-events N] [--rounds N] "
                            "[--case 1p1c|2p1c|pipeline3|diamond] [--java CMD] "
                            "[--no-pin] [--no-costs]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS - 1)
        rounds = 5;
    if (java_cmd != NULL && !java_start(java_cmd))
        return 1;

    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    for (int i = 0, k = 0; i < CPU_SETSIZE && k < 2; i++)
        if (CPU_ISSET(i, &allowed))
            cpus[k++] = i;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double load[3] = {0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la != NULL) {
        if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = -1;
        fclose(la);
    }
    printf("bench ring: longs through eddy's ring (ring %d) vs mutex queue vs ck_ring%s\n",
           RING_SIZE, java_cmd ? " vs the Java Disruptor (a co-process)" : "");
    printf("%ld CPUs online; 1p1c pinned to CPUs %d and %d%s; other cases oversubscribe the "
           "cores and run unpinned; load average %.2f at start\n",
           ncpu, cpus[0], cpus[1], pin ? "" : " (--no-pin: not pinned)", load[0]);
    printf("1 warm-up round, then %d rounds, subjects alternating within each round; "
           "ratio = eddy median / baseline median\n", rounds);
    if (costs)
        bench_machine_costs_print("ring", cpus[0], cpus[1]);

    for (int c = 0; c < C_N; c++) {
        if (only >= 0 && c != only)
            continue;
        int64_t n = events ? events : (c <= C_2P1C ? 50000000 : 10000000);
        int64_t mn = base_events < n ? base_events : n;
        bool have_ck = false;
#ifdef EDDY_BENCH_HAVE_CK
        have_ck = c != C_DIAMOND;
#endif
        samples_t e[W_N] = {0}, b[B_N] = {0}, jv[W_N] = {0};
        bool have_java = java_cmd != NULL && c <= C_2P1C;
        for (int r = 0; r <= rounds; r++) {
            for (int w = 0; w < W_N; w++) {
                double v = run_eddy(c, w, n);
                if (r > 0)
                    e[w].v[e[w].n++] = v;
            }
            double v = run_queue(c, B_MUTEX, mn);
            if (r > 0)
                b[B_MUTEX].v[b[B_MUTEX].n++] = v;
            if (have_ck) {
                v = run_queue(c, B_CK, n);
                if (r > 0)
                    b[B_CK].v[b[B_CK].n++] = v;
            }
            for (int w = 0; have_java && w < W_N; w++) {
                v = run_java(c, w, n);
                if (v <= 0)
                    have_java = false;
                else if (r > 0)
                    jv[w].v[jv[w].n++] = v;
            }
        }
        printf("\n%s: %lld events per eddy/ck_ring run, %lld per mutex_queue run\n",
               case_names[c], (long long)n, (long long)mn);
        printf("  %-26s %14s %26s\n", "subject", "median Mops/s", "min - max");
        /* Zero for a baseline that is absent (never shown): gcc 12 at -O3 cannot tell. */
        bench_stats_t es[W_N] = {0}, bs[B_N] = {0}, js[W_N] = {0};
        for (int w = 0; w < W_N; w++) {
            es[w] = bench_stats(e[w].v, e[w].n);
            char name[64];
            snprintf(name, sizeof name, "eddy %s", ws_names[w]);
            printf("  %-26s %14.2f %12.2f - %-12.2f\n", name, es[w].median / 1e6, es[w].min / 1e6,
                   es[w].max / 1e6);
        }
        for (int k = 0; k < B_N; k++) {
            if (k == B_CK && !have_ck)
                continue;
            bs[k] = bench_stats(b[k].v, b[k].n);
            printf("  %-26s %14.2f %12.2f - %-12.2f\n", base_names[k], bs[k].median / 1e6,
                   bs[k].min / 1e6, bs[k].max / 1e6);
        }
        for (int w = 0; have_java && w < W_N; w++) {
            js[w] = bench_stats(jv[w].v, jv[w].n);
            char name[64];
            snprintf(name, sizeof name, "java_disruptor %s", ws_names[w]);
            printf("  %-26s %14.2f %12.2f - %-12.2f\n", name, js[w].median / 1e6,
                   js[w].min / 1e6, js[w].max / 1e6);
        }
        printf("  ratios:");
        for (int w = 0; w < W_N; w++) {
            printf(" %s: %.2fx mutex", ws_names[w], es[w].median / bs[B_MUTEX].median);
            if (have_ck)
                printf(", %.2fx ck_ring", es[w].median / bs[B_CK].median);
            if (have_java)
                printf(", %.2fx java", es[w].median / js[w].median);
            printf(";");
        }
        printf("\n");
        for (int w = 0; w < W_N; w++) {
            char cname[64];
            snprintf(cname, sizeof cname, "%s_%s", case_names[c], ws_names[w]);
            json_line(cname, "mutex_queue", es[w], bs[B_MUTEX], rounds, n, mn);
            if (have_ck)
                json_line(cname, "ck_ring", es[w], bs[B_CK], rounds, n, n);
            if (have_java)
                json_line(cname, "java_disruptor", es[w], js[w], rounds, n, n);
        }
        fflush(stdout);
    }
    java_stop();
    return 0;
}
