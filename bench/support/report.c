/* The reports' shared part (report.h). */
#include "support/report.h"

#include "support/machine_costs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bench_case_t bench_cases[BENCH_REPORT_CASES];
int bench_ncases;

static bench_case_t *case_get(const char *name)
{
    for (int i = 0; i < bench_ncases; i++) {
        if (strcmp(bench_cases[i].name, name) == 0)
            return &bench_cases[i];
    }
    if (bench_ncases == BENCH_REPORT_CASES)
        return NULL;
    snprintf(bench_cases[bench_ncases].name, sizeof(bench_cases[bench_ncases].name), "%s", name);
    return &bench_cases[bench_ncases++];
}

static bench_series_t *series_get(bench_case_t *c, const char *name)
{
    for (int i = 0; i < c->nservers; i++) {
        if (strcmp(c->servers[i].name, name) == 0)
            return &c->servers[i];
    }
    if (c->nservers == BENCH_REPORT_SERVERS)
        return NULL;
    bench_series_t *s = &c->servers[c->nservers++];
    snprintf(s->name, sizeof(s->name), "%s", name);
    return s;
}

void bench_report_add(const char *case_name, const char *server, const double *v, int nv, int conns,
                      int depth, int size)
{
    bench_case_t *c = case_get(case_name);
    bench_series_t *s = c != NULL ? series_get(c, server) : NULL;
    if (s == NULL || s->n == BENCH_MAX_ROUNDS)
        return;
    c->conns = conns;
    c->depth = depth;
    c->size = size;
    for (int k = 0; k < nv && k < BENCH_REPORT_FIELDS; k++)
        s->v[k][s->n] = v[k];
    s->n++;
}

int bench_report_read(const char *path, void (*line)(const char *text))
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    char text[512];
    while (fgets(text, sizeof(text), f) != NULL)
        line(text);
    fclose(f);
    return 0;
}

const bench_series_t *bench_case_find(const bench_case_t *c, const char *name)
{
    for (int i = 0; i < c->nservers; i++) {
        if (strcmp(c->servers[i].name, name) == 0)
            return &c->servers[i];
    }
    return NULL;
}

bench_stats_t bench_stat(const bench_series_t *s, int f)
{
    return bench_stats(s->v[f], s->n);
}

bool bench_is_eddy(const bench_series_t *s)
{
    return strncmp(s->name, "eddy", 4) == 0;
}

int bench_rounds(const bench_series_t *a, const bench_series_t *b)
{
    return a->n < b->n ? a->n : b->n;
}

const char *bench_range(char *buf, size_t n, const bench_series_t *s, int f, double scale, int prec)
{
    bench_stats_t b = bench_stat(s, f);
    snprintf(buf, n, "%.*f (%.*f - %.*f)", prec, b.median * scale, prec, b.min * scale, prec,
             b.max * scale);
    return buf;
}

void bench_print_target(const char *text, bool met)
{
    if (text[0] != '\0')
        printf("   target %s: %s", text, met ? "met" : "NOT met");
    printf("\n");
}

void bench_json_target(const char *text, bool met)
{
    if (text[0] != '\0')
        printf(",\"target\":\"%s\",\"target_met\":%s", text, met ? "true" : "false");
    printf("}\n");
}

bool bench_report_costs(int argc, char **argv)
{
    if (argc != 5 || strcmp(argv[1], "--costs") != 0)
        return false;
    bench_machine_costs_print(argv[2], atoi(argv[3]), atoi(argv[4]));
    return true;
}
