# Every common build type with gcc and with clang, warnings as errors (tests/buildtypes/run.sh).
# In the normal tree only, and alone (RUN_SERIAL): it runs eight builds with two jobs each,
# about 2 minutes on two cores, and would slow the timed tests beside it.
if(NOT EDDY_SANITIZE)
    add_test(NAME buildtypes.gcc_clang
        COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/buildtypes/run.sh ${PROJECT_SOURCE_DIR})
    set_tests_properties(buildtypes.gcc_clang PROPERTIES LABELS buildtypes RUN_SERIAL TRUE
        TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
