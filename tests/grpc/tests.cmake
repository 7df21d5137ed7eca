# gRPC interop peers (#31): real gRPC implementations as servers and clients for eddy's gRPC
# (tests/grpc/interop.sh says how they run and how eddy's programs plug in as cmd: kinds).
# Here the peers are checked against each other: grpc.peers[CLIENT->SERVER] runs CLIENT's 14
# interop cases (and health_check) against SERVER, in plaintext and over TLS. Python (grpcio)
# and Node (@grpc/grpc-js) always; C++ (gRPC C++, tests/grpc/cpp) where tests/grpc/cpp/build.cmake
# found it. Each pair is a few seconds. The peers test no eddy code, so the sanitizer trees
# do not run them again; interop.sh skips (77) a peer whose runtime is missing.
if(EDDY_GRPC_CPP)
    foreach(prog interop_server interop_client)
        add_executable(grpc_${prog} ${CMAKE_CURRENT_SOURCE_DIR}/grpc/cpp/${prog}.cc)
        target_link_libraries(grpc_${prog} PRIVATE eddy_grpc_testproto)
        target_include_directories(grpc_${prog} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/grpc/cpp)
        target_compile_options(grpc_${prog} PRIVATE ${EDDY_GRPC_CXX_WARNINGS})
        set_target_properties(grpc_${prog} PROPERTIES OUTPUT_NAME ${prog}
            RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/grpc)
    endforeach()
endif()

if(NOT EDDY_SANITIZE)
    set(grpc_pairs "python->node" "node->python")
    if(EDDY_GRPC_CPP)
        list(APPEND grpc_pairs "python->cpp" "cpp->python" "node->cpp" "cpp->node")
    endif()
    foreach(pair ${grpc_pairs})
        string(REPLACE "->" ";" ends "${pair}")
        list(GET ends 0 client)
        list(GET ends 1 server)
        set(name "grpc.peers[${pair}]")
        add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/grpc/interop.sh
            pair ${server} ${client} --cases all,health_check)
        set(dir ${CMAKE_CURRENT_BINARY_DIR}/grpc)
        set_tests_properties(${name} PROPERTIES LABELS grpc TIMEOUT 150 SKIP_RETURN_CODE 77
            ENVIRONMENT "GRPC_WORK=${dir};GRPC_CPP_BIN=${dir}")
        if(server STREQUAL "cpp" OR client STREQUAL "cpp")
            set_tests_properties(${name} PROPERTIES REQUIRED_FILES
                "$<TARGET_FILE:grpc_interop_server>;$<TARGET_FILE:grpc_interop_client>")
        endif()
    endforeach()
endif()
# bench/grpc, briefly (SMOKE=1): two rounds of a second of unary 16 x 100, eddy-grpc-server
# and the C++ server under each load client, every status checked.
if(TARGET bench_grpc_cpp_server AND TARGET bench_grpc_cpp_load AND TARGET eddy-grpc-server)
    add_test(NAME bench.grpc_smoke COMMAND ${CMAKE_COMMAND} -E env SMOKE=1
        bash ${PROJECT_SOURCE_DIR}/bench/grpc/run.sh ${CMAKE_BINARY_DIR} --no-pin)
    set_tests_properties(bench.grpc_smoke PROPERTIES TIMEOUT 120 LABELS "bench;grpc"
        REQUIRED_FILES "$<TARGET_FILE:bench_grpc_cpp_server>;$<TARGET_FILE:bench_grpc_cpp_load>")
endif()
