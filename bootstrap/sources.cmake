# The bootstraps (Netty's Bootstrap and ServerBootstrap) and the client channel pool.
list(APPEND EDDY_LAYER_SOURCES bootstrap/bootstrap.c bootstrap/server_bootstrap.c bootstrap/fanout.c
    bootstrap/channel_pool.c bootstrap/channel_pool_map.c)
# The resolver's front, and its backend (CMake's EDDY_RESOLVER: docs/resolver.md).
list(APPEND EDDY_LAYER_SOURCES bootstrap/resolver.c)
if(EDDY_HAVE_CARES)
    list(APPEND EDDY_LAYER_SOURCES bootstrap/resolver_cares.c)
else()
    list(APPEND EDDY_LAYER_SOURCES bootstrap/resolver_gai.c)
endif()
