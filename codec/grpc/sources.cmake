# gRPC (include/eddy/grpc.h) on the HTTP/2 codec's streams: the call both sides share
# (call.c), the wire's formats (wire.c, metadata.c), the server (server.c, health.c) and the
# client (channel.c: its connections; client.c: its calls). Without nghttp2 there is no
# gRPC: grpc_none.c refuses (the wire's formats still build: eddy_grpc_status_name() works).
if(EDDY_HAVE_NGHTTP2)
    list(APPEND EDDY_LAYER_SOURCES
        codec/grpc/call.c
        codec/grpc/channel.c
        codec/grpc/client.c
        codec/grpc/health.c
        codec/grpc/metadata.c
        codec/grpc/offload.c
        codec/grpc/server.c
        codec/grpc/wire.c)
else()
    list(APPEND EDDY_LAYER_SOURCES codec/grpc/grpc_none.c codec/grpc/wire.c)
endif()
