list(APPEND EDDY_SOURCES
    pipeline/channel.c
    pipeline/channel_group.c
    pipeline/datagram.c
    pipeline/embedded.c
    pipeline/fault.c
    pipeline/handlers.c
    pipeline/outbound.c
    pipeline/pipeline.c
    pipeline/recycle.c
    pipeline/scoped.c
    pipeline/socket.c
    pipeline/socket_readiness.c
    pipeline/socket_uring.c)
# Codecs and handlers keep their own lists.
include(${CMAKE_CURRENT_LIST_DIR}/codec/sources.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/handler/sources.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/tls/sources.cmake OPTIONAL)
