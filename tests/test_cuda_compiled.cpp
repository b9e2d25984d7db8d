// Compiled CUDA plans without a GPU: the CUDA lowering of fusion plans
// (jit/cuda_lowering.h) and its NVRTC compilation (backends/cuda/
// nvrtc_compiler.h) to sm_90 cubins. Every elementwise op-table row and the
// fused groups of the differential fuzzer's graphs (tests/fuzz_cases.h)
// compile; ptxas's register and spill counts are reported (a spill fails).
// Plans for CUDA layouts (groups, arena offsets, launch configurations,
// jit cache keys) are checked on the CPU; running one raises DeviceError
// here. Runs on a GPU: scripts/gpu_check.sh.
#include "test_util.h"

#if KILN_TEST_CUDA_BUILT
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "../backends/cuda/nvrtc_compiler.h"
#include "../jit/cuda_executable.h"
#include "../jit/cuda_lowering.h"
#include "../jit/engine.h"
#include "../trace/passes/passes.h"
#include "fuzz_cases.h"

namespace {
using namespace kiln;
using codegen::CudaStep;

struct Row {
  OpId op;
  OpCategory cat;
};
std::vector<Row> elementwise_rows() {
  std::vector<Row> rows;
#define KILN_OP(id, name, arity, cat, rule)                                                       \
  if (OpCategory::cat == OpCategory::Unary || OpCategory::cat == OpCategory::Binary ||            \
      OpCategory::cat == OpCategory::Ternary)                                                     \
    rows.push_back({OpId::id, OpCategory::cat});
#include "../tensor/ops.def"
#undef KILN_OP
  return rows;
}

// A temporary disk cache for this process's compiles (KILN_CUDA_CACHE_DIR).
struct ScratchCache {
  std::filesystem::path dir;
  ScratchCache() {
    dir = std::filesystem::temp_directory_path() / ("kiln_cuda_cache_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    setenv("KILN_CUDA_CACHE_DIR", dir.c_str(), 1);
  }
  ~ScratchCache() {
    unsetenv("KILN_CUDA_CACHE_DIR");
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// Checks every kernel of `m` named in `names` has ptxas figures and no spill;
// returns "name: N registers" lines.
std::string check_resources(const cuda::CompiledModule& m, const std::vector<std::string>& names, int& max_regs) {
  std::string table;
  REQUIRE(m.is_cubin);
  REQUIRE(m.image.size() > 4);
  CHECK(std::string(m.image.begin(), m.image.begin() + 4) == "\x7f" "ELF");
  for (const std::string& n : names) {
    CAPTURE(n);
    const cuda::KernelResources* r = m.resources(n);
    REQUIRE_MESSAGE(r, "no ptxas figures for " << n << "\n" << m.log);
    CHECK(r->registers > 0);
    CHECK_MESSAGE(r->spill_store_bytes + r->spill_load_bytes == 0, n << " spills");
    max_regs = std::max(max_regs, r->registers);
    table += n + ": " + std::to_string(r->registers) + " registers, spill " + std::to_string(r->spill_store_bytes) +
             "/" + std::to_string(r->spill_load_bytes) + "\n";
  }
  return table;
}

// The CUDA plan of flat graph `g` for cuda:0.
codegen::CudaPlan cuda_plan_of(const Graph& g, const KernelOptions& opt = {}) {
  const codegen::FusionPlan f = codegen::plan_fusion(g, opt, codegen::cuda_fusion_rules(opt));
  return codegen::lower_cuda(g, f, opt, 0);
}

std::vector<std::string> kernel_names(const codegen::CudaPlan& p) {
  std::vector<std::string> r;
  for (const CudaStep& s : p.steps)
    if (s.kind == CudaStep::Kind::kernel) r.push_back(s.kernel.name);
  return r;
}

TensorLayout cuda_f32(Shape s) { return TensorLayout(DType::float32, std::move(s), Device::cuda(0)); }
}  // namespace

TEST_SUITE("cuda_compiled") {
  TEST_CASE("every elementwise op-table row lowers to one generated kernel that compiles to an sm_90 cubin") {
    ScratchCache cache;
    const std::vector<Row> rows = elementwise_rows();
    REQUIRE(rows.size() > 40);
    for (DType dt : {DType::float32, DType::float64, DType::int32}) {
      CAPTURE(name(dt));
      // One graph, one shape per row (so each row is its own group).
      Graph g("rows", {});
      std::vector<GraphValue> outs;
      int generated = 0;
      for (size_t r = 0; r < rows.size(); ++r) {
        const Shape shape = {static_cast<int64_t>(r) + 2, 3};
        const int arity = rows[r].cat == OpCategory::Unary ? 1 : rows[r].cat == OpCategory::Binary ? 2 : 3;
        std::vector<GraphValue> in;
        for (int k = 0; k < arity; ++k)
          in.push_back(g.add_input(TensorType(rows[r].op == OpId::Where && k == 0 ? DType::bool_ : dt, shape,
                                              Device::cuda(0))));
        Attrs a;
        a.dtype = dt == DType::float32 ? DType::float64 : DType::float32;  // Cast's target
        outs.push_back(g.add_op(rows[r].op, in, a));
      }
      g.output_values(outs);
      g.verify();
      const codegen::CudaPlan p = cuda_plan_of(g);
      for (const CudaStep& s : p.steps) {
        CAPTURE(s.node);
        CHECK(s.kind == CudaStep::Kind::kernel);  // no row falls back to its eager kernel
        generated += s.kind == CudaStep::Kind::kernel;
      }
      CHECK(generated == static_cast<int>(rows.size()));
      // The source names each row's functor from the op table.
      for (const Row& r : rows) CHECK(p.module_source.find(codegen::cuda_functor_name(r.op) + "{}(") != std::string::npos);
      const auto m = cuda::compile_module(p.module_source, "sm_90");
      int max_regs = 0;
      const std::string table = check_resources(*m, kernel_names(p), max_regs);
      MESSAGE(name(dt) << ": " << rows.size() << " rows, sm_90 cubin, at most " << max_regs
                       << " registers, no spills:\n" << table);
    }
  }

  TEST_CASE("the fused groups of the differential fuzzer's graphs compile to sm_90 cubins") {
    ScratchCache cache;
    int graphs = 1000;
    if (const char* e = std::getenv("KILN_CUDA_FUZZ_GRAPHS")) graphs = std::max(1, std::atoi(e));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<codegen::CudaKernelSource> batch;
    std::map<std::string, int> groups_per_name;
    int kernels = 0, reduce_kernels = 0, fallbacks = 0, max_regs = 0, modules = 0;
    auto flush = [&] {
      if (batch.empty()) return;
      const auto m = cuda::compile_module(codegen::cuda_module_source(batch), "sm_90");
      std::vector<std::string> names;
      for (const auto& k : batch) names.push_back(k.name);
      check_resources(*m, names, max_regs);
      ++modules;
      batch.clear();
    };
    for (int gi = 0; gi < graphs; ++gi) {
      const uint64_t seed = 1000 + static_cast<uint64_t>(gi);
      CAPTURE(seed);
      fuzz_cases::FuzzCase c = fuzz_cases::make_case(seed);
      auto fn = [&c](std::vector<Tensor> xs) { return fuzz_cases::run_case(c, xs); };
      std::vector<TensorLayout> layouts;
      for (const Tensor& t : c.inputs) layouts.push_back(TensorLayout(t.dtype(), t.shape()));
      // The engine's passes (traced on CPU layouts: the lowering reads shapes and dtypes only).
      CompiledCallable run = compile(fn)(layouts);
      const Graph& g = run.engine_model().artifact().graph();
      const codegen::CudaPlan p = cuda_plan_of(g);
      for (const CudaStep& s : p.steps) {
        if (s.kind == CudaStep::Kind::kernel) {
          ++kernels;
          reduce_kernels += s.launch.shared_bytes > 0;
          if (groups_per_name[s.kernel.name]++ == 0) batch.push_back(s.kernel);
        } else if (s.kind == CudaStep::Kind::op && op_info(g.node(s.node).op).category != OpCategory::View &&
                   op_info(g.node(s.node).op).category != OpCategory::Reduce) {
          ++fallbacks;  // 16-bit float groups run eagerly
        }
      }
      if (batch.size() >= 200) flush();
    }
    flush();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(graphs << " fuzzer graphs: " << kernels << " generated kernels (" << groups_per_name.size()
                   << " distinct, " << reduce_kernels << " with a fused reduction) in " << modules
                   << " NVRTC modules, sm_90, at most " << max_regs << " registers, no spills; " << fallbacks
                   << " nodes left to eager kernels; " << secs << " s");
    CHECK(kernels > graphs / 2);
    CHECK(reduce_kernels > 0);
  }

  TEST_CASE("plans for CUDA layouts: one kernel, launch configuration, arena, cache key with the device") {
    ScratchCache cache;
    auto f = [](Tensor a, Tensor b, Tensor c) { return tanh(a * b + c) * 0.5f + exp(-a); };
    const int64_t n = 1 << 20;
    CompiledCallable run = compile(f)(cuda_f32({n}), cuda_f32({n}), cuda_f32({n}));
    const codegen::CudaExecutable* cx = run.engine_model().artifact().cuda_plan();
    REQUIRE(cx);
    CHECK(cx->device() == 0);
    const codegen::CudaPlan& p = cx->plan();
    REQUIRE(p.steps.size() == 1);
    const CudaStep& s = p.steps[0];
    CHECK(s.kind == CudaStep::Kind::kernel);
    CHECK(s.kernel.numel == n);
    CHECK(s.launch == codegen::CudaLaunch{static_cast<uint32_t>(n / 256), 256, 0});  // 4096 blocks of 256
    CHECK(s.num_outputs == 1);
    CHECK(s.operands.size() == 4);
    CHECK(p.memory.arena_bytes == 0);
    REQUIRE(cx->module());
    CHECK(cx->module()->is_cubin);
    CHECK(cx->module()->arch == "sm_90");
    // The same function on CPU layouts is another cache entry: the key carries the device.
    const std::vector<TensorLayout> cu = {cuda_f32({n}), cuda_f32({n}), cuda_f32({n})};
    const std::vector<TensorLayout> cpu = {TensorLayout(DType::float32, {n}), TensorLayout(DType::float32, {n}),
                                           TensorLayout(DType::float32, {n})};
    const TreeDef tree;  // a bare leaf: only the layouts differ
    const std::string kcu = detail::jit_key(tree, cu), kcpu = detail::jit_key(tree, cpu);
    CHECK(kcu != kcpu);
    CHECK(kcu.find("cuda:0") != std::string::npos);
    CompiledCallable on_cpu = compile(f)(cpu[0], cpu[1], cpu[2]);
    CHECK(on_cpu.engine_model().artifact().cuda_plan() == nullptr);
    // Running needs a device: DeviceError here, never a crash.
    if (cuda::device_count() == 0) CHECK_THROWS_AS(cx->run({}, {}), DeviceError);
  }

  TEST_CASE("plans for CUDA layouts: a trailing reduction runs inside its group, arena offsets for intermediates") {
    ScratchCache cache;
    // softmax-like rows: x*w+b reduced by max over the last axis (fused), then
    // exp(x - max) (a second group), a matmul (cuBLASLt) with a bias row.
    auto f = [](Tensor x, Tensor w, Tensor b, Tensor m) {
      Tensor y = x * w + b;
      Tensor mx = max(y, {-1}, true);
      Tensor e = exp(x - mx);
      return matmul(e, m) + b;
    };
    CompiledCallable run = compile(f)(cuda_f32({64, 64}), cuda_f32({64}), cuda_f32({64}), cuda_f32({64, 64}));
    const codegen::CudaExecutable* cx = run.engine_model().artifact().cuda_plan();
    REQUIRE(cx);
    const codegen::CudaPlan& p = cx->plan();
    INFO(p.describe());
    int reduce = 0, gemm = 0, kernels = 0;
    for (const CudaStep& s : p.steps) {
      kernels += s.kind == CudaStep::Kind::kernel;
      if (s.kind == CudaStep::Kind::kernel && s.launch.shared_bytes) {
        ++reduce;
        CHECK(s.launch == codegen::CudaLaunch{64, 64, 64 * sizeof(float)});  // a block per row, eager's 64 threads
      }
      if (s.kind == CudaStep::Kind::gemm) {
        ++gemm;
        CHECK(s.gemm_bias >= 0);  // the bias row goes to cuBLASLt's epilogue
      }
    }
    CHECK(reduce == 1);
    CHECK(gemm == 1);
    CHECK(kernels == 2);
    // Intermediates (the max, e) live in the arena at 64-byte aligned offsets, apart while both live.
    int in_arena = 0;
    for (int64_t off : p.memory.arena_offset)
      if (off >= 0) {
        ++in_arena;
        CHECK(off % 64 == 0);
        CHECK(off < static_cast<int64_t>(p.memory.arena_bytes));
      }
    CHECK(in_arena >= 2);
    CHECK(p.memory.arena_bytes >= 64 * 64 * sizeof(float));
    int max_regs = 0;
    check_resources(*cx->module(), kernel_names(p), max_regs);
  }

  TEST_CASE("NVRTC modules: in-process and disk caches; a disk hit is timed") {
    ScratchCache cache;
    const std::string src = "#include \"kernel_templates.h\"\nextern \"C\" __global__ void kiln_cache_probe(float* o, "
                            "const float* a, long long n) { long long i = threadIdx.x; if (i < n) o[i] = "
                            "kiln::hd::Tanh{}(a[i]); }\n";
    cuda::clear_module_memory_cache();
    const auto first = cuda::compile_module(src, "sm_90");
    CHECK(first->from == cuda::CompiledModule::From::compiled);
    CHECK(std::filesystem::exists(cache.dir));
    const auto again = cuda::compile_module(src, "sm_90");
    CHECK(again->from == cuda::CompiledModule::From::memory);
    cuda::clear_module_memory_cache();
    const auto t0 = std::chrono::steady_clock::now();
    const auto disk = cuda::compile_module(src, "sm_90");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    CHECK(disk->from == cuda::CompiledModule::From::disk);
    CHECK(disk->image == first->image);
    REQUIRE(disk->resources("kiln_cache_probe"));
    CHECK(disk->resources("kiln_cache_probe")->registers == first->resources("kiln_cache_probe")->registers);
    MESSAGE("disk-cache hit: " << ms << " ms (target <= 1 ms; benchmarks/bench_cuda_compile.cpp measures it)");
    // A source that does not compile: ValueError with NVRTC's log.
    CHECK_THROWS_AS(cuda::compile_module("extern \"C\" __global__ void k() { undeclared(); }", "sm_90"), ValueError);
    CHECK_THROWS_AS(cuda::compile_module(src, "ampere"), ValueError);
  }
}
#else
TEST_SUITE("cuda_compiled") {
  TEST_CASE("compiled CUDA plans (needs the CUDA build)") {
    MESSAGE("kiln built without CUDA: the NVRTC compile of CUDA plans is skipped");
  }
}
#endif
