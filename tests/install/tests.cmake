# Install eddy into a temporary prefix and build a consumer against it with CMake's package
# and with pkg-config. Not run in sanitizer builds (the consumer is built without them).
add_test(NAME install.consumer
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/run.sh ${PROJECT_BINARY_DIR}
            ${PROJECT_SOURCE_DIR})
set_tests_properties(install.consumer PROPERTIES LABELS install TIMEOUT 300)
