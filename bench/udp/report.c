/*
 * udp_report: the table and the JSON lines of bench/udp from the per-round results run.sh
 * collected, one line per (case, server, round):
 *
 *   CASE SERVER ROUND PKTS_PER_S CPU_NS_PER_PKT P50_US P99_US LOST LATE LOAD_CPU PEAK_RSS_KB
 *        SOCKETS WINDOW SIZE [SYSCALLS_PER_PKT]
 *   idle SERVER ROUND BYTES_PER_CHANNEL RSS_BEFORE_KB RSS_AFTER_KB CHANNELS
 *
 * For each echo case: every server's median and min-max of echoed packets per second and of
 * its CPU time and system calls per packet, latency, losses, then eddy / raw, eddy / raw_gso
 * and eddy_nogso / raw (GSO against none, both, neither): the ratio of packets per second and
 * of packets per server CPU-second (raw's CPU per packet / eddy's: what the benchmark judges
 * by, target >= 0.9x), with one {"bench":"udp",...} line per comparison. Without an eddy
 * server (not built) each raw server's figures get a JSON line of their own ("baseline":"").
 * Case idle: resident bytes per idle datagram channel and the process's RSS with one channel.
 *
 *   udp_report FILE [--seconds S]
 *   udp_report --costs NAME CPU_A CPU_B     the machine's costs (bench/support/machine_costs.h)
 */
#include "support/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TARGET_PKTS_PER_CPU 0.9 /* eddy / raw packets per server CPU-second */

enum { F_OPS, F_CPU, F_P50, F_P99, F_LOST, F_LATE, F_LOAD, F_HWM, F_SYS, N_FIELDS };

/* A case's load (bench_case_t): sockets in conns (idle: channels), window in depth. */
static double seconds;

static void report_idle(const bench_case_t *c)
{
    printf("\ncase idle: %d more UDP sockets bound to 127.0.0.1 port 0 beside the echo socket "
           "(raw: a socket in epoll with its state; eddy: a datagram channel with the echo "
           "handler), resident memory after 1 s\n",
           c->conns);
    printf("  %-6s %-34s %-22s %s\n", "server", "bytes per channel median (min-max)",
           "RSS with 1 channel", "RSS after");
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *s = &c->servers[i];
        bench_stats_t b = bench_stat(s, F_OPS);
        char range[64], one[32];
        snprintf(range, sizeof(range), "%.0f (%.0f - %.0f)", b.median, b.min, b.max);
        snprintf(one, sizeof(one), "%.2f MB", bench_stat(s, F_CPU).median / 1024);
        printf("  %-6s %-34s %-22s %.2f MB\n", s->name, range, one,
               bench_stat(s, F_P50).median / 1024);
    }
    const bench_series_t *eddy = bench_case_find(c, "eddy"), *raw = bench_case_find(c, "raw");
    if (eddy != NULL && raw != NULL) {
        printf("  eddy / raw: bytes per channel %.2fx, RSS with 1 channel %.2fx\n",
               bench_stat(eddy, F_OPS).median / bench_stat(raw, F_OPS).median,
               bench_stat(eddy, F_CPU).median / bench_stat(raw, F_CPU).median);
    }
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *s = &c->servers[i];
        if (eddy != NULL && s != eddy)
            continue;
        const bench_series_t *b = eddy != NULL ? raw : NULL;
        bench_stats_t es = bench_stat(s, F_OPS);
        printf("{\"bench\":\"udp\",\"case\":\"idle\",\"subject\":\"%s\",\"baseline\":\"%s\","
               "\"bytes_per_channel\":%.1f,\"bytes_per_channel_min\":%.1f,"
               "\"bytes_per_channel_max\":%.1f,\"rss_one_channel_kb\":%.0f,\"channels\":%d,"
               "\"rounds\":%d",
               s->name, b != NULL ? b->name : "", es.median, es.min, es.max,
               bench_stat(s, F_CPU).median, c->conns, s->n);
        if (b != NULL) {
            printf(",\"baseline_bytes_per_channel\":%.1f,\"baseline_rss_one_channel_kb\":%.0f,"
                   "\"ratio\":%.4f",
                   bench_stat(b, F_OPS).median, bench_stat(b, F_CPU).median,
                   es.median / bench_stat(b, F_OPS).median);
        }
        printf("}\n");
    }
}

/* One JSON line: subject s against baseline b (NULL: s's figures alone). */
static void json_echo(const bench_case_t *c, const bench_series_t *s, const bench_series_t *b)
{
    bench_stats_t ops = bench_stat(s, F_OPS), cpu = bench_stat(s, F_CPU);
    printf("{\"bench\":\"udp\",\"case\":\"%s\",\"subject\":\"%s\",\"baseline\":\"%s\","
           "\"ops_per_s\":%.0f,\"ops_per_s_min\":%.0f,\"ops_per_s_max\":%.0f,"
           "\"cpu_ns_per_pkt\":%.1f,\"cpu_ns_per_pkt_min\":%.1f,\"cpu_ns_per_pkt_max\":%.1f,"
           "\"p50_us\":%.2f,\"p99_us\":%.2f,\"lost\":%.0f,\"load_cpu\":%.3f,\"peak_rss_kb\":%.0f,"
           "\"syscalls_per_pkt\":%.4f",
           c->name, s->name, b != NULL ? b->name : "", ops.median, ops.min, ops.max, cpu.median,
           cpu.min, cpu.max, bench_stat(s, F_P50).median, bench_stat(s, F_P99).median,
           bench_stat(s, F_LOST).median, bench_stat(s, F_LOAD).median, bench_stat(s, F_HWM).median,
           bench_stat(s, F_SYS).median);
    if (b != NULL) {
        bench_stats_t bops = bench_stat(b, F_OPS), bcpu = bench_stat(b, F_CPU);
        double per_cpu = bcpu.median / cpu.median;
        printf(",\"baseline_ops_per_s\":%.0f,\"baseline_ops_per_s_min\":%.0f,"
               "\"baseline_ops_per_s_max\":%.0f,\"baseline_cpu_ns_per_pkt\":%.1f,"
               "\"baseline_p50_us\":%.2f,\"baseline_p99_us\":%.2f,\"baseline_lost\":%.0f,"
               "\"baseline_load_cpu\":%.3f,\"baseline_syscalls_per_pkt\":%.4f,\"ratio\":%.4f,\"cpu_"
               "ratio\":%.4f,"
               "\"pkts_per_cpu_s_ratio\":%.4f,\"target\":\"packets per server CPU-second >= "
               "%.1fx\",\"target_met\":%s",
               bops.median, bops.min, bops.max, bcpu.median, bench_stat(b, F_P50).median,
               bench_stat(b, F_P99).median, bench_stat(b, F_LOST).median,
               bench_stat(b, F_LOAD).median, bench_stat(b, F_SYS).median, ops.median / bops.median,
               cpu.median / bcpu.median, per_cpu, TARGET_PKTS_PER_CPU,
               per_cpu >= TARGET_PKTS_PER_CPU ? "true" : "false");
    }
    printf(",\"rounds\":%d,\"seconds\":%.2f,\"sockets\":%d,\"window\":%d,\"size\":%d}\n",
           b != NULL ? bench_rounds(s, b) : s->n, seconds, c->conns, c->depth, c->size);
}

static void report_case(const bench_case_t *c)
{
    if (strcmp(c->name, "idle") == 0) {
        report_idle(c);
        return;
    }
    printf("\ncase %s: %d sockets x window %d x %d B datagrams\n", c->name, c->conns, c->depth,
           c->size);
    printf("  %-10s %-30s %-28s %9s %8s %8s %9s %8s %9s %s\n", "server",
           "pkts/s median (min - max)", "server CPU ns/pkt (min-max)", "syscalls", "p50 us",
           "p99 us", "lost", "late", "peak RSS", "loadgen CPU");
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *s = &c->servers[i];
        bench_stats_t ops = bench_stat(s, F_OPS), cpu = bench_stat(s, F_CPU);
        char range[64], cpus[64], rss[32];
        snprintf(range, sizeof(range), "%.3f M (%.3f - %.3f)", ops.median / 1e6, ops.min / 1e6,
                 ops.max / 1e6);
        snprintf(cpus, sizeof(cpus), "%.0f (%.0f - %.0f)", cpu.median, cpu.min, cpu.max);
        snprintf(rss, sizeof(rss), "%.1f MB", bench_stat(s, F_HWM).median / 1024);
        printf("  %-10s %-30s %-28s %9.3f %8.1f %8.1f %9.0f %8.0f %9s %.2f\n", s->name, range, cpus,
               bench_stat(s, F_SYS).median, bench_stat(s, F_P50).median,
               bench_stat(s, F_P99).median, bench_stat(s, F_LOST).median,
               bench_stat(s, F_LATE).median, rss, bench_stat(s, F_LOAD).median);
    }
    bool compared = false;
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *e = &c->servers[i];
        if (strncmp(e->name, "eddy", 4) != 0)
            continue;
        for (int k = 0; k < c->nservers; k++) {
            const bench_series_t *r = &c->servers[k];
            /* Variant against variant (eddy_nogso / raw_gso) compares nothing alike. */
            if (strncmp(r->name, "raw", 3) != 0 || (strchr(e->name, '_') && strchr(r->name, '_')))
                continue;
            double per_cpu = bench_stat(r, F_CPU).median / bench_stat(e, F_CPU).median;
            printf("  %s / %s: pkts/s %.3fx, packets per server CPU-second %.3fx (CPU per "
                   "packet %.3fx), p99 %.2fx   target packets per CPU-second >= %.1fx: %s\n",
                   e->name, r->name, bench_stat(e, F_OPS).median / bench_stat(r, F_OPS).median,
                   per_cpu, 1 / per_cpu, bench_stat(e, F_P99).median / bench_stat(r, F_P99).median,
                   TARGET_PKTS_PER_CPU, per_cpu >= TARGET_PKTS_PER_CPU ? "met" : "NOT met");
            compared = true;
        }
    }
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *e = &c->servers[i];
        for (int k = 0; k < c->nservers && strncmp(e->name, "eddy", 4) == 0; k++) {
            const bench_series_t *r = &c->servers[k];
            if (strncmp(r->name, "raw", 3) == 0 && !(strchr(e->name, '_') && strchr(r->name, '_')))
                json_echo(c, e, r);
        }
        if (!compared)
            json_echo(c, e, NULL);
    }
}

/* One round: an echo case's line or an idle one (the top of this file). */
static void read_line(const char *line)
{
    char cname[32], sname[32];
    int round, sockets = 0, window = 0, size = 0;
    double v[N_FIELDS] = {0};
    if (strncmp(line, "idle ", 5) == 0) {
        /* bytes per channel, RSS before (in F_CPU), RSS after (in F_P50), channels */
        if (sscanf(line, "%31s %31s %d %lf %lf %lf %d", cname, sname, &round, &v[F_OPS], &v[F_CPU],
                   &v[F_P50], &sockets) < 7)
            return;
    } else if (sscanf(line, "%31s %31s %d %lf %lf %lf %lf %lf %lf %lf %lf %d %d %d %lf", cname,
                      sname, &round, &v[F_OPS], &v[F_CPU], &v[F_P50], &v[F_P99], &v[F_LOST],
                      &v[F_LATE], &v[F_LOAD], &v[F_HWM], &sockets, &window, &size,
                      &v[F_SYS]) < 14) {
        return;
    }
    bench_report_add(cname, sname, v, N_FIELDS, sockets, window, size);
}

int main(int argc, char **argv)
{
    if (bench_report_costs(argc, argv))
        return 0;
    if (argc < 2) {
        fprintf(stderr, "usage: udp_report FILE [--seconds S] | --costs NAME CPU_A CPU_B\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0) {
            seconds = atof(argv[i + 1]);
        } else {
            fprintf(stderr, "usage: udp_report FILE [--seconds S]\n");
            return 2;
        }
    }
    if (bench_report_read(argv[1], read_line) != 0)
        return 1;
    for (int i = 0; i < bench_ncases; i++)
        report_case(&bench_cases[i]);
    return 0;
}
