# Install eddy into a temporary prefix, and a library-only build as Debian lays it out (/usr,
# lib/<triplet>) into a staging directory, and build a consumer against each with CMake's
# package and with pkg-config. Not run in sanitizer builds (the consumer is built without
# them). The Debian-style build is the build-type matrix's gcc Release cell
# (tests/buildtypes/tests.cmake), where that runs; elsewhere the script makes its own.
if(NOT EDDY_SANITIZE)
    set(debian_tree ${CMAKE_CURRENT_BINARY_DIR}/buildtypes/gcc-Release)
endif()
add_test(NAME install.consumer
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/run.sh ${PROJECT_BINARY_DIR}
            ${PROJECT_SOURCE_DIR} ${debian_tree})
set_tests_properties(install.consumer PROPERTIES LABELS install TIMEOUT 300)
if(NOT EDDY_SANITIZE)
    set_tests_properties(install.consumer PROPERTIES FIXTURES_REQUIRED buildtypes_debian)
endif()
