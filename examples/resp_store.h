/*
 * examples/resp_store.h: the keyspace of eddy-resp-server and the commands on it (not part of
 * the library; the tests use it through the embedded channel and a stress run).
 *
 * The keyspace is shared by every loop: RESP_STORE_SHARDS shards picked by a seeded hash of
 * the key, each a chained hash table behind its own mutex (docs/resp.md says why). Keys and
 * values are byte strings; expiry deadlines are absolute milliseconds of the store's clock,
 * checked on access and swept by resp_store_expire_cycle() from a timer on each loop.
 */
#ifndef EDDY_EXAMPLES_RESP_STORE_H
#define EDDY_EXAMPLES_RESP_STORE_H

#include <eddy/resp.h>

#include <stdint.h>

/* A power of two: 64 shards keep two loops' collisions rare (1/64 per pair of commands) at
 * 8 KiB of locks; not tuned further. */
#define RESP_STORE_SHARDS 64

typedef struct resp_store_s resp_store_t;

/* resp_store_exec(): the command asks for the connection to close after its reply (QUIT). */
#define RESP_STORE_CLOSE 1

/* The clock of deadlines, in milliseconds; the default is CLOCK_MONOTONIC's. */
typedef int64_t (*resp_store_clock_cb)(void *arg);

/* A new, empty store; NULL when out of memory. */
resp_store_t *resp_store_new(void);
/* Free s and every key; nothing may use it any more. */
void resp_store_free(resp_store_t *s);
/* Replace the clock (tests move time by hand). Before s is shared. */
void resp_store_set_clock(resp_store_t *s, resp_store_clock_cb clock, void *arg);
/* What INFO shows of the server: its port and loops. */
void resp_store_set_server_info(resp_store_t *s, unsigned port, unsigned loops);

/*
 * Run cmd (borrowed; argc >= 1) and append its reply to out: 0, RESP_STORE_CLOSE (after the
 * reply), or EDDY_ENOMEM / EDDY_ECAPACITY when out or a key could not grow (out may then hold
 * part of a reply: close the connection). Any thread.
 */
int resp_store_exec(resp_store_t *s, const eddy_resp_cmd_t *cmd, eddy_buf_t *out);

/* Counters INFO shows; any thread. */
void resp_store_client_opened(resp_store_t *s);
void resp_store_client_closed(resp_store_t *s);
void resp_store_count_commands(resp_store_t *s, uint64_t n);

/* Keys (expired ones not yet swept included, as Redis counts them) and keys with a deadline. */
size_t resp_store_size(resp_store_t *s, size_t *expires);

/*
 * Active expiry (Redis' activeExpireCycle, simplified): for each shard i with
 * i % parts == part, look at `buckets` buckets from where the last cycle stopped and delete
 * the keys past their deadline; more batches of `buckets` follow while at least 1 in 10 of
 * the keys looked at was due (up to one pass over the shard). Returns how many it deleted.
 * Any thread.
 */
size_t resp_store_expire_cycle(resp_store_t *s, size_t part, size_t parts, size_t buckets);

#endif /* EDDY_EXAMPLES_RESP_STORE_H */
