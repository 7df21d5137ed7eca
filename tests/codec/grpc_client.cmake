# The gRPC client (codec/grpc/channel.c, client.c) against eddy's own gRPC server on loopback,
# on each poller; and against a real gRPC peer, Python's grpcio (skipped without it). Only
# with nghttp2.
if(EDDY_HAVE_NGHTTP2)
    eddy_add_test(codec grpc_client TIMEOUT 120 LABELS concurrency)
    eddy_add_poller_runs(codec.grpc_client COMMAND codec_test_grpc_client TIMEOUT 120
        URING_LABELS concurrency)
endif()
