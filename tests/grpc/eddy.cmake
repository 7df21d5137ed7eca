# eddy's gRPC against real gRPC implementations (#31): gRPC's 14 interop cases (and
# health_check), in plaintext and over TLS, by tests/grpc/interop.sh.
#   grpc.interop[CLIENT->eddy]   CLIENT's interop client against eddy-grpc-server: python
#                                (grpcio), node (grpc-js), cpp (gRPC C++, where built; the
#                                sanitizer trees take the normal tree's binaries, as interop.sh
#                                finds them); and python against --offload 2 (methods on a
#                                carrier), which the TSan tree runs too (label concurrency)
#   grpc.interop[eddy->SERVER]   eddy-grpc-client against SERVER's interop server
#   examples.grpc_ping           the keepalive policy (tests/examples/grpc_ping.py)
#   examples.greeter             eddy-greeter-server answers grpcio's call
# In every tree: what is tested is eddy's server and client, under the sanitizers too.
if(TARGET eddy-grpc-server)
    set(grpc_interop ${CMAKE_CURRENT_SOURCE_DIR}/grpc/interop.sh)
    set(grpc_env "GRPC_WORK=${CMAKE_CURRENT_BINARY_DIR}/grpc")
    if(NOT EDDY_SANITIZE)
        string(APPEND grpc_env ";GRPC_CPP_BIN=${CMAKE_CURRENT_BINARY_DIR}/grpc")
    endif()
    set(grpc_interop_runs "python->eddy" "node->eddy" "cpp->eddy" "python->eddy-offload")
    if(TARGET eddy-grpc-client)
        list(APPEND grpc_interop_runs "eddy->python" "eddy->node" "eddy->cpp")
    endif()
    foreach(run ${grpc_interop_runs})
        string(REPLACE "->" ";" ends "${run}")
        list(GET ends 0 client)
        list(GET ends 1 server)
        set(labels grpc)
        if(server STREQUAL "eddy")
            set(server "cmd:$<TARGET_FILE:eddy-grpc-server>")
        elseif(server STREQUAL "eddy-offload")
            set(server "cmd:$<TARGET_FILE:eddy-grpc-server> --offload 2")
            set(labels grpc concurrency)
        endif()
        if(client STREQUAL "eddy")
            set(client "cmd:$<TARGET_FILE:eddy-grpc-client>")
        endif()
        set(name "grpc.interop[${run}]")
        add_test(NAME ${name} COMMAND bash ${grpc_interop} pair ${server} ${client}
            --cases all,health_check)
        set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 180
            SKIP_RETURN_CODE 77 ENVIRONMENT "${grpc_env}")
    endforeach()
    add_test(NAME examples.grpc_ping COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/grpc/run_py.sh
        $<TARGET_FILE:eddy-grpc-server> ${CMAKE_CURRENT_SOURCE_DIR}/examples/grpc_ping.py)
    add_test(NAME examples.greeter COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/grpc/run_py.sh
        "$<TARGET_FILE:eddy-greeter-server> 0" ${CMAKE_CURRENT_SOURCE_DIR}/grpc/greeter.py)
    set_tests_properties(examples.grpc_ping examples.greeter PROPERTIES LABELS grpc TIMEOUT 60
        SKIP_RETURN_CODE 77)
endif()
