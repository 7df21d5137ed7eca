# The RESP codec (include/eddy/resp.h): the request decoder and the reply writers.
list(APPEND EDDY_LAYER_SOURCES
    codec/resp/decoder.c
    codec/resp/encoder.c)
