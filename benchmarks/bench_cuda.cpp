// CUDA eager figures (issue 12), each beside its peer in the same run:
//   add / exp on 64M float32 vs a device-to-device cudaMemcpyAsync (the
//   bandwidth ceiling; bytes_per_second counts each op's reads + writes),
//   the eager launch of a 1-element add (host time per call, asynchronous,
//   synchronised once per batch), matmul 4096^2 float32/bfloat16 vs a
//   direct cublasLtMatmul (TFLOPS); sum of 64M float32 and softmax of
//   [4096, 4096] float32 (bytes_per_second, beside the copy's); a linear
//   layer 4096x4096x4096 + bias + GELU as one epilogue call vs matmul, add,
//   gelu_tanh as three eager ops; a compiled 50-kernel graph (issue 13):
//   replayed as one CUDA Graph (engine_model().capture/replay) beside the
//   same compiled call launching its kernels one by one: host time per
//   replay launch (Arg 0: synchronised once per 64 launches) and per
//   replay + synchronise (Arg 1); the counter `kernels` is the plan's
//   generated kernels.
// Without a device every benchmark is skipped with the driver's message.
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <kiln/kiln.h>

#include "../backends/cuda/cuda_backend.h"
#include "../jit/cuda_executable.h"
#include "../jit/engine.h"

namespace {
using namespace kiln;

constexpr int64_t k64M = int64_t(64) << 20;

bool skip_without_gpu(benchmark::State& state) {
  if (cuda::device_count() > 0) return false;
  state.SkipWithError("no CUDA device");
  return true;
}

void BM_cuda_memcpy_d2d_64M(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  Tensor a = zeros({k64M}, DType::float32, Device::cuda(0));
  Tensor b = empty({k64M}, DType::float32, Device::cuda(0));
  const size_t n = size_t(k64M) * 4;
  cuda::synchronize(0);  // zeros ran on kiln's (non-blocking) stream
  for (auto _ : state) {
    cudaMemcpyAsync(b.data_ptr(), a.data_ptr(), n, cudaMemcpyDeviceToDevice, nullptr);
    cudaStreamSynchronize(nullptr);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * n));  // read + write
}

void BM_cuda_add_64M(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  Tensor a = ones({k64M}, DType::float32, Device::cuda(0));
  Tensor b = ones({k64M}, DType::float32, Device::cuda(0));
  for (auto _ : state) {
    Tensor c = a + b;
    cuda::synchronize(0);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * k64M * 4 * 3);  // 2 reads + 1 write
}

void BM_cuda_exp_64M(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  Tensor a = zeros({k64M}, DType::float32, Device::cuda(0));
  for (auto _ : state) {
    Tensor c = exp(a);
    cuda::synchronize(0);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * k64M * 4 * 2);
}

void BM_cuda_add_1_latency(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  Tensor a = ones({1}, DType::float32, Device::cuda(0));
  Tensor b = ones({1}, DType::float32, Device::cuda(0));
  int64_t k = 0;
  for (auto _ : state) {
    Tensor c = a + b;
    benchmark::DoNotOptimize(c);
    if (++k % 1024 == 0) cuda::synchronize(0);  // bounded queue depth
  }
  cuda::synchronize(0);
}

void BM_cuda_matmul_4096(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const DType d = state.range(0) ? DType::bfloat16 : DType::float32;
  Tensor a = ones({4096, 4096}, d, Device::cuda(0)), b = ones({4096, 4096}, d, Device::cuda(0));
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    cuda::synchronize(0);
  }
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * 4096 * 4096 * 4096 * double(state.iterations()) / 1e12,
                                                benchmark::Counter::kIsRate);
}

/// The peer: one cublasLtMatmul of the same operands (row-major C = A B as
/// column-major C^T = B^T A^T), descriptors and algorithm chosen once,
/// outside the timed loop; the same compute type as kiln (32F, no TF32).
void BM_cublaslt_matmul_4096(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool bf16 = state.range(0) != 0;
  const DType d = bf16 ? DType::bfloat16 : DType::float32;
  const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const int64_t n = 4096;
  Tensor a = ones({n, n}, d, Device::cuda(0)), b = ones({n, n}, d, Device::cuda(0)), c = empty({n, n}, d, Device::cuda(0));
  cuda::synchronize(0);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, t, n, n, n);
  cublasLtMatrixLayoutCreate(&lb, t, n, n, n);
  cublasLtMatrixLayoutCreate(&lc, t, n, n, n);
  void* ws = nullptr;
  const size_t ws_bytes = size_t(32) << 20;
  cudaMalloc(&ws, ws_bytes);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes));
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(h, desc, lb, la, lc, lc, pref, 1, &r, &found);
  const float one = 1.f, zero = 0.f;
  if (found == 0) state.SkipWithError("cuBLASLt found no algorithm");
  else
    for (auto _ : state) {
      cublasLtMatmul(h, desc, &one, b.data_ptr(), lb, a.data_ptr(), la, &zero, c.data_ptr(), lc, c.data_ptr(), lc,
                     &r.algo, ws, ws_bytes, nullptr);
      cudaStreamSynchronize(nullptr);
    }
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * n * n * n * double(state.iterations()) / 1e12,
                                                benchmark::Counter::kIsRate);
  cublasLtMatmulPreferenceDestroy(pref);
  cudaFree(ws);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(h);
}

}  // namespace

void BM_cuda_sum_64M(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  Tensor a = ones({k64M}, DType::float32, Device::cuda(0));
  for (auto _ : state) {
    Tensor c = sum(a);
    cuda::synchronize(0);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * k64M * 4);
}

void BM_cuda_softmax_4096(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  Tensor a = zeros({4096, 4096}, DType::float32, Device::cuda(0));
  for (auto _ : state) {
    Tensor c = softmax(a);
    cuda::synchronize(0);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 4096 * 4096 * 4 * 2);
}

/// Arg 0: one matmul_epilogue call (bias + GELU); 1: three eager ops.
void BM_cuda_linear_gelu_4096(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t n = 4096;
  Tensor a = ones({n, n}, DType::bfloat16, Device::cuda(0)), w = ones({n, n}, DType::bfloat16, Device::cuda(0));
  Tensor bias = zeros({n}, DType::bfloat16, Device::cuda(0));
  for (auto _ : state) {
    Tensor c = state.range(0) == 0 ? cuda::matmul_epilogue(a, w, bias, cuda::Epilogue::bias_gelu)
                                   : gelu(matmul(a, w) + bias, true);
    cuda::synchronize(0);
  }
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * double(state.iterations()) / 1e12,
                                                benchmark::Counter::kIsRate);
}

// x -> 49 x (x - max(x * 0.5, -1)): 50 generated kernels per call (each
// max inside the kernel computing its input; tests/test_cuda_compiled.cpp
// checks the count).
CompiledCallable fifty_kernel_call() {
  auto f = [](Tensor x) {
    for (int i = 0; i < 49; ++i) x = x - max(x * 0.5f, {-1}, true);
    return x;
  };
  return compile(f)(TensorLayout(DType::float32, {8, 256}, Device::cuda(0)));
}

int plan_kernels(const CompiledCallable& run) {
  int k = 0;
  for (const codegen::CudaStep& s : run.engine_model().artifact().cuda_plan()->plan().steps)
    k += s.kind == codegen::CudaStep::Kind::kernel;
  return k;
}

void BM_cuda_graph_replay_50(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  CompiledCallable run = fifty_kernel_call();
  const engine::Model& m = run.engine_model();
  const std::vector<Tensor> in = {random::normal({8, 256}).cuda()};
  m.capture(1, in);
  cuda::synchronize(0);
  int64_t i = 0;
  for (auto _ : state) {
    m.replay(1, in);
    if (state.range(0) == 1 || ++i % 64 == 0) cuda::synchronize(0);
  }
  cuda::synchronize(0);
  state.counters["kernels"] = plan_kernels(run);
  m.release(1);
}

void BM_cuda_compiled_call_50(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  CompiledCallable run = fifty_kernel_call();
  const std::vector<Tensor> in = {random::normal({8, 256}).cuda()};
  std::vector<Tensor> out;
  int64_t i = 0;
  for (auto _ : state) {
    run.engine_model().execute_into(in, out);
    if (state.range(0) == 1 || ++i % 64 == 0) cuda::synchronize(0);
  }
  cuda::synchronize(0);
  state.counters["kernels"] = plan_kernels(run);
}

BENCHMARK(BM_cuda_graph_replay_50)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_cuda_compiled_call_50)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_cuda_sum_64M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cuda_softmax_4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cuda_linear_gelu_4096)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cuda_memcpy_d2d_64M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cuda_add_64M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cuda_exp_64M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cuda_add_1_latency)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_cuda_matmul_4096)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cublaslt_matmul_4096)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
