// Compiled plans with generated small GEMMs (jit/plan_small_gemm.h): a
// float32 matmul whose product only an elementwise group reads becomes one
// gemm_fused step (the group runs as the GEMM's epilogue), checked against
// eager (default mode: within tolerance; strict mode: bitwise) and against a
// float64 reference, for the epilogues of a training step: bias + tanh, the
// tanh derivative, the momentum update (two outputs), with transposed
// operands. The CPU target is detect_cpu_target(): run with
// KILN_JIT_TARGET=avx2 for the AVX2 path.
#include <cmath>
#include <tuple>

#include "../backends/cpu/jit/small_gemm.h"
#include "../jit/engine.h"
#include "../jit/plan.h"
#include "ref_matmul.h"
#include "same_bits.h"
#include "test_util.h"

namespace {
using namespace kiln;
using codegen::PlanStep;
using kt::ref_matmul;

const codegen::ExecutionPlan& plan_of(const CompiledCallable& c) { return c.engine_model().artifact().plan(); }
int count(const codegen::ExecutionPlan& p, PlanStep::Kind kind) {
  int n = 0;
  for (const auto& s : p.steps()) n += s.kind == kind;
  return n;
}
CompileOptions with(KernelOptions k) {
  CompileOptions o;
  o.session = std::make_shared<InferenceSession>(k);
  return o;
}
bool generated_target() { return codegen::detect_cpu_target() >= codegen::CpuTarget::avx2; }

}  // namespace

TEST_SUITE("small_gemm") {
  TEST_CASE("plan: bias + tanh runs as the GEMM's epilogue, within tolerance of eager and float64") {
    if (!generated_target()) return;
    auto f = [](Tensor x, Tensor w, Tensor b) { return tanh(matmul(x, w) + b); };
    for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 128}, {13, 37, 29}, {1, 5, 1}, {100, 1, 70}}) {
      CAPTURE(m);
      CAPTURE(k);
      CAPTURE(n);
      CompiledCallable run = compile(f)(TensorLayout(DType::float32, {m, k}), TensorLayout(DType::float32, {k, n}),
                                        TensorLayout(DType::float32, {n}));
      CHECK(count(plan_of(run), PlanStep::Kind::gemm_fused) == 1);
      CHECK(count(plan_of(run), PlanStep::Kind::fused) == 0);
      Tensor x = kt::random_tensor({m, k}, DType::float32, 1, false, 1.0);
      Tensor w = kt::random_tensor({k, n}, DType::float32, 2, false, 1.0);
      Tensor b = kt::random_tensor({n}, DType::float32, 3, false, 1.0);
      Tensor got = run(x, w, b).as<Tensor>();
      std::vector<double> want = ref_matmul(kt::values(x), kt::values(w), m, k, n);
      const std::vector<double> bv = kt::values(b);
      for (int64_t i = 0; i < m * n; ++i) want[size_t(i)] = std::tanh(want[size_t(i)] + bv[size_t(i % n)]);
      kt::check_all_close(got, want, 1e-5, double(k) * 1e-6, "tanh(x w + b) vs float64");
      kt::check_all_close(got, kt::values(f(x, w, b)), 1e-5, double(k) * 1e-6, "compiled vs eager");
    }
  }

  TEST_CASE("plan: backward epilogues (tanh derivative, momentum) with transposes; strict is bitwise eager") {
    if (!generated_target()) return;
    // dz1 = (dz2 W2^T) * (1 - h*h); dW1 = x^T dz1; m1' = m1 * 0.9 + dW1; w1' = w1 - m1' * 0.05
    auto f = [](Tensor x, Tensor h, Tensor dz2, Tensor w2, Tensor w1, Tensor m1) {
      Tensor dz1 = matmul(dz2, transpose(w2)) * (1.0f - h * h);
      Tensor dw1 = matmul(transpose(x), dz1);
      Tensor m = m1 * 0.9f + dw1;
      return std::make_tuple(w1 - m * 0.05f, m);
    };
    const int64_t B = 64, I = 64, H = 128, C = 10;
    Tensor x = kt::random_tensor({B, I}, DType::float32, 4, false, 1.0);
    Tensor h = kt::random_tensor({B, H}, DType::float32, 5, false, 0.5);
    Tensor dz2 = kt::random_tensor({B, C}, DType::float32, 6, false, 0.1);
    Tensor w2 = kt::random_tensor({H, C}, DType::float32, 7, false, 0.3);
    Tensor w1 = kt::random_tensor({I, H}, DType::float32, 8, false, 0.3);
    Tensor m1 = kt::random_tensor({I, H}, DType::float32, 9, false, 0.1);
    auto L = [](Shape s) { return TensorLayout(DType::float32, std::move(s)); };
    const auto want = f(x, h, dz2, w2, w1, m1);
    for (bool strict : {false, true}) {
      CAPTURE(strict);
      CompiledCallable run =
          compile(f, with({.strict = strict}))(L({B, I}), L({B, H}), L({B, C}), L({H, C}), L({I, H}), L({I, H}));
      CHECK(count(plan_of(run), PlanStep::Kind::gemm_fused) == 2);
      CHECK(count(plan_of(run), PlanStep::Kind::gemm) == 0);
      auto [w, m] = run(x, h, dz2, w2, w1, m1).as<std::tuple<Tensor, Tensor>>();
      if (strict) {
        CHECK(kt::same_bits(w, std::get<0>(want)));
        CHECK(kt::same_bits(m, std::get<1>(want)));
      } else {
        kt::check_all_close(w, kt::values(std::get<0>(want)), 1e-5, 1e-5, "w1'");
        kt::check_all_close(m, kt::values(std::get<1>(want)), 1e-5, 1e-5, "m1'");
      }
    }
    // against float64: the momentum output
    std::vector<double> dz1(size_t(B * H), 0.0);
    const std::vector<double> dzv = kt::values(dz2), w2v = kt::values(w2), hv = kt::values(h), xv = kt::values(x),
                              mv = kt::values(m1);
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < H; ++j) {
        double s = 0;
        for (int64_t c = 0; c < C; ++c) s += dzv[size_t(i * C + c)] * w2v[size_t(j * C + c)];
        dz1[size_t(i * H + j)] = s * (1 - hv[size_t(i * H + j)] * hv[size_t(i * H + j)]);
      }
    std::vector<double> mref(size_t(I * H));
    for (int64_t a = 0; a < I; ++a)
      for (int64_t j = 0; j < H; ++j) {
        double s = 0;
        for (int64_t i = 0; i < B; ++i) s += xv[size_t(i * I + a)] * dz1[size_t(i * H + j)];
        mref[size_t(a * H + j)] = mv[size_t(a * H + j)] * 0.9 + s;
      }
    kt::check_all_close(std::get<1>(want), mref, 1e-4, 1e-5, "eager m1' vs float64");
  }

  TEST_CASE("plan: a product read by anything else stays a gemm step; eager and compiled share the kernel") {
    if (!generated_target()) return;
    auto f = [](Tensor x, Tensor w) {
      Tensor p = matmul(x, w);
      return std::make_tuple(p * 2.0f, p);  // the product is also a result
    };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {20, 30}), TensorLayout(DType::float32, {30, 40}));
    CHECK(count(plan_of(run), PlanStep::Kind::gemm_fused) == 0);
    REQUIRE(count(plan_of(run), PlanStep::Kind::gemm) == 1);
    for (const auto& s : plan_of(run).steps())
      if (s.kind == PlanStep::Kind::gemm) CHECK(s.gemm.small != nullptr);  // eager's generated GEMM
    Tensor x = kt::random_tensor({20, 30}, DType::float32, 10, false, 1.0);
    Tensor w = kt::random_tensor({30, 40}, DType::float32, 11, false, 1.0);
    auto [a, p] = run(x, w).as<std::tuple<Tensor, Tensor>>();
    CHECK(kt::same_bits(p, matmul(x, w)));
    kt::check_all_close(p, ref_matmul(kt::values(x), kt::values(w), 20, 30, 40), 1e-5, 1e-4, "x w vs float64");
    // above the size threshold: the BLAS
    const int64_t big = 512;
    CompiledCallable r2 = compile([](Tensor a, Tensor b) { return matmul(a, b); })(
        TensorLayout(DType::float32, {big, big}), TensorLayout(DType::float32, {big, big}));
    for (const auto& s : plan_of(r2).steps())
      if (s.kind == PlanStep::Kind::gemm) CHECK(s.gemm.small == nullptr);
  }
}
