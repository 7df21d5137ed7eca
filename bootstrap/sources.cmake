# The bootstraps (Netty's Bootstrap and ServerBootstrap).
list(APPEND EDDY_SOURCES bootstrap/bootstrap.c bootstrap/server_bootstrap.c)
