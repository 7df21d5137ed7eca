# The HTTP client object (codec/http/client.c) against an eddy HTTP server on loopback.
eddy_add_test(codec http_client_object TIMEOUT 120 LABELS concurrency)
