# The gRPC client (codec/grpc/channel.c, client.c) against eddy's own gRPC server on loopback,
# on each poller; and against a real gRPC peer, Python's grpcio (skipped without it). Only
# with nghttp2.
if(EDDY_HAVE_NGHTTP2)
    eddy_add_test(codec grpc_client TIMEOUT 120 LABELS concurrency)
    eddy_add_poller_runs(codec.grpc_client COMMAND codec_test_grpc_client TIMEOUT 120
        URING_LABELS concurrency)
endif()
# Against Python's grpcio (tests/codec/grpc_peer.py, which the test starts; 77: no grpcio).
if(EDDY_HAVE_NGHTTP2 AND EDDY_PYTHON3)
    eddy_add_test(codec grpc_client_peer TIMEOUT 120)
    target_compile_definitions(codec_test_grpc_client_peer PRIVATE
        PEER_SCRIPT="${CMAKE_CURRENT_SOURCE_DIR}/codec/grpc_peer.py")
    set_tests_properties(codec.grpc_client_peer PROPERTIES SKIP_RETURN_CODE 77)
endif()
