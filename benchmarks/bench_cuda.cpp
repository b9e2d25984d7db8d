// CUDA eager figures (issue 12), each beside its peer in the same run:
//   add / exp on 64M float32 vs a device-to-device cudaMemcpyAsync (the
//   bandwidth ceiling; bytes_per_second counts each op's reads + writes),
//   the eager launch of a 1-element add (host time per call, asynchronous,
//   synchronised once per batch), matmul 4096^2 float32/bfloat16 (TFLOPS;
//   its peer, a direct cublasLtMatmul, is still open).
// Without a device every benchmark is skipped with the driver's message.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <kiln/kiln.h>

#include "../backends/cuda/cuda_backend.h"

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
  // The peer (a direct cublasLtMatmul of the same operands) is still open.
}

}  // namespace

BENCHMARK(BM_cuda_memcpy_d2d_64M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cuda_add_64M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cuda_exp_64M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cuda_add_1_latency)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_cuda_matmul_4096)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
