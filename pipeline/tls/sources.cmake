# TLS with OpenSSL (include/eddy/tls.h): contexts, the handler, self-signed certificates.
list(APPEND EDDY_LAYER_SOURCES
    pipeline/tls/tls_context.c
    pipeline/tls/tls_handler.c
    pipeline/tls/tls_selfsigned.c)
