# The ready-made handlers (pipeline/handler/) through the embedded channel.
eddy_add_test(pipeline handler)
# The chunked writer (pipeline/handler/chunked.c): the embedded channel, then a slow reader
# of a 64 MiB input on loopback with what was generated bounded, on every poller.
eddy_add_test(pipeline chunked TIMEOUT 60)
eddy_add_poller_runs(pipeline.chunked COMMAND pipeline_test_chunked TIMEOUT 60)
