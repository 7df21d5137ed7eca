/*
 * echo_report: the table and the JSON lines of bench/echo from the per-round results run.sh
 * collected, one line per (case, server, round):
 *
 *   CASE SERVER ROUND MSGS_PER_S MB_PER_S P50_US P99_US CPU_NS_PER_MSG LOAD_CPU CONNS DEPTH SIZE
 *        [P999_US PEAK_RSS_KB [SYSCALLS_PER_MSG]]
 *
 * For each case: every server's median and min-max of messages per second (connections per
 * second for churn, one message each), MB/s, latency, peak RSS, the server's CPU time and
 * system calls per message, then each eddy server (eddy on epoll, eddy_uring on io_uring) /
 * each other server: the ratio of messages per second (higher favours eddy) and of CPU per
 * message (lower favours eddy), the issues' targets where they set one, and one
 * {"bench":"echo",...} line per comparison. Case idle_rss carries resident bytes per idle
 * connection in MSGS_PER_S and the RSS after in PEAK_RSS_KB.
 *
 * --chart-data FILE writes three gnuplot blocks (cases by servers): messages per second and
 * CPU per message relative to epoll_raw, then bytes per idle connection (bench/echo/chart.gp).
 *
 *   echo_report FILE [--seconds S] [--chart-data FILE]
 */
#include "support/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F_OPS, F_MB, F_P50, F_P99, F_CPU, F_LOAD, F_P999, F_HWM, F_SYS, N_FIELDS };

static double seconds;

/* What the issues ask of an eddy server against one baseline in one case (#7 of eddy on
 * epoll, #16 of eddy_uring), and whether it holds. */
typedef struct verdict_s {
    char text[96]; /* empty: no target */
    bool met;
} verdict_t;

static verdict_t judge(const bench_case_t *c, const bench_series_t *eddy, const bench_series_t *b)
{
    verdict_t v = {.text = "", .met = true};
    double ratio = bench_stat(eddy, F_OPS).median / bench_stat(b, F_OPS).median;
    double cpu_ratio = bench_stat(eddy, F_CPU).median / bench_stat(b, F_CPU).median;
    bool sixty_four = strcmp(c->name, "64x16x64") == 0;
    bool uring = strcmp(eddy->name, "eddy_uring") == 0;
    if (strcmp(c->name, "idle_rss") == 0) {
        if (!uring) {
            snprintf(v.text, sizeof(v.text), "eddy <= 512 B per idle connection");
            v.met = bench_stat(eddy, F_OPS).median <= 512;
        } else if (strcmp(b->name, "eddy") == 0) {
            snprintf(v.text, sizeof(v.text), "fewer bytes per idle connection than on epoll");
            v.met = ratio < 1.0;
        }
    } else if (uring && sixty_four && strcmp(b->name, "epoll_raw") == 0) {
        snprintf(v.text, sizeof(v.text), "messages per CPU-second >= 1.25x");
        v.met = cpu_ratio <= 1 / 1.25;
    } else if (uring && sixty_four && strcmp(b->name, "uring_raw") == 0) {
        snprintf(v.text, sizeof(v.text), "messages per CPU-second >= 0.9x");
        v.met = cpu_ratio <= 1 / 0.9;
    } else if (uring) {
        /* The rows below hold of both transports against epoll_raw. */
    } else if (sixty_four && strcmp(b->name, "epoll_raw") == 0) {
        snprintf(v.text, sizeof(v.text), "ops/s >= 0.95x, CPU per op <= 1.1x");
        v.met = ratio >= 0.95 && cpu_ratio <= 1.1;
    } else if (sixty_four && strcmp(b->name, "libuv") == 0) {
        snprintf(v.text, sizeof(v.text), "ops/s >= 1.3x");
        v.met = ratio >= 1.3;
    } else if (sixty_four && strcmp(b->name, "libevent") == 0) {
        snprintf(v.text, sizeof(v.text), "ops/s >= 1.2x");
        v.met = ratio >= 1.2;
    } else if (sixty_four && strcmp(b->name, "netty_nio") == 0) {
        snprintf(v.text, sizeof(v.text), "ops/s >= 1.0x, peak RSS <= 1/20, p99.9 lower");
        v.met = ratio >= 1.0 &&
                bench_stat(eddy, F_HWM).median * 20 <= bench_stat(b, F_HWM).median &&
                bench_stat(eddy, F_P999).median < bench_stat(b, F_P999).median;
    }
    if (v.text[0] != '\0' || strcmp(b->name, "epoll_raw") != 0) {
        return v;
    }
    if (strcmp(c->name, "16x1x65536") == 0) {
        snprintf(v.text, sizeof(v.text), "MB/s >= 0.95x");
        v.met = ratio >= 0.95;
    } else if (strcmp(c->name, "1x1x64") == 0) {
        snprintf(v.text, sizeof(v.text), "p99 <= 1.1x");
        v.met = bench_stat(eddy, F_P99).median <= 1.1 * bench_stat(b, F_P99).median;
    } else if (strcmp(c->name, "churn") == 0) {
        snprintf(v.text, sizeof(v.text), "CPU per connection <= 1.1x");
        v.met = cpu_ratio <= 1.1;
    }
    return v;
}

static void report_idle(const bench_case_t *c)
{
    printf("\ncase idle_rss: %d connections, each echoed one %d B message, then quiet\n", c->conns,
           c->size);
    printf("  %-10s %-30s %s\n", "server", "bytes per connection (min-max)", "RSS after");
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *s = &c->servers[i];
        bench_stats_t b = bench_stat(s, F_OPS);
        char range[64];
        snprintf(range, sizeof(range), "%.0f (%.0f - %.0f)", b.median, b.min, b.max);
        printf("  %-10s %-30s %.1f MB\n", s->name, range, bench_stat(s, F_HWM).median / 1024);
    }
    for (int k = 0; k < c->nservers; k++) {
        const bench_series_t *eddy = &c->servers[k];
        if (!bench_is_eddy(eddy))
            continue;
        double e = bench_stat(eddy, F_OPS).median;
        for (int i = 0; i < c->nservers; i++) {
            const bench_series_t *b = &c->servers[i];
            if (b == eddy)
                continue;
            verdict_t v = judge(c, eddy, b);
            double base = bench_stat(b, F_OPS).median;
            printf("  %s / %-10s bytes per connection %.3fx", eddy->name, b->name, e / base);
            bench_print_target(v.text, v.met);
        }
        for (int i = 0; i < c->nservers; i++) {
            const bench_series_t *b = &c->servers[i];
            if (b == eddy)
                continue;
            verdict_t v = judge(c, eddy, b);
            bench_stats_t es = bench_stat(eddy, F_OPS), bs = bench_stat(b, F_OPS);
            printf("{\"bench\":\"echo\",\"case\":\"idle_rss\",\"subject\":\"%s\","
                   "\"baseline\":\"%s\",\"bytes_per_conn\":%.1f,\"bytes_per_conn_min\":%.1f,"
                   "\"bytes_per_conn_max\":%.1f,\"baseline_bytes_per_conn\":%.1f,"
                   "\"baseline_bytes_per_conn_min\":%.1f,\"baseline_bytes_per_conn_max\":%.1f,"
                   "\"ratio\":%.4f,\"rss_kb\":%.0f,\"baseline_rss_kb\":%.0f,\"rounds\":%d,"
                   "\"conns\":%d,\"size\":%d",
                   eddy->name, b->name, es.median, es.min, es.max, bs.median, bs.min, bs.max,
                   es.median / bs.median, bench_stat(eddy, F_HWM).median,
                   bench_stat(b, F_HWM).median, bench_rounds(eddy, b), c->conns, c->size);
            bench_json_target(v.text, v.met);
        }
    }
}

/* One eddy server against every other server of a case: the ratios, then the JSON lines. */
static void report_eddy(const bench_case_t *c, const bench_series_t *eddy)
{
    bench_stats_t e_ops = bench_stat(eddy, F_OPS), e_cpu = bench_stat(eddy, F_CPU);
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *b = &c->servers[i];
        if (b == eddy)
            continue;
        verdict_t v = judge(c, eddy, b);
        printf("  %s / %-10s ops/s %.3fx, CPU per op %.3fx, p99 %.2fx, peak RSS %.3fx", eddy->name,
               b->name, e_ops.median / bench_stat(b, F_OPS).median,
               e_cpu.median / bench_stat(b, F_CPU).median,
               bench_stat(eddy, F_P99).median / bench_stat(b, F_P99).median,
               bench_stat(eddy, F_HWM).median / bench_stat(b, F_HWM).median);
        bench_print_target(v.text, v.met);
    }
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *b = &c->servers[i];
        if (b == eddy)
            continue;
        bench_stats_t b_ops = bench_stat(b, F_OPS), b_cpu = bench_stat(b, F_CPU);
        double ratio = e_ops.median / b_ops.median;
        double cpu_ratio = e_cpu.median / b_cpu.median;
        verdict_t v = judge(c, eddy, b);
        printf("{\"bench\":\"echo\",\"case\":\"%s\",\"subject\":\"%s\",\"baseline\":\"%s\","
               "\"ops_per_s\":%.0f,\"ops_per_s_min\":%.0f,\"ops_per_s_max\":%.0f,"
               "\"baseline_ops_per_s\":%.0f,\"baseline_ops_per_s_min\":%.0f,"
               "\"baseline_ops_per_s_max\":%.0f,\"ratio\":%.4f,\"cpu_ns_per_msg\":%.1f,"
               "\"baseline_cpu_ns_per_msg\":%.1f,\"cpu_ratio\":%.4f,\"mb_per_s\":%.2f,"
               "\"baseline_mb_per_s\":%.2f,\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,"
               "\"baseline_p50_us\":%.2f,\"baseline_p99_us\":%.2f,\"baseline_p999_us\":%.2f,"
               "\"peak_rss_kb\":%.0f,\"baseline_peak_rss_kb\":%.0f,\"syscalls_per_msg\":%.3f,"
               "\"baseline_syscalls_per_msg\":%.3f,\"load_cpu\":%.3f,"
               "\"baseline_load_cpu\":%.3f,\"rounds\":%d,\"seconds\":%.2f,\"conns\":%d,"
               "\"depth\":%d,\"size\":%d",
               c->name, eddy->name, b->name, e_ops.median, e_ops.min, e_ops.max, b_ops.median,
               b_ops.min, b_ops.max, ratio, e_cpu.median, b_cpu.median, cpu_ratio,
               bench_stat(eddy, F_MB).median, bench_stat(b, F_MB).median,
               bench_stat(eddy, F_P50).median, bench_stat(eddy, F_P99).median,
               bench_stat(eddy, F_P999).median, bench_stat(b, F_P50).median,
               bench_stat(b, F_P99).median, bench_stat(b, F_P999).median,
               bench_stat(eddy, F_HWM).median, bench_stat(b, F_HWM).median,
               bench_stat(eddy, F_SYS).median, bench_stat(b, F_SYS).median,
               bench_stat(eddy, F_LOAD).median, bench_stat(b, F_LOAD).median, bench_rounds(eddy, b),
               seconds, c->conns, c->depth, c->size);
        bench_json_target(v.text, v.met);
    }
}

static void report_case(const bench_case_t *c)
{
    if (strcmp(c->name, "idle_rss") == 0) {
        report_idle(c);
        return;
    }
    bool churn = strcmp(c->name, "churn") == 0;
    printf("\ncase %s: %d connections x depth %d x %d B%s\n", c->name, c->conns, c->depth, c->size,
           churn ? ", each connection: connect, send, receive, close (ops = connections)" : "");
    printf("  %-10s %-28s %9s %8s %8s %9s %-24s %8s %9s %s\n", "server", "ops/s median (min - max)",
           "MB/s", "p50 us", "p99 us", "p99.9 us", "server CPU ns/op (min-max)", "peak RSS",
           "syscalls", "loadgen CPU");
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *s = &c->servers[i];
        bench_stats_t ops = bench_stat(s, F_OPS), cpu = bench_stat(s, F_CPU);
        char range[64], cpus[64], rss[32];
        snprintf(range, sizeof(range), "%.3f M (%.3f - %.3f)", ops.median / 1e6, ops.min / 1e6,
                 ops.max / 1e6);
        snprintf(cpus, sizeof(cpus), "%.0f (%.0f - %.0f)", cpu.median, cpu.min, cpu.max);
        snprintf(rss, sizeof(rss), "%.1f MB", bench_stat(s, F_HWM).median / 1024);
        printf("  %-10s %-28s %9.1f %8.1f %8.1f %9.1f %-26s %8s %9.3f %.2f\n", s->name, range,
               bench_stat(s, F_MB).median, bench_stat(s, F_P50).median, bench_stat(s, F_P99).median,
               bench_stat(s, F_P999).median, cpus, rss, bench_stat(s, F_SYS).median,
               bench_stat(s, F_LOAD).median);
    }
    for (int i = 0; i < c->nservers; i++) {
        if (bench_is_eddy(&c->servers[i]))
            report_eddy(c, &c->servers[i]);
    }
}

/* The chart's data: one gnuplot block per panel, a row per case, a column per server. */
static void write_chart_data(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        return;
    }
    const char *names[BENCH_REPORT_SERVERS];
    int nnames = 0;
    for (int i = 0; i < bench_ncases; i++) {
        for (int k = 0; k < bench_cases[i].nservers; k++) {
            bool seen = false;
            for (int j = 0; j < nnames; j++)
                seen = seen || strcmp(names[j], bench_cases[i].servers[k].name) == 0;
            if (!seen && nnames < BENCH_REPORT_SERVERS)
                names[nnames++] = bench_cases[i].servers[k].name;
        }
    }
    const int fields[2] = {F_OPS, F_CPU};
    for (int panel = 0; panel < 3; panel++) {
        fprintf(f, "case");
        for (int j = 0; j < nnames; j++)
            fprintf(f, " %s", names[j]);
        fprintf(f, "\n");
        for (int i = 0; i < bench_ncases; i++) {
            const bench_case_t *c = &bench_cases[i];
            bool idle = strcmp(c->name, "idle_rss") == 0;
            const bench_series_t *base = bench_case_find(c, "epoll_raw");
            if (idle != (panel == 2) || (!idle && base == NULL))
                continue;
            fprintf(f, "%s", c->name);
            for (int j = 0; j < nnames; j++) {
                const bench_series_t *s = bench_case_find(c, names[j]);
                if (s == NULL) {
                    fprintf(f, " -");
                } else if (idle) {
                    fprintf(f, " %.1f", bench_stat(s, F_OPS).median);
                } else {
                    fprintf(f, " %.4f",
                            bench_stat(s, fields[panel]).median /
                                bench_stat(base, fields[panel]).median);
                }
            }
            fprintf(f, "\n");
        }
        fprintf(f, "\n\n");
    }
    fclose(f);
}

/* One round: CASE SERVER ROUND MSGS_PER_S ... (the top of this file). */
static void read_line(const char *line)
{
    char cname[32], sname[32];
    int round, conns, depth, size;
    double v[N_FIELDS] = {0};
    if (sscanf(line, "%31s %31s %d %lf %lf %lf %lf %lf %lf %d %d %d %lf %lf %lf", cname, sname,
               &round, &v[F_OPS], &v[F_MB], &v[F_P50], &v[F_P99], &v[F_CPU], &v[F_LOAD], &conns,
               &depth, &size, &v[F_P999], &v[F_HWM], &v[F_SYS]) < 12)
        return;
    bench_report_add(cname, sname, v, N_FIELDS, conns, depth, size);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: echo_report FILE [--seconds S]\n");
        return 2;
    }
    const char *chart = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0) {
            seconds = atof(argv[i + 1]);
        } else if (strcmp(argv[i], "--chart-data") == 0) {
            chart = argv[i + 1];
        } else {
            fprintf(stderr, "usage: echo_report FILE [--seconds S] [--chart-data FILE]\n");
            return 2;
        }
    }
    if (bench_report_read(argv[1], read_line) != 0)
        return 1;
    for (int i = 0; i < bench_ncases; i++)
        report_case(&bench_cases[i]);
    if (chart != NULL)
        write_chart_data(chart);
    return 0;
}
