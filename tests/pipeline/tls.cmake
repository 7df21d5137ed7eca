# TLS (pipeline/tls/) end to end on loopback: eddy to eddy, and against the openssl tool. The
# certificates are made at test time by a fixture into the build directory.
set(EDDY_TLS_CERT_DIR ${CMAKE_CURRENT_BINARY_DIR}/tls-certs)
add_test(NAME pipeline.tls_certs
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/pipeline/tls_certs.sh ${EDDY_TLS_CERT_DIR})
set_tests_properties(pipeline.tls_certs PROPERTIES FIXTURES_SETUP tls_certs TIMEOUT 30)
if(NOT EDDY_HAVE_TLS)
    return() # built without TLS (EDDY_WITH_TLS=OFF): the handler's tests have nothing to test
endif()
# Labelled concurrency: client and server loops on their own threads, a shared session
# cache; the TSan build runs it too.
eddy_add_test(pipeline tls TIMEOUT 90 LABELS concurrency)
target_compile_definitions(pipeline_test_tls PRIVATE EDDY_TLS_CERTS="${EDDY_TLS_CERT_DIR}")
target_link_libraries(pipeline_test_tls PRIVATE OpenSSL::SSL)
set_tests_properties(pipeline.tls PROPERTIES FIXTURES_REQUIRED tls_certs)
eddy_add_poller_runs(pipeline.tls COMMAND pipeline_test_tls TIMEOUT 90
    URING_LABELS concurrency FIXTURES tls_certs)
# The echo example's TLS flags, end to end.
if(TARGET eddy-echo-server AND TARGET eddy-echo-client)
    add_test(NAME examples.echo_tls COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/pipeline/tls_echo_example.sh
        $<TARGET_FILE:eddy-echo-server> $<TARGET_FILE:eddy-echo-client> ${EDDY_TLS_CERT_DIR})
    set_tests_properties(examples.echo_tls PROPERTIES FIXTURES_REQUIRED tls_certs TIMEOUT 60)
endif()
