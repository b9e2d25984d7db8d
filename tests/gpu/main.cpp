// kiln_gpu_tests: the tests that need a CUDA device (ctest label `gpu`).
// Each test case skips with a message when no device answers.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
