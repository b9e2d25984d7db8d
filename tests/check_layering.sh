#!/usr/bin/env bash
# The layering rules of ARCHITECTURE.md that a compiler cannot see:
#   tensor/ includes nothing from backends/ (kernels are reached through the
#   kernel registry), and the backends are siblings that never include each other.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bad=0
report() { echo "layering: $1"; bad=1; }
while IFS= read -r line; do report "tensor/ includes a backend: $line"; done \
  < <(grep -rnE '#include\s*[<"][^">]*backends/' tensor/ || true)
for b in backends/*/; do
  name=$(basename "$b")
  for other in backends/*/; do
    o=$(basename "$other")
    [[ "$o" == "$name" ]] && continue
    while IFS= read -r line; do report "backends/$name includes backends/$o: $line"; done \
      < <(grep -rnE "#include\s*[<\"][^\">]*(\.\./$o/|backends/$o/)" "$b" || true)
  done
done
if ((bad)); then exit 1; fi
echo "layering: tensor/ names no backend; backends include no sibling"
