cmake_minimum_required(VERSION 3.24)
# common.ctest_reports_skips: ctest itself judges the probe's test cases (common/tests/
# skip_probe.cpp) under the skip rule every Catch2 test of the project gets
# (GPU100_CATCH_SKIP_PROPERTIES in cmake/Gpu100.cmake). A skipped case must come out Skipped, not
# Failed or Passed, and a failing case must still fail. Then no test source may skip but through
# GPU100_SKIP (common/catch.hpp): Catch2's SKIP called directly prints no line for the rule, and
# under Catch2 2.13 a test case left early passes silently.
#   cmake -D PROBE=<common_skip_probe> -D CTEST=<ctest> -D CATCH2_MAJOR=<2|3> -D PROPS=<a|b|...>
#         -D SOURCE_DIR=<source tree> -D WORK_DIR=<scratch folder> -P check_skip_rule.cmake
string(REPLACE "|" ";" props "${PROPS}")
set(cases "gpu100_skip=probe: skips through GPU100_SKIP=Skipped"
          "passes=probe: passes=Passed" "fails=probe: fails=Failed")
if(CATCH2_MAJOR EQUAL 3)
  list(APPEND cases "catch2_skip=probe: skips through Catch2's own SKIP=Skipped")
endif()

# A test file ctest runs as it runs the project's: add_test and set_tests_properties.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(props_text "")
foreach(p IN LISTS props)
  string(APPEND props_text " [==[${p}]==]")
endforeach()
set(testfile "")
foreach(c IN LISTS cases)
  string(REPLACE "=" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 1 test_case)
  string(APPEND testfile "add_test([==[probe.${name}]==] [==[${PROBE}]==] [==[${test_case}]==])\n")
  string(APPEND testfile "set_tests_properties([==[probe.${name}]==] PROPERTIES${props_text})\n")
endforeach()
file(WRITE "${WORK_DIR}/CTestTestfile.cmake" "${testfile}")
execute_process(COMMAND "${CTEST}" --test-dir "${WORK_DIR}" --output-on-failure
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 60)
message(STATUS "ctest under the rule (${PROPS}); probe.fails is meant to fail; exit ${rc}:\n${out}${err}")

set(bad "")
foreach(c IN LISTS cases)
  string(REPLACE "=" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 2 want)
  string(REGEX MATCH "Test +#[0-9]+: probe\\.${name} [^\n]*" line "${out}")
  if(want STREQUAL "Passed")
    set(ok_regex " Passed")
  else()
    set(ok_regex "\\*\\*\\*${want}")
  endif()
  if(NOT line MATCHES "${ok_regex}")
    string(APPEND bad "  probe.${name}: expected ${want}, ctest said: '${line}'\n")
  endif()
endforeach()

# The test sources: every skip through GPU100_SKIP.
file(GLOB_RECURSE sources LIST_DIRECTORIES false
     "${SOURCE_DIR}/common/*.cpp" "${SOURCE_DIR}/common/*.hpp" "${SOURCE_DIR}/common/*.cu"
     "${SOURCE_DIR}/day*/*.cpp" "${SOURCE_DIR}/day*/*.hpp" "${SOURCE_DIR}/day*/*.cu"
     "${SOURCE_DIR}/day*/*.cuh" "${SOURCE_DIR}/day*/*.in" "${SOURCE_DIR}/capstone*/*.cpp"
     "${SOURCE_DIR}/capstone*/*.hpp" "${SOURCE_DIR}/capstone*/*.cu" "${SOURCE_DIR}/capstone*/*.in")
foreach(src IN LISTS sources)
  if(src MATCHES "common/include/common/catch\\.hpp$|common/tests/skip_probe\\.cpp$")
    continue()
  endif()
  file(STRINGS "${src}" hits REGEX "GPU100_DETAIL_END_SKIPPED|(^|[^A-Z0-9_])SKIP[ \t]*\\(")
  foreach(h IN LISTS hits)
    string(APPEND bad "  ${src}: skips without GPU100_SKIP: ${h}\n")
  endforeach()
endforeach()

if(bad)
  message(FATAL_ERROR "a skip would not reach ctest as Skipped:\n${bad}")
endif()
message(STATUS "every skip reaches ctest as Skipped (Catch2 ${CATCH2_MAJOR}; rule: ${PROPS})")
