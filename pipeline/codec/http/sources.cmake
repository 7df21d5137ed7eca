# The HTTP/1.1 codec (include/eddy/http.h): request decoder, aggregator, response encoder,
# the cached Date.
list(APPEND EDDY_SOURCES
    pipeline/codec/http/aggregator.c
    pipeline/codec/http/date.c
    pipeline/codec/http/decoder.c
    pipeline/codec/http/encoder.c
    pipeline/codec/http/message.c
    pipeline/codec/http/parse.c)
