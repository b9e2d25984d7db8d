#!/usr/bin/env bash
# Installs what kiln-repl (the Cling prompt) needs into a virtual environment
# this script owns, .venv-repl/ in the repository (git-ignored; override with
# KILN_REPL_VENV): PyPI's cppyy-cling (Cling as libCling.so) and
# cppyy-backend (its C API, libcppyy_backend.so; a source package whose one
# C++ file builds in about 20 s). Full
# cppyy is NOT installed: its CPyCppyy is built from source (about 9 minutes
# on 2 cores) and kiln-repl does not need it. Then builds Cling's
# precompiled header of the standard library once (about 25 s), so that the
# first prompt starts fast. Idempotent: a venv that already imports
# cppyy_backend with its header built is left alone. The Debian packages
# (python3-venv, and clang-tools-19 for the clang-repl prompt) come from
# scripts/install_deps.sh.
#
# Environment: KILN_REPL_VENV (default <repo>/.venv-repl), KILN_REPL_BASE_PYTHON
# (the Python the venv is made from; default /usr/bin/python3, else python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv="${KILN_REPL_VENV:-$PWD/.venv-repl}"
# Versions checked with kiln (cppyy-cling 6.32.8 is Cling on LLVM with C++20).
pins=(cppyy-cling==6.32.8 cppyy-backend==1.15.3)
start=$SECONDS

ready() {
  "$venv/bin/python" - <<'PY' 2>/dev/null
import glob, os, cppyy_backend
etc = os.path.join(os.path.dirname(cppyy_backend.__file__), "etc")
raise SystemExit(0 if glob.glob(os.path.join(etc, "allDict.cxx.pch.*")) else 1)
PY
}

if [[ -x "$venv/bin/python" ]] && ready; then
  echo "install_repl_deps: $venv already has cppyy-cling and cppyy-backend"
  exit 0
fi

base="${KILN_REPL_BASE_PYTHON:-}"
if [[ -z "$base" ]]; then
  if [[ -x /usr/bin/python3 ]]; then base=/usr/bin/python3; else base="$(command -v python3)"; fi
fi
[[ -x "$base" ]] || { echo "install_repl_deps: no python3 found (Debian: apt-get install python3-venv)" >&2; exit 1; }

if [[ ! -x "$venv/bin/python" ]]; then
  echo "install_repl_deps: creating $venv from $base"
  "$base" -m venv "$venv" || {
    echo "install_repl_deps: '$base -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
echo "install_repl_deps: pip install ${pins[*]}"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=cppyy-cling "${pins[@]}"
# The first load builds the precompiled header (cppyy_backend.loader does it).
echo "install_repl_deps: building Cling's precompiled header (once)"
"$venv/bin/python" -c "from cppyy_backend import loader; loader.load_cpp_backend()" >/dev/null
ready || { echo "install_repl_deps: Cling's precompiled header was not built" >&2; exit 1; }
echo "install_repl_deps: done in $((SECONDS - start)) s ($venv)"
