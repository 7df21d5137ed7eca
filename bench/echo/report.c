/*
 * echo_report: the table and the JSON lines of bench/echo from the per-round results run.sh
 * collected, one line per (case, server, round):
 *
 *   CASE SERVER ROUND MSGS_PER_S MB_PER_S P50_US P99_US CPU_NS_PER_MSG LOAD_CPU CONNS DEPTH SIZE
 *
 * For each case: every server's median and min-max of messages per second (connections per
 * second for churn, one message each), MB/s, latency and the server's CPU time per message,
 * then eddy / each baseline: the ratio of messages per second (higher favours eddy) and of
 * CPU per message (lower favours eddy), and one {"bench":"echo",...} line per comparison.
 *
 *   echo_report FILE [--seconds S]
 */
#include "support/bench_util.h"

#define MAX_CASES 16
#define MAX_SERVERS 8

enum { F_OPS, F_MB, F_P50, F_P99, F_CPU, F_LOAD, N_FIELDS };

typedef struct series_s {
    char name[32];
    int n;
    double v[N_FIELDS][BENCH_MAX_ROUNDS];
} series_t;

typedef struct case_s {
    char name[32];
    int conns, depth, size;
    int nservers;
    series_t servers[MAX_SERVERS];
} case_t;

static case_t cases[MAX_CASES];
static int ncases;
static double seconds;

static case_t *case_get(const char *name)
{
    for (int i = 0; i < ncases; i++) {
        if (strcmp(cases[i].name, name) == 0)
            return &cases[i];
    }
    if (ncases == MAX_CASES)
        return NULL;
    snprintf(cases[ncases].name, sizeof(cases[ncases].name), "%s", name);
    return &cases[ncases++];
}

static series_t *series_get(case_t *c, const char *name)
{
    for (int i = 0; i < c->nservers; i++) {
        if (strcmp(c->servers[i].name, name) == 0)
            return &c->servers[i];
    }
    if (c->nservers == MAX_SERVERS)
        return NULL;
    series_t *s = &c->servers[c->nservers++];
    snprintf(s->name, sizeof(s->name), "%s", name);
    return s;
}

static bench_stats_t stat_of(const series_t *s, int f)
{
    return bench_stats(s->v[f], s->n);
}

/* The target on 64x16x64 for eddy against baseline (issue #7): msgs/s ratio, or 0 for none. */
static double target_for(const char *cname, const char *baseline)
{
    if (strcmp(cname, "64x16x64") != 0)
        return 0;
    if (strcmp(baseline, "epoll_raw") == 0)
        return 0.95;
    if (strcmp(baseline, "libuv") == 0)
        return 1.3;
    if (strcmp(baseline, "libevent") == 0)
        return 1.2;
    return 0;
}

static void report_case(const case_t *c)
{
    bool churn = strcmp(c->name, "churn") == 0;
    printf("\ncase %s: %d connections x depth %d x %d B%s\n", c->name, c->conns, c->depth, c->size,
           churn ? ", each connection: connect, send, receive, close (ops = connections)" : "");
    printf("  %-10s %-28s %9s %9s %9s %-26s %s\n", "server", "ops/s median (min - max)", "MB/s",
           "p50 us", "p99 us", "server CPU ns/op (min-max)", "loadgen CPU");
    for (int i = 0; i < c->nservers; i++) {
        const series_t *s = &c->servers[i];
        bench_stats_t ops = stat_of(s, F_OPS), cpu = stat_of(s, F_CPU);
        char range[64], cpus[64];
        snprintf(range, sizeof(range), "%.3f M (%.3f - %.3f)", ops.median / 1e6, ops.min / 1e6,
                 ops.max / 1e6);
        snprintf(cpus, sizeof(cpus), "%.0f (%.0f - %.0f)", cpu.median, cpu.min, cpu.max);
        printf("  %-10s %-28s %9.1f %9.1f %9.1f %-26s %.2f\n", s->name, range,
               stat_of(s, F_MB).median, stat_of(s, F_P50).median, stat_of(s, F_P99).median, cpus,
               stat_of(s, F_LOAD).median);
    }
    const series_t *eddy = NULL;
    for (int i = 0; i < c->nservers; i++) {
        if (strcmp(c->servers[i].name, "eddy") == 0)
            eddy = &c->servers[i];
    }
    if (eddy == NULL)
        return;
    bench_stats_t e_ops = stat_of(eddy, F_OPS), e_cpu = stat_of(eddy, F_CPU);
    for (int i = 0; i < c->nservers; i++) {
        const series_t *b = &c->servers[i];
        if (b == eddy)
            continue;
        bench_stats_t b_ops = stat_of(b, F_OPS), b_cpu = stat_of(b, F_CPU);
        double ratio = e_ops.median / b_ops.median;
        double cpu_ratio = e_cpu.median / b_cpu.median;
        double target = target_for(c->name, b->name);
        bool met = ratio >= target && (strcmp(b->name, "epoll_raw") != 0 || cpu_ratio <= 1.1);
        printf("  eddy / %-10s ops/s %.3fx, CPU per op %.3fx", b->name, ratio, cpu_ratio);
        if (target > 0) {
            printf("   target ops/s >= %.2fx%s: %s", target,
                   strcmp(b->name, "epoll_raw") == 0 ? ", CPU per op <= 1.1x" : "",
                   met ? "met" : "NOT met");
        }
        printf("\n");
    }
    for (int i = 0; i < c->nservers; i++) {
        const series_t *b = &c->servers[i];
        if (b == eddy)
            continue;
        bench_stats_t b_ops = stat_of(b, F_OPS), b_cpu = stat_of(b, F_CPU);
        double ratio = e_ops.median / b_ops.median;
        double cpu_ratio = e_cpu.median / b_cpu.median;
        double target = target_for(c->name, b->name);
        printf("{\"bench\":\"echo\",\"case\":\"%s\",\"subject\":\"eddy\",\"baseline\":\"%s\","
               "\"ops_per_s\":%.0f,\"ops_per_s_min\":%.0f,\"ops_per_s_max\":%.0f,"
               "\"baseline_ops_per_s\":%.0f,\"baseline_ops_per_s_min\":%.0f,"
               "\"baseline_ops_per_s_max\":%.0f,\"ratio\":%.4f,\"cpu_ns_per_msg\":%.1f,"
               "\"baseline_cpu_ns_per_msg\":%.1f,\"cpu_ratio\":%.4f,\"mb_per_s\":%.2f,"
               "\"baseline_mb_per_s\":%.2f,\"p50_us\":%.2f,\"p99_us\":%.2f,"
               "\"baseline_p50_us\":%.2f,\"baseline_p99_us\":%.2f,\"load_cpu\":%.3f,"
               "\"baseline_load_cpu\":%.3f,\"rounds\":%d,\"seconds\":%.2f,\"conns\":%d,"
               "\"depth\":%d,\"size\":%d",
               c->name, b->name, e_ops.median, e_ops.min, e_ops.max, b_ops.median, b_ops.min,
               b_ops.max, ratio, e_cpu.median, b_cpu.median, cpu_ratio, stat_of(eddy, F_MB).median,
               stat_of(b, F_MB).median, stat_of(eddy, F_P50).median, stat_of(eddy, F_P99).median,
               stat_of(b, F_P50).median, stat_of(b, F_P99).median, stat_of(eddy, F_LOAD).median,
               stat_of(b, F_LOAD).median, eddy->n < b->n ? eddy->n : b->n, seconds, c->conns,
               c->depth, c->size);
        if (target > 0) {
            bool met = ratio >= target && (strcmp(b->name, "epoll_raw") != 0 || cpu_ratio <= 1.1);
            printf(",\"target_ratio\":%.2f", target);
            if (strcmp(b->name, "epoll_raw") == 0)
                printf(",\"target_cpu_ratio\":1.1");
            printf(",\"target_met\":%s", met ? "true" : "false");
        }
        printf("}\n");
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: echo_report FILE [--seconds S]\n");
        return 2;
    }
    if (argc >= 4 && strcmp(argv[2], "--seconds") == 0)
        seconds = atof(argv[3]);
    FILE *f = fopen(argv[1], "r");
    if (f == NULL) {
        perror(argv[1]);
        return 1;
    }
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL) {
        char cname[32], sname[32];
        int round, conns, depth, size;
        double v[N_FIELDS];
        if (sscanf(line, "%31s %31s %d %lf %lf %lf %lf %lf %lf %d %d %d", cname, sname, &round,
                   &v[F_OPS], &v[F_MB], &v[F_P50], &v[F_P99], &v[F_CPU], &v[F_LOAD], &conns, &depth,
                   &size) != 12)
            continue;
        case_t *c = case_get(cname);
        series_t *s = c != NULL ? series_get(c, sname) : NULL;
        if (s == NULL || s->n == BENCH_MAX_ROUNDS)
            continue;
        c->conns = conns;
        c->depth = depth;
        c->size = size;
        for (int k = 0; k < N_FIELDS; k++)
            s->v[k][s->n] = v[k];
        s->n++;
    }
    fclose(f);
    for (int i = 0; i < ncases; i++)
        report_case(&cases[i]);
    return 0;
}
