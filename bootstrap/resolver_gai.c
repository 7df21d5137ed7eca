/*
 * The resolver's getaddrinfo backend (EDDY_RESOLVER=getaddrinfo): each query runs
 * getaddrinfo() on a helper thread of its own, so that no loop blocks in it, and the answer
 * comes back to the loop as a task. getaddrinfo gives no TTLs: nothing is cached, and servers
 * cannot be chosen (resolv.conf's are asked).
 *
 * A job has two references: its thread's (passed to the task that brings the answer back) and
 * the backend's, dropped when the query ends or is let go. job->q is read and written on the
 * loop's thread only.
 */
#include "bootstrap/internal.h"

#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct gai_s gai_t;

typedef struct job_s {
    _Atomic uint32_t refcnt;
    eddy_loop_t *loop; /* a use, for the thread's task */
    gai_t *g;
    eddy__query_t *q; /* NULL once let go */
    struct job_s *next, **prev;
    int family;
    eddy_addr_t *addrs;
    size_t n;
    int err;
    char host[];
} job_t;

struct gai_s {
    eddy_loop_t *loop;
    job_t *jobs; /* in flight */
};

static void job_release(job_t *j)
{
    /* acq_rel: the last releaser sees the other side's writes. */
    if (eddy__refcnt_sub(&j->refcnt, 1)) {
        eddy__loop_release(j->loop);
        free(j->addrs);
        free(j);
    }
}

static int eai_error(int rc)
{
    switch (rc) {
    case EAI_NONAME:
#ifdef EAI_NODATA
    case EAI_NODATA:
#endif
    case EAI_FAMILY:
        return EDDY_ENOENT;
    case EAI_AGAIN:
        return EDDY_ETIMEDOUT;
    case EAI_MEMORY:
        return EDDY_ENOMEM;
    default:
        return EDDY_EIO;
    }
}

/* Take j off the backend's list and end its query with what the thread found (or err). */
static void job_end(job_t *j, int err)
{
    eddy__query_t *q = j->q;
    *j->prev = j->next;
    if (j->next != NULL) {
        j->next->prev = j->prev;
    }
    j->q = NULL;
    if (err == 0) {
        err = j->err;
    }
    eddy__query_done(q, j->addrs, err == 0 ? j->n : 0, 0, err);
    job_release(j); /* the backend's */
}

static void job_answered(void *arg)
{
    job_t *j = arg;
    if (j->q != NULL) {
        job_end(j, 0);
    }
    job_release(j); /* the thread's */
}

static void *job_thread(void *arg)
{
    job_t *j = arg;
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = j->family;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(j->host, NULL, &hints, &res);
    if (rc != 0) {
        j->err = eai_error(rc);
    } else {
        size_t n = 0;
        for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
            n++;
        }
        j->addrs = calloc(n, sizeof(*j->addrs));
        for (struct addrinfo *ai = res; j->addrs != NULL && ai != NULL; ai = ai->ai_next) {
            bool ip = ai->ai_family == AF_INET || ai->ai_family == AF_INET6;
            if (ip && ai->ai_addrlen <= sizeof(j->addrs[j->n].u)) {
                memcpy(&j->addrs[j->n].u, ai->ai_addr, ai->ai_addrlen);
                j->addrs[j->n].len = ai->ai_addrlen;
                j->n++;
            }
        }
        freeaddrinfo(res);
        j->err = j->addrs == NULL ? EDDY_ENOMEM : j->n == 0 ? EDDY_ENOENT : 0;
    }
    eddy_loop_t *loop = j->loop;
    eddy__loop_retain(loop); /* j may be freed once the task is queued */
    if (eddy_loop_execute(loop, job_answered, j) != 0) {
        job_release(j); /* the loop is gone or going: its close ended the query */
    }
    eddy__loop_release(loop);
    return NULL;
}

static int gai_check(const eddy__resolver_settings_t *s)
{
    return s->servers != NULL ? EDDY_ENOTSUP : 0;
}

static int gai_open(eddy__resolver_t *r, eddy_loop_t *loop, const eddy__resolver_settings_t *s,
                    void **state)
{
    (void)r;
    (void)s;
    gai_t *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return EDDY_ENOMEM;
    }
    g->loop = loop;
    *state = g;
    return 0;
}

static void gai_close(void *state)
{
    gai_t *g = state;
    while (g->jobs != NULL) {
        job_end(g->jobs, EDDY_ESHUTDOWN);
    }
    free(g);
}

static void gai_start(void *state, eddy__query_t *q)
{
    gai_t *g = state;
    size_t len = strlen(q->name);
    job_t *j = calloc(1, sizeof(*j) + len + 1);
    if (j == NULL) {
        eddy__query_done(q, NULL, 0, 0, EDDY_ENOMEM);
        return;
    }
    memcpy(j->host, q->name, len + 1);
    atomic_init(&j->refcnt, 2);
    j->loop = g->loop;
    eddy__loop_retain(j->loop);
    j->g = g;
    j->q = q;
    j->family = q->family == EDDY_RESOLVE_V4 ? AF_INET
                : q->family == EDDY_RESOLVE_V6 ? AF_INET6
                                               : AF_UNSPEC;
    j->next = g->jobs;
    if (g->jobs != NULL) {
        g->jobs->prev = &j->next;
    }
    j->prev = &g->jobs;
    g->jobs = j;
    q->backend = j;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, job_thread, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        job_release(j); /* the thread's */
        job_end(j, -rc);
    }
}

/* getaddrinfo cannot be stopped: its thread runs on, and the query ends now. */
static void gai_abandon(void *state, eddy__query_t *q)
{
    (void)state;
    job_end(q->backend, EDDY_ECANCELED);
}

const eddy__resolver_ops_t eddy__resolver_backend = {
    .name = "getaddrinfo",
    .has_ttl = false,
    .check = gai_check,
    .open = gai_open,
    .close = gai_close,
    .start = gai_start,
    .abandon = gai_abandon,
};
