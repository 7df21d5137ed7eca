# The RESP codec (codec/resp/) through the embedded channel, with the example
# server's commands (examples/resp_store.c) behind it; and the shared keyspace hammered from
# several threads, labelled concurrency so that the TSan build runs it too.
eddy_add_test(codec resp SOURCES ${PROJECT_SOURCE_DIR}/examples/resp_store.c)
eddy_add_test(codec resp_stress NAME stress_resp LABELS concurrency TIMEOUT 120
    SOURCES ${PROJECT_SOURCE_DIR}/examples/resp_store.c)
