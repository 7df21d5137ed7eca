/*
 * What the UDP echo servers of bench/udp share: their options, pinning the whole process to
 * one CPU before any thread starts (so every thread a library makes inherits it), reading the
 * process's own resident memory, and the lines run.sh waits for.
 *
 *   --port N      the echo socket's port on 127.0.0.1 (default 8008)
 *   --cpu N       pin the process to CPU N
 *   --sockbuf B   SO_RCVBUF and SO_SNDBUF of the echo socket (default 1 MiB; the kernel caps
 *                 it at net.core.rmem_max / wmem_max); 0 leaves the kernel's defaults
 *   --idle N      after the echo socket, open N more bound sockets on 127.0.0.1 port 0, each
 *                 served as the echo socket is, and print the resident memory before and
 *                 after (the "idle" line)
 *   --per-event N datagrams read per readiness event at most (default 1024: 16 full batches),
 *                 before the server turns to its other sockets (raw) or its loop's other
 *                 work (eddy: EDDY_MAX_MESSAGES_PER_READ, one flush per event)
 *   --gso, --no-gso  send runs of same-size replies to one peer as one UDP_SEGMENT send, or
 *                 not (raw: off by default; eddy: EDDY_UDP_GSO, on by default)
 *
 * Each server prints "listening on PORT" once it echoes, and in idle mode then one line
 * {"server":...,"idle_channels":N,"rss_before_kb":...,"rss_after_kb":...,
 * "bytes_per_channel":...} once the N sockets are open and the process has settled.
 */
#ifndef EDDY_BENCH_UDP_COMMON_H
#define EDDY_BENCH_UDP_COMMON_H

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UDP_BATCH 64 /* datagrams per recvmmsg / sendmmsg (eddy's MAX_BATCH too) */
#define UDP_DEFAULT_PER_EVENT (16 * UDP_BATCH)
#define UDP_MAX_IDLE 60000 /* --idle at most */
#define UDP_DEFAULT_SOCKBUF (1 << 20)

typedef struct udp_args_s {
    int port;      /* default 8008 */
    int cpu;       /* -1: not pinned */
    int sockbuf;   /* bytes, 0: the kernel's default */
    int idle;      /* extra idle sockets, 0: none */
    int gso;       /* 1 --gso, 0 --no-gso, -1 neither */
    int per_event; /* datagrams read per readiness event at most */
} udp_args_t;

/* Parses the options above into a (defaults first); exits with status 2 on anything else. */
static inline void udp_args_parse(udp_args_t *a, int argc, char **argv, const char *name)
{
    a->port = 8008;
    a->cpu = -1;
    a->sockbuf = UDP_DEFAULT_SOCKBUF;
    a->idle = 0;
    a->gso = -1;
    a->per_event = UDP_DEFAULT_PER_EVENT;
    for (int i = 1; i < argc; i += 2) { /* each option and its value */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int n = v != NULL ? atoi(v) : -1;
        if (strcmp(argv[i], "--gso") == 0 || strcmp(argv[i], "--no-gso") == 0) {
            a->gso = strcmp(argv[i], "--gso") == 0;
            i--; /* no value */
        } else if (strcmp(argv[i], "--port") == 0 && n > 0 && n < 65536) {
            a->port = n;
        } else if (strcmp(argv[i], "--cpu") == 0 && n >= 0) {
            a->cpu = n;
        } else if (strcmp(argv[i], "--sockbuf") == 0 && n >= 0) {
            a->sockbuf = n;
        } else if (strcmp(argv[i], "--per-event") == 0 && n >= 1) {
            a->per_event = n;
        } else if (strcmp(argv[i], "--idle") == 0 && n >= 0 && n <= UDP_MAX_IDLE) {
            a->idle = n;
        } else {
            fprintf(stderr,
                    "usage: %s [--port N] [--cpu N] [--sockbuf BYTES] [--idle N] [--per-event N] "
                    "[--[no-]gso]\n",
                    name);
            exit(2);
        }
    }
}

/* Pins the calling process (and threads it starts later) to cpu; nothing when cpu < 0. */
static inline void udp_pin(int cpu, const char *name)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        fprintf(stderr, "%s: sched_setaffinity: %s\n", name, strerror(errno));
        exit(1);
    }
}

/* VmRSS of this process in KiB, or -1. */
static inline long udp_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = atol(line + 6);
            break;
        }
    }
    fclose(f);
    return kb;
}

/* Waits a second so that whatever the process defers (freed pages, a loop's caches) has
 * happened before the memory is read; then the idle line. */
static inline void udp_idle_report(const char *name, int n, long before_kb)
{
    struct timespec settle = {.tv_sec = 1};
    nanosleep(&settle, NULL);
    long after_kb = udp_rss_kb();
    printf("{\"server\":\"%s\",\"idle_channels\":%d,\"rss_before_kb\":%ld,\"rss_after_kb\":%ld,"
           "\"bytes_per_channel\":%.1f}\n",
           name, n, before_kb, after_kb, (double)(after_kb - before_kb) * 1024.0 / (double)n);
    fflush(stdout);
}

/* The line run.sh waits for. */
static inline void udp_ready(int port, const char *name)
{
    printf("%s: listening on %d\n", name, port);
    fflush(stdout);
}

#endif
