/*
 * examples/resp_store.c: the keyspace of eddy-resp-server and its commands, with Redis' replies
 * and error texts (7.0).
 *
 * Sharing: a key belongs to the shard its hash picks; every command on one key holds that
 * shard's mutex from lookup to reply, so it is atomic against every loop (INCR from two loops
 * never loses a step). Commands on several keys (DEL, EXISTS) take the shards one key at a
 * time, and FLUSHALL and DBSIZE one shard at a time: each key's part is atomic, the whole is
 * not a snapshot. With one loop every lock is uncontended (an uncontended lock and unlock is
 * two atomic operations, ~20 ns).
 */
#include "resp_store.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Buckets per shard at start and after FLUSHALL; tables double when keys outnumber buckets. */
#define SHARD_MIN_BUCKETS 16

/* resp_store_expire_cycle(): most batches of buckets a shard per cycle. */
#define EXPIRE_MAX_BATCHES 64

/* Bytes of a value INCR reads as a number: Redis' LONG_STR_SIZE (20 digits and a sign). */
#define INT_TEXT_MAX 21

typedef struct entry_s {
    struct entry_s *next;
    uint64_t hash;
    int64_t expire_ms; /* absolute deadline on the store's clock; 0: none */
    size_t klen, vlen;
    uint8_t data[]; /* the key, then the value */
} entry_t;

typedef struct shard_s {
    alignas(128) pthread_mutex_t lock; /* own cache lines: loops lock neighbours at once */
    entry_t **table;
    size_t mask; /* buckets - 1 */
    size_t count;
    size_t expires; /* entries with a deadline */
    size_t cursor;  /* where the next expiry sweep starts */
} shard_t;

struct resp_store_s {
    shard_t shard[RESP_STORE_SHARDS];
    uint64_t seed;
    resp_store_clock_cb clock;
    void *clock_arg;
    int64_t started_ms;
    _Atomic unsigned port, loops; /* set once bound, while loops may already answer INFO */
    _Atomic uint64_t clients, connections, commands;
};

/* ---------------------------------------------------------------------------------------
 * Hashing: seeded, so that a client cannot aim every key at one chain without knowing the
 * seed (weaker than Redis' SipHash; see docs/resp.md).
 */

static uint64_t rotl(uint64_t x, int r)
{
    return x << r | x >> (64 - r);
}

static uint64_t fmix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_key(uint64_t seed, const uint8_t *p, size_t n)
{
    uint64_t h = seed ^ ((uint64_t)n * 0x9e3779b97f4a7c15ULL);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = rotl((h ^ w) * 0x9e3779b97f4a7c15ULL, 31);
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = rotl((h ^ w) * 0x9e3779b97f4a7c15ULL, 31);
    return fmix64(h);
}

static shard_t *shard_of(resp_store_t *s, uint64_t h)
{
    return &s->shard[h >> 58]; /* the top 6 bits; buckets use the low ones */
}

static int64_t monotonic_ms(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------------------------
 * Shards; the caller holds the shard's lock
 */

static entry_t *entry_new(uint64_t h, const eddy_resp_arg_t *key, const void *v, size_t vlen)
{
    if (vlen > SIZE_MAX - sizeof(entry_t) - key->len) {
        return NULL;
    }
    entry_t *e = malloc(sizeof(*e) + key->len + vlen);
    if (e == NULL) {
        return NULL;
    }
    e->next = NULL;
    e->hash = h;
    e->expire_ms = 0;
    e->klen = key->len;
    e->vlen = vlen;
    memcpy(e->data, key->ptr, key->len);
    if (vlen > 0) {
        memcpy(e->data + key->len, v, vlen);
    }
    return e;
}

static int shard_init(shard_t *sh)
{
    sh->table = calloc(SHARD_MIN_BUCKETS, sizeof(entry_t *));
    if (sh->table == NULL) {
        return EDDY_ENOMEM;
    }
    sh->mask = SHARD_MIN_BUCKETS - 1;
    sh->count = 0;
    sh->expires = 0;
    sh->cursor = 0;
    return 0;
}

static void shard_clear(shard_t *sh)
{
    for (size_t i = 0; i <= sh->mask; i++) {
        entry_t *e = sh->table[i];
        while (e != NULL) {
            entry_t *next = e->next;
            free(e);
            e = next;
        }
        sh->table[i] = NULL;
    }
    sh->count = 0;
    sh->expires = 0;
    sh->cursor = 0;
}

/* Double the buckets; a failed allocation leaves the table as it is (chains grow longer). */
static void shard_grow(shard_t *sh)
{
    size_t n = (sh->mask + 1) * 2;
    entry_t **t = calloc(n, sizeof(*t));
    if (t == NULL) {
        return;
    }
    for (size_t i = 0; i <= sh->mask; i++) {
        entry_t *e = sh->table[i];
        while (e != NULL) {
            entry_t *next = e->next;
            entry_t **b = &t[e->hash & (n - 1)];
            e->next = *b;
            *b = e;
            e = next;
        }
    }
    free(sh->table);
    sh->table = t;
    sh->mask = n - 1;
}

/* The link pointing at the entry for key (*link NULL when absent). */
static entry_t **shard_link(shard_t *sh, uint64_t h, const eddy_resp_arg_t *key)
{
    entry_t **link = &sh->table[h & sh->mask];
    for (entry_t *e = *link; e != NULL; link = &e->next, e = e->next) {
        if (e->hash == h && e->klen == key->len && memcmp(e->data, key->ptr, key->len) == 0) {
            break;
        }
    }
    return link;
}

static void shard_unlink(shard_t *sh, entry_t **link)
{
    entry_t *e = *link;
    *link = e->next;
    sh->count--;
    if (e->expire_ms != 0) {
        sh->expires--;
    }
    free(e);
}

static void shard_insert(shard_t *sh, entry_t *e)
{
    entry_t **b = &sh->table[e->hash & sh->mask];
    e->next = *b;
    *b = e;
    sh->count++;
    if (e->expire_ms != 0) {
        sh->expires++;
    }
    if (sh->count > sh->mask + 1) {
        shard_grow(sh);
    }
}

/* Put e in the place of the entry at link (freed). */
static void shard_replace(shard_t *sh, entry_t **link, entry_t *e)
{
    entry_t *old = *link;
    e->next = old->next;
    *link = e;
    sh->expires += (e->expire_ms != 0) - (old->expire_ms != 0);
    free(old);
}

/* ---------------------------------------------------------------------------------------
 * A command's view of its key: the shard, locked, and the live entry (expired ones are
 * deleted on the way, as Redis' lookupKey does).
 */

typedef struct exec_s {
    resp_store_t *s;
    const eddy_resp_cmd_t *cmd;
    eddy_buf_t *out;
    int64_t now; /* 0 until read: most commands never need the clock */
} exec_t;

static int64_t now_ms(exec_t *x)
{
    if (x->now == 0) {
        x->now = x->s->clock(x->s->clock_arg);
        if (x->now == 0) {
            x->now = 1; /* 0 means unread */
        }
    }
    return x->now;
}

typedef struct slot_s {
    shard_t *sh;
    uint64_t hash;
    entry_t *e;     /* the live entry, or NULL */
    entry_t **link; /* the link pointing at e, when e is not NULL */
} slot_t;

static void lock_key(exec_t *x, const eddy_resp_arg_t *key, slot_t *k)
{
    k->hash = hash_key(x->s->seed, key->ptr, key->len);
    k->sh = shard_of(x->s, k->hash);
    pthread_mutex_lock(&k->sh->lock);
    k->link = shard_link(k->sh, k->hash, key);
    k->e = *k->link;
    if (k->e != NULL && k->e->expire_ms != 0 && k->e->expire_ms <= now_ms(x)) {
        shard_unlink(k->sh, k->link); /* *link is now the next entry of the chain */
        k->e = NULL;
    }
}

static void unlock_key(slot_t *k)
{
    pthread_mutex_unlock(&k->sh->lock);
}

/* ---------------------------------------------------------------------------------------
 * Replies
 */

static int ok(exec_t *x)
{
    return eddy_buf_write_bytes(x->out, "+OK\r\n", 5);
}

static int error(exec_t *x, const char *text)
{
    return eddy_resp_write_error(x->out, text, strlen(text));
}

static int not_integer(exec_t *x)
{
    return error(x, "ERR value is not an integer or out of range");
}

static int syntax_error(exec_t *x)
{
    return error(x, "ERR syntax error");
}

static const eddy_resp_arg_t *arg(exec_t *x, size_t i)
{
    return &x->cmd->argv[i];
}

static bool arg_int(exec_t *x, size_t i, int64_t *v)
{
    return eddy_resp_parse_int(arg(x, i)->ptr, arg(x, i)->len, v);
}

/* ---------------------------------------------------------------------------------------
 * Commands
 */

static int cmd_ping(exec_t *x)
{
    if (x->cmd->argc > 2) {
        return error(x, "ERR wrong number of arguments for 'ping' command");
    }
    if (x->cmd->argc == 2) {
        return eddy_resp_write_bulk(x->out, arg(x, 1)->ptr, arg(x, 1)->len);
    }
    return eddy_buf_write_bytes(x->out, "+PONG\r\n", 7);
}

static int cmd_echo(exec_t *x)
{
    return eddy_resp_write_bulk(x->out, arg(x, 1)->ptr, arg(x, 1)->len);
}

static int cmd_get(exec_t *x)
{
    slot_t k;
    lock_key(x, arg(x, 1), &k);
    entry_t *e = k.e;
    int err = e != NULL ? eddy_resp_write_bulk(x->out, e->data + e->klen, e->vlen)
                        : eddy_resp_write_null_bulk(x->out);
    unlock_key(&k);
    return err;
}

/* The deadline of EX/PX value v in unit ms: 0 and *at, or the error already replied. */
static int expire_at(exec_t *x, int64_t v, int64_t unit, const char *name, int64_t *at,
                     bool *replied)
{
    *replied = true;
    int64_t ms;
    if (v <= 0 && strcmp(name, "set") == 0) {
        return eddy_resp_write_errorf(x->out, "ERR invalid expire time in '%s' command", name);
    }
    if (__builtin_mul_overflow(v, unit, &ms) || __builtin_add_overflow(ms, now_ms(x), at)) {
        return eddy_resp_write_errorf(x->out, "ERR invalid expire time in '%s' command", name);
    }
    *replied = false;
    return 0;
}

/* SET key value [NX|XX] [EX s|PX ms|KEEPTTL] */
static int cmd_set(exec_t *x)
{
    bool nx = false, xx = false, keepttl = false;
    int64_t unit = 0, ttl = 0;
    size_t ttl_arg = 0; /* checked after the options, as Redis does: syntax errors first */
    for (size_t i = 3; i < x->cmd->argc; i++) {
        bool has_next = i + 1 < x->cmd->argc;
        if (eddy_resp_arg_is(x->cmd, i, "nx") && !xx) {
            nx = true;
        } else if (eddy_resp_arg_is(x->cmd, i, "xx") && !nx) {
            xx = true;
        } else if (eddy_resp_arg_is(x->cmd, i, "keepttl") && unit == 0) {
            keepttl = true;
        } else if ((eddy_resp_arg_is(x->cmd, i, "ex") || eddy_resp_arg_is(x->cmd, i, "px")) &&
                   unit == 0 && !keepttl && has_next) {
            unit = eddy_resp_arg_is(x->cmd, i, "ex") ? 1000 : 1;
            ttl_arg = ++i;
        } else {
            return syntax_error(x);
        }
    }
    int64_t at = 0;
    if (unit != 0) {
        if (!arg_int(x, ttl_arg, &ttl)) {
            return not_integer(x);
        }
        bool replied;
        int err = expire_at(x, ttl, unit, "set", &at, &replied);
        if (replied) {
            return err;
        }
    }
    const eddy_resp_arg_t *key = arg(x, 1), *val = arg(x, 2);
    slot_t k;
    lock_key(x, key, &k);
    entry_t *old = k.e;
    if ((nx && old != NULL) || (xx && old == NULL)) {
        unlock_key(&k);
        return eddy_resp_write_null_bulk(x->out);
    }
    entry_t *e = entry_new(k.hash, key, val->ptr, val->len);
    if (e == NULL) {
        unlock_key(&k);
        return EDDY_ENOMEM;
    }
    e->expire_ms = keepttl && old != NULL ? old->expire_ms : at;
    if (old != NULL) {
        shard_replace(k.sh, k.link, e);
    } else {
        shard_insert(k.sh, e);
    }
    unlock_key(&k);
    return ok(x);
}

/* DEL and EXISTS: one key at a time. */
static int64_t count_keys(exec_t *x, bool del)
{
    int64_t n = 0;
    for (size_t i = 1; i < x->cmd->argc; i++) {
        slot_t k;
        lock_key(x, arg(x, i), &k);
        if (k.e != NULL) {
            n++;
            if (del) {
                shard_unlink(k.sh, k.link);
            }
        }
        unlock_key(&k);
    }
    return n;
}

static int cmd_del(exec_t *x)
{
    return eddy_resp_write_integer(x->out, count_keys(x, true));
}

static int cmd_exists(exec_t *x)
{
    return eddy_resp_write_integer(x->out, count_keys(x, false));
}

/* INCR, DECR, INCRBY, DECRBY: by is the step (its sign already applied, or parsed here). */
static int incr_by(exec_t *x, int64_t by)
{
    const eddy_resp_arg_t *key = arg(x, 1);
    slot_t k;
    lock_key(x, key, &k);
    entry_t *e = k.e;
    int64_t v = 0;
    if (e != NULL &&
        (e->vlen > INT_TEXT_MAX || !eddy_resp_parse_int(e->data + e->klen, e->vlen, &v))) {
        unlock_key(&k);
        return not_integer(x);
    }
    if (__builtin_add_overflow(v, by, &v)) {
        unlock_key(&k);
        return error(x, "ERR increment or decrement would overflow");
    }
    char text[INT_TEXT_MAX + 1];
    int n = snprintf(text, sizeof(text), "%lld", (long long)v);
    if (e != NULL && e->vlen == (size_t)n) {
        memcpy(e->data + e->klen, text, (size_t)n); /* same length: in place */
    } else {
        entry_t *ne = entry_new(k.hash, key, text, (size_t)n);
        if (ne == NULL) {
            unlock_key(&k);
            return EDDY_ENOMEM;
        }
        if (e != NULL) {
            ne->expire_ms = e->expire_ms; /* INCR keeps the TTL, as in Redis */
            shard_replace(k.sh, k.link, ne);
        } else {
            shard_insert(k.sh, ne);
        }
    }
    unlock_key(&k);
    return eddy_resp_write_integer(x->out, v);
}

static int cmd_incr(exec_t *x)
{
    return incr_by(x, 1);
}

static int cmd_decr(exec_t *x)
{
    return incr_by(x, -1);
}

static int cmd_incrby(exec_t *x)
{
    int64_t by;
    if (!arg_int(x, 2, &by)) {
        return not_integer(x);
    }
    return incr_by(x, by);
}

static int cmd_decrby(exec_t *x)
{
    int64_t by;
    if (!arg_int(x, 2, &by)) {
        return not_integer(x);
    }
    if (by == INT64_MIN) {
        return error(x, "ERR decrement would overflow");
    }
    return incr_by(x, -by);
}

/* EXPIRE and PEXPIRE key n [NX|XX|GT|LT] */
static int expire_generic(exec_t *x, int64_t unit, const char *name)
{
    bool nx = false, xx = false, gt = false, lt = false;
    for (size_t i = 3; i < x->cmd->argc; i++) {
        if (eddy_resp_arg_is(x->cmd, i, "nx")) {
            nx = true;
        } else if (eddy_resp_arg_is(x->cmd, i, "xx")) {
            xx = true;
        } else if (eddy_resp_arg_is(x->cmd, i, "gt")) {
            gt = true;
        } else if (eddy_resp_arg_is(x->cmd, i, "lt")) {
            lt = true;
        } else {
            return eddy_resp_write_errorf(x->out, "ERR Unsupported option %.*s",
                                          (int)(arg(x, i)->len > 128 ? 128 : arg(x, i)->len),
                                          (const char *)arg(x, i)->ptr);
        }
    }
    if (nx && (xx || gt || lt)) {
        return error(x, "ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if (gt && lt) {
        return error(x, "ERR GT and LT options at the same time are not compatible");
    }
    int64_t v, at;
    if (!arg_int(x, 2, &v)) {
        return not_integer(x);
    }
    bool replied;
    int err = expire_at(x, v, unit, name, &at, &replied);
    if (replied) {
        return err;
    }
    slot_t k;
    lock_key(x, arg(x, 1), &k);
    entry_t *e = k.e;
    int64_t result = 1;
    if (e == NULL || (nx && e->expire_ms != 0) || (xx && e->expire_ms == 0) ||
        (gt && (e->expire_ms == 0 || at <= e->expire_ms)) ||
        (lt && e->expire_ms != 0 && at >= e->expire_ms)) {
        result = 0;
    } else if (at <= now_ms(x)) {
        shard_unlink(k.sh, k.link); /* a deadline in the past deletes, as in Redis */
    } else {
        k.sh->expires += e->expire_ms == 0;
        e->expire_ms = at;
    }
    unlock_key(&k);
    return eddy_resp_write_integer(x->out, result);
}

static int cmd_expire(exec_t *x)
{
    return expire_generic(x, 1000, "expire");
}

static int cmd_pexpire(exec_t *x)
{
    return expire_generic(x, 1, "pexpire");
}

static int ttl_generic(exec_t *x, bool ms)
{
    slot_t k;
    lock_key(x, arg(x, 1), &k);
    entry_t *e = k.e;
    int64_t r = e == NULL ? -2 : e->expire_ms == 0 ? -1 : e->expire_ms - now_ms(x);
    unlock_key(&k);
    if (r >= 0 && !ms) {
        r = (r + 500) / 1000;
    }
    return eddy_resp_write_integer(x->out, r);
}

static int cmd_ttl(exec_t *x)
{
    return ttl_generic(x, false);
}

static int cmd_pttl(exec_t *x)
{
    return ttl_generic(x, true);
}

static int cmd_persist(exec_t *x)
{
    slot_t k;
    lock_key(x, arg(x, 1), &k);
    entry_t *e = k.e;
    int64_t r = 0;
    if (e != NULL && e->expire_ms != 0) {
        e->expire_ms = 0;
        k.sh->expires--;
        r = 1;
    }
    unlock_key(&k);
    return eddy_resp_write_integer(x->out, r);
}

static int cmd_flushall(exec_t *x)
{
    if (x->cmd->argc > 2 || (x->cmd->argc == 2 && !eddy_resp_arg_is(x->cmd, 1, "sync") &&
                             !eddy_resp_arg_is(x->cmd, 1, "async"))) {
        return syntax_error(x);
    }
    for (size_t i = 0; i < RESP_STORE_SHARDS; i++) {
        shard_t *sh = &x->s->shard[i];
        /* Back to SHARD_MIN_BUCKETS (without memory, the emptied table stays). */
        entry_t **small =
            sh->mask + 1 > SHARD_MIN_BUCKETS ? calloc(SHARD_MIN_BUCKETS, sizeof(entry_t *)) : NULL;
        pthread_mutex_lock(&sh->lock);
        shard_clear(sh);
        if (small != NULL) {
            free(sh->table);
            sh->table = small;
            sh->mask = SHARD_MIN_BUCKETS - 1;
        }
        pthread_mutex_unlock(&sh->lock);
    }
    return ok(x);
}

static int cmd_dbsize(exec_t *x)
{
    return eddy_resp_write_integer(x->out, (int64_t)resp_store_size(x->s, NULL));
}

/* INFO [section]: a few of Redis' sections, enough for redis-cli and monitoring scripts. */
static int cmd_info(exec_t *x)
{
    resp_store_t *s = x->s;
    size_t expires, keys = resp_store_size(s, &expires);
    bool all = x->cmd->argc == 1 || eddy_resp_arg_is(x->cmd, 1, "all") ||
               eddy_resp_arg_is(x->cmd, 1, "default") || eddy_resp_arg_is(x->cmd, 1, "everything");
    char text[1024];
    size_t n = 0;
#define SECTION(name_, ...)                                                                        \
    if (all || eddy_resp_arg_is(x->cmd, 1, name_)) {                                               \
        int k = snprintf(text + n, sizeof(text) - n, __VA_ARGS__);                                 \
        n += k > 0 && (size_t)k < sizeof(text) - n ? (size_t)k : 0;                                \
    }
    SECTION("server",
            "# Server\r\nredis_version:7.0.0\r\neddy_version:%s\r\nredis_mode:standalone\r\n"
            "multiplexing_api:eddy\r\nprocess_id:%ld\r\ntcp_port:%u\r\nuptime_in_seconds:%lld\r\n"
            "event_loops:%u\r\n\r\n",
            eddy_version(), (long)getpid(),
            atomic_load_explicit(&s->port, memory_order_relaxed),
            (long long)((monotonic_ms(NULL) - s->started_ms) / 1000),
            atomic_load_explicit(&s->loops, memory_order_relaxed))
    SECTION("clients", "# Clients\r\nconnected_clients:%llu\r\n\r\n",
            (unsigned long long)atomic_load_explicit(&s->clients, memory_order_relaxed))
    SECTION("stats",
            "# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n\r\n",
            (unsigned long long)atomic_load_explicit(&s->connections, memory_order_relaxed),
            (unsigned long long)atomic_load_explicit(&s->commands, memory_order_relaxed))
    SECTION("keyspace", "# Keyspace\r\n")
    if ((all || eddy_resp_arg_is(x->cmd, 1, "keyspace")) && keys > 0) {
        int k = snprintf(text + n, sizeof(text) - n, "db0:keys=%zu,expires=%zu,avg_ttl=0\r\n", keys,
                         expires);
        n += k > 0 && (size_t)k < sizeof(text) - n ? (size_t)k : 0;
    }
#undef SECTION
    return eddy_resp_write_bulk(x->out, text, n);
}

/* COMMAND [COUNT|DOCS|INFO ...]: no command table to show; redis-cli and redis-benchmark
 * take an empty one. */
static int cmd_command(exec_t *x)
{
    if (eddy_resp_arg_is(x->cmd, 1, "count")) {
        return eddy_resp_write_integer(x->out, 0);
    }
    return eddy_resp_write_array(x->out, 0);
}

/* CONFIG GET name: what redis-benchmark asks at start (save, appendonly). */
static int cmd_config(exec_t *x)
{
    if (!eddy_resp_arg_is(x->cmd, 1, "get") || x->cmd->argc != 3) {
        return error(x, "ERR CONFIG subcommand not supported (only CONFIG GET name)");
    }
    const char *value = eddy_resp_arg_is(x->cmd, 2, "save")         ? ""
                        : eddy_resp_arg_is(x->cmd, 2, "appendonly") ? "no"
                                                                    : NULL;
    if (value == NULL) {
        return eddy_resp_write_array(x->out, 0);
    }
    int err = eddy_resp_write_array(x->out, 2);
    if (err == 0) {
        err = eddy_resp_write_bulk(x->out, arg(x, 2)->ptr, arg(x, 2)->len);
    }
    return err == 0 ? eddy_resp_write_bulk_str(x->out, value) : err;
}

static int cmd_select(exec_t *x)
{
    int64_t db;
    if (!arg_int(x, 1, &db)) {
        return not_integer(x);
    }
    return db == 0 ? ok(x) : error(x, "ERR DB index is out of range");
}

static int cmd_client(exec_t *x)
{
    return ok(x); /* SETNAME, SETINFO and the like: accepted, not kept */
}

static int cmd_quit(exec_t *x)
{
    int err = ok(x);
    return err != 0 ? err : RESP_STORE_CLOSE;
}

typedef struct command_s {
    const char *name; /* lower case */
    size_t len;
    int arity; /* Redis' convention: n exactly, or -n at least n (the name counts) */
    int (*run)(exec_t *x);
} command_t;

#define CMD(name_, arity_, run_)                                                                   \
    {                                                                                              \
        name_, sizeof(name_) - 1, arity_, run_                                                     \
    }
/* The benchmark's commands first: the lookup is a scan, by length first. */
static const command_t commands[] = {
    CMD("get", 2, cmd_get),           CMD("set", -3, cmd_set),
    CMD("ping", -1, cmd_ping),        CMD("incr", 2, cmd_incr),
    CMD("decr", 2, cmd_decr),         CMD("del", -2, cmd_del),
    CMD("exists", -2, cmd_exists),    CMD("incrby", 3, cmd_incrby),
    CMD("decrby", 3, cmd_decrby),     CMD("expire", -3, cmd_expire),
    CMD("pexpire", -3, cmd_pexpire),  CMD("ttl", 2, cmd_ttl),
    CMD("pttl", 2, cmd_pttl),         CMD("persist", 2, cmd_persist),
    CMD("echo", 2, cmd_echo),         CMD("flushall", -1, cmd_flushall),
    CMD("flushdb", -1, cmd_flushall), CMD("dbsize", 1, cmd_dbsize),
    CMD("info", -1, cmd_info),        CMD("command", -1, cmd_command),
    CMD("config", -2, cmd_config),    CMD("select", 2, cmd_select),
    CMD("client", -2, cmd_client),    CMD("quit", -1, cmd_quit),
};
#undef CMD

static const command_t *find_command(const eddy_resp_cmd_t *cmd)
{
    size_t len = cmd->argv[0].len;
    /* The first letter in lower case (| 0x20 lowers only 'A'-'Z' into 'a'-'z'), to skip the
     * call for most names. */
    char first = len > 0 ? (char)(cmd->argv[0].ptr[0] | 0x20) : 0;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (commands[i].len == len && commands[i].name[0] == first &&
            eddy_resp_arg_is(cmd, 0, commands[i].name)) {
            return &commands[i];
        }
    }
    return NULL;
}

/* Redis' reply to an unknown command: its name and the start of its arguments, quoted. */
static int unknown_command(exec_t *x)
{
    char args[160];
    size_t n = 0;
    for (size_t i = 1; i < x->cmd->argc && n < 128; i++) {
        const eddy_resp_arg_t *a = arg(x, i);
        size_t take = a->len < 128 - n ? a->len : 128 - n;
        args[n++] = '\'';
        for (size_t j = 0; j < take && a->ptr[j] != '\0'; j++) {
            args[n++] = (char)a->ptr[j];
        }
        args[n++] = '\'';
        args[n++] = ' ';
    }
    const eddy_resp_arg_t *name = arg(x, 0);
    return eddy_resp_write_errorf(
        x->out, "ERR unknown command '%.*s', with args beginning with: %.*s",
        (int)(name->len > 128 ? 128 : name->len), (const char *)name->ptr, (int)n, args);
}

int resp_store_exec(resp_store_t *s, const eddy_resp_cmd_t *cmd, eddy_buf_t *out)
{
    exec_t x = {.s = s, .cmd = cmd, .out = out, .now = 0};
    const command_t *c = find_command(cmd);
    if (c == NULL) {
        return unknown_command(&x);
    }
    if ((c->arity > 0 && cmd->argc != (size_t)c->arity) ||
        (c->arity < 0 && cmd->argc < (size_t)-c->arity)) {
        return eddy_resp_write_errorf(out, "ERR wrong number of arguments for '%s' command",
                                      c->name);
    }
    return c->run(&x);
}

/* ---------------------------------------------------------------------------------------
 * The store
 */

resp_store_t *resp_store_new(void)
{
    resp_store_t *s = aligned_alloc(alignof(resp_store_t), sizeof(resp_store_t));
    if (s == NULL) {
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    for (size_t i = 0; i < RESP_STORE_SHARDS; i++) {
        if (shard_init(&s->shard[i]) != 0) {
            for (size_t j = 0; j < i; j++) {
                pthread_mutex_destroy(&s->shard[j].lock);
                free(s->shard[j].table);
            }
            free(s);
            return NULL;
        }
        pthread_mutex_init(&s->shard[i].lock, NULL);
    }
    if (getrandom(&s->seed, sizeof(s->seed), 0) != (ssize_t)sizeof(s->seed)) {
        s->seed = (uint64_t)monotonic_ms(NULL) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
    }
    s->clock = monotonic_ms;
    s->started_ms = monotonic_ms(NULL);
    return s;
}

void resp_store_free(resp_store_t *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < RESP_STORE_SHARDS; i++) {
        shard_clear(&s->shard[i]);
        free(s->shard[i].table);
        pthread_mutex_destroy(&s->shard[i].lock);
    }
    free(s);
}

void resp_store_set_clock(resp_store_t *s, resp_store_clock_cb clock, void *arg)
{
    s->clock = clock;
    s->clock_arg = arg;
}

void resp_store_set_server_info(resp_store_t *s, unsigned port, unsigned loops)
{
    atomic_store_explicit(&s->port, port, memory_order_relaxed);
    atomic_store_explicit(&s->loops, loops, memory_order_relaxed);
}

void resp_store_client_opened(resp_store_t *s)
{
    atomic_fetch_add_explicit(&s->clients, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->connections, 1, memory_order_relaxed);
}

void resp_store_client_closed(resp_store_t *s)
{
    atomic_fetch_sub_explicit(&s->clients, 1, memory_order_relaxed);
}

void resp_store_count_commands(resp_store_t *s, uint64_t n)
{
    atomic_fetch_add_explicit(&s->commands, n, memory_order_relaxed);
}

size_t resp_store_size(resp_store_t *s, size_t *expires)
{
    size_t keys = 0, exp = 0;
    for (size_t i = 0; i < RESP_STORE_SHARDS; i++) {
        shard_t *sh = &s->shard[i];
        pthread_mutex_lock(&sh->lock);
        keys += sh->count;
        exp += sh->expires;
        pthread_mutex_unlock(&sh->lock);
    }
    if (expires != NULL) {
        *expires = exp;
    }
    return keys;
}

size_t resp_store_expire_cycle(resp_store_t *s, size_t part, size_t parts, size_t buckets)
{
    size_t deleted = 0;
    int64_t now = s->clock(s->clock_arg);
    for (size_t i = part; i < RESP_STORE_SHARDS; i += parts) {
        shard_t *sh = &s->shard[i];
        /* Batches of `buckets`, the lock released between them, go on while at least one key
         * in 10 of those looked at was due (Redis' acceptable stale share), up to one pass
         * over the table or EXPIRE_MAX_BATCHES: a fixed share per cycle would fall behind
         * keys expiring faster than it looks at them, and they would pile up in memory. */
        size_t visited = 0;
        for (size_t batch = 0; batch < EXPIRE_MAX_BATCHES; batch++) {
            size_t seen = 0, due = 0;
            pthread_mutex_lock(&sh->lock);
            for (size_t b = 0; b < buckets && sh->expires > 0; b++) {
                entry_t **link = &sh->table[sh->cursor & sh->mask];
                while (*link != NULL) {
                    seen++;
                    if ((*link)->expire_ms != 0 && (*link)->expire_ms <= now) {
                        shard_unlink(sh, link);
                        due++;
                    } else {
                        link = &(*link)->next;
                    }
                }
                sh->cursor = (sh->cursor + 1) & sh->mask;
            }
            visited += buckets;
            bool more = sh->expires > 0 && due * 10 >= seen && visited <= sh->mask;
            pthread_mutex_unlock(&sh->lock);
            deleted += due;
            if (!more) {
                break;
            }
        }
    }
    return deleted;
}
