/*
 * eddy-tasks: threads hand work to a loop group, and a graceful shutdown meets one of them
 * half-way.
 *
 *   eddy-tasks [--loops N] [--threads N] [--tasks N]
 *
 * Each of --threads threads first hands a few sums to the loops with eddy_loop_submit(), whose
 * futures bring the results back, then submits --tasks tasks with eddy_loop_execute() to the
 * loops eddy_loop_group_next() picks, then awaits the sums. The last thread stops half-way
 * until the others are done, then goes on, and the group starts shutting down meanwhile: its
 * remaining tasks race the shutdown. Those that get in first are accepted and must run; the
 * rest are refused.
 *
 * Every task has a byte of its own and adds one to it on the loop; a refused task's byte is
 * marked by its thread. Once the loops terminated, every accepted task must have added one
 * exactly once, and no refused task at all. Exit status 0 only when that holds and every sum
 * is right.
 */
#include <eddy/eddy.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SUMS_PER_THREAD = 3 };

#define REFUSED 0x80 /* a task's byte, marked by its thread; a task that runs adds 1 */

typedef struct sum_job_s {
    uint64_t n;
    uint64_t sum; /* 1^2 + 2^2 + ... + n^2, computed on a loop */
} sum_job_t;

typedef struct run_s {
    eddy_loop_group_t *group;
    _Atomic bool half_way;           /* the last thread submitted half its tasks and waits */
    _Atomic bool go_on;              /* the others are done: the last thread may go on */
    _Atomic uint64_t last_submitted; /* tasks the last thread has handed in (accepted or not) */
} run_t;

typedef struct submitter_s {
    pthread_t thread;
    run_t *run;
    uint8_t *marks; /* one byte per task of this thread */
    uint64_t tasks;
    bool last;
    uint64_t accepted, refused;
    unsigned sums_ok, sums_bad;
    sum_job_t jobs[SUMS_PER_THREAD];
} submitter_t;

static void run_task(void *arg)
{
    uint8_t *mark = arg;
    (*mark)++;
}

static int sum_squares(void *arg, void **result)
{
    sum_job_t *job = arg;
    uint64_t sum = 0;
    for (uint64_t i = 1; i <= job->n; i++) {
        sum += i * i;
    }
    job->sum = sum;
    *result = job;
    return 0;
}

static void submit_range(submitter_t *s, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to; i++) {
        eddy_loop_t *loop = eddy_loop_group_next(s->run->group);
        if (eddy_loop_execute(loop, run_task, &s->marks[i]) == 0) {
            s->accepted++;
        } else {
            /* Refused: no loop will touch this byte, so marking it here races with none. */
            s->marks[i] = REFUSED;
            s->refused++;
        }
        if (s->last) {
            atomic_store_explicit(&s->run->last_submitted, i + 1, memory_order_relaxed);
        }
    }
}

static void *submitter_main(void *arg)
{
    submitter_t *s = arg;
    eddy_future_t *sums[SUMS_PER_THREAD];
    for (int k = 0; k < SUMS_PER_THREAD; k++) {
        s->jobs[k].n = 10000u * (uint64_t)(k + 1);
        sums[k] = eddy_loop_submit(eddy_loop_group_next(s->run->group), sum_squares, &s->jobs[k]);
    }
    if (!s->last) {
        submit_range(s, 0, s->tasks);
    } else {
        submit_range(s, 0, s->tasks / 2);
        /* Release: pairs with main's acquire load; it shuts down only after this point. */
        atomic_store_explicit(&s->run->half_way, true, memory_order_release);
        while (!atomic_load_explicit(&s->run->go_on, memory_order_acquire)) {
            sched_yield();
        }
        submit_range(s, s->tasks / 2, s->tasks);
    }
    /* The futures were accepted before any shutdown, so each completes with its sum. */
    for (int k = 0; k < SUMS_PER_THREAD; k++) {
        uint64_t n = s->jobs[k].n;
        if (sums[k] != NULL && eddy_future_await(sums[k], 10000) == 0 &&
            eddy_future_error(sums[k]) == 0 && eddy_future_result(sums[k]) == &s->jobs[k] &&
            s->jobs[k].sum == n * (n + 1) * (2 * n + 1) / 6) {
            s->sums_ok++;
        } else {
            s->sums_bad++;
        }
        eddy_future_release(sums[k]);
    }
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-tasks [--loops N] [--threads N] [--tasks N]\n"
               "  --loops N     loops in the group (default 2)\n"
               "  --threads N   threads submitting tasks (default 4)\n"
               "  --tasks N     tasks per thread (default 100000)\n"
               "Threads submit tasks and sums to a loop group, which shuts down gracefully\n"
               "while the last thread is still submitting; checks that every accepted task\n"
               "ran exactly once.\n");
}

static bool parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    unsigned long loops = 2, threads = 4, tasks = 100000;
    for (int i = 1; i < argc; i += 2) { /* each option and its value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--loops") == 0 && v != NULL && parse_uint(v, 1, 256, &loops)) {
        } else if (strcmp(a, "--threads") == 0 && v != NULL && parse_uint(v, 1, 256, &threads)) {
        } else if (strcmp(a, "--tasks") == 0 && v != NULL && parse_uint(v, 2, 100000000, &tasks)) {
        } else {
            usage(stderr);
            return 2;
        }
    }

    eddy_loop_options_t opts = {.name = "tasks"};
    run_t run = {.group = eddy_loop_group_new(loops, &opts)};
    submitter_t *subs = calloc(threads, sizeof(*subs));
    uint8_t *marks = calloc(threads, tasks);
    if (run.group == NULL || subs == NULL || marks == NULL) {
        fprintf(stderr, "eddy-tasks: out of memory or threads\n");
        return 1;
    }
    printf("eddy-tasks: %lu thread%s x %lu tasks onto %lu loop%s (%s)\n", threads,
           threads == 1 ? "" : "s", tasks, loops, loops == 1 ? "" : "s",
           eddy_loop_poller(eddy_loop_group_loop(run.group, 0)));

    int64_t start_ns = eddy_now_ns();
    for (unsigned long t = 0; t < threads; t++) {
        subs[t] = (submitter_t){
            .run = &run, .marks = marks + t * tasks, .tasks = tasks, .last = t == threads - 1};
        if (pthread_create(&subs[t].thread, NULL, submitter_main, &subs[t]) != 0) {
            fprintf(stderr, "eddy-tasks: cannot start thread %lu\n", t);
            return 1;
        }
    }
    for (unsigned long t = 0; t + 1 < threads; t++) {
        pthread_join(subs[t].thread, NULL);
    }
    /* Acquire: pairs with the last thread's release store once it is half-way. */
    while (!atomic_load_explicit(&run.half_way, memory_order_acquire)) {
        sched_yield();
    }
    /* Release: pairs with the last thread's acquire load. Once it is on its way again (or
     * done), the shutdown starts; whatever the loops accepted runs before they end. How many
     * of its tasks get in first is up to the scheduler: on 2 CPUs anything from none to all. */
    atomic_store_explicit(&run.go_on, true, memory_order_release);
    uint64_t resume_at = tasks / 2 + tasks / 32;
    while (atomic_load_explicit(&run.last_submitted, memory_order_relaxed) < resume_at) {
        sched_yield();
    }
    uint64_t before_shutdown = atomic_load_explicit(&run.last_submitted, memory_order_relaxed);
    eddy_future_t *done = eddy_loop_group_shutdown_gracefully(run.group, 0, 10000);
    if (eddy_future_await(done, 30000) != 0) {
        fprintf(stderr, "eddy-tasks: the loops did not terminate\n");
        return 1;
    }
    int64_t elapsed_ns = eddy_now_ns() - start_ns;
    submitter_t *last = &subs[threads - 1];
    pthread_join(last->thread, NULL);

    uint64_t accepted = 0, refused = 0, ran = 0, twice = 0, lost = 0, refused_ran = 0;
    unsigned sums_ok = 0, sums_bad = 0;
    for (unsigned long t = 0; t < threads; t++) {
        accepted += subs[t].accepted;
        refused += subs[t].refused;
        sums_ok += subs[t].sums_ok;
        sums_bad += subs[t].sums_bad;
    }
    for (size_t i = 0; i < (size_t)threads * tasks; i++) {
        switch (marks[i]) {
        case 1:
            ran++;
            break;
        case 0:
            lost++; /* accepted, never ran */
            break;
        case REFUSED:
            break;
        default:
            if (marks[i] > REFUSED) {
                refused_ran++;
            } else {
                twice++;
            }
        }
    }
    bool ok = accepted == ran && lost == 0 && twice == 0 && refused_ran == 0 && sums_bad == 0;

    printf("  sums: %u eddy_loop_submit() results awaited by their threads, %u wrong\n",
           sums_ok + sums_bad, sums_bad);
    uint64_t rest = tasks - before_shutdown;
    if (rest > 0) {
        printf("  shutdown began with thread %lu at task %llu of %lu; of the other %llu: "
               "%llu accepted, %llu refused\n",
               threads - 1, (unsigned long long)before_shutdown, tasks, (unsigned long long)rest,
               (unsigned long long)(rest - last->refused), (unsigned long long)last->refused);
    } else {
        printf("  thread %lu had handed in all its tasks when the shutdown began\n", threads - 1);
    }
    printf("  accepted %llu, refused %llu, ran %llu", (unsigned long long)accepted,
           (unsigned long long)refused, (unsigned long long)ran);
    if (ok) {
        printf(": every accepted task ran exactly once\n");
    } else {
        printf(": FAILED (%llu never ran, %llu ran more than once, %llu refused but ran)\n",
               (unsigned long long)lost, (unsigned long long)twice,
               (unsigned long long)refused_ran);
    }
    printf("  %.1f ms from the first task to the loops' end: %.0f tasks/s\n",
           (double)elapsed_ns / 1e6, (double)accepted / ((double)elapsed_ns / 1e9));
    for (size_t i = 0; i < eddy_loop_group_size(run.group); i++) {
        eddy_loop_metrics_t m;
        eddy_loop_metrics(eddy_loop_group_loop(run.group, i), &m);
        printf("  loop %zu: %llu tasks run in %llu turns (%.1f a turn), %llu wake-ups\n", i,
               (unsigned long long)m.tasks_run, (unsigned long long)m.turns,
               m.turns > 0 ? (double)m.tasks_run / (double)m.turns : 0.0,
               (unsigned long long)m.wakeups);
    }
    int rc = eddy_loop_group_free(run.group);
    free(marks);
    free(subs);
    return ok && rc == 0 ? 0 : 1;
}
