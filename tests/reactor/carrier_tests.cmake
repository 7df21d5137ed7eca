# The carrier (reactor/carrier.c): unit tests, and a stress run labelled concurrency so that
# the ThreadSanitizer build runs it too.
eddy_add_test(reactor carrier)
eddy_add_test(reactor carrier_stress NAME stress_carrier LABELS concurrency TIMEOUT 120)
