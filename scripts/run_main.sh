#!/usr/bin/env bash
# README command 1: install what is missing, build kiln in Release and run the
# main job: sentence embeddings with the pretrained all-MiniLM-L6-v2
# (examples/embed.cpp, weights from scripts/fetch_minilm.sh), eagerly and
# compiled; then the second example, the digits classifier. Arguments are
# passed to examples/embed (e.g. --threads 1, --strict).
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

# The main job (issue 15): fetch the all-MiniLM-L6-v2 weights (once), embed a
# few sentences eagerly and compiled, compare the runs, search the corpus.
bash scripts/fetch_minilm.sh
cmake --build "$build_dir" -j"$jobs" --target embed
echo "run_main: running examples/embed"
"$build_dir/examples/embed" \
  "A man is eating food." \
  "A man is eating a piece of bread." \
  "The girl is carrying a baby." \
  "A man is riding a horse." \
  "A woman is playing the violin." \
  "Scientists discovered a new species of frog." \
  --search "Someone is having a meal." "$@"

# The second example (issue 6): fetch the digits data (once), then train the
# digits classifier eagerly and compiled and compare the runs.
bash scripts/fetch_digits.sh
cmake --build "$build_dir" -j"$jobs" --target digits
echo "run_main: running examples/digits"
"$build_dir/examples/digits" --data data/digits.csv.gz
