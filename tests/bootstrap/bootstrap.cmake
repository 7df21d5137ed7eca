# The bootstraps on real loopback sockets, once per poller built here (STYLE.md, Tests).
if(EDDY_HAVE_EPOLL)
    eddy_add_test(bootstrap bootstrap TIMEOUT 120 LABELS concurrency ENVIRONMENT EDDY_POLLER=epoll)
else()
    eddy_add_test(bootstrap bootstrap TIMEOUT 120 LABELS concurrency)
endif()
add_test(NAME "bootstrap.bootstrap[poll]" COMMAND bootstrap_test_bootstrap)
set_tests_properties("bootstrap.bootstrap[poll]" PROPERTIES ENVIRONMENT EDDY_POLLER=poll
    TIMEOUT 120)
