/*
 * What the echo servers of bench/echo share: their options (--port N, --cpu N) and pinning
 * the whole process to one CPU before any thread starts, so every thread a library makes
 * inherits it. Each server prints "listening on PORT" once it accepts; run.sh waits for it.
 */
#ifndef EDDY_BENCH_ECHO_SERVER_COMMON_H
#define EDDY_BENCH_ECHO_SERVER_COMMON_H

#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct server_args_s {
    int port; /* default 8007 */
    int cpu;  /* -1: not pinned */
} server_args_t;

/* Parses --port and --cpu into a (defaults first); exits with status 2 on anything else. */
static inline void server_args_parse(server_args_t *a, int argc, char **argv, const char *name)
{
    a->port = 8007;
    a->cpu = -1;
    for (int i = 1; i < argc; i += 2) { /* each option and its value */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--port") == 0 && v != NULL && atoi(v) > 0 && atoi(v) < 65536) {
            a->port = atoi(v);
        } else if (strcmp(argv[i], "--cpu") == 0 && v != NULL && atoi(v) >= 0) {
            a->cpu = atoi(v);
        } else {
            fprintf(stderr, "usage: %s [--port N] [--cpu N]\n", name);
            exit(2);
        }
    }
}

/* Pins the calling process (and threads it starts later) to cpu; nothing when cpu < 0. */
static inline void server_pin(int cpu, const char *name)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        perror(name);
        exit(1);
    }
}

/* A listening TCP socket on 127.0.0.1:port (SO_REUSEADDR, backlog 1024) with the socket()
 * flags given; exits with status 1 when it cannot be had. */
static inline int server_listen(int port, int flags, const char *name)
{
    int fd = socket(AF_INET, SOCK_STREAM | flags, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1024) != 0) {
        fprintf(stderr, "%s: listen: %s\n", name, strerror(errno));
        exit(1);
    }
    return fd;
}

/* The line run.sh waits for. */
static inline void server_ready(int port, const char *name)
{
    printf("%s: listening on %d\n", name, port);
    fflush(stdout);
}

#endif
