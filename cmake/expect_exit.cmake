cmake_minimum_required(VERSION 3.24)
# Runs BIN with ARGS and checks its exit status (EXPECT_EXIT) and its combined output (EXPECT_REGEX).
# Used by gpu100_add_cli_test: cmake -D BIN=... -D ARGS=a|b -D EXPECT_EXIT=2 -D EXPECT_REGEX=... -P this
string(REPLACE "|" ";" ARGS "${ARGS}")
execute_process(COMMAND ${BIN} ${ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
set(all "${out}${err}")
message(STATUS "command: ${BIN} ${ARGS}\nexit status: ${rc}\noutput:\n${all}")
# EXPECT_EXIT may list several accepted statuses, e.g. "0;3" (a run on a GPU, or no GPU).
string(REPLACE "," ";" accepted "${EXPECT_EXIT}")
if(NOT rc IN_LIST accepted)
  message(FATAL_ERROR "expected exit status ${EXPECT_EXIT}, got ${rc}")
endif()
if(EXPECT_REGEX AND NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match the regular expression: ${EXPECT_REGEX}")
endif()
