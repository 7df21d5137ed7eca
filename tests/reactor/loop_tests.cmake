# The loop, timer, future and group tests run once per poller built here (docs/style.md, "Tests"):
# eddy_add_test() registers a run that eddy_add_poller_runs() pins to epoll, and the same program
# runs again with EDDY_POLLER=poll and io_uring. The stress program is labelled concurrency, so `make test` also runs it
# under ThreadSanitizer.
function(eddy_add_loop_test unit)
    cmake_parse_arguments(L "" "TIMEOUT;NAME" "LABELS" ${ARGN})
    if(NOT L_TIMEOUT)
        set(L_TIMEOUT 60)
    endif()
    if(NOT L_NAME)
        set(L_NAME test_${unit})
    endif()
    set(labels)
    if(L_LABELS)
        set(labels LABELS ${L_LABELS})
    endif()
    string(REPLACE "test_" "" shown ${L_NAME})
    eddy_add_test(reactor ${unit} NAME ${L_NAME} TIMEOUT ${L_TIMEOUT} ${labels})
    eddy_add_poller_runs("reactor.${shown}" COMMAND reactor_${L_NAME} TIMEOUT ${L_TIMEOUT}
        LABELS ${L_LABELS})
endfunction()

eddy_add_loop_test(loop)
# The timer test schedules and cancels a million timers: it computes for seconds (see the
# end of tests/CMakeLists.txt, which gives it a whole core).
eddy_add_loop_test(timer TIMEOUT 150)
eddy_add_loop_test(future)
eddy_add_loop_test(group)
eddy_add_loop_test(stress_loop NAME stress_loop LABELS concurrency TIMEOUT 120)
# Stop signals (reactor/signal.c): blocked before the loops start, waited for on the main thread.
eddy_add_test(reactor signal TIMEOUT 30)
