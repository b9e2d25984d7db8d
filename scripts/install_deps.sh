#!/usr/bin/env bash
# Installs what kiln's build, tests and examples need from Debian 12 packages.
# Run as root (or with sudo available). Idempotent: packages that dpkg
# reports as installed are skipped, and apt-get runs only when something is
# missing. Set KILN_WITH_LIBTORCH=1 to also install LibTorch (the optional
# peer in benchmarks/).
set -euo pipefail

packages=(
  cmake g++ make            # the build (gcc's OpenMP runtime, libgomp, comes with g++)
  ccache                    # object cache shared by build folders and clones (CMakeLists.txt)
  libeigen3-dev             # Eigen: GEMM fallback and <kiln/eigen.h>
  libasmjit-dev             # the CPU JIT's code generator
  libopenblas-dev           # GEMM through OpenBLAS when found
  zlib1g-dev                # compressed model/export files
  nlohmann-json3-dev        # safetensors headers (io/safetensors.cpp), header-only
  libutf8proc-dev           # Unicode data for the WordPiece tokenizer (text/)
  doctest-dev               # tests
  libbenchmark-dev          # benchmarks/
  libmpich-dev mpich        # distributed/ across processes (MPI, mpiexec)
  clang libclang-rt-14-dev libomp-dev  # clang builds: sanitizers, fuzzers, clang's OpenMP
  python3-venv              # kiln-repl's venv (scripts/install_repl_deps.sh: cppyy-cling, cppyy-backend)
  clang-tools-19            # clang-repl-19: the clang-repl prompt (scripts/repl.sh --clang)
  valgrind                  # scripts/valgrind_tail_lanes.sh
)
if [[ "${KILN_WITH_LIBTORCH:-0}" == "1" ]]; then
  packages+=(libtorch-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=()
if [[ "$(id -u)" != "0" ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install_deps: not root and no sudo; install these as root: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
