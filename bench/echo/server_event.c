/*
 * echo_server_event: libevent's echo server with bufferevents, as libevent's sample code
 * writes it: the read callback moves the whole input buffer to the output buffer
 * (evbuffer_add_buffer, no copy), libevent writes it out. One event base, one thread. A
 * bufferevent moves at most 16 KiB per read or write event by default; raised here to 64 KiB,
 * the other servers' read size. libevent 2.1's evbuffer_read still reads at most 4 KiB per
 * call (EVBUFFER_MAX_READ; 2.2 adds evbuffer_set_max_read), which is most of its cost on
 * 64 KiB messages: that is the library as Debian ships it.
 *
 *   echo_server_event [--port N] [--cpu N]
 */
#include "server_common.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)arg;
    evbuffer_add_buffer(bufferevent_get_output(bev), bufferevent_get_input(bev));
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        bufferevent_free(bev);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                      int socklen, void *arg)
{
    (void)sa;
    (void)socklen;
    (void)arg;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct event_base *base = evconnlistener_get_base(l);
    struct bufferevent *bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        evutil_closesocket(fd);
        return;
    }
    bufferevent_set_max_single_read(bev, 65536);
    bufferevent_set_max_single_write(bev, 65536);
    bufferevent_setcb(bev, on_read, NULL, on_event, NULL);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

int main(int argc, char **argv)
{
    server_args_t a;
    server_args_parse(&a, argc, argv, "echo_server_event");
    server_pin(a.cpu, "echo_server_event");
    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = event_base_new();
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)a.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct evconnlistener *l =
        base == NULL ? NULL
                     : evconnlistener_new_bind(base, on_accept, NULL,
                                               LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 1024,
                                               (struct sockaddr *)&sa, sizeof(sa));
    if (l == NULL) {
        fprintf(stderr, "echo_server_event: cannot listen on port %d\n", a.port);
        return 1;
    }
    server_ready(a.port, "echo_server_event");
    event_base_dispatch(base);
    evconnlistener_free(l);
    event_base_free(base);
    return 0;
}
