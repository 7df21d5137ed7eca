/*
 * The reports' shared part (bench/echo, bench/udp, bench/ws): the rounds run.sh collected,
 * read into cases (in the order first seen) of servers (likewise) with up to
 * BENCH_REPORT_FIELDS numbers per round; their medians and min-max; the "median (min - max)"
 * cells of the tables; a target's verdict at the end of a table line and of a JSON line; and
 * the machine's costs (--costs). What each report reads from a line, and what its tables and
 * {"bench":...} lines say, stays in its own folder. Part of eddy_bench_support; benchmarks
 * only.
 */
#ifndef EDDY_BENCH_SUPPORT_REPORT_H
#define EDDY_BENCH_SUPPORT_REPORT_H

#include "support/bench_util.h"

#include <stdbool.h>
#include <stddef.h>

#define BENCH_REPORT_CASES 16
#define BENCH_REPORT_SERVERS 8
#define BENCH_REPORT_FIELDS 12

/* One server's rounds in one case: v[field][round]. */
typedef struct bench_series_s {
    char name[32];
    int n;
    double v[BENCH_REPORT_FIELDS][BENCH_MAX_ROUNDS];
} bench_series_t;

/* One case: its load (connections, or sockets; depth, or window; message size) and servers. */
typedef struct bench_case_s {
    char name[32];
    int conns, depth, size;
    int nservers;
    bench_series_t servers[BENCH_REPORT_SERVERS];
} bench_case_t;

/* The cases read so far, in the order first seen. */
extern bench_case_t bench_cases[BENCH_REPORT_CASES];
extern int bench_ncases;

/*
 * Adds one round of server in case: its nv (<= BENCH_REPORT_FIELDS) numbers, and the case's
 * load. A round is dropped when there are too many cases, servers or rounds.
 */
void bench_report_add(const char *case_name, const char *server, const double *v, int nv, int conns,
                      int depth, int size);

/* Calls line(text) for each line of file path (up to 511 bytes); 1 (perror) if it cannot open
 * it, else 0. */
int bench_report_read(const char *path, void (*line)(const char *text));

/* Server name's series in c, or NULL. */
const bench_series_t *bench_case_find(const bench_case_t *c, const char *name);

/* The median, min and max of field f over s's rounds. */
bench_stats_t bench_stat(const bench_series_t *s, int f);

/* An eddy server (its name starts with "eddy"), compared with the others. */
bool bench_is_eddy(const bench_series_t *s);

/* The rounds two series have in common. */
int bench_rounds(const bench_series_t *a, const bench_series_t *b);

/* "median (min - max)" of field f of s into buf, scaled, with prec decimals; returns buf. */
const char *bench_range(char *buf, size_t n, const bench_series_t *s, int f, double scale,
                        int prec);

/* A target's verdict at the end of a table line ("   target TEXT: met"), then the line's end;
 * an empty text: no target, only the end. */
void bench_print_target(const char *text, bool met);

/* The same at the end of a JSON line (,"target":"TEXT","target_met":true), then "}\n". */
void bench_json_target(const char *text, bool met);

/* With argv "--costs NAME CPU_A CPU_B" (argc 5), prints the machine's costs
 * (machine_costs.h) and returns true; else false. */
bool bench_report_costs(int argc, char **argv);

#endif /* EDDY_BENCH_SUPPORT_REPORT_H */
