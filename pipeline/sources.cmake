# The pipeline layer: channels, pipelines, the outbound buffer, the embedded channel, channel
# groups; transport/ (stream sockets on readiness and io_uring, datagram sockets), handler/
# (timeouts, logging, flush consolidation), tls/.
list(APPEND EDDY_LAYER_SOURCES
    pipeline/channel.c
    pipeline/channel_group.c
    pipeline/embedded.c
    pipeline/fault.c
    pipeline/outbound.c
    pipeline/pipeline.c
    pipeline/recycle.c
    pipeline/scoped.c
    pipeline/transport/datagram.c
    pipeline/transport/socket.c
    pipeline/transport/socket_readiness.c
    pipeline/transport/socket_uring.c)
include(${CMAKE_CURRENT_LIST_DIR}/handler/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/tls/sources.cmake)
