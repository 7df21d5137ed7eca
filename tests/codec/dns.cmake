# The DNS message library (codec/dns/): zones, answers, hostile packets, answering
# from tests/codec/dns_test.zone.
eddy_add_test(codec dns)
target_compile_definitions(codec_test_dns PRIVATE
    DNS_TEST_ZONE="${CMAKE_CURRENT_LIST_DIR}/dns_test.zone")
