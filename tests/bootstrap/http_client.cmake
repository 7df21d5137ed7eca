# The HTTP client object (bootstrap/http_client.c) against an eddy HTTP server on loopback.
eddy_add_test(bootstrap http_client TIMEOUT 120 LABELS concurrency)
