# The pipeline core and the embedded channel (pipeline/pipeline.c, pipeline/embedded.c).
eddy_add_test(pipeline pipeline)
# Handler-scoped timers and tasks (pipeline/scoped.c), on the embedded channel.
eddy_add_test(pipeline scoped)
# Stream channels on real loopback sockets, once per poller built here (STYLE.md, Tests).
if(EDDY_HAVE_EPOLL)
    eddy_add_test(pipeline socket TIMEOUT 120 LABELS concurrency ENVIRONMENT EDDY_POLLER=epoll)
else()
    eddy_add_test(pipeline socket TIMEOUT 120 LABELS concurrency)
endif()
add_test(NAME "pipeline.socket[poll]" COMMAND pipeline_test_socket)
set_tests_properties("pipeline.socket[poll]" PROPERTIES ENVIRONMENT EDDY_POLLER=poll TIMEOUT 120)
