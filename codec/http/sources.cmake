# The HTTP/1.1 codec (include/eddy/http.h): request decoder, aggregator, response encoder,
# the cached Date; and the client side (include/eddy/http_client.h): the client codec, the
# response aggregator, the exchange.
list(APPEND EDDY_LAYER_SOURCES
    codec/http/aggregator.c
    codec/http/client.c
    codec/http/client_codec.c
    codec/http/coding.c
    codec/http/compressor.c
    codec/http/date.c
    codec/http/decompressor.c
    codec/http/decoder.c
    codec/http/encoder.c
    codec/http/exchange.c
    codec/http/fifo.c
    codec/http/files.c
    codec/http/files_meta.c
    codec/http/message.c
    codec/http/parse.c)
# Content codings (include/eddy/http_coding.h): one file per library, each built when found.
if(EDDY_HAVE_ZLIB)
    list(APPEND EDDY_LAYER_SOURCES codec/http/coding_zlib.c)
endif()
if(EDDY_HAVE_BROTLI)
    list(APPEND EDDY_LAYER_SOURCES codec/http/coding_brotli.c)
endif()
if(EDDY_HAVE_ZSTD)
    list(APPEND EDDY_LAYER_SOURCES codec/http/coding_zstd.c)
endif()
