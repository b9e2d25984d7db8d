#!/bin/bash
# Syntax-checks literals.cpp with each C++ compiler found (at least one).
# Usage: check_literals.sh <fwd_include dir>
set -u
inc="$1"
src="$(dirname "$0")/literals.cpp"
found=0
for cxx in g++-12 g++ clang++-14 clang++-15 clang++-16 clang++-17 clang++-18 clang++-19 clang++; do
  command -v "$cxx" >/dev/null || continue
  found=1
  if ! "$cxx" -std=c++20 -fsyntax-only -I"$inc" "$src"; then
    echo "FAILED: $cxx"
    exit 1
  fi
  echo "ok: $cxx"
done
[ "$found" = 1 ] || { echo "no C++ compiler found"; exit 1; }
