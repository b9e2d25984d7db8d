#!/usr/bin/env bash
# README benchmark command: install what is missing, build kiln's Release
# benchmarks, run bench_ops, bench_ops2, bench_compile, bench_digits, bench_small_gemm,
# bench_export and bench_minilm, and write
# benchmarks/RESULTS.md: the machine, the date and the comparison tables
# (kiln eager, kiln compiled and the peers measured in the same run: Eigen,
# OpenBLAS, a plain C++ loop, the system C++ compiler, and LibTorch/TorchScript
# when KILN_WITH_LIBTORCH=1: then install_deps.sh installs Debian's
# libtorch-dev and the peers are built). Takes a few minutes.
#
# Environment: KILN_BUILD_DIR (default build/release), KILN_JOBS (default: number
# of cores), KILN_BENCH_MIN_TIME (seconds per benchmark, default 0.2).
# Extra arguments go to every benchmark program (e.g. --benchmark_filter=digits).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install_deps.sh
bash scripts/fetch_digits.sh || echo "run_benchmarks: no digits data; bench_digits uses random inputs"
bash scripts/fetch_minilm.sh || echo "run_benchmarks: no MiniLM weights; bench_minilm uses random weights"

build_dir="${KILN_BUILD_DIR:-build/release}"
jobs="${KILN_JOBS:-$(nproc)}"
programs=(bench_ops bench_ops2 bench_compile bench_digits bench_small_gemm bench_export bench_minilm)
with_torch=OFF
[[ "${KILN_WITH_LIBTORCH:-0}" == "1" ]] && with_torch=ON
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCHMARKS=ON -DKILN_BENCH_LIBTORCH="$with_torch"
cmake --build "$build_dir" -j"$jobs" --target "${programs[@]}"

cpu_flag() { grep -m1 '^flags' /proc/cpuinfo | grep -qw "$1" && echo "$1"; }
# OpenBLAS picks its kernels from the CPUID model; on a VM whose model it does
# not know (as this project's machines) it falls back to its SSE3 "Prescott"
# kernels, ~4x slower, and every BLAS peer and GEMM floor would be too slow
# to compare with. Then name the core its vector units allow (unless the
# caller set OPENBLAS_CORETYPE already); RESULTS.md records the core used.
if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then
  blas_core="$(OPENBLAS_VERBOSE=2 "$build_dir/benchmarks/bench_ops" --benchmark_list_tests 2>&1 | sed -n 's/^Core: //p' | head -1)"
  if [[ "$blas_core" == "Prescott" ]]; then
    if [[ -n "$(cpu_flag avx512f)" ]]; then export OPENBLAS_CORETYPE=SkylakeX
    elif [[ -n "$(cpu_flag avx2)" ]]; then export OPENBLAS_CORETYPE=Haswell; fi
  fi
fi
blas_core_used="$(OPENBLAS_VERBOSE=2 "$build_dir/benchmarks/bench_ops" --benchmark_list_tests 2>&1 | sed -n 's/^Core: //p' | head -1)"
torch=no
[[ "$("$build_dir/benchmarks/bench_digits" --benchmark_list_tests | grep -c BM_torch)" != 0 ]] && torch=yes
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -n "$(git status --porcelain 2>/dev/null)" ]] && commit+=" + uncommitted changes"

out=benchmarks/RESULTS.md
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
cat >"$tmp" <<EOF
# kiln benchmark results

Written by \`bash scripts/run_benchmarks.sh\` (do not edit by hand).

- date: $(date -u '+%Y-%m-%d %H:%M UTC')
- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores available
- flags: $(for f in avx2 fma avx512f avx512bw avx512vl; do cpu_flag $f; done | xargs)
- OpenBLAS kernels: ${blas_core_used:-unknown}${OPENBLAS_CORETYPE:+ (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE)}$(
  [[ "${KILN_BENCH_AVX2:-1}" == "1" && -n "$(cpu_flag avx512f)" ]] &&
    echo "; the KILN_JIT_TARGET=avx2 table: Haswell (OPENBLAS_CORETYPE=Haswell, OpenBLAS's AVX2 kernels)")
- load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine makes figures noisy)
- kiln commit: $commit
- LibTorch peers: $torch; each benchmark ran for at least ${KILN_BENCH_MIN_TIME:-0.2} s

Every row: kiln's figure (compiled where there is one, with kiln eager beside
it), the fastest peer measured in the same run, and kiln's time over that
peer's (< 1: kiln is faster). Times are wall-clock per call.
EOF
run_all() {
  for p in "${programs[@]}"; do
    echo "run_benchmarks: running $p${KILN_JIT_TARGET:+ (KILN_JIT_TARGET=$KILN_JIT_TARGET)}"
    "$build_dir/benchmarks/$p" --benchmark_min_time="${KILN_BENCH_MIN_TIME:-0.2}" --kiln_results="$tmp" "$@"
  done
}
run_all "$@"
# The second table: the same rows with the JIT capped at AVX2 (what users
# without AVX-512 get from kiln's generated code, the eager row kernels
# included) and OpenBLAS's AVX2 kernels (OPENBLAS_CORETYPE=Haswell: what
# OpenBLAS picks on an AVX2-only CPU; it reads the variable once per process,
# so every program of this table runs with it), LibTorch capped at AVX2 too
# (ATEN_CPU_CAPABILITY=avx2 for ATen's vector kernels, ONEDNN_MAX_CPU_ISA=AVX2
# for its oneDNN convolutions), and the Eigen peers built for AVX2
# (BM_eigen_avx2_*). kiln's C++ kernels and the other Eigen peers keep this
# CPU's instruction set. Skipped when this CPU has no AVX-512 (the first table
# is then the AVX2 one) or with KILN_BENCH_AVX2=0.
if [[ "${KILN_BENCH_AVX2:-1}" == "1" && -n "$(cpu_flag avx512f)" ]]; then
  cat >>"$tmp" <<EOF

# The same rows with KILN_JIT_TARGET=avx2

kiln's generated code limited to AVX2+FMA on the same machine and in the same
session (load average now: $(cut -d' ' -f1-3 /proc/loadavg)), against the peers
an AVX2-only CPU would have: OpenBLAS with its Haswell (AVX2) kernels
(OPENBLAS_CORETYPE=Haswell: every BLAS peer and the digits step's GEMM floor)
and, in the rows that name them, Eigen compiled for AVX2+FMA only
(kiln_bench_eigen_avx2: BM_eigen_avx2_*, e.g. the hand-written digits step
BM_eigen_avx2_digits_step), and LibTorch limited to AVX2 (ATEN_CPU_CAPABILITY=avx2,
ONEDNN_MAX_CPU_ISA=AVX2). kiln's C++ kernels and the other Eigen peers are
still built for this CPU (-march=native).
EOF
  OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 \
    KILN_JIT_TARGET=avx2 run_all "$@"
fi
# Hand-run sections (measured by hand, each with its date and conditions)
# are kept: everything from the marker line on.
marker='<!-- hand-run sections below: run_benchmarks.sh keeps everything from this line on -->'
if [[ -f "$out" ]] && grep -qF -- "$marker" "$out"; then
  printf '\n' >>"$tmp"
  awk -v m="$marker" 'index($0, m) == 1 { keep = 1 } keep' "$out" >>"$tmp"
fi
mv "$tmp" "$out"
chmod 644 "$out"
echo "run_benchmarks: wrote $out"
