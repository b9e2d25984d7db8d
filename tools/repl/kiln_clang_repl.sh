#!/usr/bin/env bash
# kiln-clang-repl: clang-repl-19 (Debian clang-tools-19) with kiln loaded and
# C++20: libkiln is preloaded (LD_PRELOAD, so no `%lib` line is needed), kiln's
# headers are on the include path and clang_repl_prelude.h is included first
# (<kiln/kiln.h>, show(), timeit(), `using namespace kiln;`). clang-repl
# prints no values: `show(x);` prints x. Arguments go to clang-repl
# (`kiln-clang-repl 'show(arange(3));'` runs code and exits). Paths are filled
# in by CMake; relative ones are relative to this file's folder.
# -fclang-abi-compat=17: Clang 18+ mangles a template's type constraints
# (`template <TensorLiteral T>`) into its symbol and g++ 12 does not, so
# without it clang-repl cannot find g++-built instantiations such as tensor().
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
abs() { case "$1" in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }
clang_repl="${KILN_CLANG_REPL:-@KILN_CLANG_REPL@}"
command -v "$clang_repl" >/dev/null 2>&1 || {
  echo "kiln-clang-repl: $clang_repl not found (Debian: apt-get install clang-tools-19)" >&2; exit 1; }
incs=()
for d in @KILN_REPL_INCLUDE_DIRS_SH@; do incs+=("--Xcc=-I$(abs "$d")"); done
LD_PRELOAD="$(abs "@KILN_REPL_LIBRARY@")${LD_PRELOAD:+:$LD_PRELOAD}" exec "$clang_repl" \
  --Xcc=-std=c++20 --Xcc=-fclang-abi-compat=17 "${incs[@]}" --Xcc=-include --Xcc="$(abs "@KILN_REPL_PRELUDE@")" "$@"
