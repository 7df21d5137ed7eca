/*
 * The client bootstrap (Netty's Bootstrap).
 *
 * A connect is a job on one loop: resolve the target (at once when numeric, else through the
 * loop's resolver, bootstrap/resolver.c), then connect with Happy Eyeballs, each address an
 * eddy_channel_connect of its own. With reconnecting on, a job whose addresses all failed
 * waits out its backoff delay on a timer of its loop and starts over. The client state is
 * refcounted: the bootstrap holds one reference and every job another, so a job may finish
 * after eddy_bootstrap_free.
 */
#include <eddy/bootstrap.h>
#include <eddy/datagram.h>

#include "bootstrap/internal.h"
#include "pipeline/layer.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shared with server_bootstrap.c (no header of its own). */
int eddy__bootstrap_refuse(eddy_channel_t *ch, int err);
/* Shared with channel_pool.c: the group b connects on, or NULL. */
eddy_loop_group_t *eddy__bootstrap_loop_group(eddy_bootstrap_t *b);

/* ---------------------------------------------------------------------------------------
 * Refusing a channel from its init callback
 */

static void release_channel_task(void *arg)
{
    eddy_channel_release(arg);
}

/*
 * Drop a reference to ch (NULL: nothing) in a task of its loop, after whatever channel code
 * is running now has returned. From the loop itself a task is always taken; were it refused,
 * leaking the reference is better than freeing the channel under the caller.
 */
static void release_later(eddy_channel_t *ch)
{
    if (ch != NULL) {
        (void)eddy_loop_execute(eddy_channel_loop(ch), release_channel_task, ch);
    }
}

/*
 * For an init callback that turns ch down: returns err (non-zero) for the callback to return,
 * and the channel layer closes ch without making it active. That close drops the last
 * reference and frees ch before child_start and connect_on_loop leave its pipeline (a use
 * after free in pipeline/transport/socket.c); until that is fixed, this holds a reference of its own,
 * dropped by a task that runs after them. The channel's loop. (A connect try holds one for
 * the same reason: connect_timeout and a connect refused at once free the channel before
 * leaving its pipeline too.)
 */
int eddy__bootstrap_refuse(eddy_channel_t *ch, int err)
{
    release_later(eddy_channel_retain(ch));
    return err;
}

/* ---------------------------------------------------------------------------------------
 * The client state and its jobs
 *
 * A job connects with Happy Eyeballs (RFC 8305): its addresses interleaved by family, IPv6
 * first; one try starts, the next after CONNECTION_ATTEMPT_DELAY_MS or at once when a try
 * fails, the first to connect wins and the others are closed. A job lives on its loop's
 * thread (only its start, eddy_bootstrap_free's cancel of a retry timer and a lost
 * connection's report come from elsewhere) and is refcounted: its own life, each try under
 * way, and its future's cancel listener hold one each, so a try that ends after the job
 * finds it still there.
 */

/* RFC 8305's recommended Connection Attempt Delay. */
#define CONNECTION_ATTEMPT_DELAY_MS 250

typedef struct attr_s {
    const void *key;
    void *value;
} attr_t;

typedef struct job_s job_t;

typedef struct client_s {
    _Atomic uint32_t refcnt;
    eddy_bootstrap_t *owner; /* for the reconnect callback; NULL once freed */
    eddy_loop_group_t *group;
    eddy_channel_config_t config;
    attr_t *attrs;
    size_t nattrs;
    eddy_channel_init_cb init;
    void *init_arg;
    eddy_reconnect_options_t reconnect;
    bool datagram;  /* make datagram channels */
    bool reuseport; /* datagram binds: one channel per loop */
    pthread_mutex_t lock; /* guards stopped, jobs and each job's timer */
    bool stopped;
    job_t *jobs; /* every unfinished job, for free to cancel their timers */
} client_t;

struct eddy_bootstrap_s {
    client_t *c;
};

/* One address tried. */
typedef struct attempt_s {
    job_t *j;
    eddy_channel_t *ch; /* retained from its init until the try is over */
    bool live;          /* its connect future has not completed */
    int init_err;       /* init turned the channel down */
} attempt_t;

struct job_s {
    _Atomic uint32_t refcnt;
    _Atomic bool finished; /* its future completed (job_finish) */
    client_t *c;           /* one reference */
    job_t *next;           /* in c->jobs */
    job_t **prev;          /* the pointer to this job in c->jobs */
    char *host;            /* NULL for a Unix socket */
    uint16_t port;
    eddy_addr_t unix_addr;
    eddy_loop_t *loop;
    eddy_addr_t *addrs;  /* in the order tried */
    attempt_t *attempts; /* one per address */
    size_t naddrs, next_addr, live;
    int last_err;
    int stop_err;  /* no more tries: when the last one ends, the job fails with this */
    bool won;      /* a try connected */
    bool cancelled;
    unsigned attempt;       /* retries made */
    eddy_promise_t *p;      /* NULL for a reconnect after a lost connection */
    eddy_timer_t *timer;    /* the retry's; guarded by c->lock */
    eddy_timer_t *he_timer; /* the connection attempt delay's */
    eddy_future_t *lookup;  /* the name's lookup under way, retained */
    eddy_channel_t *connected; /* retained until the future completes */
};

static void client_release(client_t *c)
{
    /* acq_rel: pairs with itself, so the last releaser sees every other job's writes. */
    if (!eddy__refcnt_sub(&c->refcnt, 1)) {
        return;
    }
    assert(c->stopped && c->jobs == NULL); /* freed, and every job ended (each holds c) */
    pthread_mutex_destroy(&c->lock);
    free(c->attrs);
    free(c);
}

static job_t *job_retain(job_t *j)
{
    eddy__refcnt_add(&j->refcnt);
    return j;
}

static void job_release(job_t *j)
{
    /* acq_rel: pairs with itself, so the last releaser sees what the others wrote. */
    if (!eddy__refcnt_sub(&j->refcnt, 1)) {
        return;
    }
    client_t *c = j->c;
    eddy_loop_t *loop = j->loop;
    /* Finished, which unlinked it: c->jobs never holds a freed job. */
    assert(atomic_load_explicit(&j->finished, memory_order_relaxed) && j->prev == NULL);
    assert(j->timer == NULL && j->he_timer == NULL && j->connected == NULL);
    eddy_future_release(j->lookup);
    eddy_future_release(j->p);
    free(j->attempts);
    free(j->addrs);
    free(j->host);
    free(j);
    client_release(c);
    eddy__loop_release(loop);
}

static job_t *job_new(client_t *c, const char *host, uint16_t port, const eddy_addr_t *unix_addr)
{
    assert(c->group != NULL && (host != NULL) != (unix_addr != NULL));
    job_t *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return NULL;
    }
    if (host != NULL && (j->host = strdup(host)) == NULL) {
        free(j);
        return NULL;
    }
    atomic_init(&j->refcnt, 1);
    j->port = port;
    if (unix_addr != NULL) {
        j->unix_addr = *unix_addr;
    }
    j->loop = eddy_loop_group_next(c->group);
    /* A lookup or a retry may outlive the group: the loop's memory stays until the job ends,
     * and a freed loop refuses what the job then asks of it, which ends the job. */
    eddy__loop_retain(j->loop);
    eddy__refcnt_add(&c->refcnt);
    j->c = c;
    pthread_mutex_lock(&c->lock);
    j->next = c->jobs;
    if (c->jobs != NULL) {
        c->jobs->prev = &j->next;
    }
    c->jobs = j;
    j->prev = &c->jobs;
    pthread_mutex_unlock(&c->lock);
    return j;
}

/* Unlink from c->jobs; the caller holds c->lock. */
static void job_unlink(job_t *j)
{
    assert(j->prev == NULL || *j->prev == j); /* on the list, or off it already */
    if (j->prev != NULL) {
        *j->prev = j->next;
        if (j->next != NULL) {
            j->next->prev = j->prev;
        }
        j->prev = NULL;
    }
}

/* The job is over: complete its future with ch, or fail it with err. A connection nobody
 * can receive any more (the future was cancelled) is closed. */
static void job_finish(job_t *j, eddy_channel_t *ch, int err)
{
    assert((ch == NULL) == (err != 0)); /* a channel, or why there is none */
    if (atomic_exchange_explicit(&j->finished, true, memory_order_acq_rel)) {
        return;
    }
    client_t *c = j->c;
    pthread_mutex_lock(&c->lock);
    job_unlink(j);
    pthread_mutex_unlock(&c->lock);
    if (j->p != NULL) {
        if (ch != NULL) {
            if (eddy__promise_succeed_channel(j->p, ch) != 0) {
                eddy_channel_close(ch, NULL);
            }
        } else {
            eddy_promise_fail(j->p, err);
        }
    }
    job_release(j);
}

static bool client_stopped(client_t *c)
{
    pthread_mutex_lock(&c->lock);
    bool stopped = c->stopped;
    pthread_mutex_unlock(&c->lock);
    return stopped;
}

static void job_try_next(job_t *j);
static void job_start(job_t *j);
static void job_round_failed(job_t *j, int err);

static int attempt_init(eddy_channel_t *ch, void *arg)
{
    attempt_t *a = arg;
    client_t *c = a->j->c;
    assert(a->ch == NULL); /* one channel per try */
    /* Held until the try is over: see release_later(). */
    a->ch = eddy_channel_retain(ch);
    int rc = 0;
    for (size_t i = 0; i < c->nattrs && rc == 0; i++) {
        rc = eddy_channel_attr_set(ch, c->attrs[i].key, c->attrs[i].value);
    }
    if (rc == 0 && c->init != NULL) {
        rc = c->init(ch, c->init_arg);
    }
    if (rc != 0) {
        a->init_err = rc > 0 ? EDDY_ECANCELED : rc;
        return eddy__bootstrap_refuse(ch, a->init_err);
    }
    return 0;
}

static void on_connection_lost(eddy_future_t *f, void *arg);

static void job_connected(void *arg)
{
    job_t *j = arg;
    eddy_channel_t *ch = j->connected;
    assert(ch != NULL && j->won);
    j->connected = NULL;
    job_finish(j, ch, 0);
    eddy_channel_release(ch);
    job_release(j); /* the task's */
}

/* Stop the connection attempt delay's timer, and drop the job reference it held unless it
 * ran (a timer the loop's shutdown dropped never runs). */
static void delay_stop(job_t *j)
{
    eddy_timer_t *t = j->he_timer;
    if (t == NULL) {
        return;
    }
    j->he_timer = NULL;
    if (eddy_timer_cancel(t) == 0 || eddy__timer_cancelled(t)) {
        job_release(j);
    }
    eddy_timer_release(t);
}

/* No more tries: stop the delay timer and close the tries under way (they end soon). */
static void job_stop_tries(job_t *j)
{
    delay_stop(j);
    j->next_addr = j->naddrs;
    for (size_t i = 0; i < j->naddrs; i++) {
        attempt_t *a = &j->attempts[i];
        if (a->live && a->ch != NULL) {
            eddy_channel_close(a->ch, NULL);
        }
    }
}

/* A try won: the job's future gets its channel once channel_active has passed. */
static void job_won(job_t *j, eddy_channel_t *ch, eddy_channel_t *tried)
{
    client_t *c = j->c;
    eddy__assert_on_loop(j->loop);
    assert(!j->won && ch != NULL); /* one try wins */
    j->won = true;
    job_stop_tries(j);
    if (client_stopped(c)) {
        /* Freed while this try was under way: a pending connect fails, as free promises, and
         * the channel it made closes rather than stay open with nobody holding it. */
        eddy_channel_close(ch, NULL);
        release_later(tried);
        job_finish(j, NULL, EDDY_ECANCELED);
        return;
    }
    if (c->reconnect.on_close) {
        /* The watcher is a job of its own, waiting for the close; free stops it. */
        job_t *w = job_new(c, j->host, j->port, j->host == NULL ? &j->unix_addr : NULL);
        eddy_future_t *cf = w != NULL ? eddy_channel_close_future(ch) : NULL;
        if (w != NULL && (cf == NULL || eddy_future_add_listener(cf, on_connection_lost, w) != 0)) {
            job_finish(w, NULL, EDDY_ENOMEM);
        }
    }
    /* The channel layer completes the connect future just before it fires channel_active;
     * a task queued now runs after that, so the user's future sees an active channel. */
    j->connected = tried != NULL ? tried : eddy_channel_retain(ch);
    job_retain(j);
    if (eddy_loop_execute(j->loop, job_connected, j) != 0) {
        job_connected(j);
    }
}

static void attempt_done(eddy_future_t *f, void *arg)
{
    attempt_t *a = arg;
    job_t *j = a->j;
    int err = eddy_future_error(f);
    eddy_channel_t *ch = eddy_future_channel(f);
    eddy_channel_t *tried = a->ch;
    assert(a->live && j->live > 0);
    a->ch = NULL;
    a->live = false;
    j->live--;
    if (a->init_err != 0 && j->stop_err == 0 && !j->won) {
        /* init turned the channel down: it is closed, and no other address is tried. */
        j->stop_err = a->init_err;
        job_stop_tries(j);
    }
    bool over = atomic_load_explicit(&j->finished, memory_order_acquire);
    if (err == 0 && a->init_err == 0 && !j->won && j->stop_err == 0 && !over) {
        job_won(j, ch, tried);
    } else {
        if (err == 0 && ch != NULL) {
            eddy_channel_close(ch, NULL); /* connected too late: another try won */
        }
        release_later(tried);
        if (err != 0 && a->init_err == 0) {
            j->last_err = err;
        }
        if (over || j->won) {
            /* nothing more to do for this job */
        } else if (j->stop_err != 0) {
            if (j->live == 0) {
                job_finish(j, NULL, j->stop_err);
            }
        } else {
            job_try_next(j); /* a failure starts the next try at once */
        }
    }
    eddy_future_release(f);
    job_release(j); /* the try's */
}

static int64_t backoff_ms(const eddy_reconnect_options_t *r, unsigned attempt)
{
    assert(attempt > 0 && r->backoff <= EDDY_BACKOFF_EXPONENTIAL);
    int64_t base = r->base_ms > 0 ? r->base_ms : 100;
    int64_t cap = r->max_ms > 0 ? r->max_ms : 30000;
    int64_t d = base;
    if (r->backoff == EDDY_BACKOFF_LINEAR) {
        d = base * (int64_t)attempt;
    } else if (r->backoff == EDDY_BACKOFF_EXPONENTIAL) {
        for (unsigned i = 1; i < attempt && d < cap; i++) {
            d *= 2;
        }
    }
    return d < cap ? d : cap;
}

static void retry_timer(eddy_timer_t *t, void *arg)
{
    job_t *j = arg;
    pthread_mutex_lock(&j->c->lock);
    j->timer = NULL;
    pthread_mutex_unlock(&j->c->lock);
    eddy_timer_release(t);
    job_start(j);
}

static void round_failed_task(void *arg)
{
    job_t *j = arg;
    job_round_failed(j, j->last_err);
}

/* Every address failed with err: wait and start over, or give up. */
static void job_round_failed(job_t *j, int err)
{
    client_t *c = j->c;
    const eddy_reconnect_options_t *r = &c->reconnect;
    bool again =
        r->backoff != EDDY_BACKOFF_NONE && (r->max_attempts == 0 || j->attempt < r->max_attempts);
    if (j->cancelled) {
        job_finish(j, NULL, EDDY_ECANCELED);
        return;
    }
    if (!again) {
        job_finish(j, NULL, err);
        return;
    }
    /* A lost connection reports from its channel's loop: the callback is promised the job's.
     * Queued under the lock, which the task takes too: this thread is out of
     * eddy_loop_execute before the job can end (and the group be freed). */
    if (!eddy_loop_in_event_loop(j->loop)) {
        j->last_err = err;
        pthread_mutex_lock(&c->lock);
        int rc = eddy_loop_execute(j->loop, round_failed_task, j);
        pthread_mutex_unlock(&c->lock);
        if (rc != 0) {
            job_finish(j, NULL, err);
        }
        return;
    }
    j->attempt++;
    int64_t delay = backoff_ms(r, j->attempt);
    pthread_mutex_lock(&c->lock);
    if (c->stopped) {
        pthread_mutex_unlock(&c->lock);
        job_finish(j, NULL, EDDY_ECANCELED);
        return;
    }
    if (r->cb != NULL) {
        r->cb(c->owner, j->attempt, delay, err, r->arg);
    }
    /* Scheduling under the lock: free sees either no timer yet (and no new one comes, as it
     * set stopped first) or this one, which it cancels. */
    j->timer = eddy_loop_schedule(j->loop, delay, retry_timer, j);
    bool scheduled = j->timer != NULL;
    pthread_mutex_unlock(&c->lock);
    if (!scheduled) {
        job_finish(j, NULL, err);
    }
}

static void delay_passed(eddy_timer_t *t, void *arg)
{
    job_t *j = arg;
    assert(j->he_timer == t);
    eddy_timer_release(t);
    j->he_timer = NULL;
    job_try_next(j);
    job_release(j); /* the timer's */
}

/* Start the next address's try, and the delay after which the one after it starts; with
 * none left and none under way, the round failed. */
static void job_try_next(job_t *j)
{
    delay_stop(j);
    if (client_stopped(j->c) || j->cancelled) {
        j->stop_err = EDDY_ECANCELED;
        job_stop_tries(j);
        if (j->live == 0) {
            job_finish(j, NULL, EDDY_ECANCELED);
        }
        return;
    }
    job_retain(j); /* a try may end (and the job with it) inside the connect call */
    while (j->next_addr < j->naddrs) {
        size_t i = j->next_addr++;
        attempt_t *a = &j->attempts[i];
        a->j = j;
        eddy_future_t *f;
        if (j->c->datagram) {
            eddy_datagram_options_t o = {
                .loop = j->loop,
                .config = &j->c->config,
                .init = attempt_init,
                .arg = a,
                .remote = &j->addrs[i],
            };
            f = eddy_datagram_open(NULL, &o);
        } else {
            f = eddy_channel_connect(j->loop, &j->addrs[i], &j->c->config, attempt_init, a);
        }
        if (f == NULL) {
            j->last_err = EDDY_ENOMEM;
            continue;
        }
        a->live = true;
        j->live++;
        job_retain(j); /* the try's */
        if (eddy_future_add_listener(f, attempt_done, a) != 0) {
            /* The try goes on unwatched; its channel closes with the loop. */
            eddy_future_release(f);
            a->live = false;
            j->live--;
            job_release(j);
            j->last_err = EDDY_ENOMEM;
            continue;
        }
        bool more = j->next_addr < j->naddrs && !j->won && j->stop_err == 0 &&
                    !atomic_load_explicit(&j->finished, memory_order_acquire);
        if (more && j->he_timer == NULL && a->live) {
            j->he_timer =
                eddy_loop_schedule(j->loop, CONNECTION_ATTEMPT_DELAY_MS, delay_passed, j);
            if (j->he_timer != NULL) {
                job_retain(j); /* the timer's */
            }
        }
        job_release(j);
        return;
    }
    if (j->live == 0 && !atomic_load_explicit(&j->finished, memory_order_acquire)) {
        job_round_failed(j, j->last_err != 0 ? j->last_err : EDDY_ENOENT);
    }
    job_release(j);
}

/* RFC 8305, 4: IPv6 first, then the families alternate, each family in the order given. */
static void interleave(eddy_addr_t *addrs, size_t n)
{
    eddy_addr_t *tmp = malloc(n * sizeof(*tmp));
    if (tmp == NULL || n < 2) {
        free(tmp);
        return; /* tried in the resolver's order */
    }
    size_t v6 = 0, v4 = 0, k = 0;
    for (;;) {
        while (v6 < n && addrs[v6].u.sa.sa_family != AF_INET6) {
            v6++;
        }
        while (v4 < n && addrs[v4].u.sa.sa_family == AF_INET6) {
            v4++;
        }
        if (v6 == n && v4 == n) {
            break;
        }
        if (v6 < n) {
            tmp[k++] = addrs[v6++];
        }
        if (v4 < n) {
            tmp[k++] = addrs[v4++];
        }
    }
    memcpy(addrs, tmp, n * sizeof(*tmp));
    free(tmp);
}

static void job_resolved(void *arg, eddy_addr_t *addrs, size_t n, int err)
{
    job_t *j = arg;
    eddy__assert_on_loop(j->loop);
    assert(j->live == 0 && (err != 0 || n > 0)); /* no try of the last round under way */
    eddy_future_release(j->lookup);
    j->lookup = NULL;
    free(j->addrs);
    free(j->attempts);
    j->addrs = addrs;
    j->naddrs = n;
    j->next_addr = 0;
    j->live = 0;
    j->won = false;
    j->attempts = err == 0 ? calloc(n, sizeof(*j->attempts)) : NULL;
    if (err == 0 && j->attempts == NULL) {
        err = EDDY_ENOMEM;
    }
    if (err != 0) {
        job_round_failed(j, err);
        return;
    }
    interleave(j->addrs, n);
    job_try_next(j);
}

static void job_start_task(void *arg)
{
    job_t *j = arg;
    job_start(j);
    job_release(j); /* the task's */
}

static void job_start(job_t *j)
{
    if (!eddy_loop_in_event_loop(j->loop)) {
        if (eddy_loop_execute(j->loop, job_start_task, job_retain(j)) != 0) {
            job_release(j);
            job_finish(j, NULL, EDDY_ESHUTDOWN);
        }
        return;
    }
    if (j->cancelled || client_stopped(j->c)) {
        job_finish(j, NULL, EDDY_ECANCELED);
        return;
    }
    if (j->host == NULL) {
        eddy_addr_t *a = malloc(sizeof(*a));
        if (a == NULL) {
            job_resolved(j, NULL, 0, EDDY_ENOMEM);
        } else {
            *a = j->unix_addr;
            job_resolved(j, a, 1, 0);
        }
        return;
    }
    int rc = eddy__bootstrap_resolve(j->loop, j->host, j->port, false, job_resolved, j,
                                     &j->lookup);
    if (rc != 0) {
        job_round_failed(j, rc);
    }
}

/* The connect's future completed: when cancelled, stop the lookup, the tries and the
 * retry timer. The job's loop (the future's owner), or any thread once that loop is gone. */
static void job_future_done(eddy_future_t *f, void *arg)
{
    (void)f;
    job_t *j = arg;
    if (!atomic_load_explicit(&j->finished, memory_order_acquire) &&
        eddy_loop_in_event_loop(j->loop)) {
        j->cancelled = true;
        if (j->lookup != NULL) {
            eddy_future_cancel(j->lookup); /* job_resolved ends the job */
        } else if (j->live > 0) {
            j->stop_err = EDDY_ECANCELED; /* the last try to end ends the job */
            job_stop_tries(j);
        } else {
            client_t *c = j->c;
            pthread_mutex_lock(&c->lock);
            bool cancelled = j->timer != NULL && eddy_timer_cancel(j->timer) == 0;
            if (cancelled) {
                eddy_timer_release(j->timer);
                j->timer = NULL;
            }
            pthread_mutex_unlock(&c->lock);
            if (cancelled) {
                job_finish(j, NULL, EDDY_ECANCELED);
            }
            /* Else a task of the job is queued (a start, a round's end, the connection's
             * delivery): it sees cancelled, or finds the future done. */
        }
    }
    job_release(j); /* the listener's */
}

static void on_connection_lost(eddy_future_t *f, void *arg)
{
    (void)f;
    job_t *j = arg;
    if (client_stopped(j->c)) {
        job_finish(j, NULL, EDDY_ECANCELED);
        return;
    }
    job_round_failed(j, EDDY_ECLOSED);
}

/* ---------------------------------------------------------------------------------------
 * Public
 */

eddy_bootstrap_t *eddy_bootstrap_new(void)
{
    eddy_bootstrap_t *b = calloc(1, sizeof(*b));
    client_t *c = calloc(1, sizeof(*c));
    if (b == NULL || c == NULL || pthread_mutex_init(&c->lock, NULL) != 0) {
        free(b);
        free(c);
        return NULL;
    }
    atomic_init(&c->refcnt, 1);
    c->owner = b;
    eddy_channel_config_init(&c->config);
    b->c = c;
    return b;
}

void eddy_bootstrap_free(eddy_bootstrap_t *b)
{
    if (b == NULL) {
        return;
    }
    client_t *c = b->c;
    job_t *cancelled = NULL;
    pthread_mutex_lock(&c->lock);
    c->stopped = true;
    c->owner = NULL;
    for (job_t *j = c->jobs, *next; j != NULL; j = next) {
        next = j->next;
        /* A timer that already fired runs its job to job_try_next, which sees stopped. One
         * its loop dropped while shutting down never fires: that job ends here too. */
        if (j->timer != NULL &&
            (eddy_timer_cancel(j->timer) == 0 || eddy__timer_cancelled(j->timer))) {
            eddy_timer_release(j->timer);
            j->timer = NULL;
            job_unlink(j);
            j->next = cancelled;
            cancelled = j;
        }
    }
    pthread_mutex_unlock(&c->lock);
    while (cancelled != NULL) {
        job_t *j = cancelled;
        cancelled = j->next;
        job_finish(j, NULL, EDDY_ECANCELED);
    }
    free(b);
    client_release(c);
}

int eddy_bootstrap_group(eddy_bootstrap_t *b, eddy_loop_group_t *group)
{
    if (group == NULL) {
        return EDDY_EINVAL;
    }
    b->c->group = group;
    return 0;
}

int eddy_bootstrap_option(eddy_bootstrap_t *b, eddy_option_t opt, int64_t value)
{
    return eddy_channel_config_set(&b->c->config, opt, value);
}

int eddy_bootstrap_attr(eddy_bootstrap_t *b, const void *key, void *value)
{
    client_t *c = b->c;
    for (size_t i = 0; i < c->nattrs; i++) {
        if (c->attrs[i].key == key) {
            c->attrs[i].value = value;
            return 0;
        }
    }
    attr_t *a = realloc(c->attrs, (c->nattrs + 1) * sizeof(*a));
    if (a == NULL) {
        return EDDY_ENOMEM;
    }
    a[c->nattrs++] = (attr_t){key, value};
    c->attrs = a;
    return 0;
}

void eddy_bootstrap_init(eddy_bootstrap_t *b, eddy_channel_init_cb init, void *arg)
{
    b->c->init = init;
    b->c->init_arg = arg;
}

int eddy_bootstrap_reconnect(eddy_bootstrap_t *b, const eddy_reconnect_options_t *opts)
{
    if (opts == NULL) {
        memset(&b->c->reconnect, 0, sizeof(b->c->reconnect));
        return 0;
    }
    if (opts->backoff > EDDY_BACKOFF_EXPONENTIAL) {
        return EDDY_EINVAL;
    }
    b->c->reconnect = *opts;
    return 0;
}

static eddy_future_t *client_connect(eddy_bootstrap_t *b, const char *host, uint16_t port,
                                     const eddy_addr_t *unix_addr)
{
    client_t *c = b->c;
    if (c->group == NULL) {
        eddy__log(EDDY_LOG_ERROR, "bootstrap connect: no group (call eddy_bootstrap_group)");
        return eddy__future_new_done(EDDY_EINVAL, NULL, NULL);
    }
    job_t *j = job_new(c, host, port, unix_addr);
    eddy_promise_t *p = eddy_promise_new(j != NULL ? j->loop : NULL);
    if (j == NULL || p == NULL) {
        if (j != NULL) {
            job_finish(j, NULL, EDDY_ENOMEM);
        }
        if (p != NULL) {
            eddy_promise_fail(p, EDDY_ENOMEM);
        }
        return p;
    }
    j->p = eddy_future_retain(p);
    job_retain(j);
    if (eddy_future_add_listener(p, job_future_done, j) != 0) {
        job_release(j); /* not cancellable then, but it still connects */
    }
    job_start(j);
    return p;
}

eddy_future_t *eddy_bootstrap_connect(eddy_bootstrap_t *b, const char *host, uint16_t port)
{
    if (host == NULL || host[0] == '\0') {
        return eddy__future_new_done(EDDY_EINVAL, NULL, NULL);
    }
    return client_connect(b, host, port, NULL);
}

eddy_future_t *eddy_bootstrap_connect_unix(eddy_bootstrap_t *b, const char *path)
{
    eddy_addr_t a;
    if (path == NULL || eddy_addr_unix(&a, path) != 0) {
        return eddy__future_new_done(EDDY_EINVAL, NULL, NULL);
    }
    return client_connect(b, NULL, 0, &a);
}

/* ---------------------------------------------------------------------------------------
 * Datagram binds: one channel, or with SO_REUSEPORT one per loop of the group, all on the
 * port the first one got.
 */

int eddy_bootstrap_datagram(eddy_bootstrap_t *b, bool on)
{
    b->c->datagram = on;
    return 0;
}

int eddy_bootstrap_reuseport(eddy_bootstrap_t *b, bool on)
{
#ifndef SO_REUSEPORT
    if (on) {
        return EDDY_ENOTSUP;
    }
#endif
    b->c->reuseport = on;
    return 0;
}

/* Each bound channel's init: the bootstrap's attributes, then its init. */
static int dgram_init(eddy_channel_t *ch, void *arg)
{
    client_t *c = arg;
    int rc = 0;
    for (size_t i = 0; i < c->nattrs && rc == 0; i++) {
        rc = eddy_channel_attr_set(ch, c->attrs[i].key, c->attrs[i].value);
    }
    if (rc == 0 && c->init != NULL) {
        rc = c->init(ch, c->init_arg);
    }
    return rc;
}

/* The fan-out's release of the client. */
static void client_put(void *c)
{
    client_release(c);
}

static void dgram_open(eddy__fanout_t *fo, size_t i);

/* One channel of the bind opened or failed, on its loop. */
static void dgram_opened(eddy_future_t *f, void *arg)
{
    eddy__fanout_slot_t *slot = arg;
    int err = eddy_future_error(f);
    eddy_channel_t *ch = eddy_future_channel(f);
    eddy_channel_t *held = ch != NULL ? eddy_channel_retain(ch) : NULL;
    eddy_future_release(f);
    eddy__fanout_opened(slot->fo, slot->i, held, err);
}

/* The fan-out's open: channel i, on the group's next loop, or on its loop i with REUSEPORT. */
static void dgram_open(eddy__fanout_t *fo, size_t i)
{
    client_t *c = fo->owner;
    eddy_channel_config_t cfg = c->config;
    if (fo->reuseport) {
        eddy_channel_config_set(&cfg, EDDY_SO_REUSEPORT, 1);
    }
    eddy_datagram_options_t o = {
        .loop = fo->reuseport ? eddy_loop_group_loop(c->group, i) : eddy_loop_group_next(c->group),
        .config = &cfg,
        .init = dgram_init,
        .arg = c,
    };
    eddy_future_t *f = eddy_datagram_open(&fo->addr, &o);
    if (f == NULL || eddy_future_add_listener(f, dgram_opened, &fo->slot[i]) != 0) {
        /* Without memory: a channel that still opens is left to its loop. */
        eddy_future_release(f);
        eddy__fanout_opened(fo, i, NULL, EDDY_ENOMEM);
    }
}

static eddy_future_t *dgram_bind(eddy_bootstrap_t *b, const char *host, uint16_t port,
                                 const eddy_addr_t *unix_addr)
{
    client_t *c = b->c;
    if (c->group == NULL || !c->datagram) {
        eddy__log(EDDY_LOG_ERROR, "bootstrap bind: %s", c->group == NULL
                                      ? "no group (call eddy_bootstrap_group)"
                                      : "not in datagram mode (call eddy_bootstrap_datagram)");
        return eddy__future_new_done(EDDY_EINVAL, NULL, NULL);
    }
    bool reuseport = c->reuseport && unix_addr == NULL;
    size_t want = reuseport ? eddy_loop_group_size(c->group) : 1;
    eddy_loop_t *owner = reuseport ? eddy_loop_group_loop(c->group, 0) : NULL;
    eddy__refcnt_add(&c->refcnt); /* the bind's */
    eddy__fanout_t *fo = eddy__fanout_new(want, reuseport, owner, c, dgram_open, client_put);
    if (fo == NULL) {
        return eddy__future_new_done(EDDY_ENOMEM, NULL, NULL);
    }
    if (host == NULL || host[0] == '\0') {
        host = "0.0.0.0";
    }
    eddy_loop_t *loop = reuseport ? owner : eddy_loop_group_next(c->group);
    return eddy__fanout_start(fo, loop, host, port, unix_addr);
}

eddy_future_t *eddy_bootstrap_bind(eddy_bootstrap_t *b, const char *host, uint16_t port)
{
    return dgram_bind(b, host, port, NULL);
}

eddy_future_t *eddy_bootstrap_bind_unix(eddy_bootstrap_t *b, const char *path)
{
    eddy_addr_t a;
    if (path == NULL || eddy_addr_unix(&a, path) != 0) {
        return eddy__future_new_done(EDDY_EINVAL, NULL, NULL);
    }
    return dgram_bind(b, NULL, 0, &a);
}

eddy_loop_group_t *eddy__bootstrap_loop_group(eddy_bootstrap_t *b)
{
    return b->c->group;
}
