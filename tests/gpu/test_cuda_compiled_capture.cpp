// Compiled CUDA plans on a device, part 2 (issue 13), label `gpu`; each case
// skips without a device:
//   - float16/bfloat16 fused groups equal eager CUDA bit for bit (each op's
//     result rounded to 16 bits), casts of NaN/inf/out-of-range floats to
//     integers as eager's cast kernel;
//   - strict mode (-fmad=false, exact ops only): compiled = eager bitwise,
//     fused reductions included;
//   - capture/replay: one CUDA Graph, replays follow new input values, the
//     CPU's errors, held memory not reused, release;
//   - a MEF read back adopts the cubin and runs to the same bits.
#include <cmath>
#include <filesystem>
#include <limits>

#include "../../backends/cuda/nvrtc_compiler.h"
#include "../../jit/cuda_executable.h"
#include "../../jit/engine.h"
#include "../same_bits.h"
#include "gpu_util.h"

namespace {
using namespace kiln;

Tensor on_gpu(const Tensor& t) { return t.to(Device::cuda(0)); }
bool same(const Tensor& a, const Tensor& b) { return kt::same_bits(a.cpu(), b.cpu()); }

// Values that exercise rounding and the casts' special cases.
Tensor specials(int64_t n, uint64_t seed) {
  std::vector<float> v = random::normal({n}, 0.0, 50.0, DType::float32, nullptr).to_vector<float>();
  const float sp[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), 3e9f, -3e9f, 65504.0f, 70000.0f, -0.0f, 1e-8f, 0.5f,
                      1.5f, 2.5f, -2.5f, 255.5f, 256.0f, -129.0f};
  for (size_t i = 0; i < sizeof sp / sizeof sp[0] && i < v.size(); ++i) v[(i * 37 + seed) % v.size()] = sp[i];
  return Tensor::from_vector(v);
}
}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("compiled CUDA float16/bfloat16 groups and casts = eager CUDA bit for bit") {
    if (!kt::gpu_or_skip()) return;
    for (DType h : {DType::float16, DType::bfloat16}) {
      CAPTURE(name(h));
      auto f = [](Tensor x, Tensor w) {
        Tensor y = (x * w + x) / 3.0f - sqrt(abs(w));
        Tensor z = tanh(y) * 0.5f + exp(-abs(x) * 0.01f);
        return std::vector<Tensor>{y, z, y.to(DType::int32), y.to(DType::uint8), z.to(DType::float32),
                                   x.to(DType::float32).to(DType::int8), where(y > z, y, z)};
      };
      const Tensor x = on_gpu(specials(4099, 1).to(h)), w = on_gpu(specials(4099, 2).to(h));
      CompiledCallable run = compile(f)(x, w);
      const codegen::CudaExecutable* cx = run.engine_model().artifact().cuda_plan();
      REQUIRE(cx);
      int kernels = 0;
      for (const codegen::CudaStep& s : cx->plan().steps) kernels += s.kind == codegen::CudaStep::Kind::kernel;
      CHECK(kernels >= 1);
      const std::vector<Tensor> got = run(x, w).as<std::vector<Tensor>>();
      const std::vector<Tensor> want = f(x, w);
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < got.size(); ++k) {
        CAPTURE(k);
        CHECK(same(got[k], want[k]));
      }
    }
  }

  TEST_CASE("strict compiled CUDA = eager CUDA bitwise (no contraction across ops, fused reductions in eager's order)") {
    if (!kt::gpu_or_skip()) return;
    auto f = [](Tensor a, Tensor b, Tensor c) {
      Tensor p = a * b + c;
      return std::vector<Tensor>{p, sum(a * b, {-1}), max(p * c - a, {-1}), p / (abs(c) + 1.0f) - b * c};
    };
    const Tensor a = on_gpu(random::normal({300, 1000})), b = on_gpu(random::normal({300, 1000})),
                 c = on_gpu(random::normal({300, 1000}));
    CompileOptions o;
    o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
    CompiledCallable run = compile(f, o)(a, b, c);
    const codegen::CudaExecutable* cx = run.engine_model().artifact().cuda_plan();
    REQUIRE(cx);
    CHECK(cx->plan().strict);
    const std::vector<Tensor> got = run(a, b, c).as<std::vector<Tensor>>();
    const std::vector<Tensor> want = f(a, b, c);
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      CHECK(same(got[k], want[k]));
    }
  }

  TEST_CASE("capture/replay of a compiled CUDA callable: one CUDA Graph, new input values, the CPU's errors") {
    if (!kt::gpu_or_skip()) return;
    auto f = [](Tensor x, Tensor w, Tensor b) {
      Tensor h = matmul(x, w) + b;
      return std::vector<Tensor>{softmax(h, -1), sum(tanh(h) * 0.5f, {-1}), x * 2.0f};
    };
    Tensor x = on_gpu(random::normal({64, 128})), w = on_gpu(random::normal({128, 96})),
           b = on_gpu(random::normal({96}));
    CompiledCallable run = compile(f)(x, w, b);
    const engine::Model& m = run.engine_model();
    REQUIRE(m.artifact().cuda_plan());
    const std::vector<Tensor> in = {x, w, b};
    const std::vector<Tensor> outs = m.capture(1, in);
    REQUIRE(outs.size() == 3);
    std::vector<Tensor> want = f(x, w, b);
    for (size_t k = 0; k < 3; ++k) kt::check_cuda_matches_cpu(outs[k], want[k].cpu(), "capture");
    // Allocations after the capture never take the graph's memory.
    std::vector<Tensor> noise;
    for (int i = 0; i < 20; ++i) noise.push_back(full({64, 96}, 1e6f, DType::float32, Device::cuda(0)));
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      const Tensor nx = on_gpu(random::normal({64, 128}, 0.0, 1.0 + round));
      x.copy_(nx);  // new values, same buffer
      m.replay(1, in);
      want = f(x, w, b);
      for (size_t k = 0; k < 3; ++k) kt::check_cuda_matches_cpu(outs[k], want[k].cpu(), "replay");
      const std::vector<Tensor> again = m.captured_outputs(1);
      CHECK(again[0].data_ptr() == outs[0].data_ptr());
    }
    // Same results as the compiled call, bit for bit (same kernels, same order).
    const std::vector<Tensor> called = run(x, w, b).as<std::vector<Tensor>>();
    for (size_t k = 0; k < 3; ++k) CHECK(same(outs[k], called[k]));
    // The CPU's errors: another buffer, an unknown key, a key captured for another device's buffers.
    const Tensor other = x.clone();
    CHECK_THROWS_WITH_AS(m.replay(1, std::vector<Tensor>{other, w, b}),
                         doctest::Contains("argument 0 is not the buffer captured under this key"), ValueError);
    CHECK_THROWS_WITH_AS(m.replay(2, in), doctest::Contains("no capture under this key"), ValueError);
    CHECK_THROWS_WITH_AS(m.replay(1, std::vector<Tensor>{x.cpu(), w, b}),
                         doctest::Contains("argument 0 is not the buffer captured"), ValueError);
    CHECK_THROWS_AS(m.capture(3, std::vector<Tensor>{x.cpu(), w.cpu(), b.cpu()}), ValueError);
    CHECK(m.num_captures() == 1);
    m.release(1);
    CHECK(m.num_captures() == 0);
    CHECK_THROWS_AS(m.replay(1, in), ValueError);
    for (const Tensor& t : noise)
      for (float v : t.to_vector<float>()) REQUIRE(v == 1e6f);  // no replay wrote into them
  }

  TEST_CASE("a MEF of a CUDA callable read back adopts its cubin and gives the same bits") {
    if (!kt::gpu_or_skip()) return;
    auto f = [](Tensor a, Tensor b) { return tanh(a * b) + exp(-a); };
    const Tensor a = on_gpu(random::normal({5000})), b = on_gpu(random::normal({5000}));
    CompiledCallable run = compile(f)(a, b);
    const std::filesystem::path p = std::filesystem::temp_directory_path() / "kiln_gpu_cubin.mef";
    run.export_mef(p.string());
    cuda::clear_module_memory_cache();
    const int64_t before = cuda::nvrtc_compilations();
    auto art = engine::read(p.string());
    std::filesystem::remove(p);
    REQUIRE(art->cuda_plan());
    CHECK(art->cuda_plan()->module()->from == cuda::CompiledModule::From::mef);
    CHECK(cuda::nvrtc_compilations() == before);
    engine::Model m(art, {});
    const std::vector<Tensor> got = m.execute(std::vector<Tensor>{a, b});
    CHECK(same(got[0], run(a, b).as<Tensor>()));
  }
}
