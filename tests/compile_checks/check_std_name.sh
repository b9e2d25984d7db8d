#!/bin/bash
# std_name.cpp with each C++ compiler found (at least one): kiln::std(x) and
# x.std() compile under `using namespace kiln`; unqualified std(x) is
# rejected as ambiguous. Usage: check_std_name.sh <fwd_include dir>
set -u
inc="$1"
src="$(dirname "$0")/std_name.cpp"
found=0
for cxx in g++-12 g++ clang++-14 clang++-15 clang++-16 clang++-17 clang++-18 clang++-19 clang++; do
  command -v "$cxx" >/dev/null || continue
  found=1
  if ! "$cxx" -std=c++20 -fsyntax-only -I"$inc" "$src"; then
    echo "FAILED: $cxx: kiln::std(x) / x.std() under using namespace kiln"
    exit 1
  fi
  if out=$("$cxx" -std=c++20 -fsyntax-only -DKILN_UNQUALIFIED_STD -I"$inc" "$src" 2>&1); then
    echo "FAILED: $cxx: unqualified std(x) compiled; update tensor/ops.h and the README"
    exit 1
  fi
  if ! grep -q "ambiguous" <<<"$out"; then
    echo "FAILED: $cxx: unqualified std(x) failed for another reason:"
    echo "$out" | head -5
    exit 1
  fi
  echo "ok: $cxx"
done
[ "$found" = 1 ] || { echo "no C++ compiler found"; exit 1; }
