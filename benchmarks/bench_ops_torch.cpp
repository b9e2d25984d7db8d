// LibTorch peers for bench_ops (built only when Debian's libtorch-dev is installed).
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_torch_peers.h"

namespace {
constexpr int64_t kBig = 16 << 20;

using kb::BM_torch_add_1elem;
BENCHMARK(BM_torch_add_1elem);

template <int Op>
void BM_torch_ew(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  at::Tensor a = at::rand({kBig}) + 0.5, b = at::rand({kBig}) + 0.5;
  int64_t bytes = 0;
  for (auto _ : st) {
    at::Tensor r;
    switch (Op) {
      case 0: r = a + b; bytes = 12; break;
      case 1: r = a * b; bytes = 12; break;
      case 2: r = -a; bytes = 8; break;
      case 3: r = at::exp(a); bytes = 8; break;
      case 4: r = at::tanh(a); bytes = 8; break;
      case 5: r = at::sqrt(a); bytes = 8; break;
    }
    benchmark::DoNotOptimize(r.data_ptr());
  }
  st.SetBytesProcessed(st.iterations() * kBig * bytes);
}
BENCHMARK_TEMPLATE(BM_torch_ew, 0)->Name("BM_torch_add_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_torch_ew, 1)->Name("BM_torch_mul_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_torch_ew, 2)->Name("BM_torch_neg_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_torch_ew, 3)->Name("BM_torch_exp_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_torch_ew, 4)->Name("BM_torch_tanh_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_torch_ew, 5)->Name("BM_torch_sqrt_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_torch_mm(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(static_cast<int>(st.range(1)));
  at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  for (auto _ : st) benchmark::DoNotOptimize(at::mm(a, b).data_ptr());
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
BENCHMARK(BM_torch_mm)->Args({256, 1})->Args({256, 2})->Args({512, 1})->Args({512, 2})->Args({1024, 1})->Args({1024, 2})
    ->UseRealTime()->Unit(benchmark::kMicrosecond);
}  // namespace
