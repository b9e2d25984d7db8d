#!/usr/bin/env bash
# Fetches the UCI optical-recognition handwritten digits set (1,797 8x8
# images, 16 grey levels, 10 classes) as Debian's python3-sklearn package
# ships it, into data/digits.csv.gz (git-ignored). No Python needed: the file
# is extracted from the .deb with dpkg-deb and tar.
#
# Usage: bash scripts/fetch_digits.sh        (idempotent: skips when present)
# Format: 65 comma-separated integers per row: 64 pixels in 0..16, then the
# label in 0..9.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/data/digits.csv.gz"
MEMBER="sklearn/datasets/data/digits.csv.gz"

# Checks the file: 1,797 rows, 65 integer columns, pixels 0..16, labels 0..9.
verify() {
  gzip -dc "$1" | awk -F, '
    NF != 65 { printf "line %d: %d columns, expected 65\n", NR, NF; bad = 1; exit }
    {
      for (i = 1; i <= 65; ++i) {
        v = $i; sub(/\.0*$/, "", v)  # the file may write integers as "3.0"
        if (v !~ /^[0-9]+$/ || v + 0 > (i < 65 ? 16 : 9)) {
          printf "line %d, column %d: \"%s\" is not an integer in range\n", NR, i, $i; bad = 1; exit
        }
      }
      ++rows
    }
    END { if (!bad && rows != 1797) { printf "%d rows, expected 1797\n", rows; bad = 1 } exit bad }'
}

if [[ -f "$DEST" ]]; then
  if verify "$DEST"; then
    echo "fetch_digits: $DEST already present (1797 rows x 65 columns)"
    exit 0
  fi
  echo "fetch_digits: $DEST is damaged; fetching it again" >&2
  rm -f "$DEST"
fi

for tool in apt-get dpkg-deb tar gzip awk; do
  command -v "$tool" >/dev/null || { echo "fetch_digits: '$tool' not found (this script needs a Debian-based system)" >&2; exit 1; }
done

SUDO=""
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then SUDO="sudo"; fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
# apt-get download fetches into the current folder; a stale package index can
# make it fail, so refresh the index once and retry.
if ! apt-get download python3-sklearn >/dev/null 2>"$WORK/apt.err"; then
  echo "fetch_digits: apt-get download failed; running apt-get update and retrying" >&2
  $SUDO apt-get update >/dev/null
  apt-get download python3-sklearn >/dev/null || {
    echo "fetch_digits: could not download python3-sklearn:" >&2; cat "$WORK/apt.err" >&2; exit 1; }
fi
DEB="$(ls "$WORK"/python3-sklearn_*.deb | head -n1)"

# The package installs under ./usr/lib/python3/dist-packages/; match the
# member by its tail so a different Python layout still works.
dpkg-deb --fsys-tarfile "$DEB" | tar -x --wildcards "*/$MEMBER"
SRC="$(find "$WORK" -path "*/$MEMBER" -type f | head -n1)"
[[ -n "$SRC" ]] || { echo "fetch_digits: $MEMBER not found in $(basename "$DEB")" >&2; exit 1; }

verify "$SRC" || { echo "fetch_digits: the extracted file failed verification" >&2; exit 1; }
mkdir -p "$ROOT/data"
cp "$SRC" "$DEST.tmp" && mv "$DEST.tmp" "$DEST"
echo "fetch_digits: wrote $DEST (1797 rows x 65 columns, from $(basename "$DEB"))"
