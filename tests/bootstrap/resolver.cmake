# The resolver and Happy Eyeballs connects (bootstrap/resolver*.c, bootstrap/bootstrap.c)
# against a DNS responder inside the test, and against eddy-dns-server when it is built.
# With EDDY_RESOLVER=getaddrinfo the cases that need a server of the test's skip.
set(resolver_env "")
if(TARGET eddy-dns-server)
    set(resolver_env "EDDY_DNS_SERVER=$<TARGET_FILE:eddy-dns-server>")
endif()
eddy_add_test(bootstrap resolver TIMEOUT 120 LABELS concurrency ENVIRONMENT ${resolver_env})
eddy_add_poller_runs(bootstrap.resolver COMMAND bootstrap_test_resolver TIMEOUT 120
    URING_LABELS concurrency)
