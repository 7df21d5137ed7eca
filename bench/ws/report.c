/*
 * ws_report: the tables and the JSON lines of bench/ws from the per-round results run.sh
 * collected, one line per (case, server, round):
 *
 *   echo SIZE SERVER ROUND MSGS_PER_S CPU_NS_PER_MSG RSS_KB HWM_KB LOAD_CPU CONNS WINDOW
 *   bcast SIZE SERVER ROUND P50_US P99_US FIRST_US CPU_US_PER_BCAST HWM_KB COPIED_PER_MEMBER
 *         CONNS COUNT RSS_GROWTH_B
 *
 * Echo: each server's median and min-max of messages per second and of its CPU time per
 * message, messages per server CPU-second, RSS; then each eddy server / netty: the ratio of
 * messages per server CPU-second (the one judged, target >= 1.5x) and of peak RSS (target
 * <= 1/20), one {"bench":"ws",...} line each. Broadcast: the time until every connection had
 * the message (median over rounds of each round's p50 and p99), server CPU per broadcast, the
 * bytes copied per member (counted by eddy's server; -1: not counted), and eddy / netty.
 *
 *   ws_report FILE
 *   ws_report --costs NAME CPU_A CPU_B     the machine's costs (bench/support/machine_costs.h)
 */
#include "support/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F_A, F_B, F_C, F_D, F_E, F_F, F_G, N_FIELDS }; /* the numbers after ROUND, in order */

/* A case (bench_case_t) is named by its kind and size ("echo 64", "bcast 16384"); its load:
 * conns, depth (echo: the window; broadcast: the broadcasts a round) and size. */

static void report_echo(const bench_case_t *c)
{
    printf("\necho, %d B: %d connections x window %d, masked binary frames, each echoed\n", c->size,
           c->conns, c->depth);
    printf("  %-12s %-28s %-26s %12s %9s %9s %s\n", "server", "msgs/s M median (min - max)",
           "server CPU ns/msg (min-max)", "msgs/CPU-s", "RSS", "peak RSS", "loadgen CPU");
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *s = &c->servers[i];
        char r1[64], r2[64];
        printf("  %-12s %-28s %-26s %10.3f M %6.1f MB %6.1f MB %.2f\n", s->name,
               bench_range(r1, sizeof(r1), s, F_A, 1e-6, 3),
               bench_range(r2, sizeof(r2), s, F_B, 1, 0), 1e3 / bench_stat(s, F_B).median,
               bench_stat(s, F_C).median / 1024, bench_stat(s, F_D).median / 1024,
               bench_stat(s, F_E).median);
    }
    const bench_series_t *b = bench_case_find(c, "netty");
    for (int i = 0; b != NULL && i < c->nservers; i++) {
        const bench_series_t *e = &c->servers[i];
        if (!bench_is_eddy(e))
            continue;
        double ops = bench_stat(e, F_A).median / bench_stat(b, F_A).median;
        double per_cpu = bench_stat(b, F_B).median / bench_stat(e, F_B).median;
        double rss = bench_stat(e, F_D).median / bench_stat(b, F_D).median;
        bool met_cpu = per_cpu >= 1.5, met_rss = rss <= 1.0 / 20;
        printf("  %s / netty: msgs/s %.3fx, msgs per server CPU-second %.3fx (target >= 1.5x: "
               "%s), peak RSS %.4fx = 1/%.0f (target <= 1/20: %s)\n",
               e->name, ops, per_cpu, met_cpu ? "met" : "NOT met", rss, 1 / rss,
               met_rss ? "met" : "NOT met");
        printf("{\"bench\":\"ws\",\"case\":\"echo_%d\",\"subject\":\"%s\",\"baseline\":\"netty\","
               "\"msgs_per_s\":%.0f,\"msgs_per_s_min\":%.0f,\"msgs_per_s_max\":%.0f,"
               "\"baseline_msgs_per_s\":%.0f,\"baseline_msgs_per_s_min\":%.0f,"
               "\"baseline_msgs_per_s_max\":%.0f,\"ratio\":%.4f,\"cpu_ns_per_msg\":%.1f,"
               "\"cpu_ns_per_msg_min\":%.1f,\"cpu_ns_per_msg_max\":%.1f,"
               "\"baseline_cpu_ns_per_msg\":%.1f,\"baseline_cpu_ns_per_msg_min\":%.1f,"
               "\"baseline_cpu_ns_per_msg_max\":%.1f,\"msgs_per_cpu_s_ratio\":%.4f,"
               "\"rss_kb\":%.0f,\"peak_rss_kb\":%.0f,\"baseline_rss_kb\":%.0f,"
               "\"baseline_peak_rss_kb\":%.0f,\"peak_rss_ratio\":%.5f,\"rounds\":%d,"
               "\"conns\":%d,\"window\":%d,\"size\":%d,\"target\":\"msgs per server CPU-second "
               ">= 1.5x, peak RSS <= 1/20\",\"target_met\":%s}\n",
               c->size, e->name, bench_stat(e, F_A).median, bench_stat(e, F_A).min,
               bench_stat(e, F_A).max, bench_stat(b, F_A).median, bench_stat(b, F_A).min,
               bench_stat(b, F_A).max, ops, bench_stat(e, F_B).median, bench_stat(e, F_B).min,
               bench_stat(e, F_B).max, bench_stat(b, F_B).median, bench_stat(b, F_B).min,
               bench_stat(b, F_B).max, per_cpu, bench_stat(e, F_C).median,
               bench_stat(e, F_D).median, bench_stat(b, F_C).median, bench_stat(b, F_D).median, rss,
               bench_rounds(e, b), c->conns, c->depth, c->size,
               met_cpu && met_rss ? "true" : "false");
    }
}

static void report_bcast(const bench_case_t *c)
{
    printf("\nbroadcast, %d B: one message to %d connections (the sender among them), time "
           "until all had it; %d broadcasts a round, p50 and p99 of each round, then median "
           "(min - max) over rounds\n",
           c->size, c->conns, c->depth);
    printf("  %-13s %-26s %-26s %9s %-24s %12s %9s\n", "server", "all delivered p50 us",
           "all delivered p99 us", "first us", "server CPU us/broadcast", "copied/member",
           "peak RSS");
    for (int i = 0; i < c->nservers; i++) {
        const bench_series_t *s = &c->servers[i];
        char r1[64], r2[64], r3[64], copied[32];
        double cp = bench_stat(s, F_F).median;
        if (cp < 0)
            snprintf(copied, sizeof(copied), "not counted");
        else
            snprintf(copied, sizeof(copied), "%.0f B", cp);
        printf("  %-13s %-26s %-26s %9.0f %-24s %12s %6.1f MB\n", s->name,
               bench_range(r1, sizeof(r1), s, F_A, 1, 0), bench_range(r2, sizeof(r2), s, F_B, 1, 0),
               bench_stat(s, F_C).median, bench_range(r3, sizeof(r3), s, F_D, 1, 0), copied,
               bench_stat(s, F_E).median / 1024);
    }
    const bench_series_t *b = bench_case_find(c, "netty");
    for (int i = 0; b != NULL && i < c->nservers; i++) {
        const bench_series_t *e = &c->servers[i];
        if (!bench_is_eddy(e))
            continue;
        double p50 = bench_stat(e, F_A).median / bench_stat(b, F_A).median;
        double p99 = bench_stat(e, F_B).median / bench_stat(b, F_B).median;
        double cpu = bench_stat(e, F_D).median / bench_stat(b, F_D).median;
        printf("  %s / netty: time to all p50 %.3fx, p99 %.3fx, server CPU per broadcast "
               "%.3fx, peak RSS %.4fx\n",
               e->name, p50, p99, cpu, bench_stat(e, F_E).median / bench_stat(b, F_E).median);
        printf("{\"bench\":\"ws\",\"case\":\"broadcast_%d\",\"subject\":\"%s\","
               "\"baseline\":\"netty\",\"p50_us\":%.1f,\"p50_us_min\":%.1f,\"p50_us_max\":%.1f,"
               "\"p99_us\":%.1f,\"baseline_p50_us\":%.1f,\"baseline_p50_us_min\":%.1f,"
               "\"baseline_p50_us_max\":%.1f,\"baseline_p99_us\":%.1f,\"ratio\":%.4f,"
               "\"p99_ratio\":%.4f,\"cpu_us_per_bcast\":%.1f,\"baseline_cpu_us_per_bcast\":%.1f,"
               "\"cpu_ratio\":%.4f,\"copied_per_member_b\":%.1f,\"rss_growth_per_bcast_b\":%.1f,"
               "\"baseline_rss_growth_per_bcast_b\":%.1f,\"peak_rss_kb\":%.0f,"
               "\"baseline_peak_rss_kb\":%.0f,\"rounds\":%d,\"conns\":%d,\"broadcasts\":%d,"
               "\"size\":%d}\n",
               c->size, e->name, bench_stat(e, F_A).median, bench_stat(e, F_A).min,
               bench_stat(e, F_A).max, bench_stat(e, F_B).median, bench_stat(b, F_A).median,
               bench_stat(b, F_A).min, bench_stat(b, F_A).max, bench_stat(b, F_B).median, p50, p99,
               bench_stat(e, F_D).median, bench_stat(b, F_D).median, cpu, bench_stat(e, F_F).median,
               bench_stat(e, F_G).median, bench_stat(b, F_G).median, bench_stat(e, F_E).median,
               bench_stat(b, F_E).median, bench_rounds(e, b), c->conns, c->depth, c->size);
    }
}

/* One round: an echo line or a bcast one (the top of this file). */
static void read_line(const char *line)
{
    char kind[8], sname[32], cname[32];
    int size, round;
    double v[N_FIELDS] = {0}, conns = 0, depth = 0;
    if (strncmp(line, "echo ", 5) == 0) {
        if (sscanf(line, "%7s %d %31s %d %lf %lf %lf %lf %lf %lf %lf", kind, &size, sname, &round,
                   &v[F_A], &v[F_B], &v[F_C], &v[F_D], &v[F_E], &conns, &depth) != 11)
            return;
    } else if (sscanf(line, "%7s %d %31s %d %lf %lf %lf %lf %lf %lf %lf %lf %lf", kind, &size,
                      sname, &round, &v[F_A], &v[F_B], &v[F_C], &v[F_D], &v[F_E], &v[F_F], &conns,
                      &depth, &v[F_G]) != 13) {
        return;
    }
    snprintf(cname, sizeof(cname), "%s %d", kind, size);
    bench_report_add(cname, sname, v, N_FIELDS, (int)conns, (int)depth, size);
}

int main(int argc, char **argv)
{
    if (bench_report_costs(argc, argv))
        return 0;
    if (argc != 2) {
        fprintf(stderr, "usage: ws_report FILE | ws_report --costs NAME CPU_A CPU_B\n");
        return 2;
    }
    if (bench_report_read(argv[1], read_line) != 0)
        return 1;
    for (int i = 0; i < bench_ncases; i++) {
        if (strncmp(bench_cases[i].name, "echo ", 5) == 0)
            report_echo(&bench_cases[i]);
        else
            report_bcast(&bench_cases[i]);
    }
    return 0;
}
