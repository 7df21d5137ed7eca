# The WebSocket codec (codec/ws/) through embedded channels: frames, the protocol
# handler, UTF-8, close codes, permessage-deflate, both handshakes, and a seeded mutation run.
# It checks against OpenSSL's SHA-1 and zlib itself: not in a build without them.
if(EDDY_HAVE_TLS AND EDDY_HAVE_ZLIB)
    eddy_add_test(codec ws TIMEOUT 120)
    target_link_libraries(codec_test_ws PRIVATE OpenSSL::Crypto ZLIB::ZLIB)
endif()
