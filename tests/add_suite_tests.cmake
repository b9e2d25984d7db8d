# Included by ctest (TEST_INCLUDE_FILES): one ctest entry per doctest test
# suite of kiln_tests, listed from the binary at test time. Per suite, not per
# case: doctest's --test-case filter splits at ',' and ';', so a case whose
# name holds one ran nothing under a per-case entry and passed. Suite names
# are escaped the same way, for the same reason.
execute_process(COMMAND "${KILN_TESTS_EXE}" --list-test-suites --no-version=true
                OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  add_test(kiln_tests_listing "${KILN_TESTS_EXE}" --list-test-suites)
  return()
endif()
string(REPLACE "\n" ";" _lines "${_out}")
set(_in_list FALSE)
set(_all "")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^=+$")
    if(_in_list)
      break()
    endif()
    set(_in_list TRUE)
    continue()
  endif()
  if(NOT _in_list OR _line STREQUAL "")
    continue()
  endif()
  string(REPLACE "," "\\," _filter "${_line}")
  string(APPEND _all ",${_filter}")
  add_test("${_line}" "${KILN_TESTS_EXE}" "--test-suite=${_filter}" "--no-version=true")
  set_tests_properties("${_line}" PROPERTIES LABELS "doctest" TIMEOUT 1800)
endforeach()
# Cases in no suite (there should be none) run under one more entry.
string(REGEX REPLACE "^," "" _all "${_all}")
add_test("cases outside a suite" "${KILN_TESTS_EXE}" "--test-suite-exclude=${_all}" "--no-version=true")
