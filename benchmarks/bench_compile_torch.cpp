// LibTorch peers for bench_compile (built only when libtorch-dev is installed).
#include <benchmark/benchmark.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "bench_torch_peers.h"

namespace {
constexpr int64_t kBig = 16 << 20;

using kb::BM_torch_add_1elem;
BENCHMARK(BM_torch_add_1elem);

// TorchScript: compile the same 20-op function from source and make the
// first call (this LibTorch build does not fuse on the CPU).
void BM_torchscript_first_call_20op(benchmark::State& st) {
  const char* src = R"(
def f(a, b):
    x = a * b + 1.0
    x = torch.tanh(x) * 0.9 + a
    x = torch.tanh(x) * 0.9 + a
    x = torch.tanh(x) * 0.9 + a
    x = torch.tanh(x) * 0.9 + a
    x = torch.tanh(x) * 0.9 + a
    x = torch.tanh(x) * 0.9 + a
    return x - b
)";
  at::Tensor a = at::rand({1024}), b = at::rand({1024});
  for (auto _ : st) {
    auto cu = torch::jit::compile(src);
    benchmark::DoNotOptimize(cu->run_method("f", a, b));
  }
}
BENCHMARK(BM_torchscript_first_call_20op)->Unit(benchmark::kMicrosecond)->UseRealTime();

template <int64_t N>
void BM_torch_chain(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  at::Tensor a = at::rand({N}), b = at::rand({N}), c = at::rand({N});
  at::tanh(a * b + c) * 0.5 + at::exp(-a);  // warm-up
  for (auto _ : st) benchmark::DoNotOptimize((at::tanh(a * b + c) * 0.5 + at::exp(-a)).data_ptr());
  st.SetBytesProcessed(st.iterations() * N * 16);
}
BENCHMARK_TEMPLATE(BM_torch_chain, kBig)->Name("BM_torch_chain_16M")->Arg(1)->Arg(2)->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_torch_chain, int64_t{1} << 20)->Name("BM_torch_chain_1M")->Arg(1)->Arg(2)->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_torch_softmax_rows(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  at::Tensor x = at::randn({1024, 1024});
  for (auto _ : st) benchmark::DoNotOptimize(at::softmax(x, -1).data_ptr());
}
void BM_torch_layernorm_rows(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  at::Tensor x = at::randn({1024, 1024});
  for (auto _ : st) benchmark::DoNotOptimize(at::layer_norm(x, {1024}).data_ptr());
}
BENCHMARK(BM_torch_softmax_rows)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_torch_layernorm_rows)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
}  // namespace
