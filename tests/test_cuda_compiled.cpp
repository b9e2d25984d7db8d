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
#include <fstream>
#include <map>
#include <sstream>

#include "../backends/cuda/nvrtc_compiler.h"
#include "../jit/cuda_executable.h"
#include "../jit/cuda_lowering.h"
#include "../jit/engine.h"
#include "../jit/mef.h"
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

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_SUITE("cuda_compiled") {
  TEST_CASE("every elementwise op-table row lowers to one generated kernel that compiles to an sm_90 cubin") {
    ScratchCache cache;
    const std::vector<Row> rows = elementwise_rows();
    REQUIRE(rows.size() > 40);
    for (DType dt : {DType::float32, DType::float64, DType::int32, DType::float16, DType::bfloat16}) {
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
      // (Cast runs eager's conversion, hd::cast_to, not the identity functor.)
      for (const Row& r : rows)
        CHECK(p.module_source.find(r.op == OpId::Cast ? std::string("kiln::hd::cast_to<")
                                                       : codegen::cuda_functor_name(r.op) + "{}(") != std::string::npos);
      const auto m = cuda::compile_module(p.module_source, "sm_90");
      int max_regs = 0;
      const std::string table = check_resources(*m, kernel_names(p), max_regs);
      MESSAGE(name(dt) << ": " << rows.size() << " rows, sm_90 cubin, at most " << max_regs
                       << " registers, no spills:\n" << table);
    }
  }

  TEST_CASE("the fused groups of the differential fuzzer's graphs compile to sm_90 cubins") {
    ScratchCache cache;
    // CI compiles a sample (kDefaultGraphs, seeds spread evenly over the
    // 1,000 so the rarer fused reductions stay in it): all 1,000 took
    // 64 s wall (34 s CPU, 1,357 distinct kernels, at most 56 registers, no
    // spills) on a 2-core machine at load 9. The full count (scripts/
    // gpu_check.sh): KILN_NVRTC_FUZZ_GRAPHS=1000.
    constexpr int kDefaultGraphs = 200;
    int graphs = kDefaultGraphs;
    if (const char* e = std::getenv("KILN_NVRTC_FUZZ_GRAPHS")) graphs = std::max(1, std::atoi(e));
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
    const int stride = graphs < 1000 ? 1000 / graphs : 1;
    for (int gi = 0; gi < graphs; ++gi) {
      const uint64_t seed = 1000 + static_cast<uint64_t>(gi) * static_cast<uint64_t>(stride);
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
          ++fallbacks;  // ops outside every group (or in a group the generator declined)
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


  TEST_CASE("float16/bfloat16 groups: one kernel, each op's result rounded to 16 bits, casts through hd::cast_to") {
    ScratchCache cache;
    for (DType h : {DType::float16, DType::bfloat16}) {
      CAPTURE(name(h));
      const char* rn = h == DType::float16 ? "kiln_rt::rn_f16(" : "kiln_rt::rn_bf16(";
      const char* ld = h == DType::float16 ? "kiln_rt::ld_f16(" : "kiln_rt::ld_bf16(";
      const char* st = h == DType::float16 ? "kiln_rt::st_f16(" : "kiln_rt::st_bf16(";
      // y = (x*w + x) / 3 in 16 bits (three 16-bit results), then two casts:
      // to int32 (hd::cast_to: NaN/inf/out-of-range as eager) and to float32.
      Graph g("half", {});
      const GraphValue x = g.add_input(TensorType(h, {64, 32}, Device::cuda(0)));
      const GraphValue w = g.add_input(TensorType(h, {32}, Device::cuda(0)));
      const GraphValue three = g.add_constant(Tensor::from_vector(std::vector<float>{3.0f}).reshape({}).to(h));
      const GraphValue xw = g.add_op(OpId::Mul, std::array{x, w});
      const GraphValue sum = g.add_op(OpId::Add, std::array{xw, x});
      const GraphValue y = g.add_op(OpId::Div, std::array{sum, three});
      Attrs to_int, to_f32;
      to_int.dtype = DType::int32;
      to_f32.dtype = DType::float32;
      const GraphValue yi = g.add_op(OpId::Cast, std::array{y}, to_int);
      const GraphValue yf = g.add_op(OpId::Cast, std::array{y}, to_f32);
      g.output_values({y, yi, yf});
      g.verify();
      const codegen::CudaPlan p = cuda_plan_of(g);
      INFO(p.describe() << p.module_source);
      REQUIRE(p.steps.size() == 1);
      const CudaStep& s = p.steps[0];
      REQUIRE(s.kind == CudaStep::Kind::kernel);  // no 16-bit fallback to eager kernels
      CHECK(s.num_outputs == 3);
      const std::string& k = s.kernel.source;
      CHECK(count_of(k, rn) == 3);              // mul, add, div: each rounded as eager stores it
      CHECK(count_of(k, ld) == 2);              // x and w loaded once each
      CHECK(count_of(k, st) == 1);              // y stored once
      CHECK(count_of(k, "unsigned short* __restrict__") == 3);  // y, x, w in 16 bits
      CHECK(k.find("kiln::hd::cast_to<int32_t>(") != std::string::npos);
      CHECK(k.find("kiln::hd::cast_to<float>(") != std::string::npos);
      // the constant 3 as the float it widens to, bit-exact
      CHECK(k.find("__int_as_float(0x40400000u)") != std::string::npos);
      const auto m = cuda::compile_module(p.module_source, "sm_90");
      int max_regs = 0;
      MESSAGE(name(h) << " group: " << check_resources(*m, kernel_names(p), max_regs));
    }
    // float64 -> float16 rounds once (cvt.rn.f16.f64, as __double2half);
    // float64 -> bfloat16 runs eager's cast kernel (no such cvt before sm_90).
    for (DType h : {DType::float16, DType::bfloat16}) {
      Graph g("narrow", {});
      const GraphValue x = g.add_input(TensorType(DType::float64, {100}, Device::cuda(0)));
      const GraphValue x2 = g.add_op(OpId::Mul, std::array{x, x});
      Attrs a;
      a.dtype = h;
      g.output_values({g.add_op(OpId::Cast, std::array{x2}, a)});
      g.verify();
      const codegen::CudaPlan p = cuda_plan_of(g);
      INFO(p.describe());
      if (h == DType::float16) {
        REQUIRE(p.steps.size() == 1);
        CHECK(p.module_source.find("kiln_rt::st_f16_rn64(") != std::string::npos);
        int max_regs = 0;
        check_resources(*cuda::compile_module(p.module_source, "sm_90"), kernel_names(p), max_regs);
      } else {
        int ops = 0;
        for (const CudaStep& s : p.steps) ops += s.kind == CudaStep::Kind::op;
        CHECK(ops == 2);  // the group declined: both nodes run their eager kernels
      }
    }
  }

  TEST_CASE("casts in generated kernels go through hd::cast_to for every source and target dtype") {
    ScratchCache cache;
    const DType dts[] = {DType::bool_, DType::uint8, DType::int8, DType::int32, DType::int64,
                         DType::float16, DType::bfloat16, DType::float32, DType::float64};
    Graph g("casts", {});
    std::vector<GraphValue> outs;
    int64_t rows = 2;
    for (DType from : dts)
      for (DType to : dts) {
        if (from == to || (from == DType::float64 && to == DType::bfloat16)) continue;
        const GraphValue x = g.add_input(TensorType(from, {rows++, 3}, Device::cuda(0)));  // one group each
        Attrs a;
        a.dtype = to;
        outs.push_back(g.add_op(OpId::Cast, std::array{x}, a));
      }
    g.output_values(outs);
    g.verify();
    const codegen::CudaPlan p = cuda_plan_of(g);
    REQUIRE(p.steps.size() == outs.size());
    for (const CudaStep& s : p.steps) CHECK(s.kind == CudaStep::Kind::kernel);
    // No C-style conversion of a float to an integer remains (undefined for
    // NaN and out-of-range values; eager gives To's minimum).
    CHECK(p.module_source.find("int32_t(kiln::hd::Cast") == std::string::npos);
    // every cast but float64 -> float16 (one cvt.rn.f16.f64, as __double2half)
    CHECK(count_of(p.module_source, "kiln::hd::cast_to<") == outs.size() - 1);
    int max_regs = 0;
    check_resources(*cuda::compile_module(p.module_source, "sm_90"), kernel_names(p), max_regs);
    MESSAGE(outs.size() << " casts, sm_90, at most " << max_regs << " registers");
  }

  TEST_CASE("strict mode: NVRTC gets -fmad=false, nothing is contracted across ops; the default may contract") {
    ScratchCache cache;
    CHECK(cuda::module_options("sm_90", true) ==
          std::vector<std::string>{"-std=c++17", "-default-device", "-arch=sm_90", "-Xptxas=-v", "-fmad=false"});
    CHECK(cuda::module_options("sm_90", false) ==
          std::vector<std::string>{"-std=c++17", "-default-device", "-arch=sm_90", "-Xptxas=-v"});
    const std::string kd = cuda::module_feature_key("sm_90", false), ks = cuda::module_feature_key("sm_90", true);
    CHECK(kd != ks);
    CHECK(ks.find("-fmad=false") != std::string::npos);
    CHECK(kd.rfind("sm_90 nvrtc=", 0) == 0);
    CHECK(kd.find(" templates=") != std::string::npos);
    // a*b + c, and a sum of a*b: fused with the product (a reduction inside the group).
    auto f = [](Tensor a, Tensor b, Tensor c) { return std::vector<Tensor>{a * b + c, sum(a * b, {-1})}; };
    for (bool strict : {false, true}) {
      CAPTURE(strict);
      CompileOptions o;
      o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = strict});
      CompiledCallable run = compile(f, o)(cuda_f32({256, 256}), cuda_f32({256, 256}), cuda_f32({256, 256}));
      const codegen::CudaExecutable* cx = run.engine_model().artifact().cuda_plan();
      REQUIRE(cx);
      CHECK(cx->plan().strict == strict);
      REQUIRE(cx->module());
      const auto& opts = cx->module()->options;
      CHECK((std::find(opts.begin(), opts.end(), "-fmad=false") != opts.end()) == strict);
      const std::string ptx = cuda::compile_ptx(cx->plan().module_source, "sm_90", strict);
      if (std::getenv("KILN_TEST_SHOW_PTX")) MESSAGE(ptx);
      // Strict: every float multiply and add carries .rn, which ptxas never
      // fuses, and none is an fma. Default: plain mul.f32/add.f32, which
      // ptxas may contract into one FMA (within the tolerance only).
      CHECK(ptx.find("fma.rn.f32") == std::string::npos);
      CHECK((ptx.find("mul.rn.f32") != std::string::npos) == strict);
      CHECK((ptx.find("add.rn.f32") != std::string::npos) == strict);
      CHECK((ptx.find("mul.f32") != std::string::npos) == !strict);
      CHECK((ptx.find("add.f32") != std::string::npos) == !strict);
    }
  }

  TEST_CASE("MEF CUBN: a read on the same feature key adopts the cubin (no NVRTC); another key or damage recompiles") {
    ScratchCache cache;
    auto f = [](Tensor a, Tensor b) { return tanh(a * b) + exp(-a); };
    CompiledCallable run = compile(f)(cuda_f32({1000}), cuda_f32({1000}));
    const codegen::CudaExecutable* cx = run.engine_model().artifact().cuda_plan();
    REQUIRE(cx);
    REQUIRE(cx->module());
    const std::vector<char> image = cx->module()->image;
    const std::filesystem::path path = cache.dir / "cuda.mef";
    std::filesystem::create_directories(cache.dir);
    run.export_mef(path.string());
    const std::string bytes = file_bytes(path);
    const mef::Contents c = mef::decode(bytes, "cuda.mef");
    CHECK(c.cubin.feature_key == cuda::module_feature_key("sm_90", false));
    CHECK(c.cubin.image == image);
    CHECK(c.cubin.is_cubin);
    CHECK(c.cubin.image_arch == "sm_90");
    CHECK(c.cubin.source_hash == codegen::module_source_hash(cx->plan().module_source));
    CHECK(c.cubin.kernels.size() == cx->module()->kernels.size());
    CHECK(c.cubin_note.empty());

    auto fresh = [&] {  // neither cache may answer: only the file or NVRTC
      cuda::clear_module_memory_cache();
      std::filesystem::remove_all(cache.dir / "kmods");
      setenv("KILN_CUDA_CACHE_DIR", (cache.dir / "kmods").c_str(), 1);
    };
    auto read = [&](const std::string& b, std::shared_ptr<InferenceSession> session = nullptr) {
      fresh();
      const int64_t before = cuda::nvrtc_compilations();
      auto art = engine::read_bytes(b, "cuda.mef", std::move(session));
      const int64_t compiled = cuda::nvrtc_compilations() - before;
      REQUIRE(art->cuda_plan());  // engine::read of a CUDA graph builds its CUDA plan
      return std::make_pair(art, compiled);
    };
    {  // same key: adopted, NVRTC does not run
      auto [art, compiled] = read(bytes);
      CHECK(compiled == 0);
      CHECK(art->cuda_plan()->module()->from == cuda::CompiledModule::From::mef);
      CHECK(art->cuda_plan()->module()->image == image);
      CHECK(art->cuda_plan()->stored_note().empty());
      CHECK(art->cuda_plan()->plan().module_source == cx->plan().module_source);
    }
    {  // another key (another architecture, NVRTC or templates): compiled from the graph
      mef::Contents other = c;
      other.cubin.feature_key = "sm_80 nvrtc=11.8 templates=0000000000000000 -std=c++17 -default-device -Xptxas=-v";
      auto [art, compiled] = read(mef::encode(other));
      CHECK(compiled == 1);
      CHECK(art->cuda_plan()->module()->from == cuda::CompiledModule::From::compiled);
      CHECK(art->cuda_plan()->module()->image == image);
      CHECK(art->cuda_plan()->stored_note().find("compiled for 'sm_80") != std::string::npos);
    }
    {  // a strict reader has another key (-fmad=false): compiled
      auto [art, compiled] = read(bytes, std::make_shared<InferenceSession>(KernelOptions{.strict = true}));
      CHECK(compiled == 1);
      CHECK(art->cuda_plan()->module()->from == cuda::CompiledModule::From::compiled);
      CHECK(art->cuda_plan()->stored_note().find("-fmad=false") != std::string::npos);
    }
    {  // another source under the same key (a file edited by hand): compiled
      mef::Contents other = c;
      other.cubin.source_hash ^= 1;
      auto [art, compiled] = read(mef::encode(other));
      CHECK(compiled == 1);
      CHECK(art->cuda_plan()->stored_note().find("another source") != std::string::npos);
    }
    {  // damaged image bytes, the file's checksum made to agree: the section is ignored
      const size_t tag = bytes.find("CUBN");
      REQUIRE(tag != std::string::npos);
      std::string bad = bytes;
      const size_t at = tag + 12 + (bytes.size() - 4 - tag - 12) / 2;  // inside the payload (the image)
      bad[at] = static_cast<char>(bad[at] ^ 0x20);
      mef::reseal(bad);
      const mef::Contents d = mef::decode(bad, "cuda.mef");
      CHECK(d.cubin.image.empty());
      CHECK(d.cubin_note.find("CUBN") != std::string::npos);
      auto [art, compiled] = read(bad);
      CHECK(compiled == 1);
      CHECK(art->cuda_plan()->module()->from == cuda::CompiledModule::From::compiled);
      CHECK(art->cuda_plan()->module()->image == image);
    }
    {  // a truncated section (its length made consistent): ignored the same way
      // decode_cubin needs every field: a CUBN of only a feature key is malformed
      std::vector<std::pair<std::string, std::string>> sections;
      sections.emplace_back("META", mef::writer_string());
      sections.emplace_back("GRPH", c.graph_text);
      sections.emplace_back("SIGN", mef::encode_signature(c.signature));
      sections.emplace_back("WGTS", mef::encode_weights(c.weights));
      sections.emplace_back("CUBN", std::string("\x05\x00\x00\x00sm_90", 9));
      const std::string cut = mef::encode_sections(mef::kFormatVersion, sections);
      const mef::Contents d = mef::decode(cut, "cuda.mef");
      CHECK(d.cubin.image.empty());
      CHECK(d.cubin_note.find("malformed") != std::string::npos);
      auto [art, compiled] = read(cut);
      CHECK(compiled == 1);
    }
    setenv("KILN_CUDA_CACHE_DIR", cache.dir.c_str(), 1);
  }

  TEST_CASE("plans for CUDA layouts: bench_cuda's replay graph is 50 generated kernels") {
    ScratchCache cache;
    // x -> 49 x (x - max(x * 0.5, -1)) (benchmarks/bench_cuda.cpp's replay
    // graph): each step's subtract, the next multiply and its max are one
    // kernel (the max's input never stored), plus the last subtract: 50.
    auto f = [](Tensor x) {
      for (int i = 0; i < 49; ++i) x = x - max(x * 0.5f, {-1}, true);
      return x;
    };
    CompiledCallable run = compile(f)(cuda_f32({8, 256}));
    const codegen::CudaExecutable* cx = run.engine_model().artifact().cuda_plan();
    REQUIRE(cx);
    const codegen::CudaPlan& p = cx->plan();
    INFO(p.describe());
    int kernels = 0, reduce = 0, other = 0;
    for (const CudaStep& s : p.steps) {
      kernels += s.kind == CudaStep::Kind::kernel;
      reduce += s.kind == CudaStep::Kind::kernel && s.launch.shared_bytes > 0;
      other += s.kind != CudaStep::Kind::kernel;
    }
    MESSAGE("replay graph: " << kernels << " generated kernels (" << reduce << " with a fused max), " << other
                              << " other steps");
    CHECK(kernels == 50);
    CHECK(reduce == 49);  // each max runs inside the group computing its input
    CHECK(other == 0);
  }

  TEST_CASE("capture on a CUDA callable: the CPU's argument errors; without a device, DeviceError") {
    ScratchCache cache;
    auto f = [](Tensor a, Tensor b) { return a * b + 1.0f; };
    CompiledCallable run = compile(f)(cuda_f32({16}), cuda_f32({16}));
    const engine::Model& m = run.engine_model();
    REQUIRE(m.artifact().cuda_plan());
    // CPU buffers for a CUDA callable: the device is named, nothing recorded.
    const std::vector<Tensor> cpu = {ones({16}), ones({16})};
    CHECK_THROWS_WITH_AS(m.capture(7, cpu), doctest::Contains("argument 0: expected float32[16] cuda:0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(m.replay(7, cpu), doctest::Contains("no capture under this key"), ValueError);
    CHECK_THROWS_AS(m.capture(7, {}), ValueError);
    CHECK(m.num_captures() == 0);
    if (cuda::device_count() == 0) {
      // No CUDA tensor can exist here: building one raises the driver's DeviceError.
      CHECK_THROWS_AS(zeros({16}, DType::float32, Device::cuda(0)), DeviceError);
    }
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
