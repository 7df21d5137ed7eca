# Install eddy into a temporary prefix, and a library-only build as Debian lays it out (/usr,
# lib/<triplet>) into a staging directory, and build a consumer against each with CMake's
# package and with pkg-config. Not run in sanitizer builds (the consumer is built without
# them). About 10 s: most of it is the second build.
add_test(NAME install.consumer
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/run.sh ${PROJECT_BINARY_DIR}
            ${PROJECT_SOURCE_DIR})
set_tests_properties(install.consumer PROPERTIES LABELS install TIMEOUT 300)
