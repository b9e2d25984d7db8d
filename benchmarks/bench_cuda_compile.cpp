// Compiled CUDA plans, the host side (issue 13; no GPU needed): the NVRTC
// compile of a generated module for a 20-op fused elementwise group to an
// sm_90 cubin, beside the compile of a 1-op group (the fixed cost of an
// NVRTC run) in the same run; and the module caches: a disk-cache hit
// (target: at most 1 ms) beside an in-process hit.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include <kiln/kiln.h>

#include "../backends/cuda/nvrtc_compiler.h"
#include "../jit/cuda_lowering.h"

namespace {
using namespace kiln;

// The module of one fused group of `ops` elementwise ops over two float32
// [1 << 20] inputs on cuda:0 (a chain cycling through mul, add, tanh, sub,
// exp, sigmoid, maximum, silu); `salt` makes the text unique (no cache hit).
std::string chain_module(int ops, int salt) {
  Graph g("chain", {});
  const TensorType t(DType::float32, {1 << 20}, Device::cuda(0));
  GraphValue a = g.add_input(t), b = g.add_input(t), x = a;
  const OpId cycle[] = {OpId::Mul, OpId::Add, OpId::Tanh, OpId::Sub, OpId::Exp, OpId::Sigmoid, OpId::Maximum, OpId::Silu};
  for (int i = 0; i < ops; ++i) {
    const OpId op = cycle[i % 8];
    const bool binary = op == OpId::Mul || op == OpId::Add || op == OpId::Sub || op == OpId::Maximum;
    std::vector<GraphValue> in = {x};
    if (binary) in.push_back(i % 2 ? a : b);
    x = g.add_op(op, in);
  }
  g.output_values({x});
  const KernelOptions opt;
  const codegen::FusionPlan f = codegen::plan_fusion(g, opt, codegen::cuda_fusion_rules(opt));
  const codegen::CudaPlan p = codegen::lower_cuda(g, f, opt, 0);
  return p.module_source + "// " + std::to_string(salt) + "\n";
}

void compile_bench(benchmark::State& state, int ops) {
  setenv("KILN_CUDA_CACHE_DIR", "", 1);  // no disk cache
  int salt = 0;
  int regs = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string src = chain_module(ops, salt++);
    cuda::clear_module_memory_cache();
    state.ResumeTiming();
    auto m = cuda::compile_module(src, "sm_90");
    if (!m->kernels.empty()) regs = m->kernels[0].registers;
    benchmark::DoNotOptimize(m);
  }
  state.counters["registers"] = regs;
  unsetenv("KILN_CUDA_CACHE_DIR");
}
void BM_nvrtc_compile_fused_20_ops(benchmark::State& state) { compile_bench(state, 20); }
void BM_nvrtc_compile_fused_1_op(benchmark::State& state) { compile_bench(state, 1); }
BENCHMARK(BM_nvrtc_compile_fused_20_ops)->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK(BM_nvrtc_compile_fused_1_op)->Unit(benchmark::kMillisecond)->Iterations(10);

void cache_bench(benchmark::State& state, bool disk) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_bench_cuda_cache_" + std::to_string(::getpid()));
  setenv("KILN_CUDA_CACHE_DIR", dir.c_str(), 1);
  const std::string src = chain_module(20, -1);  // a text the compile benchmarks never made
  cuda::clear_module_memory_cache();
  cuda::compile_module(src, "sm_90");  // fills both caches
  for (auto _ : state) {
    if (disk) cuda::clear_module_memory_cache();
    auto m = cuda::compile_module(src, "sm_90");
    if (m->from != (disk ? cuda::CompiledModule::From::disk : cuda::CompiledModule::From::memory))
      state.SkipWithError("not the expected cache");
    benchmark::DoNotOptimize(m);
  }
  unsetenv("KILN_CUDA_CACHE_DIR");
  std::filesystem::remove_all(dir);
}
void BM_module_cache_hit_disk(benchmark::State& state) { cache_bench(state, true); }
void BM_module_cache_hit_memory(benchmark::State& state) { cache_bench(state, false); }
BENCHMARK(BM_module_cache_hit_disk)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_module_cache_hit_memory)->Unit(benchmark::kMicrosecond);
}  // namespace

BENCHMARK_MAIN();
