// LibTorch peers for bench_ops2 (built only when Debian's libtorch-dev is installed).
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_torch_peers.h"

namespace {
void BM_torch_conv2d(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  torch::NoGradGuard no_grad;
  at::Tensor x = at::randn({8, 64, 56, 56}), w = at::randn({64, 64, 3, 3});
  for (auto _ : st) benchmark::DoNotOptimize(at::conv2d(x, w, {}, 1, 1).data_ptr());
  st.SetItemsProcessed(st.iterations() * 2 * 8 * 64 * 56 * 56 * 64 * 9);
}
BENCHMARK(BM_torch_conv2d)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_torch_einsum_attn(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  torch::NoGradGuard no_grad;
  at::Tensor q = at::randn({8, 12, 128, 64}), k = at::randn({8, 12, 128, 64});
  for (auto _ : st) benchmark::DoNotOptimize(at::einsum("bhqd,bhkd->bhqk", {q, k}).data_ptr());
  st.SetItemsProcessed(st.iterations() * 2 * 8 * 12 * 128 * 128 * 64);
}
BENCHMARK(BM_torch_einsum_attn)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_torch_max_pool2d(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  torch::NoGradGuard no_grad;
  at::Tensor x = at::randn({1, 64, 112, 112});
  for (auto _ : st) benchmark::DoNotOptimize(at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}).data_ptr());
  st.SetItemsProcessed(st.iterations() * 64 * 56 * 56 * 9);
}
BENCHMARK(BM_torch_max_pool2d)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
}  // namespace
