/*
 * Fan-out binds: one channel, or with SO_REUSEPORT one per loop of a group, all on the port
 * the first one got (port 0 lets the kernel choose it once). The server bootstrap's listeners
 * and the client bootstrap's datagram binds open their channels through open(); this file
 * counts their reports and completes the bind once every slot reported.
 */
#include "bootstrap/internal.h"
#include "pipeline/layer.h"

#include <assert.h>
#include <stdlib.h>

eddy__fanout_t *eddy__fanout_new(size_t want, bool reuseport, eddy_loop_t *owner_loop,
                                 void *owner, void (*open)(eddy__fanout_t *fo, size_t i),
                                 void (*release)(void *owner))
{
    assert(want > 0 && (want == 1 || reuseport) && open != NULL && release != NULL);
    eddy__fanout_t *fo = calloc(1, sizeof(*fo) + want * sizeof(fo->slot[0]));
    if (fo == NULL || pthread_mutex_init(&fo->lock, NULL) != 0) {
        free(fo);
        release(owner);
        return NULL;
    }
    fo->p = eddy_promise_new(owner_loop);
    if (fo->p == NULL) {
        pthread_mutex_destroy(&fo->lock);
        free(fo);
        release(owner);
        return NULL;
    }
    fo->owner = owner;
    fo->open = open;
    fo->release = release;
    fo->reuseport = reuseport;
    fo->want = want;
    for (size_t i = 0; i < want; i++) {
        fo->slot[i] = (eddy__fanout_slot_t){.fo = fo, .i = i};
    }
    return fo;
}

static void fanout_free(eddy__fanout_t *fo)
{
    pthread_mutex_destroy(&fo->lock);
    eddy_future_release(fo->p);
    fo->release(fo->owner);
    free(fo);
}

/* The first channel closed: close its siblings (a NULL-terminated array, retained). */
static void close_siblings(eddy_future_t *f, void *arg)
{
    (void)f;
    eddy_channel_t **sib = arg;
    assert(sib[0] != NULL);
    for (size_t i = 0; sib[i] != NULL; i++) {
        eddy_channel_close(sib[i], NULL);
        eddy_channel_release(sib[i]);
    }
    free(sib);
}

/* Close what opened and fail the bind with err. */
static void fanout_fail(eddy__fanout_t *fo, int err)
{
    assert(err < 0);
    for (size_t i = 0; i < fo->want; i++) {
        if (fo->slot[i].ch != NULL) {
            eddy_channel_close(fo->slot[i].ch, NULL);
            eddy_channel_release(fo->slot[i].ch);
        }
    }
    eddy_promise_fail(fo->p, err);
    fanout_free(fo);
}

/* Every slot reported: the first channel, its siblings closing with it; or the failure. */
static void fanout_complete(eddy__fanout_t *fo)
{
    assert(fo->done == fo->want);
    if (fo->err != 0) {
        fanout_fail(fo, fo->err);
        return;
    }
    eddy_channel_t *first = fo->slot[0].ch;
    assert(first != NULL); /* no error: every slot opened */
    if (fo->want > 1) {
        eddy_channel_t **sib = calloc(fo->want, sizeof(*sib));
        eddy_future_t *cf = sib != NULL ? eddy_channel_close_future(first) : NULL;
        for (size_t i = 1; cf != NULL && i < fo->want; i++) {
            sib[i - 1] = fo->slot[i].ch;
        }
        if (cf == NULL || eddy_future_add_listener(cf, close_siblings, sib) != 0) {
            free(sib);
            fanout_fail(fo, EDDY_ENOMEM);
            return;
        }
    }
    eddy__promise_succeed_channel(fo->p, first);
    eddy_channel_release(first);
    fanout_free(fo);
}

void eddy__fanout_opened(eddy__fanout_t *fo, size_t i, eddy_channel_t *ch, int err)
{
    assert(i < fo->want && fo->slot[i].ch == NULL && (ch != NULL || err != 0));
    fo->slot[i].ch = ch;
    bool first = i == 0;
    if (first && err == 0 && fo->want > 1) {
        /* Port 0 chose a port for the first channel: the others share it. The first counts
         * as done only after they are started, so that fo outlives this call. */
        fo->addr = *eddy_channel_local_addr(ch);
        for (size_t k = 1; k < fo->want; k++) {
            fo->open(fo, k);
        }
    }
    pthread_mutex_lock(&fo->lock);
    if (err != 0 && fo->err == 0) {
        fo->err = err;
    }
    fo->done = first && err != 0 ? fo->want : fo->done + 1; /* the others never start */
    assert(fo->done <= fo->want);
    bool all = fo->done == fo->want;
    pthread_mutex_unlock(&fo->lock);
    if (all) {
        fanout_complete(fo);
    }
}

static void fanout_resolved(void *arg, eddy_addr_t *addrs, size_t n, int err)
{
    eddy__fanout_t *fo = arg;
    if (err == 0 && n == 0) {
        err = EDDY_ENOENT;
    }
    if (err == 0) {
        fo->addr = addrs[0];
    }
    free(addrs);
    if (err != 0) {
        fanout_fail(fo, err);
        return;
    }
    fo->open(fo, 0);
}

eddy_future_t *eddy__fanout_start(eddy__fanout_t *fo, eddy_loop_t *loop, const char *host,
                                  uint16_t port, const eddy_addr_t *unix_addr)
{
    eddy_future_t *f = eddy_future_retain(fo->p);
    if (unix_addr != NULL) {
        fo->addr = *unix_addr;
        fo->open(fo, 0);
        return f;
    }
    int rc = eddy__bootstrap_resolve(loop, host, port, true, fanout_resolved, fo, NULL);
    if (rc != 0) {
        fanout_fail(fo, rc);
    }
    return f;
}
