# HTTP/2 (include/eddy/http2.h) on nghttp2: the connection handler, stream handles, the
# adapter to HTTP/1.1's objects and the server's negotiation; the client side's streams
# (client.c) and adapter (client_adapter.c). Without nghttp2
# (EDDY_WITH_NGHTTP2=OFF), http2_none.c's constructors refuse with EDDY_ENOTSUP.
if(EDDY_HAVE_NGHTTP2)
    list(APPEND EDDY_LAYER_SOURCES
        codec/http2/adapter.c
        codec/http2/client.c
        codec/http2/client_adapter.c
        codec/http2/connection.c
        codec/http2/message.c
        codec/http2/negotiate.c
        codec/http2/session.c
        codec/http2/stream.c)
else()
    list(APPEND EDDY_LAYER_SOURCES codec/http2/http2_none.c)
endif()
