# The HTTP/1.1 codec (include/eddy/http.h): request decoder, aggregator, response encoder,
# the cached Date; and the client side (include/eddy/http_client.h): the client codec, the
# response aggregator, the exchange.
list(APPEND EDDY_SOURCES
    pipeline/codec/http/aggregator.c
    pipeline/codec/http/client_aggregator.c
    pipeline/codec/http/client_codec.c
    pipeline/codec/http/client_message.c
    pipeline/codec/http/date.c
    pipeline/codec/http/decoder.c
    pipeline/codec/http/encoder.c
    pipeline/codec/http/exchange.c
    pipeline/codec/http/message.c
    pipeline/codec/http/parse.c)
