/*
 * What every channel kind shares: creation and lifetime, options, attributes, counters, the
 * public operations (which hop to the loop when called elsewhere), and close.
 */
#include "pipeline/internal.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic uint64_t next_id = 1;

/* ch->close_future of a channel that closed before anyone asked for its close future. */
static char closed_no_future;
#define CLOSED_NO_FUTURE ((eddy_promise_t *)(void *)&closed_no_future)

/* ---------------------------------------------------------------------------------------
 * Addresses
 */

int eddy_addr_ip(eddy_addr_t *a, const char *ip, uint16_t port)
{
    memset(a, 0, sizeof(*a));
    if (ip != NULL && inet_pton(AF_INET, ip, &a->u.in4.sin_addr) == 1) {
        a->u.in4.sin_family = AF_INET;
        a->u.in4.sin_port = htons(port);
        a->len = sizeof(a->u.in4);
        return 0;
    }
    if (ip != NULL && inet_pton(AF_INET6, ip, &a->u.in6.sin6_addr) == 1) {
        a->u.in6.sin6_family = AF_INET6;
        a->u.in6.sin6_port = htons(port);
        a->len = sizeof(a->u.in6);
        return 0;
    }
    return EDDY_EINVAL;
}

int eddy_addr_unix(eddy_addr_t *a, const char *path)
{
    memset(a, 0, sizeof(*a));
    size_t n = path != NULL ? strlen(path) : 0;
    if (n == 0 || n >= sizeof(a->u.un.sun_path)) {
        return EDDY_EINVAL;
    }
    a->u.un.sun_family = AF_UNIX;
    memcpy(a->u.un.sun_path, path, n + 1);
    a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    return 0;
}

uint16_t eddy_addr_port(const eddy_addr_t *a)
{
    if (a->len == 0) {
        return 0;
    }
    if (a->u.sa.sa_family == AF_INET) {
        return ntohs(a->u.in4.sin_port);
    }
    if (a->u.sa.sa_family == AF_INET6) {
        return ntohs(a->u.in6.sin6_port);
    }
    return 0;
}

const char *eddy_addr_format(const eddy_addr_t *a, char *out, size_t n)
{
    char ip[INET6_ADDRSTRLEN];
    if (n == 0) {
        return out;
    }
    if (a->len == 0) {
        snprintf(out, n, "?");
    } else if (a->u.sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &a->u.in4.sin_addr, ip, sizeof(ip));
        snprintf(out, n, "%s:%u", ip, ntohs(a->u.in4.sin_port));
    } else if (a->u.sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &a->u.in6.sin6_addr, ip, sizeof(ip));
        snprintf(out, n, "[%s]:%u", ip, ntohs(a->u.in6.sin6_port));
    } else if (a->u.sa.sa_family == AF_UNIX) {
        snprintf(out, n, "unix:%s", a->u.un.sun_path);
    } else {
        snprintf(out, n, "family %d", a->u.sa.sa_family);
    }
    return out;
}

/* ---------------------------------------------------------------------------------------
 * Options
 */

_Static_assert(EDDY_OPTION_COUNT_ <= 64, "eddy_channel_config_t.set has a bit per option");

/* The defaults every channel starts with, shared until its first write. */
static eddy__options_t default_options = {
    .value =
        {
            [EDDY_SO_BACKLOG] = 1024,
            [EDDY_SO_REUSEADDR] = 0,
            [EDDY_SO_REUSEPORT] = 0,
            [EDDY_TCP_NODELAY] = 1,
            [EDDY_SO_KEEPALIVE] = 0,
            [EDDY_SO_RCVBUF] = 0,
            [EDDY_SO_SNDBUF] = 0,
            [EDDY_SO_LINGER] = -1,
            [EDDY_CONNECT_TIMEOUT_MS] = 30000,
            [EDDY_WRITE_BUFFER_LOW_WATER_MARK] = 32 * 1024,
            [EDDY_WRITE_BUFFER_HIGH_WATER_MARK] = 64 * 1024,
            [EDDY_AUTO_READ] = 1,
            [EDDY_ALLOW_HALF_CLOSURE] = 0,
            [EDDY_MAX_MESSAGES_PER_READ] = 16,
            [EDDY_WRITE_SPIN_COUNT] = 16,
            [EDDY_RCVBUF_ALLOC_MIN] = 64,
            [EDDY_RCVBUF_ALLOC_INITIAL] = 2048,
            [EDDY_RCVBUF_ALLOC_MAX] = 65536,
            [EDDY_PAUSE_READ_WHEN_UNWRITABLE] = 0,
            [EDDY_MAX_PENDING_OUTBOUND] = 0,
            [EDDY_LINGER_MS] = 2000,
            [EDDY_SO_BROADCAST] = 0,
            [EDDY_IP_MULTICAST_LOOP] = 1,
            [EDDY_IP_MULTICAST_TTL] = 1,
            [EDDY_IP_MULTICAST_IF] = 0,
            [EDDY_UDP_GSO] = 1,
            [EDDY_UDP_GRO] = 0,
            [EDDY_DATAGRAM_RECV_SIZE] = 2048,
            [EDDY_TCP_CORK] = 0,
            [EDDY_TCP_NOTSENT_LOWAT] = 0,
            [EDDY_TCP_FASTOPEN] = 0,
            [EDDY_TCP_USER_TIMEOUT] = 0,
            [EDDY_TCP_KEEPIDLE] = 0,
            [EDDY_TCP_KEEPINTVL] = 0,
            [EDDY_TCP_KEEPCNT] = 0,
        },
};

static bool option_valid(eddy_option_t opt, int64_t v)
{
    switch (opt) {
    case EDDY_SO_REUSEADDR:
    case EDDY_SO_REUSEPORT:
    case EDDY_TCP_NODELAY:
    case EDDY_SO_KEEPALIVE:
    case EDDY_AUTO_READ:
    case EDDY_ALLOW_HALF_CLOSURE:
    case EDDY_PAUSE_READ_WHEN_UNWRITABLE:
    case EDDY_SO_BROADCAST:
    case EDDY_IP_MULTICAST_LOOP:
    case EDDY_UDP_GSO:
    case EDDY_UDP_GRO:
    case EDDY_TCP_CORK:
        return v == 0 || v == 1;
    case EDDY_TCP_KEEPIDLE:
    case EDDY_TCP_KEEPINTVL:
        return v >= 0 && v <= 32767; /* the kernel's MAX_TCP_KEEPIDLE, _KEEPINTVL */
    case EDDY_TCP_KEEPCNT:
        return v >= 0 && v <= 127; /* MAX_TCP_KEEPCNT */
    case EDDY_TCP_NOTSENT_LOWAT:
    case EDDY_TCP_FASTOPEN:
    case EDDY_TCP_USER_TIMEOUT:
        return v >= 0 && v <= INT32_MAX;
    case EDDY_IP_MULTICAST_TTL:
        return v >= 0 && v <= 255;
    case EDDY_IP_MULTICAST_IF:
        return v >= 0 && v <= INT32_MAX;
    case EDDY_DATAGRAM_RECV_SIZE:
        return v >= 1 && v <= 65536;
    case EDDY_SO_LINGER:
        return v >= -1 && v <= 65535;
    case EDDY_SO_BACKLOG:
    case EDDY_SO_RCVBUF:
    case EDDY_SO_SNDBUF:
        return v >= 0 && v <= INT32_MAX;
    case EDDY_MAX_MESSAGES_PER_READ:
    case EDDY_WRITE_SPIN_COUNT:
        return v >= 1 && v <= 1 << 20;
    case EDDY_RCVBUF_ALLOC_MIN:
    case EDDY_RCVBUF_ALLOC_INITIAL:
    case EDDY_RCVBUF_ALLOC_MAX:
        return v >= 16 && v <= 64 * 1024 * 1024;
    case EDDY_CONNECT_TIMEOUT_MS:
    case EDDY_LINGER_MS:
    case EDDY_WRITE_BUFFER_LOW_WATER_MARK:
    case EDDY_WRITE_BUFFER_HIGH_WATER_MARK:
    case EDDY_MAX_PENDING_OUTBOUND:
        return v >= 0;
    default:
        return false;
    }
}

/* A low mark above the high one, or a high mark below the low one: refused. */
static bool marks_conflict(const int64_t *v, eddy_option_t opt, int64_t value)
{
    return (opt == EDDY_WRITE_BUFFER_LOW_WATER_MARK &&
            value > v[EDDY_WRITE_BUFFER_HIGH_WATER_MARK]) ||
           (opt == EDDY_WRITE_BUFFER_HIGH_WATER_MARK &&
            value < v[EDDY_WRITE_BUFFER_LOW_WATER_MARK]);
}

void eddy_channel_config_init(eddy_channel_config_t *cfg)
{
    memcpy(cfg->value, default_options.value, sizeof(cfg->value));
    cfg->set = 0;
}

int eddy_channel_config_set(eddy_channel_config_t *cfg, eddy_option_t opt, int64_t value)
{
    if ((unsigned)opt >= EDDY_OPTION_COUNT_ || !option_valid(opt, value)) {
        return EDDY_EINVAL;
    }
    cfg->value[opt] = value;
    cfg->set |= 1ull << opt;
    return 0;
}

/* Datagram channels' defaults: the same, but one recvmmsg batch per wake-up. Static like
 * default_options (refs 0, never freed), so a datagram channel with no option of its own holds
 * no copy. Made once, at the first datagram channel. */
static eddy__options_t datagram_options;
static pthread_once_t datagram_once = PTHREAD_ONCE_INIT;

static void datagram_options_init(void)
{
    memcpy(datagram_options.value, default_options.value, sizeof(datagram_options.value));
    datagram_options.value[EDDY_MAX_MESSAGES_PER_READ] = 64;
}

/* A block of the process's, never freed. */
static bool options_static(const eddy__options_t *o)
{
    return o == &default_options || o == &datagram_options;
}

void eddy__channel_use_datagram_defaults(eddy_channel_t *ch)
{
    pthread_once(&datagram_once, datagram_options_init);
    assert(ch->opt == default_options.value); /* a new channel, no value of its own yet */
    ch->opt = datagram_options.value;
}

static void options_retain(eddy__options_t *o)
{
    if (!options_static(o)) {
        eddy__refcnt_add(&o->refs);
    }
}

void eddy__options_release(eddy__options_t *o)
{
    /* acq_rel, pairing with itself: the last releaser, on whichever loop, sees the block as
     * it was made. */
    if (o != NULL && !options_static(o) &&
        eddy__refcnt_sub(&o->refs, 1)) {
        free(o);
    }
}

static eddy__options_t *options_of(const eddy_channel_t *ch)
{
    return EDDY_CONTAINER_OF(ch->opt, eddy__options_t, value);
}

/* The channel's own copy of its values, made at the first write. The shared block stays
 * referenced until the channel is freed (the copy's `shared`): another thread may be
 * reading it. */
static int options_own(eddy_channel_t *ch)
{
    eddy__options_t *cur = options_of(ch);
    if (cur->shared != NULL) {
        return 0; /* ours already */
    }
    eddy__options_t *own = malloc(sizeof(*own));
    if (own == NULL) {
        return EDDY_ENOMEM;
    }
    atomic_init(&own->refs, 0);
    own->shared = cur; /* the channel's reference moves to the copy */
    memcpy(own->value, cur->value, sizeof(own->value));
    ch->opt = own->value;
    return 0;
}

int eddy__channel_option_store(eddy_channel_t *ch, eddy_option_t opt, int64_t value)
{
    if (ch->opt[opt] == value) {
        return 0; /* no copy for a value the channel has */
    }
    int err = options_own(ch);
    if (err == 0) {
        ch->opt[opt] = value;
    }
    return err;
}

int eddy_channel_set_option(eddy_channel_t *ch, eddy_option_t opt, int64_t value)
{
    if ((unsigned)opt >= EDDY_OPTION_COUNT_ || !option_valid(opt, value)) {
        return EDDY_EINVAL;
    }
    if (marks_conflict(ch->opt, opt, value)) {
        return EDDY_EINVAL;
    }
    int64_t old = ch->opt[opt];
    int err = old != value ? options_own(ch) : 0;
    if (err == 0 && ch->ops->set_socket_option != NULL && ch->fd >= 0) {
        err = ch->ops->set_socket_option(ch, opt, value);
    }
    if (err != 0) {
        return err;
    }
    if (old != value) {
        ch->opt[opt] = value; /* our own copy by now */
    }
    if (opt == EDDY_AUTO_READ && value == 1 && old == 0 && (ch->flags & EDDY__CH_ACTIVE)) {
        eddy_channel_read(ch);
    }
    if (opt == EDDY_WRITE_BUFFER_LOW_WATER_MARK || opt == EDDY_WRITE_BUFFER_HIGH_WATER_MARK) {
        if (eddy_loop_in_event_loop(eddy__loop_of(ch))) {
            eddy__outbound_update_writability(ch);
        }
    }
    return 0;
}

int64_t eddy_channel_option(const eddy_channel_t *ch, eddy_option_t opt)
{
    if ((unsigned)opt >= EDDY_OPTION_COUNT_) {
        return EDDY_EINVAL;
    }
    return ch->opt[opt];
}

static void log_not_applied(const eddy_channel_t *ch, unsigned o, int err)
{
    eddy__log(EDDY_LOG_DEBUG, "channel %llu: option %u not applied: %s", (unsigned long long)ch->id,
              o, eddy_strerror(err));
}

void eddy__channel_apply_config(eddy_channel_t *ch, const eddy_channel_config_t *cfg)
{
    if (cfg == NULL) {
        return;
    }
    /* The water marks first in an order that keeps low <= high at every step. */
    if (cfg->set & (1ull << EDDY_WRITE_BUFFER_HIGH_WATER_MARK)) {
        int err = eddy__channel_option_store(ch, EDDY_WRITE_BUFFER_HIGH_WATER_MARK,
                                             cfg->value[EDDY_WRITE_BUFFER_HIGH_WATER_MARK]);
        if (err != 0) {
            log_not_applied(ch, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, err);
        }
    }
    for (unsigned o = 0; o < EDDY_OPTION_COUNT_; o++) {
        if ((cfg->set & (1ull << o)) && o != EDDY_WRITE_BUFFER_HIGH_WATER_MARK) {
            int err = eddy_channel_set_option(ch, (eddy_option_t)o, cfg->value[o]);
            if (err != 0) {
                log_not_applied(ch, o, err);
            }
        }
    }
}

eddy__options_t *eddy__options_new(const eddy_channel_config_t *cfg)
{
    if (cfg->set == 0) {
        return &default_options;
    }
    eddy__options_t *o = malloc(sizeof(*o));
    if (o == NULL) {
        return NULL;
    }
    atomic_init(&o->refs, 1);
    o->shared = NULL;
    int64_t *v = o->value;
    memcpy(v, default_options.value, sizeof(o->value));
    /* The values eddy__channel_apply_config() leaves on a new channel, in its order. */
    if (cfg->set & (1ull << EDDY_WRITE_BUFFER_HIGH_WATER_MARK)) {
        v[EDDY_WRITE_BUFFER_HIGH_WATER_MARK] = cfg->value[EDDY_WRITE_BUFFER_HIGH_WATER_MARK];
    }
    for (unsigned i = 0; i < EDDY_OPTION_COUNT_; i++) {
        if ((cfg->set & (1ull << i)) && i != EDDY_WRITE_BUFFER_HIGH_WATER_MARK &&
            option_valid((eddy_option_t)i, cfg->value[i]) &&
            !marks_conflict(v, (eddy_option_t)i, cfg->value[i])) {
            v[i] = cfg->value[i];
        }
    }
    return o;
}

void eddy__channel_share_config(eddy_channel_t *ch, eddy__options_t *o,
                                const eddy_channel_config_t *cfg)
{
    /* ch is new: it holds the static defaults, nothing to release. */
    options_retain(o);
    ch->opt = o->value;
    if (ch->ops->set_socket_option == NULL || ch->fd < 0) {
        return;
    }
    for (unsigned i = 0; i < EDDY_OPTION_COUNT_; i++) {
        if (!(cfg->set & (1ull << i)) || o->value[i] != cfg->value[i]) {
            continue; /* not given, or refused when the block was made */
        }
        int err = ch->ops->set_socket_option(ch, (eddy_option_t)i, cfg->value[i]);
        if (err != 0) {
            /* As eddy_channel_set_option(): a value the socket refused is not the channel's. */
            eddy__channel_option_store(ch, (eddy_option_t)i, default_options.value[i]);
            log_not_applied(ch, i, err);
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Lifetime
 */

eddy_channel_t *eddy__channel_new(eddy_loop_t *loop, const eddy__channel_ops_t *ops, int fd)
{
    /* A kind with a state of its own is allocated up to the end of that state: the watcher
     * it takes the place of is not needed (internal.h). */
    assert(loop != NULL && ops->state_size <= sizeof(eddy_io_t));
    size_t size = ops->state_size > 0 ? offsetof(eddy_channel_t, transport_state) + ops->state_size
                                      : sizeof(eddy_channel_t);
    eddy_channel_t *ch = calloc(1, size);
    if (ch == NULL) {
        return NULL;
    }
    atomic_init(&ch->close_future, NULL);
    atomic_init(&ch->addrs, NULL);
    atomic_init(&ch->refs, 1); /* the loop's (open channel's) reference */
    ch->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    ch->ops = ops;
    ch->loop = loop;
    if (ops->state_size == 0) {
        eddy_io_init(&ch->io, loop, fd, NULL, ch); /* socket kinds give it a callback later */
    }
    eddy__loop_retain(loop); /* the loop's memory stays while the channel can reach it */
    ch->fd = fd;
    ch->opt = default_options.value;
    atomic_init(&ch->writable, true);
    atomic_init(&ch->output_cut, false);
    eddy__pipeline_init(&ch->pipeline);
    return ch;
}

void eddy__promise_done_listener(eddy_future_t *f, void *arg)
{
    eddy__promise_done(arg, eddy_future_error(f));
    eddy_future_release(arg);
}

static void release_channel(void *ch)
{
    eddy_channel_release(ch);
}

int eddy__promise_succeed_channel(eddy_promise_t *p, eddy_channel_t *ch)
{
    return eddy__promise_succeed_owned(p, eddy_channel_retain(ch), release_channel);
}

eddy_channel_t *eddy_channel_retain(eddy_channel_t *ch)
{
    eddy__refcnt_add(&ch->refs);
    return ch;
}

void eddy_channel_release(eddy_channel_t *ch)
{
    if (ch == NULL) {
        return;
    }
    /* acq_rel: the last releaser sees every write of the others before it frees. */
    if (!eddy__refcnt_sub(&ch->refs, 1)) {
        return;
    }
    /* The open channel's reference goes at close: the last one finds it closed or never
     * registered, and inactive. */
    assert((ch->flags & (EDDY__CH_REGISTERED | EDDY__CH_ACTIVE)) == 0);
    if (ch->ops->destroy != NULL) {
        ch->ops->destroy(ch);
    }
    /* A channel that never closed (made and dropped before registration) frees its queue. */
    eddy__outbound_destroy(ch);
    eddy__pipeline_free(&ch->pipeline);
    eddy__options_t *o = options_of(ch);
    if (o->shared != NULL) {
        eddy__options_t *shared = o->shared;
        free(o);
        o = shared;
    }
    eddy__options_release(o);
    eddy_promise_t *cf = atomic_load_explicit(&ch->close_future, memory_order_acquire);
    if (cf != CLOSED_NO_FUTURE) {
        eddy_future_release(cf);
    }
    free(atomic_load_explicit(&ch->addrs, memory_order_relaxed)); /* the last reference */
    free(ch->attrs);
    eddy_loop_t *loop = eddy__loop_of(ch);
    free(ch);
    eddy__loop_release(loop);
}

void eddy__channel_registered(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(!(ch->flags & (EDDY__CH_REGISTERED | EDDY__CH_ACTIVE | EDDY__CH_CLOSED)));
    ch->flags |= EDDY__CH_REGISTERED;
    eddy__channel_show_state(ch);
    eddy__pipeline_fire_registered(&ch->pipeline);
}

void eddy__channel_activate(eddy_channel_t *ch)
{
    if (ch->flags & EDDY__CH_CLOSED) {
        return;
    }
    /* Registered, then active, once: Netty's order of channel states. */
    assert((ch->flags & (EDDY__CH_REGISTERED | EDDY__CH_ACTIVE)) == EDDY__CH_REGISTERED);
    ch->flags |= EDDY__CH_ACTIVE;
    eddy__channel_show_state(ch);
    eddy__pipeline_fire_active(&ch->pipeline);
    if (ch->opt[EDDY_AUTO_READ] && !(ch->flags & EDDY__CH_CLOSED)) {
        eddy__pipeline_read(&ch->pipeline);
    }
}

void eddy__channel_do_close(eddy_channel_t *ch, int why, eddy_promise_t *p)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    if (ch->flags & EDDY__CH_CLOSED) {
        /* Already closed: p completes when the close future does (at once, by now). */
        eddy__promise_done(p, 0);
        return;
    }
    if ((why == 0 || why == EDDY_ESHUTDOWN) && (ch->flags & EDDY__CH_ACTIVE) &&
        !(ch->flags & EDDY__CH_FLUSHING) && eddy__outbound_has_flushed(ch)) {
        /* A requested close (or the loop's shutdown) first gives what was flushed one
         * non-blocking try, so a reply written and flushed just before close goes out
         * when the socket takes it. An error close does not: the peer is gone. */
        ch->ops->flush(ch);
        if (ch->flags & EDDY__CH_CLOSED) {
            eddy__promise_done(p, 0); /* the flush met an error and closed */
            return;
        }
    }
    assert(atomic_load_explicit(&ch->refs, memory_order_relaxed) > 0); /* the open one's */
    ch->flags |= EDDY__CH_CLOSED;
    eddy__loop_closer_remove(&ch->closer);
    bool was_active = (ch->flags & EDDY__CH_ACTIVE) != 0;
    ch->flags &= ~EDDY__CH_ACTIVE;
    eddy__channel_show_state(ch);
    eddy__pipeline_enter(&ch->pipeline);
    if ((why == 0 || why == EDDY_ESHUTDOWN) && was_active && ch->ops->discard_input != NULL &&
        !(ch->flags & EDDY__CH_INPUT_SHUTDOWN) && ch->opt[EDDY_SO_LINGER] != 0) {
        ch->ops->discard_input(ch);
    }
    if (ch->ops->do_close != NULL) {
        ch->ops->do_close(ch);
    }
    eddy__outbound_fail_all(ch, EDDY_ECLOSED);
    if (was_active) {
        eddy__pipeline_fire_inactive(&ch->pipeline);
    }
    if (ch->flags & EDDY__CH_REGISTERED) {
        ch->flags &= ~EDDY__CH_REGISTERED;
        eddy__channel_show_state(ch);
        eddy__pipeline_fire_unregistered(&ch->pipeline);
    }
    eddy__pipeline_destroy(&ch->pipeline);
    eddy__pipeline_leave(&ch->pipeline);
    assert((ch->flags & (EDDY__CH_REGISTERED | EDDY__CH_ACTIVE)) == 0); /* no handler reopens */
    if (ch->close_hook != NULL) {
        ch->close_hook->closed(ch, ch->close_hook->arg);
    }
    /* A close future made by now completes; otherwise the marker says a later one is made
     * completed. Acquire: pairs with the release CAS in eddy_channel_close_future(). */
    eddy_promise_t *cf = NULL;
    if (!atomic_compare_exchange_strong_explicit(&ch->close_future, &cf, CLOSED_NO_FUTURE,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        eddy_promise_succeed(cf, NULL);
    }
    eddy__promise_done(p, 0);
    eddy_channel_release(ch); /* the open channel's reference */
}

typedef struct on_loop_s {
    eddy_channel_t *ch;
    void (*fn)(eddy_channel_t *, void *);
    void *arg;
} on_loop_t;

static void on_loop_run(void *arg)
{
    on_loop_t *t = arg;
    eddy__assert_on_loop(eddy__loop_of(t->ch));
    eddy__pipeline_enter(&t->ch->pipeline); /* the task holds the channel: unhold drops it */
    t->fn(t->ch, t->arg);
    eddy__channel_unhold(t->ch);
    free(t);
}

void eddy__channel_on_loop(eddy_channel_t *ch, void (*fn)(eddy_channel_t *, void *), void *arg)
{
    assert(ch != NULL && fn != NULL);
    if (eddy_loop_in_event_loop(eddy__loop_of(ch))) {
        fn(ch, arg);
        return;
    }
    on_loop_t *t = malloc(sizeof(*t));
    if (t == NULL) {
        /* Out of memory on a cross-thread call: run nothing rather than race the loop. The
         * callers' messages leak with the task; say so. */
        eddy__log(EDDY_LOG_ERROR, "channel %llu: out of memory queueing a task; dropped",
                  (unsigned long long)ch->id);
        return;
    }
    t->ch = eddy_channel_retain(ch);
    t->fn = fn;
    t->arg = arg;
    int err = eddy_loop_execute(eddy__loop_of(ch), on_loop_run, t);
    if (err != 0) {
        /* The loop is shutting down and takes no more tasks from other threads. Once it has
         * terminated nothing else touches the channel: run the operation here, where it finds
         * the channel closed and fails its promise, releasing its message. */
        if (eddy_future_await(eddy_loop_termination_future(eddy__loop_of(ch)), 5000) == 0) {
            /* One at a time: several threads may get here for one channel, and the loop's
             * thread no longer serialises them (held: a listener inside may come back). */
            static pthread_mutex_t after_loop = PTHREAD_MUTEX_INITIALIZER;
            static _Thread_local unsigned held;
            if (held++ == 0) {
                pthread_mutex_lock(&after_loop);
            }
            eddy_loop_t *prev = eddy__loop_enter(eddy__loop_of(ch));
            on_loop_run(t);
            eddy__loop_leave(prev);
            if (--held == 0) {
                pthread_mutex_unlock(&after_loop);
            }
            return;
        }
        eddy__log(EDDY_LOG_ERROR, "channel %llu: its loop refused a task (%s); dropped",
                  (unsigned long long)ch->id, eddy_strerror(err));
        eddy_channel_release(ch);
        free(t);
    }
}

/* ---------------------------------------------------------------------------------------
 * Public operations
 */

void eddy_channel_write(eddy_channel_t *ch, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy__pipeline_write(&ch->pipeline, msg, p, false); /* a NULL msg fails p there */
}

void eddy_channel_write_and_flush(eddy_channel_t *ch, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy__pipeline_write(&ch->pipeline, msg, p, true);
}

void eddy_channel_flush(eddy_channel_t *ch)
{
    eddy__pipeline_flush(&ch->pipeline);
}

void eddy_channel_read(eddy_channel_t *ch)
{
    eddy__pipeline_read(&ch->pipeline);
}

void eddy__channel_cut_output(eddy_channel_t *ch)
{
    /* Seen by the loop through what follows the store (the group's lock, a task). */
    atomic_store_explicit(&ch->output_cut, true, memory_order_relaxed);
}

void eddy_channel_close(eddy_channel_t *ch, eddy_promise_t *p)
{
    eddy__pipeline_close(&ch->pipeline, p, false);
}

void eddy_channel_close_after_flush(eddy_channel_t *ch, eddy_promise_t *p)
{
    eddy__pipeline_close(&ch->pipeline, p, true);
}

static void shutdown_output_on_loop(eddy_channel_t *ch, void *arg)
{
    eddy_promise_t *p = arg;
    eddy__assert_on_loop(eddy__loop_of(ch));
    if (ch->flags & EDDY__CH_CLOSED) {
        eddy__promise_done(p, EDDY_ECLOSED);
    } else if (ch->ops->shutdown_output == NULL) {
        eddy__promise_done(p, EDDY_ENOTSUP);
    } else {
        ch->ops->shutdown_output(ch, p);
    }
    eddy_future_release(p);
}

void eddy_channel_shutdown_output(eddy_channel_t *ch, eddy_promise_t *p)
{
    eddy__channel_on_loop(ch, shutdown_output_on_loop, p != NULL ? eddy_future_retain(p) : NULL);
}

/* ---------------------------------------------------------------------------------------
 * Accessors
 */

uint64_t eddy_channel_id(const eddy_channel_t *ch)
{
    return ch->id;
}

eddy_loop_t *eddy_channel_loop(const eddy_channel_t *ch)
{
    return eddy__loop_of(ch);
}

eddy_pipeline_t *eddy_channel_pipeline(eddy_channel_t *ch)
{
    return &ch->pipeline;
}

/* ip as an eddy_addr_t (zero length when there is none). */
static void addr_from_ip(eddy_addr_t *a, const eddy__ip_addr_t *ip)
{
    memset(a, 0, sizeof(*a));
    if (ip->sa.sa_family == AF_INET) {
        a->u.in4 = ip->in4;
        a->len = sizeof(ip->in4);
    } else if (ip->sa.sa_family == AF_INET6) {
        a->u.in6 = ip->in6;
        a->len = sizeof(ip->in6);
    }
}

/* ch->addrs, made from the inline addresses if it is not yet: any thread; NULL without
 * memory. */
static eddy__addrs_t *addrs_get(eddy_channel_t *ch)
{
    /* Acquire: pairs with the release CAS below, so the block is seen filled. */
    eddy__addrs_t *b = atomic_load_explicit(&ch->addrs, memory_order_acquire);
    if (b != NULL) {
        return b;
    }
    b = malloc(sizeof(*b));
    if (b == NULL) {
        return NULL;
    }
    addr_from_ip(&b->local, &ch->local_ip);
    addr_from_ip(&b->remote, &ch->remote_ip);
    eddy__addrs_t *prev = NULL;
    if (!atomic_compare_exchange_strong_explicit(&ch->addrs, &prev, b, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        free(b); /* another thread made it first */
        return prev;
    }
    return b;
}

void eddy__channel_set_addr(eddy_channel_t *ch, bool remote, const eddy_addr_t *a)
{
    assert(a != NULL && a->len <= sizeof(a->u));
    eddy__ip_addr_t *ip = remote ? &ch->remote_ip : &ch->local_ip;
    sa_family_t f = a->len > 0 ? a->u.sa.sa_family : AF_UNSPEC;
    memset(ip, 0, sizeof(*ip));
    bool is_ip =
        (f == AF_INET && a->len >= sizeof(ip->in4)) || (f == AF_INET6 && a->len >= sizeof(ip->in6));
    if (f == AF_INET && is_ip) {
        ip->in4 = a->u.in4;
    } else if (is_ip) {
        ip->in6 = a->u.in6;
    }
    /* A Unix socket's address has no inline form; a block made already is kept current.
     * Acquire: pairs with the release CAS in addrs_get(). */
    eddy__addrs_t *b = is_ip || a->len == 0 ? atomic_load_explicit(&ch->addrs, memory_order_acquire)
                                            : addrs_get(ch);
    if (b != NULL) {
        *(remote ? &b->remote : &b->local) = *a;
    }
}

/* Borrowed by the accessors when there was no memory for ch->addrs: unknown. */
static const eddy_addr_t no_addr;

/* The accessors take a const channel, as callers see it; making ch->addrs does not change
 * what the channel is. */
const eddy_addr_t *eddy_channel_local_addr(const eddy_channel_t *ch)
{
    const eddy__addrs_t *b = addrs_get((eddy_channel_t *)(uintptr_t)ch);
    return b != NULL ? &b->local : &no_addr;
}

const eddy_addr_t *eddy_channel_remote_addr(const eddy_channel_t *ch)
{
    const eddy__addrs_t *b = addrs_get((eddy_channel_t *)(uintptr_t)ch);
    return b != NULL ? &b->remote : &no_addr;
}

int eddy_channel_fd(const eddy_channel_t *ch)
{
    return ch->fd;
}

bool eddy_channel_is_registered(const eddy_channel_t *ch)
{
    return (atomic_load_explicit(&ch->shown_state, memory_order_acquire) &
            EDDY__CH_REGISTERED) != 0;
}

bool eddy_channel_is_active(const eddy_channel_t *ch)
{
    return (atomic_load_explicit(&ch->shown_state, memory_order_acquire) & EDDY__CH_ACTIVE) != 0;
}

bool eddy_channel_is_open(const eddy_channel_t *ch)
{
    return !(atomic_load_explicit(&ch->shown_state, memory_order_acquire) & EDDY__CH_CLOSED);
}

bool eddy_channel_is_writable(const eddy_channel_t *ch)
{
    return atomic_load_explicit(&ch->writable, memory_order_relaxed) &&
           !atomic_load_explicit(&ch->output_cut, memory_order_relaxed);
}

/*
 * Made on demand: most connections never ask (an idle one would carry a future for nothing).
 * Any thread, racing the close on the loop: whoever publishes first wins. A future made
 * after the close, or losing to it, is completed before it is published.
 */
eddy_future_t *eddy_channel_close_future(eddy_channel_t *ch)
{
    /* Acquire: pairs with the release CASes below and in eddy__channel_do_close(). */
    eddy_promise_t *cf = atomic_load_explicit(&ch->close_future, memory_order_acquire);
    if (cf != NULL && cf != CLOSED_NO_FUTURE) {
        return cf;
    }
    eddy_promise_t *p = eddy_promise_new(eddy__loop_of(ch));
    if (p == NULL) {
        return NULL;
    }
    for (;;) {
        if (cf == CLOSED_NO_FUTURE) {
            eddy_promise_succeed(p, NULL); /* EDDY_EALREADY on a second turn: fine */
        }
        if (atomic_compare_exchange_weak_explicit(&ch->close_future, &cf, p, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            return p;
        }
        if (cf != NULL && cf != CLOSED_NO_FUTURE) {
            eddy_future_release(p); /* another thread published one first */
            return cf;
        }
    }
}

void eddy__channel_enter(eddy_channel_t *ch)
{
    eddy__channel_hold(ch);
}

void eddy__channel_leave(eddy_channel_t *ch)
{
    eddy__channel_unhold(ch);
}

void eddy__channel_set_close_hook(eddy_channel_t *ch, const eddy__close_hook_t *hook)
{
    assert(hook == NULL || ch->close_hook == NULL || ch->close_hook == hook); /* one owner */
    ch->close_hook = hook;
}

int eddy_channel_attr_set(eddy_channel_t *ch, const void *key, void *value)
{
    size_t n = ch->attrs != NULL ? ch->attrs->n : 0;
    for (size_t i = 0; i < n; i++) {
        if (ch->attrs->a[i].key == key) {
            ch->attrs->a[i].value = value;
            return 0;
        }
    }
    eddy__attrs_t *attrs = realloc(ch->attrs, sizeof(*attrs) + (n + 1) * sizeof(attrs->a[0]));
    if (attrs == NULL) {
        return EDDY_ENOMEM;
    }
    attrs->a[n].key = key;
    attrs->a[n].value = value;
    attrs->n = n + 1;
    ch->attrs = attrs;
    return 0;
}

void *eddy_channel_attr(const eddy_channel_t *ch, const void *key)
{
    size_t n = ch->attrs != NULL ? ch->attrs->n : 0;
    for (size_t i = 0; i < n; i++) {
        if (ch->attrs->a[i].key == key) {
            return ch->attrs->a[i].value;
        }
    }
    return NULL;
}

void eddy_channel_counters(const eddy_channel_t *ch, eddy_channel_counters_t *c)
{
    c->bytes_read = atomic_load_explicit(&ch->bytes_read, memory_order_relaxed);
    c->bytes_written = atomic_load_explicit(&ch->bytes_written, memory_order_relaxed);
    c->msgs_read = atomic_load_explicit(&ch->msgs_read, memory_order_relaxed);
    c->msgs_written = atomic_load_explicit(&ch->msgs_written, memory_order_relaxed);
    c->pending_outbound_bytes = eddy__outbound_pending(ch);
    c->msgs_dropped = atomic_load_explicit(&ch->pipeline.dropped, memory_order_relaxed);
}
