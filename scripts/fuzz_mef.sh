#!/usr/bin/env bash
# Fuzzes engine::read (the MEF loader) with libFuzzer + AddressSanitizer:
# builds kiln and tests/fuzz/fuzz_mef.cpp with clang in build/fuzz, writes a
# seed corpus of real exported MEF files (tests/fuzz/mef_seed_corpus.cpp),
# then runs a fixed number of mutated inputs. Any crash, ASan report, leak or
# timeout makes this script exit non-zero.
#   scripts/fuzz_mef.sh [RUNS]        (default 20000; env KILN_JOBS = build jobs)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs="${1:-20000}"
jobs="${KILN_JOBS:-2}"
build=build/fuzz
# -O0 with line tables: the fuzzer hunts crashes, not speed, and unoptimised
# ASan code builds several times faster than -O2 (the kernels are template-heavy).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=FuzzO0 \
  -DCMAKE_C_FLAGS_FUZZO0="-O0 -gline-tables-only" -DCMAKE_CXX_FLAGS_FUZZO0="-O0 -gline-tables-only" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DKILN_SANITIZE=address -DKILN_BUILD_FUZZERS=ON \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCHMARKS=OFF -DKILN_BUILD_EXAMPLES=OFF \
  -DKILN_WITH_CUDA=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target fuzz_mef mef_seed_corpus

corpus="$build/corpus"
rm -rf "$corpus" "$build/artifacts"
mkdir -p "$corpus" "$build/artifacts"
"$build/mef_seed_corpus" "$corpus"
# A file cut short and a non-MEF file start the walk on the error paths too.
head -c 40 "$corpus/seed_0.mef" >"$corpus/cut_40"
printf 'not a mef file' >"$corpus/not_mef"

# Options: fixed seed and run count; 10 s per input is a hang; 2 GiB RSS is a
# blow-up; leaks are failures (detect_leaks is on under ASan by default).
"$build/fuzz_mef" "$corpus" -runs="$runs" -seed=1 -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -artifact_prefix="$build/artifacts/" -print_final_stats=1
echo "fuzz_mef: ${runs} runs without a crash"
