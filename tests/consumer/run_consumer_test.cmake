# ctest driver for the install test (cmake -P). Installs the kiln build in
# KILN_BUILD_DIR into a scratch prefix, then configures, builds and runs the
# consumer project in KILN_CONSUMER_SRC against that prefix.
# Inputs: KILN_BUILD_DIR, KILN_CONSUMER_SRC, KILN_SCRATCH, KILN_CXX_COMPILER,
# KILN_BUILD_TYPE, KILN_SAN_FLAGS (sanitizer flags the consumer must share
# with an instrumented libkiln; may be empty).
foreach(v KILN_BUILD_DIR KILN_CONSUMER_SRC KILN_SCRATCH)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer_test.cmake: ${v} is not set")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc}):\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE "${KILN_SCRATCH}")
set(prefix "${KILN_SCRATCH}/prefix")
set(build "${KILN_SCRATCH}/build")
run_step("cmake --install" ${CMAKE_COMMAND} --install "${KILN_BUILD_DIR}" --prefix "${prefix}")
if(NOT EXISTS "${prefix}/include/kiln/kiln.h")
  message(FATAL_ERROR "install_consumer: ${prefix}/include/kiln/kiln.h was not installed")
endif()
run_step("configuring the consumer" ${CMAKE_COMMAND} -S "${KILN_CONSUMER_SRC}" -B "${build}"
         "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${KILN_CXX_COMPILER}"
         "-DCMAKE_BUILD_TYPE=${KILN_BUILD_TYPE}" "-DCMAKE_CXX_FLAGS=${KILN_SAN_FLAGS}"
         "-DCMAKE_EXE_LINKER_FLAGS=${KILN_SAN_FLAGS}")
run_step("building the consumer" ${CMAKE_COMMAND} --build "${build}")
run_step("running the consumer" "${build}/kiln_consumer")
# The installed `kiln` tool starts from its prefix (no LD_LIBRARY_PATH).
if(EXISTS "${prefix}/bin/kiln")
  run_step("running the installed kiln tool" "${prefix}/bin/kiln" --help)
endif()
