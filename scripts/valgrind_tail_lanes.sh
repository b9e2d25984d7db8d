#!/bin/bash
# Runs tests/valgrind/tail_lanes.cpp under valgrind memcheck (issue 11):
# compiled pow/fmod/atan2/remainder must read no uninitialised lane.
# valgrind has no AVX-512, so this builds kiln without -march=native into
# build/vg and caps the code generator at AVX2. Exit status 0 = no error.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/vg -DCMAKE_BUILD_TYPE=Release -DKILN_NATIVE=OFF -DKILN_BUILD_TESTS=OFF \
  -DKILN_BUILD_BENCHMARKS=OFF -DKILN_WITH_CUDA=OFF >/dev/null
cmake --build build/vg -j"${JOBS:-2}" --target kiln >/dev/null
c++ -std=c++20 -O1 -g tests/valgrind/tail_lanes.cpp -Ibuild/vg/fwd_include -Lbuild/vg -lkiln \
  -Wl,-rpath,"$PWD/build/vg" -o build/vg/tail_lanes
KILN_JIT_TARGET=avx2 valgrind --error-exitcode=3 build/vg/tail_lanes
