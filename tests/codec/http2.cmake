# HTTP/2 (codec/http2/) through the embedded channel, against an nghttp2 client session in the
# test and frames written by hand. Only with nghttp2 (EDDY_WITH_NGHTTP2).
if(EDDY_HAVE_NGHTTP2)
    eddy_add_test(codec http2)
    target_link_libraries(codec_test_http2 PRIVATE PkgConfig::NGHTTP2)
endif()
