#!/usr/bin/env bash
# The GPU check of issue 12, for a machine with an NVIDIA GPU (at most 8
# minutes on an H100/H200 with a warm ccache; the first build dominates):
#   1. configure and build kiln with CUDA (sm_90 unless CUDA_ARCH is set),
#      the tests and bench_cuda;
#   2. ctest -L gpu (every GPU test; they skip when no device answers, so
#      this script first checks that one does);
#   3. the differential run CPU vs CUDA eager (KILN_DIFF_SEQUENCES, 1000);
#   4. the compiled CUDA plans (issue 13): the fuzzer's graphs compiled for
#      CUDA = eager CUDA = float64 reference (KILN_CUDA_FUZZ_GRAPHS, 1000;
#      part of ctest -L gpu above, rerun here with its summary), and the
#      no-GPU NVRTC checks (every row, the fuzzer's groups as sm_<arch> cubins:
#      all KILN_NVRTC_FUZZ_GRAPHS=1000 here, a sample in CI);
#   5. compiled CUDA, part 2 (tests/gpu/test_cuda_compiled_capture.cpp, part
#      of ctest -L gpu, rerun here by name): float16/bfloat16 groups and
#      casts = eager bitwise, strict = eager bitwise, capture/replay as one
#      CUDA Graph, a MEF's cubin adopted;
#   6. the CUDA benchmarks, printing each figure beside its peer (the
#      50-kernel graph's replay beside the same compiled call), and the
#      NVRTC compile / module-cache figures (bench_cuda_compile).
# Exits non-zero at the first failing step and says which one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build="${KILN_GPU_BUILD_DIR:-build/gpu}"
jobs="${KILN_JOBS:-$(nproc)}"
arch="${CUDA_ARCH:-90}"
step="start"
trap 'rc=$?; if ((rc != 0)); then echo "gpu_check: FAILED at step: ${step} (exit ${rc})"; fi' EXIT
say() { printf '\n== gpu_check: %s ==\n' "$*"; step="$*"; }

say "device"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
nvcc --version | tail -1

say "configure (CUDA, sm_${arch})"
export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-$(command -v ccache || true)}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DKILN_BUILD_TESTS=ON -DKILN_BUILD_BENCHMARKS=ON -DKILN_BUILD_EXAMPLES=OFF >/dev/null

say "build"
t0=$SECONDS
cmake --build "$build" -j"$jobs" --target kiln kiln_tests kiln_gpu_tests bench_cuda bench_cuda_compile
echo "build: $((SECONDS - t0)) s"

say "a device answers"
"$build/tests/kiln_gpu_tests" -tc="host to device*" -s 2>&1 | tee /tmp/kiln_gpu_probe.txt | tail -3
if grep -q "skipped:" /tmp/kiln_gpu_probe.txt; then
  echo "gpu_check: no CUDA device answers; nothing to check"; exit 1
fi

say "no-GPU CUDA tests (functors, NVRTC, allocator, launch plans, kernel coverage)"
"$build/tests/kiln_tests" -ts="cuda*"
"$build/tests/kiln_tests" -ts="cuda coverage" -s 2>&1 | grep -A20 "without a CUDA kernel" | head -20 || true

say "ctest -L gpu (includes the differential run, ${KILN_DIFF_SEQUENCES:=1000} sequences)"
export KILN_DIFF_SEQUENCES
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300

say "compiled CUDA plans: fuzzer graphs compiled = eager CUDA = float64 (${KILN_CUDA_FUZZ_GRAPHS:=1000} graphs)"
export KILN_CUDA_FUZZ_GRAPHS
"$build/tests/kiln_gpu_tests" -tc="compiled CUDA*" -s 2>&1 | grep -E "outputs compared|test cases|FAILED|ERROR" || true
"$build/tests/kiln_gpu_tests" -tc="compiled CUDA*"
export KILN_NVRTC_FUZZ_GRAPHS="${KILN_NVRTC_FUZZ_GRAPHS:-1000}"
"$build/tests/kiln_tests" -ts="cuda_compiled" -s 2>&1 | grep -E "fuzzer graphs|rows, sm_90|disk-cache hit" || true

say "compiled CUDA part 2: 16-bit groups, strict, capture/replay (CUDA Graphs), MEF cubins"
"$build/tests/kiln_gpu_tests" -tc="compiled CUDA float16*,strict compiled CUDA*,capture/replay*,a MEF of a CUDA*" -s 2>&1 |
  grep -E "test cases|FAILED|ERROR|skipped" || true
"$build/tests/kiln_gpu_tests" -tc="compiled CUDA float16*,strict compiled CUDA*,capture/replay*,a MEF of a CUDA*"

say "benchmarks (each beside its peer)"
"$build/benchmarks/bench_cuda_compile" --benchmark_format=console
"$build/benchmarks/bench_cuda" --benchmark_min_time=0.2 --benchmark_format=console \
  --benchmark_out=/tmp/kiln_bench_cuda.json --benchmark_out_format=json
python3 - /tmp/kiln_bench_cuda.json <<'PY'
import json, sys
b = {x["name"]: x for x in json.load(open(sys.argv[1]))["benchmarks"]}
def bw(n): return b[n].get("bytes_per_second", 0.0) if n in b and not b[n].get("error_occurred") else None
copy = bw("BM_cuda_memcpy_d2d_64M")
for op in ("add", "exp"):
    r = bw(f"BM_cuda_{op}_64M")
    if copy and r: print(f"{op} 64M float32: {r/1e9:.0f} GB/s = {r/copy:.2f} of cudaMemcpyAsync D2D ({copy/1e9:.0f} GB/s); target >= 0.85")
for n, what in (("BM_cuda_sum_64M", "sum 64M float32"), ("BM_cuda_softmax_4096", "softmax 4096x4096 float32")):
    r = bw(n)
    if copy and r: print(f"{what}: {r/1e9:.0f} GB/s = {r/copy:.2f} of cudaMemcpyAsync D2D")
fused, unfused = b.get("BM_cuda_linear_gelu_4096/0"), b.get("BM_cuda_linear_gelu_4096/1")
if fused and unfused and not fused.get("error_occurred") and not unfused.get("error_occurred"):
    print(f"linear+bias+GELU 4096 bfloat16: epilogue {fused['real_time']:.2f} vs three ops {unfused['real_time']:.2f} {fused['time_unit']} ({unfused['real_time']/fused['real_time']:.2f}x)")
lat = b.get("BM_cuda_add_1_latency")
if lat and not lat.get("error_occurred"): print(f"1-element add: {lat['real_time']:.2f} {lat['time_unit']} per eager call; target <= 6 us")
for arg, dt in (("0", "float32"), ("1", "bfloat16")):
    mm, peer = b.get(f"BM_cuda_matmul_4096/{arg}"), b.get(f"BM_cublaslt_matmul_4096/{arg}")
    if mm and peer and not mm.get("error_occurred") and not peer.get("error_occurred"):
        print(f"matmul 4096 {dt}: {mm['TFLOPS']:.1f} TFLOPS = {mm['TFLOPS']/peer['TFLOPS']:.2f}x direct cublasLtMatmul ({peer['TFLOPS']:.1f}); target >= 0.95")
for arg, what in (("0", "launch (synchronised every 64)"), ("1", "launch + synchronise")):
    rp, call = b.get(f"BM_cuda_graph_replay_50/{arg}"), b.get(f"BM_cuda_compiled_call_50/{arg}")
    if rp and call and not rp.get("error_occurred") and not call.get("error_occurred"):
        print(f"50-kernel graph ({rp['kernels']:.0f} generated kernels), {what}: replay {rp['real_time']:.1f} vs compiled call {call['real_time']:.1f} {rp['time_unit']} ({call['real_time']/rp['real_time']:.1f}x); replay target <= 20 us")
PY
step="done"
echo "gpu_check: passed"
