# The content codings (codec/http/coding*.c, compressor.c, decompressor.c) through the
# embedded channel; their output read back by gzip, brotli, zstd and Python (skipped without).
if(EDDY_HAVE_ZLIB AND EDDY_HAVE_BROTLI AND EDDY_HAVE_ZSTD)
    eddy_add_test(codec http_coding TIMEOUT 300)
endif()
