# gRPC (codec/grpc/): the wire formats alone; the server and client end to end, and against
# real gRPC peers, are tests/grpc/ and tests/examples/grpc*.sh. Only with nghttp2.
if(EDDY_HAVE_NGHTTP2)
    eddy_add_test(codec grpc_wire)
endif()
