# The loop, timer, future and group tests run once per poller built here (STYLE.md, Tests):
# eddy_add_test() registers the epoll run, and a plain add_test() reuses the same program with
# EDDY_POLLER=poll. The stress program is labelled concurrency, so `make test` also runs it
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
    if(EDDY_HAVE_EPOLL)
        eddy_add_test(reactor ${unit} NAME ${L_NAME} TIMEOUT ${L_TIMEOUT} ${labels}
            ENVIRONMENT EDDY_POLLER=epoll)
    else()
        eddy_add_test(reactor ${unit} NAME ${L_NAME} TIMEOUT ${L_TIMEOUT} ${labels})
    endif()
    add_test(NAME "reactor.${shown}[poll]" COMMAND reactor_${L_NAME})
    set_tests_properties("reactor.${shown}[poll]" PROPERTIES
        ENVIRONMENT EDDY_POLLER=poll TIMEOUT ${L_TIMEOUT})
    if(L_LABELS)
        set_tests_properties("reactor.${shown}[poll]" PROPERTIES LABELS "${L_LABELS}")
    endif()
endfunction()

eddy_add_loop_test(loop)
eddy_add_loop_test(timer)
eddy_add_loop_test(future)
eddy_add_loop_test(group)
eddy_add_loop_test(stress_loop NAME stress_loop LABELS concurrency TIMEOUT 120)
# Stop signals (reactor/signal.c): blocked before the loops start, waited for on the main thread.
eddy_add_test(reactor signal TIMEOUT 30)
