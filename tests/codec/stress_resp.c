/*
 * The keyspace of eddy-resp-server (examples/resp_store.c) shared by several threads, as the
 * server's loops share it: every thread INCRs one shared counter and a counter of its own,
 * SETs, GETs, EXPIREs and DELs keys that collide with the other threads', while one more
 * thread sweeps expired keys and asks DBSIZE. No INCR may be lost, and under TSan no access
 * may race.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/resp.h>

#include "examples/resp_store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 20000
#define KEYS 256

typedef struct worker_s {
    resp_store_t *s;
    int id;
    eddy_buf_t *out;
} worker_t;

static _Atomic bool done;
static _Atomic int failures; /* counted, not asserted: cmocka's asserts jump, on one thread */

/* Run the command of argc NUL-terminated words; the reply is left in w->out. */
static void run(worker_t *w, int argc, const char *const *words)
{
    eddy_resp_arg_t argv[8];
    for (int i = 0; i < argc; i++) {
        argv[i] = (eddy_resp_arg_t){(const uint8_t *)words[i], strlen(words[i])};
    }
    eddy_resp_cmd_t cmd = {.argc = (size_t)argc, .argv = argv};
    eddy_buf_clear(w->out);
    int rc = resp_store_exec(w->s, &cmd, w->out);
    if (rc != 0 || eddy_buf_readable(w->out) == 0 || *eddy_buf_read_ptr(w->out) == '-') {
        if (atomic_fetch_add(&failures, 1) == 0) {
            fprintf(stderr, "%s: rc %d, reply %.*s\n", words[0], rc, (int)eddy_buf_readable(w->out),
                    (const char *)eddy_buf_read_ptr(w->out));
        }
    }
}

static void *work(void *arg)
{
    worker_t *w = arg;
    char key[32], own[32];
    snprintf(own, sizeof(own), "own:%d", w->id);
    for (int i = 0; i < ROUNDS; i++) {
        snprintf(key, sizeof(key), "key:%d", (i * 7 + w->id) % KEYS);
        run(w, 2, (const char *const[]){"INCR", "shared"});
        run(w, 2, (const char *const[]){"INCR", own});
        switch (i % 5) {
        case 0:
            run(w, 3, (const char *const[]){"SET", key, "value"});
            break;
        case 1:
            run(w, 2, (const char *const[]){"GET", key});
            break;
        case 2:
            run(w, 5, (const char *const[]){"SET", key, "v", "PX", "1"});
            break;
        case 3:
            run(w, 3, (const char *const[]){"PEXPIRE", key, "2"});
            break;
        default:
            run(w, 3, (const char *const[]){"DEL", key, "nope"});
            break;
        }
    }
    return NULL;
}

static void *sweep(void *arg)
{
    worker_t *w = arg;
    while (!atomic_load(&done)) {
        resp_store_expire_cycle(w->s, 0, 1, 64);
        run(w, 1, (const char *const[]){"DBSIZE"});
        run(w, 1, (const char *const[]){"INFO"});
    }
    return NULL;
}

static void expect_integer(worker_t *w, const char *key, long long want)
{
    run(w, 2, (const char *const[]){"GET", key});
    char expected[64];
    int n = snprintf(expected, sizeof(expected), "%lld", want);
    char reply[96];
    snprintf(reply, sizeof(reply), "$%d\r\n%s\r\n", n, expected);
    assert_int_equal(eddy_buf_readable(w->out), strlen(reply));
    assert_memory_equal(eddy_buf_read_ptr(w->out), reply, strlen(reply));
}

static void test_resp_store_shared_by_threads_loses_no_increment(void **state)
{
    (void)state;
    resp_store_t *s = resp_store_new();
    assert_non_null(s);
    worker_t w[THREADS + 1];
    pthread_t t[THREADS + 1];
    for (int i = 0; i <= THREADS; i++) {
        w[i] = (worker_t){.s = s, .id = i, .out = eddy_buf_new(256)};
        assert_non_null(w[i].out);
    }
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    assert_int_equal(pthread_create(&t[THREADS], NULL, sweep, &w[THREADS]), 0);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    atomic_store(&done, true);
    pthread_join(t[THREADS], NULL);
    assert_int_equal(atomic_load(&failures), 0);
    expect_integer(&w[0], "shared", (long long)THREADS * ROUNDS);
    for (int i = 0; i < THREADS; i++) {
        char own[32];
        snprintf(own, sizeof(own), "own:%d", i);
        expect_integer(&w[0], own, ROUNDS);
    }
    for (int i = 0; i <= THREADS; i++) {
        eddy_buf_release(w[i].out);
    }
    resp_store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_store_shared_by_threads_loses_no_increment),
    };
    return cmocka_run_group_tests_name("codec.stress_resp", tests, NULL, NULL);
}
