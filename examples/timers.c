/*
 * eddy-timers: the loop's timers at work, one line per firing.
 *
 *   eddy-timers [--seconds S] [--rate-ms N] [--delay-ms N] [--quiet]
 *
 * Four timers start together:
 *   once    a one-shot timer, halfway through the run; its callback cancels "doomed"
 *   doomed  a one-shot timer three quarters through, cancelled before it can fire
 *   rate    every --rate-ms at a fixed rate: its runs stay on the grid start + k * period
 *   delay   --delay-ms after each of its runs ends (fixed delay); the callback works 0, 1/8,
 *           2/8 or 3/8 of the delay in turn, so the gaps between runs grow by that work
 * After --seconds the loops shut down gracefully, which cancels what is still pending, and a
 * summary follows. Exit status 0 when "once" fired once and "doomed" never did.
 */
#include <eddy/eddy.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One timer's record. Each is written only by the loop its timer runs on, and read by main
 * after the loops terminated. */
typedef struct tick_s {
    unsigned fired;
    int64_t first_ns; /* since the start */
    int64_t last_ns;
    int64_t work_ns;      /* time worked in runs followed by another run */
    int64_t last_work_ns; /* time worked in the latest run */
} tick_t;

typedef struct app_s {
    int64_t start_ns;
    int64_t delay_ms;
    bool quiet;
    tick_t once, doomed, rate, delay;
    eddy_timer_t *doomed_timer; /* set before "once" is scheduled */
    int cancel_rc;              /* what eddy_timer_cancel() said to "once" */
    int64_t cancelled_ns;
} app_t;

static double ms(int64_t ns)
{
    return (double)ns / 1e6;
}

/* Count a run of tick; the time since the start, and since its previous run (0 for the
 * first), come back through the pointers. */
static void record(const app_t *app, tick_t *tick, int64_t *at, int64_t *gap)
{
    *at = eddy_now_ns() - app->start_ns;
    *gap = tick->fired > 0 ? *at - tick->last_ns : 0;
    if (tick->fired++ == 0) {
        tick->first_ns = *at;
    }
    tick->last_ns = *at;
}

/* The gap since the previous run, "+100.2 ms", or "first" for run 1. */
static const char *since(unsigned run, int64_t gap, char *buf, size_t size)
{
    if (run == 1) {
        return "first";
    }
    snprintf(buf, size, "%+.1f ms", ms(gap));
    return buf;
}

static void once_fired(eddy_timer_t *t, void *arg)
{
    (void)t;
    app_t *app = arg;
    int64_t at, gap;
    record(app, &app->once, &at, &gap);
    /* Another loop's timer would do as well: cancel works from any thread. */
    app->cancel_rc = eddy_timer_cancel(app->doomed_timer);
    app->cancelled_ns = eddy_now_ns() - app->start_ns;
    if (!app->quiet) {
        printf("%9.1f ms  once    #%-2u cancels doomed: %s\n", ms(at), app->once.fired,
               app->cancel_rc == 0 ? "done" : eddy_strerror(app->cancel_rc));
    }
}

static void doomed_fired(eddy_timer_t *t, void *arg)
{
    (void)t;
    app_t *app = arg;
    int64_t at, gap;
    record(app, &app->doomed, &at, &gap);
    printf("%9.1f ms  doomed  #%-2u fired, though cancelled!\n", ms(at), app->doomed.fired);
}

static void rate_fired(eddy_timer_t *t, void *arg)
{
    (void)t;
    app_t *app = arg;
    int64_t at, gap;
    record(app, &app->rate, &at, &gap);
    char buf[32];
    if (!app->quiet) {
        printf("%9.1f ms  rate    #%-2u %s\n", ms(at), app->rate.fired,
               since(app->rate.fired, gap, buf, sizeof(buf)));
    }
}

static void delay_fired(eddy_timer_t *t, void *arg)
{
    (void)t;
    app_t *app = arg;
    int64_t at, gap;
    record(app, &app->delay, &at, &gap);
    if (app->delay.fired > 1) {
        app->delay.work_ns += app->delay.last_work_ns; /* part of the gap just measured */
    }
    int64_t work_ns = (int64_t)((app->delay.fired - 1) % 4) * app->delay_ms * 1000000 / 8;
    app->delay.last_work_ns = work_ns;
    char buf[32];
    if (!app->quiet) {
        printf("%9.1f ms  delay   #%-2u %s, then works %.1f ms\n", ms(at), app->delay.fired,
               since(app->delay.fired, gap, buf, sizeof(buf)), ms(work_ns));
    }
    /* The work: a sleep, which holds this loop just as computing would. */
    struct timespec ts = {work_ns / 1000000000, work_ns % 1000000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-timers [--seconds S] [--rate-ms N] [--delay-ms N] [--quiet]\n"
               "  --seconds S    how long to run (default 1.0)\n"
               "  --rate-ms N    period of the fixed-rate timer (default 100)\n"
               "  --delay-ms N   delay of the fixed-delay timer (default 100)\n"
               "  --quiet        print the summary only\n"
               "Runs a one-shot, a fixed-rate and a fixed-delay timer, and cancels a fourth\n"
               "before it fires; prints each firing in ms since the start.\n");
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

static bool parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0.01 && v <= 3600)) {
        return false;
    }
    *out = v;
    return true;
}

static void print_periodic(const char *name, const tick_t *tick, const char *what)
{
    printf("  %-7s fired %u times", name, tick->fired);
    if (tick->fired >= 2) {
        printf(", every %.1f ms on average (%s)",
               ms(tick->last_ns - tick->first_ns) / (tick->fired - 1), what);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    double seconds = 1.0;
    unsigned long rate_ms = 100, delay_ms = 100;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
            continue;
        } else if (strcmp(a, "--seconds") == 0 && v != NULL && parse_seconds(v, &seconds)) {
        } else if (strcmp(a, "--rate-ms") == 0 && v != NULL && parse_uint(v, 1, 60000, &rate_ms)) {
        } else if (strcmp(a, "--delay-ms") == 0 && v != NULL &&
                   parse_uint(v, 1, 60000, &delay_ms)) {
        } else {
            usage(stderr);
            return 2;
        }
        i++;
    }

    /* Two loops: the fixed-delay timer's callback holds its loop while it works, which would
     * make the timers sharing that loop late. The work is on purpose, so no stall reports. */
    eddy_loop_options_t opts = {.name = "timers", .stall_threshold_ns = -1};
    eddy_loop_group_t *g = eddy_loop_group_new(2, &opts);
    if (g == NULL) {
        fprintf(stderr, "eddy-timers: out of memory or threads\n");
        return 1;
    }
    eddy_loop_t *main_loop = eddy_loop_group_loop(g, 0);
    eddy_loop_t *delay_loop = eddy_loop_group_loop(g, 1);
    int64_t run_ms = (int64_t)(seconds * 1000);
    int64_t once_ms = run_ms / 2, doomed_ms = run_ms * 3 / 4;
    if (!quiet) {
        printf("eddy-timers: once at %lld ms, doomed at %lld ms, rate every %lu ms, "
               "delay %lu ms after each run; %.1f s on %s\n",
               (long long)once_ms, (long long)doomed_ms, rate_ms, delay_ms, seconds,
               eddy_loop_poller(main_loop));
    }

    /* Scheduled from this thread: each timer reaches its loop as a task. */
    app_t app = {.start_ns = eddy_now_ns(),
                 .delay_ms = (int64_t)delay_ms,
                 .quiet = quiet,
                 .cancel_rc = EDDY_EAGAIN};
    app.doomed_timer = eddy_loop_schedule(main_loop, doomed_ms, doomed_fired, &app);
    eddy_timer_t *once = eddy_loop_schedule(main_loop, once_ms, once_fired, &app);
    eddy_timer_t *rate = eddy_loop_schedule_at_fixed_rate(main_loop, (int64_t)rate_ms,
                                                          (int64_t)rate_ms, rate_fired, &app);
    eddy_timer_t *delay = eddy_loop_schedule_with_fixed_delay(delay_loop, (int64_t)delay_ms,
                                                              (int64_t)delay_ms, delay_fired, &app);
    if (app.doomed_timer == NULL || once == NULL || rate == NULL || delay == NULL) {
        fprintf(stderr, "eddy-timers: cannot schedule the timers\n");
        return 1;
    }

    int64_t left_ns = app.start_ns + run_ms * 1000000 - eddy_now_ns();
    if (left_ns > 0) {
        struct timespec ts = {left_ns / 1000000000, left_ns % 1000000000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    /* Pending timers are cancelled, a running callback finishes; a quiet period of 0 ends
     * each loop as soon as its queue is empty. */
    eddy_future_t *done = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    if (eddy_future_await(done, 10000) != 0) {
        fprintf(stderr, "eddy-timers: the loops did not terminate\n");
        return 1;
    }
    int64_t stop_ns = eddy_now_ns() - app.start_ns;
    eddy_timer_release(app.doomed_timer);
    eddy_timer_release(once);
    eddy_timer_release(rate);
    eddy_timer_release(delay);
    if (eddy_loop_group_free(g) != 0) {
        fprintf(stderr, "eddy-timers: cannot free the loops\n");
        return 1;
    }

    bool ok = app.once.fired == 1 && app.doomed.fired == 0 && app.cancel_rc == 0;
    printf("eddy-timers: the loops ended at %.1f ms\n", ms(stop_ns));
    printf("  once    fired %u time%s", app.once.fired, app.once.fired == 1 ? "" : "s");
    if (app.once.fired > 0) {
        printf(", at %.1f ms (due at %lld ms)", ms(app.once.first_ns), (long long)once_ms);
    }
    printf("\n");
    char what[80];
    snprintf(what, sizeof(what), "fixed rate, period %lu ms", rate_ms);
    print_periodic("rate", &app.rate, what);
    snprintf(what, sizeof(what), "fixed delay %lu ms + work %.1f ms a run", delay_ms,
             app.delay.fired > 1 ? ms(app.delay.work_ns) / (app.delay.fired - 1) : 0.0);
    print_periodic("delay", &app.delay, what);
    if (app.doomed.fired > 0) {
        printf("  doomed  fired %u times though cancelled: FAILED\n", app.doomed.fired);
    } else if (app.cancel_rc != 0) {
        printf("  doomed  never fired, but was not cancelled in time: FAILED\n");
    } else {
        printf("  doomed  cancelled at %.1f ms, %.1f ms before its deadline; never fired: ok\n",
               ms(app.cancelled_ns), (double)doomed_ms - ms(app.cancelled_ns));
    }
    return ok ? 0 : 1;
}
