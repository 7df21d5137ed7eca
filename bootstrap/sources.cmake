# The bootstraps (Netty's Bootstrap and ServerBootstrap) and the client channel pool.
list(APPEND EDDY_SOURCES bootstrap/bootstrap.c bootstrap/server_bootstrap.c
    bootstrap/channel_pool.c bootstrap/channel_pool_map.c)
