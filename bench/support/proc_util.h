/*
 * What the load generators read of the clock and of the server process (bench/echo,
 * bench/udp, bench/ws): the monotonic clock, their own CPU time, and the server's CPU time and
 * memory from /proc. Header-only; benchmarks only.
 */
#ifndef EDDY_BENCH_SUPPORT_PROC_UTIL_H
#define EDDY_BENCH_SUPPORT_PROC_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* This process's CPU time (all threads), in seconds. */
static inline double bench_process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* utime + stime of process pid in seconds (all its threads), or -1 (pid < 0: none given). */
static inline double bench_proc_cpu_s(long pid)
{
    if (pid < 0) {
        return -1;
    }
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: fields count from the last ')'. */
    const char *p = strrchr(buf, ')');
    unsigned long long utime = 0, stime = 0;
    /* After ")": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15). */
    if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                            &stime) != 2) {
        return -1;
    }
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/*
 * The CPU time of process pid in seconds, or -1: the sum over its threads of the first field
 * of /proc/PID/task/TID/schedstat (time on a CPU, in ns), which a window of a second or two
 * needs (bench_proc_cpu_s's utime + stime come in 10 ms ticks: 13 ticks for a busy second of a
 * loaded machine's echo server, +-8%). Threads that end inside the window are not counted (the
 * servers' do not). Falls back to /proc/PID/stat without schedstats.
 */
static inline double bench_proc_sched_cpu_s(long pid)
{
    if (pid < 0)
        return -1;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    unsigned long long sum = 0;
    bool ok = true;
    for (struct dirent *e = readdir(d); e != NULL && ok; e = readdir(d)) {
        if (e->d_name[0] == '.')
            continue;
        char sp[300];
        snprintf(sp, sizeof(sp), "/proc/%ld/task/%s/schedstat", pid, e->d_name);
        FILE *f = fopen(sp, "r");
        if (f == NULL)
            continue; /* the thread ended meanwhile */
        unsigned long long ns = 0;
        ok = fscanf(f, "%llu", &ns) == 1;
        fclose(f);
        sum += ns;
    }
    closedir(d);
    return ok ? (double)sum * 1e-9 : bench_proc_cpu_s(pid);
}

/* A "Key:   N kB" line of /proc/PID/status (VmHWM, VmRSS...), in KiB, or -1. */
static inline long bench_proc_status_kb(long pid, const char *key)
{
    if (pid < 0) {
        return -1;
    }
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    long kb = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            kb = atol(line + klen + 1);
            break;
        }
    }
    fclose(f);
    return kb;
}

#endif /* EDDY_BENCH_SUPPORT_PROC_UTIL_H */
