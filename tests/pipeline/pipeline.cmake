# The pipeline core and the embedded channel (pipeline/pipeline.c, pipeline/embedded.c).
eddy_add_test(pipeline pipeline)
# Handler-scoped timers and tasks (pipeline/scoped.c), on the embedded channel.
eddy_add_test(pipeline scoped)
# Stream channels on real loopback sockets, once per poller built here (docs/style.md, "Tests").
eddy_add_test(pipeline socket TIMEOUT 120 LABELS concurrency)
eddy_add_poller_runs(pipeline.socket COMMAND pipeline_test_socket TIMEOUT 120
    URING_LABELS concurrency)
# What only the io_uring transport can get wrong, on loops made with small rings.
if(EDDY_HAVE_IO_URING)
    eddy_add_test(pipeline uring TIMEOUT 120 LABELS concurrency)
endif()
# Datagram channels (UDP, Unix datagram) on real sockets, on every poller.
eddy_add_test(pipeline datagram TIMEOUT 120 LABELS concurrency)
eddy_add_poller_runs(pipeline.datagram COMMAND pipeline_test_datagram TIMEOUT 120
    URING_LABELS concurrency)
# Multicast, in a network namespace the test makes (skips where it cannot).
eddy_add_test(pipeline multicast LABELS concurrency)
# Channel groups: broadcast without copies, members that do not keep up.
eddy_add_test(pipeline channel_group LABELS concurrency)
# No silent loss (#28): the hard cap without holes, backpressure per message, errors raised
# and logged once, on real loopback sockets, on every poller.
eddy_add_test(pipeline no_loss TIMEOUT 120 LABELS concurrency)
eddy_add_poller_runs(pipeline.no_loss COMMAND pipeline_test_no_loss TIMEOUT 120
    URING_LABELS concurrency)
# File regions (include/eddy/file.h): the embedded channel and the HTTP encoder, then real
# loopback sockets on every poller (sendfile; io_uring's read and send).
eddy_add_test(pipeline file_region TIMEOUT 60)
eddy_add_poller_runs(pipeline.file_region COMMAND pipeline_test_file_region TIMEOUT 60)
