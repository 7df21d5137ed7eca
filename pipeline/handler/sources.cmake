# Ready-made handlers (include/eddy/handler.h): Netty's io.netty.handler.timeout, .logging
# and .flush.
list(APPEND EDDY_LAYER_SOURCES
    pipeline/handler/chunked.c
    pipeline/handler/flush_consolidation.c
    pipeline/handler/logging.c
    pipeline/handler/timeout.c)
