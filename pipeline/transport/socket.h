/*
 * pipeline/transport/socket.h: stream sockets inside, shared by socket.c (what every transport does)
 * and the transports, socket_readiness.c and socket_uring.c. Not installed.
 *
 * A transport is how a loop's sockets do their I/O, beside the loop's poller: readiness
 * (epoll, kqueue, poll: wait until a descriptor is ready, then read and write it) or
 * completion (io_uring: submit receives and sends, reap their completions). Each gives the
 * channel operations (eddy__channel_ops_t) of its stream and listening channels; a channel
 * takes its loop's at creation, and the pipeline calls them without knowing which.
 */
#ifndef EDDY_PIPELINE_SOCKET_H
#define EDDY_PIPELINE_SOCKET_H

#include "pipeline/internal.h"
#include "eddy_config.h"

#include <sys/types.h>

typedef struct eddy__transport_s {
    const char *name;
    const eddy__channel_ops_t *stream;   /* connected and accepted channels */
    const eddy__channel_ops_t *listener; /* listening channels */
} eddy__transport_t;

extern const eddy__transport_t eddy__transport_readiness;
#ifdef EDDY_HAVE_IO_URING
extern const eddy__transport_t eddy__transport_uring;
#endif

/*
 * The channel operations every transport's stream and listening channels share (socket.c),
 * as designated initializers: a transport's tables add their I/O (begin_read, update_interest,
 * do_close; a stream's flush and destroy).
 */
#define EDDY__SOCKET_STREAM_OPS                                                                \
    .kind = "stream", .connect = eddy__socket_connect,                                         \
    .discard_input = eddy__socket_discard_input,                                               \
    .close_after_flush = eddy__socket_close_after_flush,                                       \
    .shutdown_output = eddy__socket_shutdown_output, .set_socket_option = eddy__socket_option
#define EDDY__SOCKET_LISTENER_OPS                                                              \
    .kind = "listener", .flush = eddy__listener_flush, .set_socket_option = eddy__socket_option, \
    .destroy = eddy__listener_destroy

/* The transport of loop's sockets (by its poller). */
const eddy__transport_t *eddy__transport_of(const eddy_loop_t *loop);

/* ---------------------------------------------------------------------------------------
 * What every transport shares (socket.c). The channel's loop, unless said otherwise.
 */

/* Make fd non-blocking and close-on-exec (where accept4 and SOCK_NONBLOCK are missing). */
int eddy__socket_nonblock_cloexec(int fd);
/* The channel's socket is IP (TCP or UDP, IPv4 or IPv6), not Unix. */
bool eddy__socket_is_ip(const eddy_channel_t *ch);
/* Apply a socket option (the channel ops' set_socket_option). */
int eddy__socket_option(eddy_channel_t *ch, eddy_option_t opt, int64_t value);
/* Note the addresses the kernel gives: local always, remote when asked. */
void eddy__socket_fill_addrs(eddy_channel_t *ch, bool remote);
/* Whether opt is one of the TCP options (EDDY_TCP_CORK and after): nothing on datagrams. */
bool eddy__socket_is_tcp_option(eddy_option_t opt);
/* Throw away unread input before a requested close (the channel ops' discard_input). */
void eddy__socket_discard_input(eddy_channel_t *ch);
/* Shut the output down once what is flushed is written (the channel ops' shutdown_output). */
void eddy__socket_shutdown_output(eddy_channel_t *ch, eddy_promise_t *p);
/* What is flushed is written and a shutdown waited for it: send the FIN now. */
void eddy__socket_finish_shutdown_output(eddy_channel_t *ch);
/* Close gracefully: FIN after the flushed data, then linger (close_after_flush). */
void eddy__socket_close_after_flush(eddy_channel_t *ch, eddy_promise_t *p);
/* Input while lingering: n bytes read and dropped (n > 0), the peer's FIN (0), or an error
 * (-errno). True while more may come; false once the lingering moved on (it may have closed
 * the channel). */
bool eddy__socket_linger_input(eddy_channel_t *ch, ssize_t n);
/* A read batch ended with an error (exception_caught, then close) or at the peer's FIN (half
 * closure when allowed, else close); nothing when neither. */
void eddy__socket_input_end(eddy_channel_t *ch, int err, bool eof);
/* At close, after the transport let go of the descriptor: end a lingering close or a connect
 * in progress, completing their promises. */
void eddy__socket_close_parts(eddy_channel_t *ch);
/* Close a descriptor never registered (the channel ops' destroy). */
void eddy__socket_destroy(eddy_channel_t *ch);
/* The file region r at the head of ch's buffer, as far as the (non-blocking) socket takes it
 * without waiting, in the kernel (sendfile(2); read and send without it): the bytes sent,
 * *total those offered, or a negative code (-EAGAIN: full; EDDY_ETRUNCATED: the file ended
 * first). Blocks SIGPIPE on the calling thread the first time (loop threads only). */
ssize_t eddy__socket_send_region(eddy_channel_t *ch, const eddy_file_region_t *r, size_t *total);
/* MSG_MORE when a file region follows the bytes about to go (a response's head, then its
 * file): the kernel holds the head until sendfile adds the file, so a small file leaves in one
 * segment, not two (server segs_out for 2000 keep-alive GETs of a 1 KiB file: 4001 without,
 * 2001 with; nginx gets the same with tcp_nopush); the sendfile, without it, pushes them. */
int eddy__socket_more_flag(const eddy_channel_t *ch);
/* Connect ch to remote (bound to local first, when given; the channel ops' connect). The
 * transport's update_interest waits for writability while CONNECTING (readiness: the
 * watcher; io_uring: a poll, ending in eddy__socket_connected()). */
void eddy__socket_connect(eddy_channel_t *ch, const eddy_addr_t *remote, const eddy_addr_t *local,
                          eddy_promise_t *p);
/* A connect in progress is over, on a transport that waits for it without the channel's
 * watcher: err 0 (connected) or the error (SO_ERROR's, negated); the promise completes and
 * the channel becomes active, or closes. Nothing when no connect is in progress. */
void eddy__socket_connected(eddy_channel_t *ch, int err);
/* Watch the channel's descriptor for ev (EDDY_IO_READ | EDDY_IO_WRITE; 0: nothing); a
 * poller that refuses closes the channel with the error. */
void eddy__socket_watch(eddy_channel_t *ch, unsigned ev);
/* The flush spun its count with more to write: flush again from a task, after the loop served
 * the others (Netty's incompleteWrite). */
void eddy__socket_flush_later(eddy_channel_t *ch);
/* Register a socket channel with its loop: its watcher, the loop's closer, the event. */
void eddy__socket_register(eddy_channel_t *ch);
/* The same with the kind's own watcher callback (datagram channels); arg is the channel. */
void eddy__socket_register_io(eddy_channel_t *ch, eddy_io_cb cb);

/* A listener's accepted connection fd (peer: its address, or NULL to ask the kernel): a child
 * channel on the next child loop, with that loop's transport, initialised there. */
void eddy__listener_child(eddy_channel_t *ch, int fd, const eddy_addr_t *peer);
/* Accepting met EMFILE or ENFILE (err): accept the pending connection and close it with the
 * reserve descriptor, and pause accepting for 100 ms (the transport's update_interest). */
void eddy__listener_out_of_descriptors(eddy_channel_t *ch, int err);
/* At a listener's close, after the transport let go of the descriptor. */
void eddy__listener_close_parts(eddy_channel_t *ch);
/* The channel ops' flush of listeners: nothing to write. */
void eddy__listener_flush(eddy_channel_t *ch);
/* The channel ops' destroy of listeners. */
void eddy__listener_destroy(eddy_channel_t *ch);

/* ---------------------------------------------------------------------------------------
 * The readiness transport (socket_readiness.c)
 */

/* The descriptor's watcher fired and no connect is in progress. */
void eddy__readiness_on_io(eddy_channel_t *ch, unsigned events);

#endif /* EDDY_PIPELINE_SOCKET_H */
