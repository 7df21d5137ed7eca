# The C++ gRPC peers' common part, included by the top CMakeLists.txt: where a C++ compiler,
# gRPC C++ and protobuf are found (pkg-config grpc++ protobuf; Debian: g++, libgrpc++-dev,
# libprotobuf-dev, protobuf-compiler, protobuf-compiler-grpc, grpc-proto), C++ is enabled and
# the messages and stubs of grpc-proto's grpc/testing/test.proto are generated with protoc and
# grpc_cpp_plugin into eddy_grpc_testproto, which tests/grpc (the interop peers) and bench/grpc
# (the baselines) link. Only in a tree built with the tests and without sanitizers (the
# sanitizer trees skip the C++ peers); EDDY_GRPC_CPP says whether it is there.
option(EDDY_GRPC_PEERS
    "Build the C++ gRPC interop peers and benchmark baselines when gRPC C++ is found" ON)
set(EDDY_GRPC_CPP OFF)
if(EDDY_GRPC_PEERS AND EDDY_BUILD_TESTS AND NOT EDDY_SANITIZE)
    include(CheckLanguage)
    check_language(CXX)
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
        pkg_check_modules(EDDY_GRPCPP QUIET IMPORTED_TARGET grpc++ protobuf)
    endif()
    find_program(EDDY_PROTOC protoc)
    find_program(EDDY_GRPC_CPP_PLUGIN grpc_cpp_plugin)
    set(EDDY_GRPC_PROTO_DIR /usr/share/grpc-proto CACHE PATH "grpc-proto's .proto files")
    set(missing)
    if(NOT CMAKE_CXX_COMPILER)
        list(APPEND missing "a C++ compiler: g++")
    endif()
    if(NOT EDDY_GRPCPP_FOUND)
        list(APPEND missing "pkg-config grpc++ and protobuf: libgrpc++-dev, libprotobuf-dev")
    endif()
    if(NOT EDDY_PROTOC)
        list(APPEND missing "protoc: protobuf-compiler")
    endif()
    if(NOT EDDY_GRPC_CPP_PLUGIN)
        list(APPEND missing "grpc_cpp_plugin: protobuf-compiler-grpc")
    endif()
    if(NOT EXISTS ${EDDY_GRPC_PROTO_DIR}/grpc/testing/test.proto)
        list(APPEND missing "grpc/testing/test.proto: grpc-proto")
    endif()
    if(missing)
        string(REPLACE ";" "; " missing "${missing}")
        message(STATUS "gRPC C++ peers not built; missing ${missing}")
    else()
        enable_language(CXX)
        set(EDDY_GRPC_CPP ON)
        set(gen ${CMAKE_CURRENT_BINARY_DIR}/grpc-gen)
        set(protos test messages empty)
        set(outputs)
        set(inputs)
        foreach(p ${protos})
            list(APPEND inputs ${EDDY_GRPC_PROTO_DIR}/grpc/testing/${p}.proto)
            foreach(ext pb.h pb.cc grpc.pb.h grpc.pb.cc)
                list(APPEND outputs ${gen}/grpc/testing/${p}.${ext})
            endforeach()
        endforeach()
        add_custom_command(OUTPUT ${outputs}
            COMMAND ${CMAKE_COMMAND} -E make_directory ${gen}
            COMMAND ${EDDY_PROTOC} -I${EDDY_GRPC_PROTO_DIR} --cpp_out=${gen} --grpc_out=${gen}
                --plugin=protoc-gen-grpc=${EDDY_GRPC_CPP_PLUGIN} ${inputs}
            DEPENDS ${inputs}
            COMMENT "Generating grpc/testing C++ messages and stubs (grpc-proto)")
        list(FILTER outputs INCLUDE REGEX "\\.cc$")
        add_library(eddy_grpc_testproto STATIC ${outputs})
        target_include_directories(eddy_grpc_testproto PUBLIC ${gen})
        target_link_libraries(eddy_grpc_testproto PUBLIC PkgConfig::EDDY_GRPCPP)
        # Debian's abseil, under gRPC and protobuf, is built as C++17.
        target_compile_features(eddy_grpc_testproto PUBLIC cxx_std_17)
        set(EDDY_GRPC_CXX_WARNINGS -Wall -Wextra)
        if(EDDY_WERROR)
            list(APPEND EDDY_GRPC_CXX_WARNINGS -Werror)
        endif()
    endif()
endif()
