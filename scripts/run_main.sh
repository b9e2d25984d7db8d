#!/usr/bin/env bash
# README command 1: install what is missing, build kiln in Release and run the
# main job: the quickstart example (examples/quickstart.cpp, built-in data),
# then the digits classifier (below).
#
# Environment: KILN_BUILD_DIR (default build/release, the "release" preset's
# folder), KILN_JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install_deps.sh

build_dir="${KILN_BUILD_DIR:-build/release}"
jobs="${KILN_JOBS:-$(nproc)}"
# Same cache as `cmake --preset release`; -S/-B so that KILN_BUILD_DIR works.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" -j"$jobs" --target quickstart kiln_cli

echo "run_main: running examples/quickstart"
"$build_dir/examples/quickstart"

# The main job (issue 6): fetch the digits data (once), then train the digits
# classifier eagerly and compiled and compare the runs.
bash scripts/fetch_digits.sh
cmake --build "$build_dir" -j"$jobs" --target digits
echo "run_main: running examples/digits"
"$build_dir/examples/digits" --data data/digits.csv.gz "$@"
