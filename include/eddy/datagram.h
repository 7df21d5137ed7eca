/*
 * eddy datagram channels: UDP over IPv4 and IPv6, and Unix datagram sockets (Netty's
 * DatagramChannel and DatagramPacket).
 *
 * A datagram channel is a channel (channel.h): one loop, a pipeline of handlers, writes from
 * any thread, refcounted. What differs from a stream:
 *
 * - Messages keep their boundaries. An unconnected channel reads eddy_datagram_t packets (the
 *   payload, in a pooled buffer, with the sender's address and the channel's own) and writes
 *   packets that name their recipient. A connected channel (eddy_datagram_open with a remote)
 *   talks to one peer: it still reads packets, and writes packets or plain buffers
 *   (eddy_buf_t, composites), each one datagram. A protocol decoder sees one datagram as one
 *   message (codec.h's packet decoder), never a stream of bytes.
 * - Reading takes up to EDDY_MAX_MESSAGES_PER_READ datagrams per readiness event (64 by
 *   default for datagram channels: one batch), batched by recvmmsg (up to 64 a call), each into a pooled buffer of EDDY_DATAGRAM_RECV_SIZE bytes: no
 *   copy after the kernel's. channel_read_complete follows each recvmmsg batch, so answers
 *   flushed there go out while the batch's buffers are still in the cache. A datagram longer than that is truncated by the kernel: it is never passed on;
 *   exception_caught gets EDDY_EMSGSIZE and reading goes on. With EDDY_UDP_GRO the kernel may
 *   hand over several same-size datagrams from one sender at once; they are split again, each
 *   a packet of its own (slices of one buffer).
 * - Writing batches flushed packets into sendmmsg; runs of same-size packets to one peer go out
 *   as one UDP_SEGMENT (GSO) send where the kernel has it (EDDY_UDP_GSO, on by default; where
 *   the kernel refuses it, the channel stops asking). EAGAIN leaves the rest queued until the
 *   socket is writable again: nothing is dropped silently. Pending bytes count against the
 *   write-buffer water marks, with the writability events and the pause of streams. A
 *   datagram the socket refuses (too large: EDDY_EMSGSIZE; no route...) fails its own
 *   promise, and the next ones go on.
 * - Errors do not close the channel: an ICMP error a connected channel receives (a peer's
 *   closed port: EDDY_ECONNREFUSED) reaches exception_caught and reading goes on. There is no
 *   half-closure, no end of input: the channel lives until closed.
 *
 * Channels are made by eddy_datagram_open() here, or by the client bootstrap in datagram
 * mode (bootstrap.h: eddy_bootstrap_datagram, then eddy_bootstrap_bind or _connect), which
 * also serves one port from every loop of its group with SO_REUSEPORT.
 */
#ifndef EDDY_DATAGRAM_H
#define EDDY_DATAGRAM_H

#include <eddy/buffer.h>
#include <eddy/channel.h>
#include <eddy/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Packets: a message of type EDDY_MSG_DATAGRAM, with a reference count.
 */

typedef struct eddy_datagram_s eddy_datagram_t;

/**
 * A packet of content (taken over) to recipient, from sender (NULL: the channel's address).
 * recipient may be NULL for a connected channel. NULL only without memory (content is
 * released then). Any thread.
 */
EDDY_EXTERN eddy_datagram_t *eddy_datagram_new(eddy_buf_t *content, const eddy_addr_t *recipient,
                                               const eddy_addr_t *sender);
/** A packet back to where d came from: recipient d's sender, sender d's recipient; content
 * taken over. NULL only without memory (content released). */
EDDY_EXTERN eddy_datagram_t *eddy_datagram_reply(const eddy_datagram_t *d, eddy_buf_t *content);

/**
 * Turn d around for its answer, without a new packet: sender and recipient swap, and the
 * content becomes content (taken over; the old one is released), or stays when content is
 * NULL (an echo). Returns d, ready to write. d must be the caller's alone (one reference): a
 * received packet in channel_read is. The loop's thread of d's channel, like channel_read.
 */
EDDY_EXTERN eddy_datagram_t *eddy_datagram_turn(eddy_datagram_t *d, eddy_buf_t *content);

/** The packet as a message (for writes and channel_read). */
EDDY_EXTERN eddy_msg_t *eddy_datagram_msg(eddy_datagram_t *d);
/** The packet behind a message of type EDDY_MSG_DATAGRAM; NULL for any other message. */
EDDY_EXTERN eddy_datagram_t *eddy_datagram_of(eddy_msg_t *msg);
EDDY_EXTERN eddy_datagram_t *eddy_datagram_retain(eddy_datagram_t *d);
EDDY_EXTERN void eddy_datagram_release(eddy_datagram_t *d);

/** The payload. Borrowed: valid while the packet is. */
EDDY_EXTERN eddy_buf_t *eddy_datagram_content(const eddy_datagram_t *d);
/** Take the payload out (yours to release); the packet is left empty. */
EDDY_EXTERN eddy_buf_t *eddy_datagram_take_content(eddy_datagram_t *d);
/** Where it came from (received packets: the peer), and where it goes (received packets: the
 * channel's own address). A zero length: not given. Borrowed. */
EDDY_EXTERN const eddy_addr_t *eddy_datagram_sender(const eddy_datagram_t *d);
EDDY_EXTERN const eddy_addr_t *eddy_datagram_recipient(const eddy_datagram_t *d);

/* ---------------------------------------------------------------------------------------
 * Channels
 */

typedef struct eddy_datagram_options_s {
    eddy_loop_t *loop;                   /* required: the channel's loop */
    const eddy_channel_config_t *config; /* its options (EDDY_SO_REUSEPORT...), or NULL */
    eddy_channel_init_cb init;           /* adds its handlers, on the loop; may be NULL */
    void *arg;
    /* Connect to this peer (a connected channel), or NULL. With local NULL the socket takes
     * remote's family and an ephemeral port. */
    const eddy_addr_t *remote;
} eddy_datagram_options_t;

/**
 * A datagram channel bound to local (an IP address and port, port 0 ephemeral, or a Unix
 * socket path; NULL with a remote: any), connected to opts->remote when given. init runs on
 * the loop first, then the channel becomes active and reads. The future completes with the
 * channel (eddy_future_channel(), held by the future as for eddy_channel_listen) or fails
 * with EDDY_EADDRINUSE, EDDY_EACCES, EDDY_EINVAL (no loop, no address at all)... The caller
 * owns the future. Any thread. NULL only without memory.
 */
EDDY_EXTERN eddy_future_t *eddy_datagram_open(const eddy_addr_t *local,
                                              const eddy_datagram_options_t *opts);

/**
 * Join a multicast group (IPv4 or IPv6, as the group's address says) on the interface with
 * index ifindex (0: the kernel's choice; if_nametoindex() names it), receiving from any sender,
 * or from source alone when given (source-specific, IPv4 and IPv6). The channel must be bound
 * to the group's port. Leave undoes it. Any thread: the socket call runs on the channel's
 * loop; the future completes with 0, or fails with the kernel's error (EDDY_EADDRNOTAVAIL:
 * no such interface; EDDY_EINVAL: not a multicast address, or a family the channel is not;
 * EDDY_ECLOSED). The caller owns the future. NULL only without memory.
 */
EDDY_EXTERN eddy_future_t *eddy_datagram_join_group(eddy_channel_t *ch, const eddy_addr_t *group,
                                                    unsigned ifindex, const eddy_addr_t *source);
EDDY_EXTERN eddy_future_t *eddy_datagram_leave_group(eddy_channel_t *ch, const eddy_addr_t *group,
                                                     unsigned ifindex,
                                                     const eddy_addr_t *source);

/** ch is a datagram channel. */
EDDY_EXTERN bool eddy_channel_is_datagram(const eddy_channel_t *ch);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_DATAGRAM_H */
