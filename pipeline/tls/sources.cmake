# TLS with OpenSSL (include/eddy/tls.h): contexts, the handler, self-signed certificates; in a
# build without it (EDDY_WITH_TLS=OFF), the same API refusing (tls_none.c).
if(EDDY_HAVE_TLS)
    list(APPEND EDDY_LAYER_SOURCES
        pipeline/tls/tls_context.c
        pipeline/tls/tls_handler.c
        pipeline/tls/tls_selfsigned.c)
else()
    list(APPEND EDDY_LAYER_SOURCES pipeline/tls/tls_none.c)
endif()
