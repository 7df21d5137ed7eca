# The build-type matrix: every common build type with gcc and with clang, warnings as errors
# (tests/buildtypes/run.sh), a test per cell, in the normal tree only. What a test tree
# already builds is not built again: gcc Debug is the normal tree itself (it builds the
# library, examples and benchmarks with -DEDDY_WERROR=ON) and gcc RelWithDebInfo the TSan
# tree's type (the library and examples, -DEDDY_WERROR=ON), so they have no cell. Every other
# cell builds the library and the header check; the Release cells also the examples and the
# benchmarks (the optimiser's warnings in them; the front end's are gcc's in the normal tree
# and clang's in its Release cell). clang Debug builds the library without its optional
# components (TLS, zlib, nghttp2, brotli, zstd), as a user who wants only loops and channels does. The gcc Release cell is laid out as Debian packages the
# library and kept for the install test (buildtypes_debian fixture).
# A cell is one compiler at one job, a whole core (PROCESSORS, tests/CMakeLists.txt).
if(NOT EDDY_SANITIZE)
    set(matrix
        "gcc Release debian" "gcc MinSizeRel library"
        "clang Debug minimal" "clang Release all" "clang RelWithDebInfo library"
        "clang MinSizeRel library")
    foreach(cell ${matrix})
        string(REPLACE " " ";" cell "${cell}")
        list(GET cell 0 cc)
        list(GET cell 1 type)
        list(GET cell 2 scope)
        set(name buildtypes.${cc}_${type})
        add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/buildtypes/run.sh
            ${PROJECT_SOURCE_DIR} ${cc} ${type} ${scope}
            ${CMAKE_CURRENT_BINARY_DIR}/buildtypes/${cc}-${type})
        set_tests_properties(${name} PROPERTIES LABELS buildtypes TIMEOUT 900
            SKIP_RETURN_CODE 77)
        if(scope STREQUAL "debian")
            set_tests_properties(${name} PROPERTIES FIXTURES_SETUP buildtypes_debian)
        endif()
    endforeach()
endif()
