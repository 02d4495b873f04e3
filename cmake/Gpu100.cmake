# Helpers shared by every day's CMakeLists.txt.

option(GPU100_WERROR "Treat host and device compiler warnings as errors" OFF)

# The GPU tests hold one lock, so that `ctest -j N` runs the CPU tests side by side but never two
# GPU tests at once (they would share the GPU's memory).
function(gpu100_test_lock_properties out label)
  if(label STREQUAL "gpu")
    set(${out} RESOURCE_LOCK gpu PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# Per-target flags, set with generator expressions (never directory-wide):
#  - -lineinfo always, so compute-sanitizer and ncu can map SASS back to source lines;
#  - -G (device debug) only in Debug builds;
#  - warnings on for host code and for the host side of .cu files.
function(gpu100_target_flags target)
  set(host_warnings -Wall -Wextra -Wshadow -Wno-unknown-pragmas)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${host_warnings}>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${GPU100_WERROR}>>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xcompiler=-Wall,-Wextra,-Wno-unknown-pragmas>
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${GPU100_WERROR}>>:-Werror=all-warnings>
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<CONFIG:Debug>>:-G>)
endfunction()

# How ctest tells a skipped Catch2 test case from a failed one. Every skip goes through
# GPU100_SKIP (common/catch.hpp), which prints "GPU100_SKIP: <reason>": the regular expression.
# Catch2 3 also ends a process whose test cases were all skipped with status 4 (its own SKIP
# macro), which ctest then takes as Skipped too. Catch2 2.13 has no skip, and there status 4
# means four failed assertions, so the status joins the rule with Catch2 3 only.
# common.ctest_reports_skips checks the rule with ctest itself.
set(GPU100_CATCH_SKIP_PROPERTIES SKIP_REGULAR_EXPRESSION "GPU100_SKIP")
if(GPU100_CATCH2_MAJOR EQUAL 3)
  list(APPEND GPU100_CATCH_SKIP_PROPERTIES SKIP_RETURN_CODE 4)
endif()

# gpu100_add_catch_test(<target> PREFIX <dayNN> LABEL <cpu|gpu> SOURCES ... [LIBS ...])
# One executable per label, one ctest test per TEST_CASE, named "<prefix>.<test case name>", so that
# `ctest -R day02` selects exactly that day and `ctest -L cpu` the tests that need no GPU.
# A GPU test on a machine with no CUDA device skips (GPU100_SKIP), which ctest reports as Skipped.
function(gpu100_add_catch_test target)
  cmake_parse_arguments(arg "" "PREFIX;LABEL" "SOURCES;LIBS" ${ARGN})
  add_executable(${target} ${arg_SOURCES})
  target_link_libraries(${target} PRIVATE common::test ${arg_LIBS})
  gpu100_target_flags(${target})
  gpu100_test_lock_properties(lock "${arg_LABEL}")
  catch_discover_tests(${target}
    TEST_PREFIX "${arg_PREFIX}."
    PROPERTIES LABELS "${arg_LABEL}" ${lock} ${GPU100_CATCH_SKIP_PROPERTIES})
endfunction()

# gpu100_add_cli_test(<name> <target> EXIT <code[,code]> [REGEX <regex>] [LABEL cpu|gpu]
#                     [SKIP_REGEX <regex>] ARGS ...)
# Runs a binary with the given arguments and checks its exit status and that its output matches
# REGEX. Argument errors are reported before any GPU call, so these tests run without a GPU.
function(gpu100_add_cli_test name target)
  cmake_parse_arguments(arg "" "EXIT;REGEX;LABEL;SKIP_REGEX" "ARGS" ${ARGN})
  if(NOT arg_LABEL)
    set(arg_LABEL cpu)
  endif()
  string(JOIN "|" args_joined ${arg_ARGS})  # a list can't pass through -D; expect_exit splits it
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -D "BIN=$<TARGET_FILE:${target}>" -D "ARGS=${args_joined}"
                   -D "EXPECT_EXIT=${arg_EXIT}" -D "EXPECT_REGEX=${arg_REGEX}"
                   -P ${PROJECT_SOURCE_DIR}/cmake/expect_exit.cmake)
  gpu100_test_lock_properties(lock "${arg_LABEL}")
  set_tests_properties(${name} PROPERTIES LABELS "${arg_LABEL}" ${lock})
  if(arg_SKIP_REGEX)
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "${arg_SKIP_REGEX}")
  endif()
endfunction()

# gpu100_add_cli_checks(<prefix> <target> LIST_REGEX <regex> BAD <name>:<arg>[:<arg>...] ...)
# The command-line checks every day has: each BAD case (e.g. n_zero:--n:0) must print "error:" and
# exit 2 before any GPU call; --help must print the usage and --list a line matching LIST_REGEX,
# both with exit 0. Tests are named <prefix>.cli.rejects_<name>, <prefix>.cli.help, ...list.
function(gpu100_add_cli_checks prefix target)
  cmake_parse_arguments(arg "" "LIST_REGEX" "BAD" ${ARGN})
  foreach(case IN LISTS arg_BAD)
    string(REPLACE ":" ";" parts "${case}")
    list(POP_FRONT parts name)
    gpu100_add_cli_test(${prefix}.cli.rejects_${name} ${target} EXIT 2 REGEX "error:" ARGS ${parts})
  endforeach()
  gpu100_add_cli_test(${prefix}.cli.help ${target} EXIT 0 REGEX "usage: ${target}" ARGS --help)
  gpu100_add_cli_test(${prefix}.cli.list ${target} EXIT 0 REGEX "${arg_LIST_REGEX}" ARGS --list)
endfunction()

# gpu100_add_smoke_run(<test name> <target> ARGS ...)
# A small end-to-end run of a day's binary: it must end with "verdict: PASS" on a GPU; on a machine
# without one, or with a GPU this build holds no code for, it exits 3 with "no CUDA-capable GPU" or
# "this build holds no code for", which ctest reports as Skipped.
function(gpu100_add_smoke_run name target)
  cmake_parse_arguments(arg "" "" "ARGS" ${ARGN})
  set(unusable "no CUDA-capable GPU|this build holds no code for")
  gpu100_add_cli_test(${name} ${target} EXIT 0,3 LABEL gpu
                      REGEX "verdict: PASS|${unusable}" SKIP_REGEX "${unusable}"
                      ARGS ${arg_ARGS})
endfunction()

# gpu100_add_learner_variants(<prefix> BINARY <target> TESTS <target> TEMPLATE <file> LIBS ...)
# A learner's variants: every <day>/mine/*.cu (scripts/new_variant.sh writes one) is compiled
# into the day's binary and its GPU test executable, linked as an object library so that the
# file's start-up registration is always kept. For each file, TEMPLATE (the day's
# mine_test.cpp.in, with @NAME@ the file's stem) becomes test cases named after the variant.
# The glob is re-checked at every build, so a new file needs no edit anywhere else.
function(gpu100_add_learner_variants prefix)
  cmake_parse_arguments(arg "" "BINARY;TESTS;TEMPLATE" "LIBS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/mine/*.cu)
  if(NOT sources)
    return()
  endif()
  add_library(${prefix}_mine OBJECT ${sources})
  target_link_libraries(${prefix}_mine PUBLIC ${arg_LIBS})
  gpu100_target_flags(${prefix}_mine)
  target_link_libraries(${arg_BINARY} PRIVATE ${prefix}_mine)
  target_link_libraries(${arg_TESTS} PRIVATE ${prefix}_mine)
  foreach(src IN LISTS sources)
    get_filename_component(NAME ${src} NAME_WE)
    set(test_src ${CMAKE_CURRENT_BINARY_DIR}/mine_tests/${NAME}_test.cpp)
    configure_file(${arg_TEMPLATE} ${test_src} @ONLY)
    target_sources(${arg_TESTS} PRIVATE ${test_src})
  endforeach()
endfunction()

# gpu100_max_cuda_arch(<var>): the largest architecture number in CMAKE_CUDA_ARCHITECTURES
# ("75-virtual" -> 75, "80;90a" -> 90), or 0 when the list names one by keyword (native, all), whose
# code is known only when the GPU is. For the command-line tests of what a build lacks.
function(gpu100_max_cuda_arch var)
  set(max 0)
  foreach(a IN LISTS CMAKE_CUDA_ARCHITECTURES)
    if(NOT a MATCHES "^([0-9]+)")
      set(max 0)
      break()
    endif()
    if(CMAKE_MATCH_1 GREATER max)
      set(max ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(${var} ${max} PARENT_SCOPE)
endfunction()
