list(APPEND EDDY_LAYER_SOURCES
    buffer/buf.c
    buffer/composite.c
    buffer/file.c
    buffer/leak.c
    buffer/pool.c
    buffer/alloc.c
    buffer/common.c
    buffer/log.c
    buffer/random.c)
