# The bootstraps on real loopback sockets, once per poller built here (docs/style.md, "Tests").
eddy_add_test(bootstrap bootstrap TIMEOUT 120 LABELS concurrency)
eddy_add_poller_runs(bootstrap.bootstrap COMMAND bootstrap_test_bootstrap TIMEOUT 120
    URING_LABELS concurrency)
