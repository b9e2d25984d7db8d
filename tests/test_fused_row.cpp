// The plan's fused_row step (jit/plan.h): a row op (softmax, layer_norm...)
// whose input is computed by a fused elementwise group that nothing else
// reads runs as one step, the group's value computed a block of rows at a
// time in L1 and never stored. Attention's softmax(scores * scale + mask)
// and a layer_norm of a residual sum, against a float64 reference and
// against eager bitwise (default and strict sessions, 1 and 2 threads), with
// -inf masks, all-masked rows, NaN scores, rows longer than the scratch,
// and the cases that must keep the unfused steps.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../jit/plan.h"
#include "same_bits.h"
#include "test_util.h"

namespace {

using namespace kiln;
using namespace kiln::codegen;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

const ExecutionPlan& plan_of(const CompiledCallable& c) { return c.engine_model().artifact().plan(); }

int count(const ExecutionPlan& p, PlanStep::Kind k) {
  int n = 0;
  for (const PlanStep& s : p.steps()) n += s.kind == k;
  return n;
}

// Equal bits, or both NaN (a NaN's payload is not specified across kernels).
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = kt::values(a), y = kt::values(b);
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::isnan(x[i]) && std::isnan(y[i])) && std::memcmp(&x[i], &y[i], sizeof(double)) != 0) return false;
  return true;
}

// softmax(s * scale + mask) along the last axis in float64, from the float32
// inputs, s [n, h, L, L], mask [n, 1, 1, L]; NaN for rows holding NaN or
// +inf, or that are all -inf (eager's rule, tests/test_row_kernels.cpp).
std::vector<double> reference_attention(const Tensor& s, const Tensor& mask, double scale) {
  const std::vector<double> sv = kt::values(s), mv = kt::values(mask);
  const int64_t n = s.size(0), h = s.size(1), L = s.size(2), Lk = s.size(3);
  std::vector<double> y(sv.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t r = 0; r < h * L; ++r) {
      const size_t off = static_cast<size_t>((b * h * L + r) * Lk);
      std::vector<double> z(static_cast<size_t>(Lk));
      double mx = -INFINITY;
      bool nan = false;
      for (int64_t j = 0; j < Lk; ++j) {
        z[j] = sv[off + j] * scale + mv[static_cast<size_t>(b * Lk + j)];
        nan |= std::isnan(z[j]) || z[j] == INFINITY;
        mx = std::max(mx, z[j]);
      }
      nan |= mx == -INFINITY;
      double sum = 0;
      for (int64_t j = 0; j < Lk; ++j) sum += std::exp(z[j] - mx);
      for (int64_t j = 0; j < Lk; ++j) y[off + j] = nan ? NAN : std::exp(z[j] - mx) / sum;
    }
  return y;
}

// mask [n, 1, 1, L]: 0 or -inf; sentence b keeps its first L - b tokens;
// sentence 1 (when n > 1) is masked whole.
Tensor make_mask(int64_t n, int64_t L) {
  std::vector<float> m(static_cast<size_t>(n * L), 0.0f);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < L; ++j)
      if (j >= L - b || b == 1) m[static_cast<size_t>(b * L + j)] = kNegInf;
  return Tensor::from_vector(m, {n, 1, 1, L});
}

Tensor attention(const Tensor& s, const Tensor& mask) { return softmax(s * (1.0 / std::sqrt(32.0)) + mask, -1); }

TEST_SUITE("fused row step") {
  TEST_CASE("attention's scale, mask and softmax run as one step: float64 reference, eager bitwise") {
    struct Case {
      int64_t n, h, L;
    };
    // L = 5000: rows longer than the scratch (one row per block); n = 0: no rows
    for (Case c : {Case{1, 12, 16}, Case{3, 4, 33}, Case{4, 2, 128}, Case{2, 1, 1}, Case{2, 1, 5000}, Case{0, 2, 8}})
      for (bool strict : {false, true})
        for (int threads : {1, 2}) {
          CAPTURE(c.n);
          CAPTURE(c.L);
          CAPTURE(strict);
          CAPTURE(threads);
          const int before = get_num_threads();
          set_num_threads(threads);
          const int64_t Lq = c.L == 5000 ? 3 : c.L;  // few long rows
          const Shape shape{c.n, c.h, Lq, c.L};
          Tensor s = kt::random_tensor(shape, DType::float32, 7 + c.L, /*specials=*/false, 3.0);
          if (s.numel() > 0) {  // a NaN score in one row of sentence 0
            std::vector<float> v = s.to_vector<float>();
            v[static_cast<size_t>(c.L / 2)] = NAN;
            s = Tensor::from_vector(v, shape);
          }
          const Tensor mask = make_mask(c.n, c.L);
          CompileOptions co;
          co.session = std::make_shared<InferenceSession>(KernelOptions{.strict = strict});
          CompiledCallable run = compile(attention, co)(TensorLayout(DType::float32, shape),
                                                        TensorLayout(DType::float32, {c.n, 1, 1, c.L}));
          const ExecutionPlan& p = plan_of(run);
          CHECK(count(p, PlanStep::Kind::fused_row) == 1);
          CHECK(count(p, PlanStep::Kind::fused) == 0);
          CHECK(count(p, PlanStep::Kind::row) == 0);
          CHECK(p.describe(false).find("] into softmax") != std::string::npos);
          const Tensor got = run(s, mask).leaves[0];
          CHECK(same_values(got, attention(s, mask)));
          const std::vector<double> want = reference_attention(s, mask, 1.0 / std::sqrt(32.0)), y = kt::values(got);
          REQUIRE(y.size() == want.size());
          int bad = 0;
          for (size_t i = 0; i < y.size(); ++i)
            bad += std::isnan(want[i]) ? !std::isnan(y[i]) : !(std::abs(y[i] - want[i]) <= 1e-5 * want[i] + 1e-12);
          CHECK(bad == 0);
          if (c.n > 1 && c.L > 1) {  // sentence 1 is all masked: NaN rows, as eager
            CHECK(std::isnan(y[static_cast<size_t>(c.h * Lq * c.L)]));
          }
          set_num_threads(before);
        }
  }

  TEST_CASE("a layer_norm of a residual sum (weight, bias) runs as one step, eager bitwise") {
    auto f = [](Tensor a, Tensor bias, Tensor r, Tensor w, Tensor b) { return layer_norm(a + bias + r, w, b, 1e-12); };
    for (bool strict : {false, true}) {
      CAPTURE(strict);
      CompileOptions co;
      co.session = std::make_shared<InferenceSession>(KernelOptions{.strict = strict});
      const TensorLayout x(DType::float32, {40, 384}), row(DType::float32, {384});
      CompiledCallable run = compile(f, co)(x, row, x, row, row);
      CHECK(count(plan_of(run), PlanStep::Kind::fused_row) == 1);
      const Tensor a = kt::random_tensor({40, 384}, DType::float32, 1, /*specials=*/true),
                   bias = kt::random_tensor({384}, DType::float32, 2), r = kt::random_tensor({40, 384}, DType::float32, 3),
                   w = kt::random_tensor({384}, DType::float32, 4), b = kt::random_tensor({384}, DType::float32, 5);
      CHECK(same_values(run(a, bias, r, w, b).leaves[0], f(a, bias, r, w, b)));
    }
  }

  TEST_CASE("the group keeps its own step when its value is read elsewhere or is an output") {
    const TensorLayout s(DType::float32, {2, 3, 8, 8}), m(DType::float32, {2, 1, 1, 8});
    auto also_read = [](Tensor x, Tensor mask) {
      Tensor z = x * 0.5 + mask;
      return softmax(z, -1) + z;
    };
    auto also_output = [](Tensor x, Tensor mask) {
      Tensor z = x * 0.5 + mask;
      return std::make_tuple(softmax(z, -1), z);
    };
    auto shared_scale = [](Tensor x, Tensor mask) {  // x * 0.5 is also an output: two values leave the group
      Tensor xs = x * 0.5;
      return std::make_tuple(softmax(xs + mask, -1), xs);
    };
    const Tensor x = kt::random_tensor({2, 3, 8, 8}, DType::float32, 9), mask = make_mask(2, 8);
    CompiledCallable r1 = compile(also_read)(s, m), r2 = compile(also_output)(s, m), r3 = compile(shared_scale)(s, m);
    for (const CompiledCallable* r : {&r1, &r2, &r3}) {
      CHECK(count(plan_of(*r), PlanStep::Kind::fused_row) == 0);
      CHECK(count(plan_of(*r), PlanStep::Kind::row) == 1);
    }
    CHECK(same_values(r1(x, mask).leaves[0], also_read(x, mask)));
    auto [y2, z2] = r2(x, mask).as<std::tuple<Tensor, Tensor>>();
    auto [y2e, z2e] = also_output(x, mask);
    CHECK(same_values(y2, y2e));
    CHECK(same_values(z2, z2e));
    auto [y3, z3] = r3(x, mask).as<std::tuple<Tensor, Tensor>>();
    auto [y3e, z3e] = shared_scale(x, mask);
    CHECK(same_values(y3, y3e));
    CHECK(same_values(z3, z3e));
  }
}

}  // namespace
