/*
 * Multicast on datagram channels (eddy_datagram_join_group, _leave_group, the multicast
 * options), IPv4 and IPv6, any-source and source-specific: delivery through loopback on IPv4,
 * the kernel's membership table on IPv6 (whose loopback does not loop multicast back). The test runs in a network
 * namespace of its own (unshare -n, made before any thread starts) whose loopback it brings up
 * with multicast on, so no real network is touched and the machine's interfaces do not
 * matter. Where the namespace cannot be made (not root, no CLONE_NEWNET), every test says so
 * and skips.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/buffer.h>
#include <eddy/channel.h>
#include <eddy/datagram.h>
#include <eddy/pipeline.h>

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEADLINE_MS 10000

#include "support/wait_util.h"

static bool have_netns; /* the namespace and its multicast loopback are ours */
static unsigned lo_index;

/* Enter a new network namespace and bring its loopback up, with multicast. */
static bool make_netns(void)
{
    if (unshare(CLONE_NEWNET) != 0) {
        fprintf(stderr, "multicast: cannot make a network namespace (%s): skipping\n",
                strerror(errno));
        return false;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    bool ok = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
    if (ok) {
        ifr.ifr_flags |= IFF_UP | IFF_MULTICAST;
        ok = ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    lo_index = if_nametoindex("lo");
    if (!ok || lo_index == 0) {
        fprintf(stderr, "multicast: cannot bring lo up with multicast (%s): skipping\n",
                strerror(errno));
        return false;
    }
    return true;
}

typedef struct node_s {
    eddy_loop_group_t *group;
    eddy_channel_t *ch;
    _Atomic int reads;
    _Atomic int from_port; /* the last sender's port */
} node_t;

static void count_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    node_t *n = eddy_ctx_state(ctx);
    eddy_datagram_t *d = eddy_datagram_of(msg);
    atomic_store(&n->from_port, eddy_addr_port(eddy_datagram_sender(d)));
    atomic_fetch_add(&n->reads, 1);
    eddy_msg_release(msg);
}

static const eddy_handler_ops_t count_ops = {.name = "count", .channel_read = count_read};

static int init_node(eddy_channel_t *ch, void *arg)
{
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "count", &count_ops, arg, NULL);
}

static void node_open(node_t *n, const char *ip, uint16_t port, const eddy_channel_config_t *cfg)
{
    n->group = eddy_loop_group_new(1, NULL);
    assert_non_null(n->group);
    eddy_addr_t a;
    assert_int_equal(eddy_addr_ip(&a, ip, port), 0);
    eddy_datagram_options_t o = {
        .loop = eddy_loop_group_next(n->group), .config = cfg, .init = init_node, .arg = n};
    eddy_future_t *f = eddy_datagram_open(&a, &o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    n->ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
}

static void node_close(node_t *n)
{
    eddy_channel_close(n->ch, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(n->ch), DEADLINE_MS), 0);
    eddy_channel_release(n->ch);
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(n->group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(n->group), 0);
}

/* The future's error, once it completed; f released. */
static int await_err(eddy_future_t *f)
{
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    int err = eddy_future_error(f);
    eddy_future_release(f);
    return err;
}

static void send_to(node_t *from, const eddy_addr_t *to)
{
    eddy_buf_t *b = eddy_buf_alloc(eddy_allocator_default(), 8, 8);
    eddy_buf_write_bytes(b, "mcast!", 6);
    eddy_channel_write_and_flush(from->ch, eddy_datagram_msg(eddy_datagram_new(b, to, NULL)),
                                 NULL);
}

/* Join, receive what a sender sends to the group through lo, leave, hear nothing more. */
static void join_receive_leave(const char *any, const char *group_ip, const char *src_ip)
{
    if (!have_netns) {
        skip();
    }
    eddy_channel_config_t cfg;
    eddy_channel_config_init(&cfg);
    eddy_channel_config_set(&cfg, EDDY_IP_MULTICAST_IF, lo_index);
    eddy_channel_config_set(&cfg, EDDY_IP_MULTICAST_LOOP, 1);
    eddy_channel_config_set(&cfg, EDDY_IP_MULTICAST_TTL, 1);
    node_t rx = {0}, tx = {0};
    node_open(&rx, any, 0, &cfg);
    node_open(&tx, src_ip, 0, &cfg);
    uint16_t port = eddy_addr_port(eddy_channel_local_addr(rx.ch));
    eddy_addr_t group;
    assert_int_equal(eddy_addr_ip(&group, group_ip, port), 0);
    if (group.u.sa.sa_family == AF_INET6) {
        group.u.in6.sin6_scope_id = lo_index;
    }
    assert_int_equal(await_err(eddy_datagram_join_group(rx.ch, &group, lo_index, NULL)), 0);
    send_to(&tx, &group);
    WAIT_FOR(atomic_load(&rx.reads) == 1);
    assert_int_equal(atomic_load(&rx.from_port), eddy_addr_port(eddy_channel_local_addr(tx.ch)));
    assert_int_equal(await_err(eddy_datagram_leave_group(rx.ch, &group, lo_index, NULL)), 0);
    send_to(&tx, &group);
    usleep(200 * 1000);
    assert_int_equal(atomic_load(&rx.reads), 1);

    /* Source-specific: from tx's address, heard; a group it did not join, not. */
    eddy_addr_t src;
    assert_int_equal(eddy_addr_ip(&src, src_ip, 0), 0);
    assert_int_equal(await_err(eddy_datagram_join_group(rx.ch, &group, lo_index, &src)), 0);
    send_to(&tx, &group);
    WAIT_FOR(atomic_load(&rx.reads) == 2);
    assert_int_equal(await_err(eddy_datagram_leave_group(rx.ch, &group, lo_index, &src)), 0);

    /* Refused: not a multicast address; an interface that does not exist. */
    eddy_addr_t unicast;
    assert_int_equal(eddy_addr_ip(&unicast, src_ip, port), 0);
    assert_int_equal(await_err(eddy_datagram_join_group(rx.ch, &unicast, lo_index, NULL)),
                     EDDY_EINVAL);
    assert_true(await_err(eddy_datagram_join_group(rx.ch, &group, 9999, NULL)) != 0);
    node_close(&tx);
    node_close(&rx);
}

static void multicast_ipv4(void **state)
{
    (void)state;
    join_receive_leave("0.0.0.0", "239.1.2.3", "127.0.0.1");
}

/* Whether /proc/net/igmp6 lists lo as a member of group (32 hex digits). */
static bool igmp6_member(const char *hex)
{
    FILE *f = fopen("/proc/net/igmp6", "r");
    if (f == NULL) {
        return false;
    }
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, " lo ") != NULL && strstr(line, hex) != NULL;
    }
    fclose(f);
    return found;
}

/* IPv6: this kernel's loopback does not loop IPv6 multicast back (no multicast route on lo,
 * and lo skips the local copy), so delivery is checked on IPv4 above; here the join and leave
 * must reach the kernel's membership table, and bad requests be refused. */
static void multicast_ipv6(void **state)
{
    (void)state;
    if (!have_netns) {
        skip();
    }
    node_t rx = {0};
    node_open(&rx, "::", 0, NULL);
    eddy_addr_t group, src;
    assert_int_equal(eddy_addr_ip(&group, "ff02::1:2:3", 4242), 0);
    assert_int_equal(eddy_addr_ip(&src, "::1", 0), 0);
    const char *hex = "ff020000000000000000000100020003";
    assert_false(igmp6_member(hex));
    assert_int_equal(await_err(eddy_datagram_join_group(rx.ch, &group, lo_index, NULL)), 0);
    assert_true(igmp6_member(hex));
    assert_int_equal(await_err(eddy_datagram_leave_group(rx.ch, &group, lo_index, NULL)), 0);
    assert_false(igmp6_member(hex));
    assert_int_equal(await_err(eddy_datagram_join_group(rx.ch, &group, lo_index, &src)), 0);
    assert_true(igmp6_member(hex));
    assert_int_equal(await_err(eddy_datagram_leave_group(rx.ch, &group, lo_index, &src)), 0);
    /* An IPv4 group on an IPv6 socket, a source of the other family: refused. */
    eddy_addr_t v4;
    assert_int_equal(eddy_addr_ip(&v4, "239.1.2.3", 4242), 0);
    assert_true(await_err(eddy_datagram_join_group(rx.ch, &v4, lo_index, NULL)) != 0);
    eddy_addr_t v4src;
    assert_int_equal(eddy_addr_ip(&v4src, "127.0.0.1", 0), 0);
    assert_int_equal(await_err(eddy_datagram_join_group(rx.ch, &group, lo_index, &v4src)),
                     EDDY_EINVAL);
    node_close(&rx);
}

/* A closed channel refuses group changes. */
static void closed_channel_refuses(void **state)
{
    (void)state;
    if (!have_netns) {
        skip();
    }
    node_t n = {0};
    node_open(&n, "0.0.0.0", 0, NULL);
    eddy_channel_close(n.ch, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(n.ch), DEADLINE_MS), 0);
    eddy_addr_t group;
    eddy_addr_ip(&group, "239.1.2.3", 5000);
    assert_int_equal(await_err(eddy_datagram_join_group(n.ch, &group, 0, NULL)), EDDY_ECLOSED);
    node_close(&n);
}

int main(void)
{
    have_netns = make_netns(); /* before any thread: the whole process moves */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(multicast_ipv4),
        cmocka_unit_test(multicast_ipv6),
        cmocka_unit_test(closed_channel_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
