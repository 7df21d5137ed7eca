list(APPEND EDDY_LAYER_SOURCES
    reactor/sequence.c
    reactor/ring.c
    reactor/wait.c
    reactor/processor.c
    reactor/ring_builder.c)
list(APPEND EDDY_LAYER_SOURCES
    reactor/eventfd.c
    reactor/future.c
    reactor/group.c
    reactor/loop.c
    reactor/poller_epoll.c
    reactor/poller_kqueue.c
    reactor/poller_poll.c
    reactor/poller_uring.c
    reactor/shutdown.c
    reactor/signal.c
    reactor/taskq.c
    reactor/timer.c
    reactor/watchdog.c)
list(APPEND EDDY_LAYER_SOURCES reactor/carrier.c)
