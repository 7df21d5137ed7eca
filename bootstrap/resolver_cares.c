/*
 * The resolver's c-ares backend: one ares channel per loop, its sockets watched by the loop
 * (eddy_io_t, through ARES_OPT_SOCK_STATE_CB) and its timeouts kept by one loop timer,
 * re-armed from ares_timeout() after each call into c-ares. No helper thread.
 *
 * c-ares 1.18 cannot cancel one query, only all of them (ares_cancel): a query nobody waits
 * for any more runs on (its answer still fills the cache) until every query in flight is
 * in that state; then they are all cancelled at once.
 *
 * A query started from inside c-ares (by a listener of an answer) is sent once c-ares has
 * returned: c-ares reads a socket until it is empty, and under load, answers to queries sent
 * from its own callbacks kept it reading for over 100 ms in one call (bench/resolve).
 */
#include "bootstrap/internal.h"

#include "buffer/layer.h"

#include <ares.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct cares_s cares_t;

typedef struct sock_s {
    eddy_io_t io;
    cares_t *c;
    struct sock_s *next;
} sock_t;

struct cares_s {
    ares_channel ch;
    eddy__resolver_t *r;
    eddy_loop_t *loop;
    sock_t *socks;
    eddy_timer_t *timer; /* the one timer; NULL when c-ares waits for nothing */
    int64_t timer_deadline;
    size_t active, abandoned; /* queries in flight, and how many of them nobody waits for */
    int depth;                /* calls into c-ares under way (its callbacks may nest ours) */
    bool cancel_pending;      /* ares_cancel once out of c-ares */
    eddy__query_t **deferred; /* started inside c-ares, to send once out of it */
    size_t ndeferred, deferred_cap;
};

static pthread_once_t library_once = PTHREAD_ONCE_INIT;
static int library_status;

static void library_init(void)
{
    library_status = ares_library_init(ARES_LIB_INIT_ALL);
}

static int ares_error(int status)
{
    switch (status) {
    case ARES_ENOTFOUND:
    case ARES_ENODATA:
    case ARES_ENONAME:
        return EDDY_ENOENT;
    case ARES_ETIMEOUT:
        return EDDY_ETIMEDOUT;
    case ARES_ECANCELLED:
        return EDDY_ECANCELED;
    case ARES_EDESTRUCTION:
        return EDDY_ESHUTDOWN;
    case ARES_ENOMEM:
        return EDDY_ENOMEM;
    case ARES_EBADNAME:
    case ARES_EBADFAMILY:
    case ARES_EBADFLAGS:
        return EDDY_EINVAL;
    default:
        return EDDY_EIO; /* refused, server failure, bad answers, connection refused */
    }
}

static void timer_fired(eddy_timer_t *t, void *arg);
static void send_query(cares_t *c, eddy__query_t *q);

/* Keep the timer at c-ares's next timeout: an earlier timer stays (it re-arms when it
 * fires), a later one is moved. */
static void rearm(cares_t *c)
{
    struct timeval tv;
    if (ares_timeout(c->ch, NULL, &tv) == NULL) {
        if (c->timer != NULL) {
            eddy_timer_cancel(c->timer);
            eddy_timer_release(c->timer);
            c->timer = NULL;
        }
        return;
    }
    int64_t delay = (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
    int64_t deadline = eddy_loop_now_ns(c->loop) + delay;
    if (c->timer != NULL) {
        if (c->timer_deadline <= deadline) {
            return;
        }
        eddy_timer_cancel(c->timer);
        eddy_timer_release(c->timer);
    }
    c->timer = eddy_loop_schedule_ns(c->loop, delay, timer_fired, c);
    c->timer_deadline = deadline;
    if (c->timer == NULL) {
        /* Without memory or shutting down: the lookups' own timers still end them. */
        eddy__log(EDDY_LOG_WARN, "resolver: no timer for c-ares's timeouts");
    }
}

/* After a call into c-ares: the queries started inside it, a cancel asked for, the timer. */
static void after_ares(cares_t *c)
{
    if (c->depth > 0) {
        return;
    }
    for (;;) {
        while (c->ndeferred > 0) {
            /* Taken from the front, in the order started; one may start more. */
            eddy__query_t *q = c->deferred[0];
            memmove(c->deferred, c->deferred + 1, --c->ndeferred * sizeof(*c->deferred));
            if (q->waiters == NULL) {
                /* Abandoned before it was sent. */
                c->active--;
                c->abandoned--;
                eddy__query_done(q, NULL, 0, 0, EDDY_ECANCELED);
            } else {
                send_query(c, q);
            }
        }
        /* Looked at again: a query started meanwhile (by a listener) must not be cancelled.
         * The cancel's callbacks may start queries in turn: round again. */
        if (!c->cancel_pending || c->active == 0 || c->abandoned != c->active) {
            break;
        }
        c->cancel_pending = false;
        c->depth++;
        ares_cancel(c->ch);
        c->depth--;
    }
    c->cancel_pending = false;
    rearm(c);
}

static void timer_fired(eddy_timer_t *t, void *arg)
{
    cares_t *c = arg;
    eddy_timer_release(t);
    c->timer = NULL;
    c->depth++;
    ares_process_fd(c->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    c->depth--;
    after_ares(c);
}

static void sock_ready(eddy_io_t *io, unsigned events, void *arg)
{
    cares_t *c = ((sock_t *)arg)->c;
    int fd = io->fd;
    /* An error or a hang-up is for c-ares's read to find. */
    bool r = (events & (EDDY_IO_READ | EDDY_IO_ERROR | EDDY_IO_HUP)) != 0;
    bool w = (events & EDDY_IO_WRITE) != 0;
    c->depth++;
    /* May close the socket, and free its sock_t (sock_state). */
    ares_process_fd(c->ch, r ? fd : ARES_SOCKET_BAD, w ? fd : ARES_SOCKET_BAD);
    c->depth--;
    after_ares(c);
}

/* c-ares opened, changed or (neither readable nor writable) is about to close fd. */
static void sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
    cares_t *c = data;
    sock_t **pp = &c->socks;
    while (*pp != NULL && (*pp)->io.fd != fd) {
        pp = &(*pp)->next;
    }
    sock_t *s = *pp;
    if (!readable && !writable) {
        if (s != NULL) {
            eddy_io_stop(&s->io);
            *pp = s->next;
            free(s);
        }
        return;
    }
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL) {
            eddy__log(EDDY_LOG_WARN, "resolver: no memory to watch a c-ares socket");
            return; /* its queries time out */
        }
        s->c = c;
        eddy_io_init(&s->io, c->loop, fd, sock_ready, s);
        s->next = c->socks;
        c->socks = s;
    }
    unsigned ev = (readable ? EDDY_IO_READ : 0) | (writable ? EDDY_IO_WRITE : 0);
    int rc = eddy_io_start(&s->io, ev);
    if (rc != 0) {
        eddy__log(EDDY_LOG_WARN, "resolver: cannot watch a c-ares socket: %s", eddy_strerror(rc));
    }
}

static void query_answered(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
    (void)timeouts;
    eddy__query_t *q = arg;
    cares_t *c = q->backend;
    c->active--;
    if (q->waiters == NULL) {
        c->abandoned--;
    }
    int err = status == ARES_SUCCESS ? 0 : ares_error(status);
    size_t n = 0;
    eddy_addr_t *addrs = NULL;
    uint32_t ttl = UINT32_MAX;
    if (err == 0 && res != NULL) {
        for (struct ares_addrinfo_node *ai = res->nodes; ai != NULL; ai = ai->ai_next) {
            n++;
        }
        addrs = n > 0 ? calloc(n, sizeof(*addrs)) : NULL;
        n = 0;
        for (struct ares_addrinfo_node *ai = res->nodes; addrs != NULL && ai != NULL;
             ai = ai->ai_next) {
            bool ip = ai->ai_family == AF_INET || ai->ai_family == AF_INET6;
            if (!ip || ai->ai_addrlen > sizeof(addrs[n].u)) {
                continue;
            }
            memcpy(&addrs[n].u, ai->ai_addr, ai->ai_addrlen);
            addrs[n].len = ai->ai_addrlen;
            n++;
            /* The answer is as old as its youngest record allows; /etc/hosts gives 0. */
            uint32_t t = ai->ai_ttl > 0 ? (uint32_t)ai->ai_ttl : 0;
            if (t < ttl) {
                ttl = t;
            }
        }
        if (res->nodes != NULL && addrs == NULL) {
            err = EDDY_ENOMEM;
        }
    }
    if (res != NULL) {
        ares_freeaddrinfo(res);
    }
    eddy__query_done(q, addrs, n, n > 0 ? ttl : 0, err);
    free(addrs);
}

static int cares_check(const eddy__resolver_settings_t *s)
{
    pthread_once(&library_once, library_init);
    if (library_status != ARES_SUCCESS) {
        return EDDY_EIO;
    }
    if (s->servers == NULL) {
        return 0;
    }
    /* Parsed by a channel of its own: a malformed list changes nothing. */
    struct ares_options o;
    memset(&o, 0, sizeof(o));
    char lookups[] = "b"; /* DNS only: no hosts file read to check a list */
    o.lookups = lookups;
    ares_channel ch;
    if (ares_init_options(&ch, &o, ARES_OPT_LOOKUPS) != ARES_SUCCESS) {
        return EDDY_ENOMEM;
    }
    int rc = ares_set_servers_ports_csv(ch, s->servers);
    ares_destroy(ch);
    return rc == ARES_SUCCESS ? 0 : rc == ARES_ENOMEM ? EDDY_ENOMEM : EDDY_EINVAL;
}

static int cares_open(eddy__resolver_t *r, eddy_loop_t *loop, const eddy__resolver_settings_t *s,
                      void **state)
{
    pthread_once(&library_once, library_init);
    if (library_status != ARES_SUCCESS) {
        return EDDY_EIO;
    }
    cares_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return EDDY_ENOMEM;
    }
    c->r = r;
    c->loop = loop;
    struct ares_options o;
    memset(&o, 0, sizeof(o));
    int mask = ARES_OPT_SOCK_STATE_CB;
    o.sock_state_cb = sock_state;
    o.sock_state_cb_data = c;
    if (s->attempt_timeout_ms > 0) {
        o.timeout = s->attempt_timeout_ms > INT32_MAX ? INT32_MAX : (int)s->attempt_timeout_ms;
        mask |= ARES_OPT_TIMEOUTMS;
    }
    if (s->tries > 0) {
        o.tries = s->tries;
        mask |= ARES_OPT_TRIES;
    }
    int rc = ares_init_options(&c->ch, &o, mask);
    if (rc == ARES_SUCCESS && s->servers != NULL) {
        rc = ares_set_servers_ports_csv(c->ch, s->servers);
        if (rc != ARES_SUCCESS) {
            ares_destroy(c->ch);
        }
    }
    if (rc != ARES_SUCCESS) {
        eddy__log(EDDY_LOG_WARN, "resolver: c-ares: %s", ares_strerror(rc));
        free(c);
        return rc == ARES_ENOMEM ? EDDY_ENOMEM : EDDY_EIO;
    }
    *state = c;
    return 0;
}

static void cares_close(void *state)
{
    cares_t *c = state;
    c->depth++;
    /* Ends every query with ARES_EDESTRUCTION (EDDY_ESHUTDOWN) and closes its sockets. */
    ares_destroy(c->ch);
    c->depth--;
    for (size_t i = 0; i < c->ndeferred; i++) {
        eddy__query_done(c->deferred[i], NULL, 0, 0, EDDY_ESHUTDOWN);
    }
    free(c->deferred);
    while (c->socks != NULL) {
        sock_t *s = c->socks;
        c->socks = s->next;
        eddy_io_stop(&s->io);
        free(s);
    }
    if (c->timer != NULL) {
        eddy_timer_cancel(c->timer);
        eddy_timer_release(c->timer);
    }
    free(c);
}

static void send_query(cares_t *c, eddy__query_t *q)
{
    struct ares_addrinfo_hints hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = q->family == EDDY_RESOLVE_V4   ? AF_INET
                      : q->family == EDDY_RESOLVE_V6 ? AF_INET6
                                                     : AF_UNSPEC;
    /* No RFC 6724 sort: c-ares would connect a UDP socket per address to learn its source
     * address; Happy Eyeballs orders them instead. */
    hints.ai_flags = ARES_AI_NOSORT;
    c->depth++;
    ares_getaddrinfo(c->ch, q->name, NULL, &hints, query_answered, q);
    c->depth--;
}

static void cares_start(void *state, eddy__query_t *q)
{
    cares_t *c = state;
    q->backend = c;
    c->active++;
    if (c->depth > 0) {
        if (c->ndeferred == c->deferred_cap) {
            size_t cap = c->deferred_cap ? 2 * c->deferred_cap : 16;
            eddy__query_t **d = realloc(c->deferred, cap * sizeof(*d));
            if (d == NULL) {
                c->active--;
                eddy__query_done(q, NULL, 0, 0, EDDY_ENOMEM);
                return;
            }
            c->deferred = d;
            c->deferred_cap = cap;
        }
        c->deferred[c->ndeferred++] = q;
        return;
    }
    send_query(c, q);
    after_ares(c);
}

static void cares_abandon(void *state, eddy__query_t *q)
{
    (void)q;
    cares_t *c = state;
    c->abandoned++;
    if (c->abandoned == c->active) {
        c->cancel_pending = true;
        after_ares(c);
    }
}

const eddy__resolver_ops_t eddy__resolver_backend = {
    .name = "c-ares",
    .has_ttl = true,
    .check = cares_check,
    .open = cares_open,
    .close = cares_close,
    .start = cares_start,
    .abandon = cares_abandon,
};
