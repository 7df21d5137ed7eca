# The DNS message library (pipeline/codec/dns/): zones, answers, hostile packets, answering
# from tests/pipeline/dns_test.zone.
eddy_add_test(pipeline dns)
target_compile_definitions(pipeline_test_dns PRIVATE
    DNS_TEST_ZONE="${CMAKE_CURRENT_LIST_DIR}/dns_test.zone")
