// kiln benchmarks: what the LibTorch peer files (<name>_torch.cpp, built
// only when libtorch-dev is installed) share. Include it from the one such
// file of a benchmark: it defines that benchmark's kb::set_torch_threads
// (replacing bench_peers.cpp's weak no-op; a second including file in the
// same benchmark is a link error).
#pragma once
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_peers.h"

namespace kb {

void set_torch_threads(int n) { at::set_num_threads(n); }

/// LibTorch's dispatch cost: a 1-element float32 add on one thread
/// (registered by the files that compare it: BENCHMARK(BM_torch_add_1elem)).
inline void BM_torch_add_1elem(benchmark::State& st) {
  at::set_num_threads(1);
  at::Tensor a = at::ones({1}), b = at::ones({1});
  for (auto _ : st) benchmark::DoNotOptimize(at::add(a, b));
}

}  // namespace kb
