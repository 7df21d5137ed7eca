# Channel pools (bootstrap/channel_pool.c) against an echo server on loopback sockets.
eddy_add_test(bootstrap channel_pool TIMEOUT 120 LABELS concurrency)
