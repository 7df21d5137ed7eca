# The HTTP/2 client (codec/http2/client.c, client_adapter.c) against eddy's server connection
# through two embedded channels, and eddy_http_client_t over HTTP/2 on loopback (h2c by prior
# knowledge, h2 by ALPN). Not in a build without nghttp2.
if(EDDY_HAVE_NGHTTP2)
    eddy_add_test(codec http2_client TIMEOUT 120 LABELS concurrency)
endif()
