#!/usr/bin/env bash
# Opens an interactive C++20 prompt with kiln loaded (README "The interactive
# prompt"): installs what is missing (Debian packages with install_deps.sh, the
# Cling venv with install_repl_deps.sh), builds libkiln if needed, then runs
#   build/release/kiln-repl          Cling: values print themselves (default)
#   build/release/kiln-clang-repl    clang-repl-19, with --clang: show(x) prints
# Set-up output goes to stderr, so `bash scripts/repl.sh < session.cpp` gives
# only the session on stdout. Other arguments go to the prompt
# (kiln-repl --timing prints the startup time, --echo echoes piped input).
#
# Environment: KILN_BUILD_DIR (default build/release), KILN_JOBS (default:
# number of cores), KILN_REPL_VENV (see install_repl_deps.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

clang=0
args=()
for a in "$@"; do
  if [[ "$a" == "--clang" ]]; then clang=1; else args+=("$a"); fi
done
# --timing and --echo are kiln-repl's; clang-repl would stop at them with
# "Unknown command line argument".
if ((clang)); then
  for a in "${args[@]+"${args[@]}"}"; do
    if [[ "$a" == "--echo" || "$a" == "--timing" ]]; then
      echo "repl.sh: $a is an option of kiln-repl (the Cling prompt, without --clang); kiln-clang-repl does not take it" >&2
      exit 2
    fi
  done
fi
build_dir="${KILN_BUILD_DIR:-build/release}"
jobs="${KILN_JOBS:-$(nproc)}"

{
  bash scripts/install_deps.sh
  if ((clang == 0)); then bash scripts/install_repl_deps.sh; fi
  # The launchers are written at configure time, once the venv is there:
  # configure when the one wanted is missing (cmake --build re-configures by
  # itself after a CMakeLists change).
  venv="${KILN_REPL_VENV:-$PWD/.venv-repl}"
  launcher="$build_dir/kiln-repl"
  if ((clang)); then launcher="$build_dir/kiln-clang-repl"; fi
  if [[ ! -x "$launcher" ]]; then
    cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DKILN_REPL_PYTHON="$venv/bin/python" >/dev/null
  fi
  cmake --build "$build_dir" -j"$jobs" --target kiln kiln_repl_hook
} >&2

if ((clang)); then
  exec "$build_dir/kiln-clang-repl" "${args[@]}"
fi
exec "$build_dir/kiln-repl" "${args[@]}"
