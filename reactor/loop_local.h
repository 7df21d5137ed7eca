/*
 * reactor/loop_local.h: storage per loop for the library's own modules above the reactor
 * (the HTTP codec's cached Date), so that they keep per-loop state without a thread-local or
 * a look inside the loop. The application's pointer is eddy_loop_data(). Not installed.
 */
#ifndef EDDY_REACTOR_LOOP_LOCAL_H
#define EDDY_REACTOR_LOOP_LOCAL_H

#include <eddy/loop.h>

#include <stddef.h>

/*
 * The block that key keeps on loop: size bytes, zeroed, aligned for any type, made by the
 * first call with key and freed with the loop's memory; later calls with key return the same
 * block (and must pass the same size). key is any address unique to its user (a static
 * variable's). NULL without memory (a later call tries again). The loop's thread, or the
 * thread driving a manual loop (eddy_loop_in_event_loop()).
 */
void *eddy__loop_local(eddy_loop_t *loop, const void *key, size_t size);

#endif /* EDDY_REACTOR_LOOP_LOCAL_H */
