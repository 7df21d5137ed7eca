# The RESP codec (include/eddy/resp.h): the request decoder and the reply writers.
list(APPEND EDDY_SOURCES
    pipeline/codec/resp/decoder.c
    pipeline/codec/resp/encoder.c)
