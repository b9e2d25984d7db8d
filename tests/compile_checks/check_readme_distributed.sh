#!/bin/bash
# The README's first distributed example compiles as written, with the
# headers the paragraph above it names (<kiln/...>) and <kiln/kiln.h>, in a
# function taking its free tensors (w1, w2, x). An example that calls a
# function no named header declares (kd::init() once) fails here.
# Usage: check_readme_distributed.sh <source dir>
set -u
src="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$(cd "$src" && pwd)" "$tmp/kiln"  # <kiln/X> is X in the source tree, as in an install
# The section from its heading to the end of its first ```cpp block.
section=$(awk '/^## Distributed: meshes/ {on = 1} on {print} on && /^```$/ && seen {exit} on && /^```cpp/ {seen = 1}' "$src/README.md")
[ -n "$section" ] || { echo "FAILED: no '## Distributed: meshes' section with a cpp block in README.md"; exit 1; }
headers=$(sed -n '1,/^```cpp/p' <<<"$section" | grep -o '<kiln/[^>]*>' | sort -u)
[ -n "$headers" ] || { echo "FAILED: the README names no <kiln/...> header before the example"; exit 1; }
{
  echo "#include <kiln/kiln.h>"
  for h in $headers; do echo "#include $h"; done
  echo "using namespace kiln;"
  echo "void readme_example(Tensor w1, Tensor w2, Tensor x) {"
  sed -n '/^```cpp/,/^```$/p' <<<"$section" | sed '1d;$d'
  echo "}"
} >"$tmp/example.cpp"
cxx=$(command -v g++ || command -v clang++) || { echo "no C++ compiler found"; exit 1; }
if ! "$cxx" -std=c++20 -fsyntax-only -I"$tmp" "$tmp/example.cpp"; then
  echo "FAILED: the README's distributed example with the headers it names ($(echo $headers)):"
  cat -n "$tmp/example.cpp"
  exit 1
fi
echo "ok: $cxx, headers $(echo $headers)"
