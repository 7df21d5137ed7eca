# The HTTP/1.1 codec (codec/http/) through the embedded channel.
eddy_add_test(codec http)
# The HTTP/1.1 client (codec, response aggregator, exchange) through the embedded channel, and
# one exchange with an eddy HTTP server over loopback.
eddy_add_test(codec http_client TIMEOUT 120 LABELS concurrency)
# The static file handler (codec/http/files.c, files_meta.c): its decisions as functions, and
# the handler on the embedded channel.
eddy_add_test(codec files)
