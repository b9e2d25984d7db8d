// Compiled plans: 2-d float matmuls as bound BLAS calls (gemm steps) with
// transposes and bias rows folded into them, column sums, and whole-call
// binding (every step bound before the first runs) with its step-by-step
// fallback.
#include <cstring>

#include "test_util.h"
#include "../jit/engine.h"
#include "../jit/plan.h"
#include "../backends/cpu/matmul.h"
#include "../backends/cpu/jit/small_gemm.h"

namespace {
using namespace kiln;
using codegen::PlanStep;
const codegen::ExecutionPlan& plan_of(const CompiledCallable& c) { return c.engine_model().artifact().plan(); }
int count(const codegen::ExecutionPlan& p, PlanStep::Kind kind, OpId op = OpId::Matmul) {
  int n = 0;
  for (const auto& s : p.steps()) n += s.kind == kind && (kind != PlanStep::Kind::op || s.op == op);
  return n;
}
// Bitwise equality of two tensors of one dtype, the strict-mode contract:
// every element has the same bits (so -0 != +0), except that any NaN equals
// any NaN (a NaN's sign and payload are not part of the contract).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::vector<double> x = kt::values(a), y = kt::values(b);
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0 && !(std::isnan(x[i]) && std::isnan(y[i]))) return false;
  return true;
}
CompileOptions with(KernelOptions k) {
  CompileOptions o;
  o.session = std::make_shared<InferenceSession>(k);
  return o;
}

// Operands of every layout eager matmul meets: a GEMM step (and an op
// step) must issue eager's call for the layout the argument has at run
// time (eager reads a transposed or row-strided matrix in place, with the
// BLAS's transposed kernels or the generated GEMM for that layout, and
// copies other layouts), not the call for a contiguous copy of it.
// float64 with k >= 32 and float32 under KILN_JIT_TARGET=sse2 (OpenBLAS
// for both) differed by up to thousands of ulp before.
enum class Lay { contiguous, transposed, row_step, col_step, padded, transposed_padded };
std::string lay_name(Lay l) {
  static const char* names[] = {"contiguous", "transposed", "row_step", "col_step", "padded", "transposed_padded"};
  return names[int(l)];
}
// A rows x cols matrix of `dt` with the given layout (random values).
Tensor operand(int64_t rows, int64_t cols, Lay l, DType dt, uint64_t seed) {
  auto r = [&](Shape s) { return kt::random_tensor(s, DType::float64, seed, false, 1.0).to(dt); };
  switch (l) {
    case Lay::contiguous: return r({rows, cols});
    case Lay::transposed: return transpose(r({cols, rows}));                                     // strides (1, rows)
    case Lay::row_step: return slice(r({2 * rows, cols}), 0, 0, std::nullopt, 2);                // (2 cols, 1)
    case Lay::col_step: return slice(r({rows, 2 * cols}), 1, 0, std::nullopt, 2);                // (2 cols, 2): copied
    case Lay::padded: return slice(r({rows, cols + 3}), 1, 0, cols);                             // (cols + 3, 1)
    case Lay::transposed_padded: return transpose(slice(r({cols, rows + 5}), 1, 0, rows));       // (1, rows + 5)
  }
  return {};
}
// |c - a b| within twice the rounding bound k eps sum_q |a_iq b_qj| (c and the
// float64 reference both round).
void check_reference(const Tensor& c, const Tensor& a, const Tensor& b, const std::string& what) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  const std::vector<double> av = kt::values(a), bv = kt::values(b), cv = kt::values(c);
  const double eps = c.dtype() == DType::float64 ? 0x1p-53 : 0x1p-24;
  int bad = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) {
        ref += av[size_t(i * k + q)] * bv[size_t(q * n + j)];
        mag += std::abs(av[size_t(i * k + q)] * bv[size_t(q * n + j)]);
      }
      bad += !(std::abs(cv[size_t(i * n + j)] - ref) <= 2.0 * double(k + 2) * eps * mag);
    }
  INFO(what);
  CHECK(bad == 0);
}
}  // namespace

TEST_SUITE("compile") {
  TEST_CASE("gemm steps: the four transpose combinations are one BLAS call each, bitwise eager") {
    // a: [m, k] and at: [k, m]; b: [k, n] and bt: [n, k].
    auto f = [](Tensor a, Tensor at, Tensor b, Tensor bt) {
      return std::make_tuple(matmul(a, b), matmul(transpose(at), b), matmul(a, transpose(bt)),
                             matmul(transpose(at), transpose(bt)));
    };
    struct Case {
      int64_t m, n, k;
    };
    for (DType dt : {DType::float32, DType::float64})
      for (Case c : {Case{64, 128, 64}, Case{1, 7, 3}, Case{5, 1, 9}, Case{3, 4, 1}, Case{33, 17, 129}})
        for (bool strict : {false, true}) {
          CAPTURE(dt);
          CAPTURE(c.m);
          CAPTURE(c.n);
          CAPTURE(c.k);
          CAPTURE(strict);
          auto L = [&](Shape s) { return TensorLayout(dt, std::move(s)); };
          CompiledCallable run = compile(f, with({.strict = strict}))(L({c.m, c.k}), L({c.k, c.m}), L({c.k, c.n}), L({c.n, c.k}));
          const auto& p = plan_of(run);
          REQUIRE(count(p, PlanStep::Kind::gemm) == 4);
          CHECK(count(p, PlanStep::Kind::op, OpId::Permute) == 0);  // folded into the calls
          int combo = 0;
          for (const auto& s : p.steps())
            if (s.kind == PlanStep::Kind::gemm) {
              CHECK(s.gemm.f64 == (dt == DType::float64));
              CHECK(s.gemm.m == c.m);
              CHECK(s.gemm.n == c.n);
              CHECK(s.gemm.k == c.k);
              combo |= 1 << (int(s.gemm.ta) * 2 + int(s.gemm.tb));
            }
          // 1-row or 1-column operands may be read either way; full shapes use all four.
          if (c.m > 1 && c.n > 1 && c.k > 1) CHECK(combo == 0xF);
          Tensor a = kt::random_tensor({c.m, c.k}, DType::float32, 1, false, 1.0).to(dt), at = kt::random_tensor({c.k, c.m}, DType::float32, 2, false, 1.0).to(dt);
          Tensor b = kt::random_tensor({c.k, c.n}, DType::float32, 3, false, 1.0).to(dt), bt = kt::random_tensor({c.n, c.k}, DType::float32, 4, false, 1.0).to(dt);
          auto got = run(a, at, b, bt).as<std::tuple<Tensor, Tensor, Tensor, Tensor>>();
          auto want = f(a, at, b, bt);
          CHECK(same_bits(std::get<0>(got), std::get<0>(want)));
          CHECK(same_bits(std::get<1>(got), std::get<1>(want)));
          CHECK(same_bits(std::get<2>(got), std::get<2>(want)));
          CHECK(same_bits(std::get<3>(got), std::get<3>(want)));
          // against a float64 reference: C[0][0] = sum_k a[0][k] b[k][0]
          std::vector<double> av = kt::values(a), bv = kt::values(b);
          double ref = 0;
          for (int64_t i = 0; i < c.k; ++i) ref += av[i * 1] * bv[i * c.n];
          CHECK(kt::values(std::get<0>(got))[0] == doctest::Approx(ref).epsilon(1e-5));
        }
  }

  TEST_CASE("gemm steps: matmul of an intermediate, NaN/inf propagate, outputs are fresh memory") {
    auto f = [](Tensor x, Tensor w) {
      Tensor h = tanh(matmul(x, w));
      return std::make_tuple(matmul(transpose(h), h), h);
    };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {8, 4}), TensorLayout(DType::float32, {4, 6}));
    // tanh(x w) is the first GEMM's epilogue (gemm_fused) where the GEMM is generated
    CHECK(count(plan_of(run), PlanStep::Kind::gemm) + count(plan_of(run), PlanStep::Kind::gemm_fused) == 2);
    Tensor x = kt::random_tensor({8, 4}, DType::float32, 5, false, 1.0), w = kt::random_tensor({4, 6}, DType::float32, 6, false, 1.0);
    auto [g1, h1] = run(x, w).as<std::tuple<Tensor, Tensor>>();
    auto [g2, h2] = f(x, w);
    kt::check_all_close(g1, kt::values(g2), 1e-5, 1e-5, "h^T h");
    // a NaN in row 0 of x reaches row 0 of h and every element of h^T h's row... through the sum
    std::vector<float> xv = x.to_vector<float>();
    xv[0] = std::numeric_limits<float>::quiet_NaN();
    xv[1] = std::numeric_limits<float>::infinity();
    Tensor xn = Tensor::from_vector(xv, {8, 4});
    auto [g3, h3] = run(xn, w).as<std::tuple<Tensor, Tensor>>();
    for (double v : kt::values(g3)) CHECK(std::isnan(v));
    // two calls return different buffers (no output aliases the plan's arena or a previous call)
    auto [g4, h4] = run(x, w).as<std::tuple<Tensor, Tensor>>();
    CHECK(g4.data_ptr() != g1.data_ptr());
    CHECK(same_bits(g4, g1));
  }

  TEST_CASE("gemm steps: a transpose that is also read elsewhere stays a step") {
    // permute(a) feeds the matmul and an elementwise op: the elementwise
    // kernel reads a strided view, so that call runs step by step.
    auto f = [](Tensor a, Tensor b) {
      Tensor t = transpose(a);
      return std::make_tuple(matmul(t, b), t * 2.0f);
    };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {5, 3}), TensorLayout(DType::float32, {5, 4}));
    CHECK(count(plan_of(run), PlanStep::Kind::gemm) == 1);
    CHECK(count(plan_of(run), PlanStep::Kind::op, OpId::Permute) == 1);
    Tensor a = kt::random_tensor({5, 3}, DType::float32, 7, false, 1.0), b = kt::random_tensor({5, 4}, DType::float32, 8, false, 1.0);
    auto [m1, t1] = run(a, b).as<std::tuple<Tensor, Tensor>>();
    auto [m2, t2] = f(a, b);
    CHECK(same_bits(m1, m2));
    CHECK(same_bits(t1, t2.contiguous()));
  }

  TEST_CASE("gemm steps: strided views, empty and K = 0 products, other dtypes keep their eager kernel") {
    // A column slice of an input is strided: the matmul reads a copy made
    // when that step runs (bind cannot see the data yet).
    auto sliced = [](Tensor a, Tensor b) { return matmul(slice(a, 1, 0, std::nullopt, 2), b); };
    CompiledCallable r1 = compile(sliced)(TensorLayout(DType::float32, {4, 6}), TensorLayout(DType::float32, {3, 2}));
    Tensor a = kt::random_tensor({4, 6}, DType::float32, 9, false, 1.0), b = kt::random_tensor({3, 2}, DType::float32, 10, false, 1.0);
    CHECK(same_bits(r1(a, b).as<Tensor>(), sliced(a, b)));

    auto mm = [](Tensor a, Tensor b) { return matmul(a, b); };
    // K = 0: a sum of nothing is 0; an empty result has no step to run
    CompiledCallable r2 = compile(mm)(TensorLayout(DType::float32, {3, 0}), TensorLayout(DType::float32, {0, 4}));
    Tensor z = r2(Tensor::empty({3, 0}, DType::float32), Tensor::empty({0, 4}, DType::float32)).as<Tensor>();
    CHECK(z.shape() == Shape{3, 4});
    for (double v : kt::values(z)) CHECK(v == 0.0);
    CompiledCallable r3 = compile(mm)(TensorLayout(DType::float32, {0, 3}), TensorLayout(DType::float32, {3, 4}));
    CHECK(r3(Tensor::empty({0, 3}, DType::float32), kt::random_tensor({3, 4}, DType::float32, 11, false, 1.0)).as<Tensor>().shape() == Shape{0, 4});
    // batched and integer matmuls stay op steps
    CompiledCallable r4 = compile(mm)(TensorLayout(DType::float32, {2, 3, 4}), TensorLayout(DType::float32, {4, 5}));
    CHECK(count(plan_of(r4), PlanStep::Kind::gemm) == 0);
    Tensor x3 = kt::random_tensor({2, 3, 4}, DType::float32, 12, false, 1.0), w3 = kt::random_tensor({4, 5}, DType::float32, 13, false, 1.0);
    CHECK(same_bits(r4(x3, w3).as<Tensor>(), mm(x3, w3)));
    CompiledCallable r5 = compile(mm)(TensorLayout(DType::int32, {3, 4}), TensorLayout(DType::int32, {4, 2}));
    CHECK(count(plan_of(r5), PlanStep::Kind::gemm) == 0);
    Tensor i1 = kt::random_tensor({3, 4}, DType::int32, 14), i2 = kt::random_tensor({4, 2}, DType::int32, 15);
    CHECK(same_bits(r5(i1, i2).as<Tensor>(), mm(i1, i2)));
    // without fusion every op keeps its eager kernel
    CompiledCallable r6 = compile(mm, with({.fuse = false}))(TensorLayout(DType::float32, {3, 4}), TensorLayout(DType::float32, {4, 2}));
    CHECK(count(plan_of(r6), PlanStep::Kind::gemm) == 0);
  }

  TEST_CASE("gemm steps: capture and replay run the bound calls") {
    auto f = [](Tensor x, Tensor w) { return matmul(transpose(x), matmul(x, w)); };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {6, 3}), TensorLayout(DType::float32, {3, 2}));
    Tensor x = kt::random_tensor({6, 3}, DType::float32, 16, false, 1.0), w = kt::random_tensor({3, 2}, DType::float32, 17, false, 1.0);
    const engine::Model& m = run.engine_model();
    std::vector<Tensor> ins = {x, w};
    std::vector<Tensor> outs = m.capture(1, ins);
    Tensor want = f(x, w);
    CHECK(same_bits(outs.at(0), want));
    // new values in the captured input buffers
    Tensor x2 = kt::random_tensor({6, 3}, DType::float32, 18, false, 1.0);
    std::memcpy(x.data_ptr(), x2.data_ptr(), 6 * 3 * sizeof(float));
    m.replay(1, ins);
    CHECK(same_bits(m.captured_outputs(1).at(0), f(x2, w)));
    m.release(1);
  }

  TEST_CASE("gemm steps: a bias row added to a product runs in the gemm step, bitwise eager") {
    auto gemm_of = [](const codegen::ExecutionPlan& p) -> const PlanStep* {
      // (a product only an elementwise group reads is a generated GEMM's gemm_fused step)
      for (const auto& s : p.steps())
        if (s.kind == PlanStep::Kind::gemm || s.kind == PlanStep::Kind::gemm_fused) return &s;
      return nullptr;
    };
    // The bias joins the step: the BLAS call's bias pass (GemmCall::bias),
    // or, where the generated GEMM runs (float32), its epilogue out =
    // product + bias on the tile in registers.
    auto bias_in_step = [](const PlanStep* s, DType dt) {
      if (dt == DType::float32 && s->gemm.small) {
        if (s->kind != PlanStep::Kind::gemm_fused || !s->small_gemm || s->gemm.bias || s->product_operand != 1 ||
            s->operands.size() != 3 || !s->elementwise)
          return false;
        const std::vector<codegen::Instr>& code = s->elementwise->code;
        return code.size() == 4 && code[2].kind == codegen::Instr::Kind::op && code[2].op == OpId::Add;
      }
      return s->kind == PlanStep::Kind::gemm && s->gemm.bias;
    };
    for (DType dt : {DType::float32, DType::float64}) {
      CAPTURE(dt);
      auto L = [&](Shape s) { return TensorLayout(dt, std::move(s)); };
      Tensor x = kt::random_tensor({9, 5}, DType::float32, 20, false, 1.0).to(dt), w = kt::random_tensor({5, 7}, DType::float32, 21, false, 1.0).to(dt), b = kt::random_tensor({7}, DType::float32, 22, false, 1.0).to(dt);
      // the sum feeds a row op only: the add joins the call; either operand order, [n] or [1, n]
      auto f1 = [](Tensor x, Tensor w, Tensor b) { return log_softmax(matmul(x, w) + b, -1); };
      auto f2 = [](Tensor x, Tensor w, Tensor b) {
        Tensor row = reshape(b, {1, 7});  // before the matmul: the call reads it
        Tensor m = matmul(x, w);
        return softmax(row + m, -1);
      };
      for (bool strict : {false, true}) {
        CAPTURE(strict);
        CompiledCallable r1 = compile(f1, with({.strict = strict}))(L({9, 5}), L({5, 7}), L({7}));
        CompiledCallable r2 = compile(f2, with({.strict = strict}))(L({9, 5}), L({5, 7}), L({7}));
        for (const CompiledCallable* r : {&r1, &r2}) {
          const PlanStep* s = gemm_of(plan_of(*r));
          REQUIRE(s != nullptr);
          CHECK(bias_in_step(s, dt));
          if (dt == DType::float32 && codegen::detect_cpu_target() >= codegen::CpuTarget::avx2)
            CHECK(s->kind == PlanStep::Kind::gemm_fused);
          CHECK(count(plan_of(*r), PlanStep::Kind::fused) == 0);
        }
        Tensor got1 = r1(x, w, b).as<Tensor>(), got2 = r2(x, w, b).as<Tensor>();
        CHECK(same_bits(got1, f1(x, w, b)));
        CHECK(same_bits(got2, f2(x, w, b)));
        // float64 reference of the logits: sum_k x[i][k] w[k][j] + b[j]
        std::vector<double> xv = kt::values(x), wv = kt::values(w), bv = kt::values(b), want(9 * 7);
        for (int i = 0; i < 9; ++i)
          for (int j = 0; j < 7; ++j) {
            double z = bv[j];
            for (int k = 0; k < 5; ++k) z += xv[i * 5 + k] * wv[k * 7 + j];
            want[i * 7 + j] = z;
          }
        for (int i = 0; i < 9; ++i) {  // log_softmax by rows
          double m = -1e300, se = 0;
          for (int j = 0; j < 7; ++j) m = std::max(m, want[i * 7 + j]);
          for (int j = 0; j < 7; ++j) se += std::exp(want[i * 7 + j] - m);
          for (int j = 0; j < 7; ++j) want[i * 7 + j] -= m + std::log(se);
        }
        kt::check_all_close(got1, want, 1e-5, 1e-5, "log_softmax(x w + b)");
        kt::check_all_close(got2, kt::values(f2(x, w, b)), 1e-5, 1e-6, "softmax(b + x w)");
      }
    }
    // kept separate: the sum feeds an elementwise op (the add fuses there),
    // the product has another use, the bias is computed after the matmul
    auto g1 = [](Tensor x, Tensor w, Tensor b) { return tanh(matmul(x, w) + b); };
    auto g2 = [](Tensor x, Tensor w, Tensor b) {
      Tensor m = matmul(x, w);
      return std::make_tuple(softmax(m + b, -1), m);
    };
    auto g3 = [](Tensor x, Tensor w, Tensor b) {
      Tensor m = matmul(x, w);
      Tensor r = relu(b) * 2.0f;
      return softmax(m + r, -1);
    };
    auto L = [](Shape s) { return TensorLayout(DType::float32, std::move(s)); };
    Tensor x = kt::random_tensor({4, 3}, DType::float32, 23, false, 1.0), w = kt::random_tensor({3, 6}, DType::float32, 24, false, 1.0), b = kt::random_tensor({6}, DType::float32, 25, false, 1.0);
    CompiledCallable c1 = compile(g1)(L({4, 3}), L({3, 6}), L({6}));
    CompiledCallable c2 = compile(g2)(L({4, 3}), L({3, 6}), L({6}));
    CompiledCallable c3 = compile(g3)(L({4, 3}), L({3, 6}), L({6}));
    CHECK_FALSE(gemm_of(plan_of(c1))->gemm.bias);
    CHECK_FALSE(gemm_of(plan_of(c2))->gemm.bias);
    CHECK_FALSE(gemm_of(plan_of(c3))->gemm.bias);
    kt::check_all_close(c1(x, w, b).as<Tensor>(), kt::values(g1(x, w, b)), 1e-5, 1e-6, "tanh(x w + b)");
    auto [s2, m2] = c2(x, w, b).as<std::tuple<Tensor, Tensor>>();
    CHECK(same_bits(m2, matmul(x, w)));
    kt::check_all_close(c3(x, w, b).as<Tensor>(), kt::values(g3(x, w, b)), 1e-5, 1e-6, "softmax(x w + 2 relu(b))");
    // NaN and inf in the bias reach the result
    std::vector<float> bv = b.to_vector<float>();
    bv[1] = std::numeric_limits<float>::quiet_NaN();
    bv[2] = std::numeric_limits<float>::infinity();
    auto f = [](Tensor x, Tensor w, Tensor b) { return log_softmax(matmul(x, w) + b, -1); };
    CompiledCallable cf = compile(f)(L({4, 3}), L({3, 6}), L({6}));
    CHECK(bias_in_step(gemm_of(plan_of(cf)), DType::float32));
    for (double v : kt::values(cf(x, w, Tensor::from_vector(bv, {6})).as<Tensor>())) CHECK(std::isnan(v));
  }

  TEST_CASE("gemm steps: the bias epilogue on edge shapes matches eager bitwise and a float64 reference") {
    // rows not a multiple of the tile's, columns not a multiple of the
    // vector width, one row, one column; strict and not (the add is the
    // same float add either way)
    const int64_t shapes[][3] = {{1, 5, 3}, {13, 37, 11}, {64, 10, 128}, {7, 1, 4}, {30, 17, 2}};
    auto f = [](Tensor x, Tensor w, Tensor b) { return log_softmax(matmul(x, w) + b, -1); };
    uint64_t seed = 40;
    for (const auto& sh : shapes)
      for (bool strict : {false, true}) {
        const int64_t m = sh[0], n = sh[1], k = sh[2];
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        CAPTURE(strict);
        auto L = [](Shape s) { return TensorLayout(DType::float32, std::move(s)); };
        Tensor x = kt::random_tensor({m, k}, DType::float32, seed++, false, 1.0);
        Tensor w = kt::random_tensor({k, n}, DType::float32, seed++, false, 1.0);
        Tensor b = kt::random_tensor({n}, DType::float32, seed++, false, 1.0);
        CompiledCallable r = compile(f, with({.strict = strict}))(L({m, k}), L({k, n}), L({n}));
        Tensor got = r(x, w, b).as<Tensor>();
        CHECK(same_bits(got, f(x, w, b)));
        std::vector<double> xv = kt::values(x), wv = kt::values(w), bv = kt::values(b), want(size_t(m * n));
        for (int64_t i = 0; i < m; ++i) {
          double mx = -1e300, se = 0;
          for (int64_t j = 0; j < n; ++j) {
            double z = bv[size_t(j)];
            for (int64_t kk = 0; kk < k; ++kk) z += xv[size_t(i * k + kk)] * wv[size_t(kk * n + j)];
            want[size_t(i * n + j)] = z;
            mx = std::max(mx, z);
          }
          for (int64_t j = 0; j < n; ++j) se += std::exp(want[size_t(i * n + j)] - mx);
          for (int64_t j = 0; j < n; ++j) want[size_t(i * n + j)] -= mx + std::log(se);
        }
        kt::check_all_close(got, want, 1e-5, 1e-5, "log_softmax(x w + b)");
      }
  }

  TEST_CASE("column sums of a GEMM epilogue's output are made in the GEMM step, bitwise eager") {
    // dz = (a w^T) * (1 - h^2), db = sum_rows(dz): the digits step's dz1 and
    // db1 (w^T packed, k small), and the same with w untransposed; edge
    // shapes: 2 rows, n not a multiple of 16, m not a multiple of the tile
    // rows; the keepdim form of the sum
    const int64_t shapes[][3] = {{64, 128, 10}, {13, 37, 11}, {2, 17, 3}, {33, 70, 2}, {64, 10, 128}};
    uint64_t seed = 60;
    for (const auto& sh : shapes)
      for (bool tw : {true, false})
        for (bool keep : {false, true})
          for (bool strict : {false, true}) {
            const int64_t m = sh[0], n = sh[1], k = sh[2];
            CAPTURE(m);
            CAPTURE(n);
            CAPTURE(k);
            CAPTURE(tw);
            CAPTURE(keep);
            CAPTURE(strict);
            auto f = [tw, keep](Tensor a, Tensor w, Tensor h) {
              Tensor dz = matmul(a, tw ? transpose(w, 0, 1) : w) * (1.0f - h * h);
              return std::make_tuple(dz, keep ? sum(dz, {-2}, true) : sum(dz, {0}));
            };
            auto L = [](Shape s) { return TensorLayout(DType::float32, std::move(s)); };
            const Shape ws = tw ? Shape{n, k} : Shape{k, n};
            CompiledCallable run = compile(f, with({.strict = strict}))(L({m, k}), L(ws), L({m, n}));
            const auto& plan = plan_of(run);
            const bool generated = codegen::detect_cpu_target() >= codegen::CpuTarget::avx2;
            if (generated) {
              CHECK(count(plan, PlanStep::Kind::column_sum) == 0);
              int merged = 0;
              for (const auto& s : plan.steps()) merged += s.kind == PlanStep::Kind::gemm_fused && s.column_sum_output >= 0;
              CHECK(merged == 1);
            }
            Tensor a = kt::random_tensor({m, k}, DType::float32, seed++, false, 1.0);
            Tensor w = kt::random_tensor(ws, DType::float32, seed++, false, 1.0);
            Tensor h = kt::random_tensor({m, n}, DType::float32, seed++, false, 1.0);
            auto [dz, db] = run(a, w, h).as<std::tuple<Tensor, Tensor>>();
            auto [dz_e, db_e] = f(a, w, h);
            CHECK(same_bits(dz, dz_e));
            CHECK(same_bits(db, db_e));
            // float64 reference
            std::vector<double> av = kt::values(a), wv = kt::values(w), hv = kt::values(h), want(size_t(n), 0.0);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double p = 0;
                for (int64_t kk = 0; kk < k; ++kk)
                  p += av[size_t(i * k + kk)] * (tw ? wv[size_t(j * k + kk)] : wv[size_t(kk * n + j)]);
                const double hh = hv[size_t(i * n + j)];
                want[size_t(j)] += p * (1 - hh * hh);
              }
            kt::check_all_close(db, want, 1e-4, 1e-4, "column sums of (a w) * (1 - h^2)");
          }
  }

  TEST_CASE("gemm steps: a transposed B with a small k is packed first (not in strict mode)") {
    // A B^T with k = 10: the shape of a backward pass's dz W^T
    auto f = [](Tensor a, Tensor bt) { return matmul(a, transpose(bt)); };
    for (DType dt : {DType::float32, DType::float64})
      for (bool strict : {false, true}) {
        CAPTURE(dt);
        CAPTURE(strict);
        auto L = [&](Shape s) { return TensorLayout(dt, std::move(s)); };
        CompiledCallable run = compile(f, with({.strict = strict}))(L({64, 10}), L({128, 10}));
        const PlanStep* s = nullptr;
        for (const auto& st : plan_of(run).steps())
          if (st.kind == PlanStep::Kind::gemm) s = &st;
        REQUIRE(s != nullptr);
        CHECK(s->gemm.tb);
        CHECK(s->gemm.pack_b == (!strict && std::string(cpu::gemm_backend()) == "OpenBLAS"));
        Tensor a = kt::random_tensor({64, 10}, DType::float32, 26, false, 1.0).to(dt), bt = kt::random_tensor({128, 10}, DType::float32, 27, false, 1.0).to(dt);
        Tensor got = run(a, bt).as<Tensor>(), want = f(a, bt);
        if (strict) CHECK(same_bits(got, want));
        kt::check_all_close(got, kt::values(want), 1e-6, 1e-6, "a bt^T");
        // float64 reference of one element
        std::vector<double> av = kt::values(a), bv = kt::values(bt);
        double ref = 0;
        for (int k = 0; k < 10; ++k) ref += av[3 * 10 + k] * bv[5 * 10 + k];
        CHECK(kt::values(got)[3 * 128 + 5] == doctest::Approx(ref).epsilon(1e-5));
      }
  }

  TEST_CASE("column sums: sum over axis 0 of a 2-d float value is bitwise eager's, specials included") {
    auto f = [](Tensor x) { return sum(x * 1.0f, {0}); };      // of an intermediate
    auto fk = [](Tensor x) { return sum(x, {-2}, true); };      // of an input, keepdim
    struct Case {
      int64_t rows, cols;
      bool column_step;
    };
    for (DType dt : {DType::float32, DType::float64})
      for (Case c : {Case{64, 10, true}, Case{2, 2, true}, Case{128, 33, true}, Case{129, 5, false}, Case{1, 7, false},
                     Case{7, 1, false}, Case{3, 1000, true},
                     // whole blocks of columns summed in registers (128 floats,
                     // 64 doubles), and blocks with a tail
                     Case{64, 128, true}, Case{16, 200, true},
                     // the last <= 64 bytes of columns with their width fixed at
                     // compile time (16 floats, 8 doubles), alone and after blocks
                     Case{5, 16, true}, Case{9, 3, true}, Case{64, 8, true}, Case{33, 138, true},
                     Case{17, 136, true}, Case{64, 17, true}}) {
        CAPTURE(dt);
        CAPTURE(c.rows);
        CAPTURE(c.cols);
        auto L = TensorLayout(dt, {c.rows, c.cols});
        for (bool strict : {false, true}) {
          CompiledCallable r = compile(f, with({.strict = strict}))(L);
          CompiledCallable rk = compile(fk, with({.strict = strict}))(L);
          CHECK(count(plan_of(r), PlanStep::Kind::column_sum) == (c.column_step ? 1 : 0));
          CHECK(count(plan_of(rk), PlanStep::Kind::column_sum) == (c.column_step ? 1 : 0));
          Tensor x = kt::random_tensor({c.rows, c.cols}, dt, 30, /*specials=*/true);
          CHECK(same_bits(r(x).as<Tensor>(), f(x)));
          CHECK(same_bits(rk(x).as<Tensor>(), fk(x)));
          // -0.0 everywhere: 0 + -0 is +0 in both
          Tensor z = zeros({c.rows, c.cols}, dt) * -1.0f;
          CHECK(same_bits(r(z).as<Tensor>(), f(z)));
          // against a float64 reference on normal values
          Tensor y = kt::random_tensor({c.rows, c.cols}, DType::float32, 31, false, 1.0).to(dt);
          std::vector<double> yv = kt::values(y), want(static_cast<size_t>(c.cols), 0.0);
          for (int64_t i = 0; i < c.rows; ++i)
            for (int64_t j = 0; j < c.cols; ++j) want[j] += yv[i * c.cols + j];
          kt::check_all_close(r(y).as<Tensor>(), want, 1e-5, 1e-5, "column sums");
        }
      }
  }

  TEST_CASE("column sums: the sum of a strided view runs eager's reduce() on the view") {
    // Eager sums a transposed view's unit-stride columns in lanes, the
    // column-sum kernel row after row: summed as a contiguous copy the bits
    // differed (tester t20 F8, F9). More layouts: test_reduce_views.cpp.
    auto ft = [](Tensor x) { return sum(x.transpose(), {0}); };                // a view in the graph: an op step
    auto fs = [](Tensor x) { return sum(x.index({Slice(0, 20)}), {0}); };    // leading rows: contiguous, a column sum
    auto fa = [](Tensor x) { return sum(x, {0}); };                            // of the argument
    for (DType dt : {DType::float32, DType::float64})
      for (bool strict : {false, true}) {
        CAPTURE(dt);
        CAPTURE(strict);
        const Tensor x = kt::random_tensor({33, 64}, DType::float64, 40, false, 20.0).to(dt);
        CompiledCallable rt = compile(ft, with({.strict = strict}))(x.layout());
        CHECK(count(plan_of(rt), PlanStep::Kind::column_sum) == 0);
        CHECK(count(plan_of(rt), PlanStep::Kind::op, OpId::Sum) == 1);
        CHECK(same_bits(rt(x).as<Tensor>(), ft(x)));
        CompiledCallable rs = compile(fs, with({.strict = strict}))(x.layout());
        CHECK(count(plan_of(rs), PlanStep::Kind::column_sum) == 1);
        CHECK(same_bits(rs(x).as<Tensor>(), fs(x)));
        // A transposed argument: its strides are met when the plan runs; the
        // column-sum step then runs eager's reduce() on it.
        const Tensor xt = x.transpose();
        CompiledCallable ra = compile(fa, with({.strict = strict}))(xt.layout());
        CHECK(count(plan_of(ra), PlanStep::Kind::column_sum) == 1);
        CHECK(same_bits(ra(xt).as<Tensor>(), fa(xt)));
        CHECK_FALSE(same_bits(fa(xt), fa(xt.contiguous())));  // the orders differ for these values
      }
  }
}

TEST_SUITE("compile") {
  TEST_CASE("attention's heads merged back (permute, reshape, matmul) copy once, into the arena") {
    // BERT's context: [n, heads, L, d] permuted to [n, L, heads, d] and
    // reshaped to [n * L, heads * d] for the output projection. The trace
    // records the reshape and a copy (a same-dtype cast); the plan runs one
    // copy, the reshape step's, into an arena slot the gemm step reads.
    const int64_t n = 2, heads = 3, L = 4, d = 5;
    random::Generator gen(5);
    const Tensor w = random::normal({heads * d, 7}, 0.0, 1.0, DType::float32, &gen);
    auto f = [&](Tensor q, Tensor v) {
      const Tensor ctx = matmul(q, v);  // [n, heads, L, d]
      return matmul(reshape(permute(ctx, {0, 2, 1, 3}), {n * L, heads * d}), w);
    };
    for (bool strict : {false, true}) {
      INFO("strict " << strict);
      const CompiledCallable c =
          compile(f, with({.strict = strict}))(zeros({n, heads, L, L}), zeros({n, heads, L, d}));
      const auto& p = plan_of(c);
      int fused = 0, reshapes = 0, other = 0;
      int32_t merged = -1;
      const PlanStep* copy = nullptr;
      for (const auto& s : p.steps()) {
        if (s.kind == PlanStep::Kind::fused) ++fused;  // a copy loop (the cast)
        else if (s.kind == PlanStep::Kind::op && s.op == OpId::Reshape) {
          ++reshapes;
          merged = s.output;
          copy = &s;
        } else if (!(s.kind == PlanStep::Kind::gemm ||
                     (s.kind == PlanStep::Kind::op && (s.op == OpId::Matmul || s.op == OpId::Permute))))
          ++other;
      }
      CHECK(fused == 0);
      CHECK(reshapes == 1);
      CHECK(other == 0);
      CHECK(count(p, PlanStep::Kind::gemm) == 1);
      REQUIRE(copy);
      CHECK_FALSE(codegen::step_is_view(p.graph(), *copy));
      CHECK(p.arena_offsets()[static_cast<size_t>(merged)] > 0);  // its own slot, past the batched product's
      for (uint64_t seed : {1, 2}) {
        random::Generator g(seed);
        const Tensor q = random::normal({n, heads, L, L}, 0.0, 1.0, DType::float32, &g);
        const Tensor v = random::normal({n, heads, L, d}, 0.0, 1.0, DType::float32, &g);
        const Tensor got = c(q, v).tensor();
        if (strict) CHECK(same_bits(got, f(q, v)));
        // float64 reference: out[b*L + l][j] = sum_{h, e} (sum_k q[b,h,l,k] v[b,h,k,e]) w[h*d + e][j]
        const std::vector<double> qv = kt::values(q), vv = kt::values(v), wv = kt::values(w);
        std::vector<double> want(static_cast<size_t>(n * L * 7), 0.0);
        for (int64_t b = 0; b < n; ++b)
          for (int64_t l = 0; l < L; ++l)
            for (int64_t h = 0; h < heads; ++h)
              for (int64_t e = 0; e < d; ++e) {
                double cx = 0;
                for (int64_t k = 0; k < L; ++k)
                  cx += qv[static_cast<size_t>(((b * heads + h) * L + l) * L + k)] *
                        vv[static_cast<size_t>(((b * heads + h) * L + k) * d + e)];
                for (int64_t j = 0; j < 7; ++j)
                  want[static_cast<size_t>((b * L + l) * 7 + j)] += cx * wv[static_cast<size_t>((h * d + e) * 7 + j)];
              }
        kt::check_all_close(got, want, 1e-4, 1e-4, "heads merged back");
      }
    }
  }

  TEST_CASE("a reshape that copies an argument, read after the argument is written: the old values, fresh memory") {
    // Eagerly `v` is a copy of x's transpose made before the write; the
    // optimiser drops the copy after the reshape (the plan's reshape step
    // copies), so the call must still read x before writing it.
    auto f = [](Tensor x) {
      const Tensor v = reshape(transpose(x, 0, 1), {6}).index({Slice(1, 5)});
      x.add_(10.0f);
      return v * 1.0f + 0.0f;
    };
    auto g = [](Tensor x) {
      const Tensor v = reshape(transpose(x, 0, 1), {6}).index({Slice(1, 5)});
      x.add_(10.0f);
      return v;
    };
    for (bool strict : {false, true}) {
      INFO("strict " << strict);
      const CompiledCallable cf = compile(f, with({.strict = strict}))(zeros({2, 3}));
      const CompiledCallable cg = compile(g, with({.strict = strict}))(zeros({2, 3}));
      // x = [[0, 1, 2], [3, 4, 5]]: x^T flattened = 0 3 1 4 2 5, [1, 5) = 3 1 4 2
      Tensor x = arange(0.0, 6.0, 1.0, DType::float32).reshape({2, 3});
      CHECK(kt::values(cf(x).tensor()) == std::vector<double>{3, 1, 4, 2});
      CHECK(kt::values(x) == std::vector<double>{10, 11, 12, 13, 14, 15});
      const Tensor r = cg(x).tensor();
      CHECK(kt::values(r) == std::vector<double>{13, 11, 14, 12});
      CHECK(kt::values(x) == std::vector<double>{20, 21, 22, 23, 24, 25});
      CHECK_FALSE(may_share_memory(r, x));
    }
  }

  TEST_CASE("whole-call binding: a reshape that copies a permuted intermediate runs in its place") {
    // Attention's heads merged back: permute then reshape of a computed
    // value (a copy), read by a gemm step and a fused group. The copy must be
    // made when the step is reached, from this call's data.
    random::Generator gen(11);
    const Tensor w = random::normal({6, 5}, 0.0, 1.0, DType::float32, &gen);
    auto f = [&](Tensor x) {
      const Tensor h = permute(x * 2.0 + 1.0, {1, 0, 2});  // [3, 2, 6] -> strided [2, 3, 6]
      const Tensor m = reshape(h, {6, 6});                // a copy
      return matmul(m, w) + exp(sum(m, {1}, true));
    };
    for (bool strict : {false, true}) {
      const CompiledCallable c = compile(f, with({.strict = strict}))(zeros({3, 2, 6}));
      for (uint64_t seed : {1, 2, 3}) {
        random::Generator g(seed);
        const Tensor x = random::normal({3, 2, 6}, 0.0, 1.0, DType::float32, &g);
        const Tensor got = c(x).tensor(), want = f(x);
        INFO("strict " << strict << ", seed " << seed);
        if (strict)
          CHECK(same_bits(got, want));
        else
          kt::check_all_close(got, kt::values(want), 1e-5, 1e-5, "reshape of a permuted intermediate");
      }
    }
  }


  TEST_CASE("gemm steps: transposed, sliced and broadcast operands get eager's call, bitwise (strict compile and jit)") {
    const auto strict = with({.strict = true});
    auto mm = [](Tensor a, Tensor b) { return matmul(a, b); };
    // (A, B) layouts: B^T and A^T as arguments, both, row steps (read in
    // place), column steps (copied), padded rows (general stride class)
    const std::pair<Lay, Lay> pairs[] = {{Lay::contiguous, Lay::transposed},  {Lay::transposed, Lay::contiguous},
                                         {Lay::transposed, Lay::transposed},  {Lay::row_step, Lay::transposed},
                                         {Lay::col_step, Lay::padded},        {Lay::transposed_padded, Lay::row_step},
                                         {Lay::padded, Lay::transposed_padded}};
    struct Size {
      int64_t m, n;
    };
    for (DType dt : {DType::float32, DType::float64}) {
      auto jmm = jit(mm, JitOptions{.compile = strict});
      for (int64_t k : {31, 32, 33, 64})
        for (Size sz : {Size{1, 1}, Size{1, 130}, Size{9, 13}, Size{130, 1}, Size{64, 96}, Size{127, 130}})
          for (auto [la, lb] : pairs) {
            const std::string what = std::string(name(dt)) + " m=" + std::to_string(sz.m) + " n=" +
                                     std::to_string(sz.n) + " k=" + std::to_string(k) + " A " + lay_name(la) +
                                     ", B " + lay_name(lb);
            INFO(what);
            const Tensor a = operand(sz.m, k, la, dt, uint64_t(k * 131 + sz.m)), b = operand(k, sz.n, lb, dt, uint64_t(k * 137 + sz.n));
            const Tensor want = matmul(a, b);
            check_reference(want, a, b, "eager " + what);
            CHECK(same_bits(compile(mm, strict)(a.layout(), b.layout())(a, b).as<Tensor>(), want));
            CHECK(same_bits(jmm(a, b), want));
            // default mode: eager's call too (within the float bound at least)
            check_reference(compile(mm)(a.layout(), b.layout())(a, b).as<Tensor>(), a, b, "default " + what);
          }
    }
  }

  TEST_CASE("gemm steps: one compiled callable for the general stride class takes each call's layout, bitwise eager") {
    // The key holds the stride class only: a callable traced for a padded
    // argument also runs column-strided and padded transposed ones.
    const auto strict = with({.strict = true});
    auto mm = [](Tensor a, Tensor b) { return matmul(a, b); };
    for (DType dt : {DType::float32, DType::float64})
      for (int64_t k : {31, 33, 64}) {
        const Tensor a0 = operand(9, k, Lay::padded, dt, 1), b0 = operand(k, 13, Lay::padded, dt, 2);
        REQUIRE(a0.stride_class() == StrideClass::general);
        const CompiledCallable run = compile(mm, strict)(a0.layout(), b0.layout());
        for (Lay la : {Lay::padded, Lay::col_step, Lay::transposed_padded})
          for (Lay lb : {Lay::padded, Lay::col_step, Lay::transposed_padded}) {
            INFO(name(dt) << " k=" << k << " A " << lay_name(la) << ", B " << lay_name(lb));
            const Tensor a = operand(9, k, la, dt, uint64_t(k + 3)), b = operand(k, 13, lb, dt, uint64_t(k + 4));
            REQUIRE(b.stride_class() == StrideClass::general);
            const Tensor want = matmul(a, b);
            check_reference(want, a, b, "eager");
            CHECK(same_bits(run(a, b).as<Tensor>(), want));
          }
      }
  }

  TEST_CASE("gemm steps: view ops inside the function on strided arguments, bias rows, epilogues and batches, bitwise eager") {
    const auto strict = with({.strict = true});
    // bt: [n, k]; at: [k, m]: transposed inside the function, so a
    // transposed-view argument is read contiguous by eager
    auto f_bt = [](Tensor a, Tensor bt) { return matmul(a, transpose(bt)); };
    auto f_atbt = [](Tensor at, Tensor bt) { return matmul(transpose(at), transpose(bt)); };
    auto f_bias = [](Tensor a, Tensor b, Tensor c) { return matmul(a, b) + c; };
    auto f_epi = [](Tensor a, Tensor b) { return relu(matmul(a, b)) * 0.5; };
    auto f_batch = [](Tensor a3, Tensor bt) { return matmul(a3, transpose(bt)); };
    // every second row of a2 [2m, k] (a view step: eager reads it in place, ld 2k)
    auto f_rows = [](Tensor a2, Tensor b) { return matmul(slice(a2, 0, 0, std::nullopt, 2), b); };
    for (DType dt : {DType::float32, DType::float64})
      for (int64_t k : {31, 32, 33, 64})
        for (int64_t m : {1, 9, 130})
          for (Lay l : {Lay::contiguous, Lay::transposed, Lay::row_step, Lay::col_step}) {
            const int64_t n = m == 1 ? 130 : 13;
            INFO(name(dt) << " m=" << m << " n=" << n << " k=" << k << " layout " << lay_name(l));
            const Tensor a = operand(m, k, l, dt, uint64_t(k + m)), bt = operand(n, k, l, dt, uint64_t(k + m + 1));
            const Tensor at = operand(k, m, l, dt, uint64_t(k + m + 2)), b = operand(k, n, l, dt, uint64_t(k + m + 3));
            const Tensor c = kt::random_tensor({n}, DType::float64, uint64_t(k + m + 4), false, 1.0).to(dt);
            const Tensor want_bt = f_bt(a, bt);
            check_reference(want_bt, a, transpose(bt), "eager a bt^T");
            CHECK(same_bits(compile(f_bt, strict)(a.layout(), bt.layout())(a, bt).as<Tensor>(), want_bt));
            CHECK(same_bits(jit(f_bt, JitOptions{.compile = strict})(a, bt), want_bt));
            CHECK(same_bits(compile(f_atbt, strict)(at.layout(), bt.layout())(at, bt).as<Tensor>(), f_atbt(at, bt)));
            CHECK(same_bits(compile(f_bias, strict)(a.layout(), b.layout(), c.layout())(a, b, c).as<Tensor>(), f_bias(a, b, c)));
            CHECK(same_bits(compile(f_epi, strict)(a.layout(), b.layout())(a, b).as<Tensor>(), f_epi(a, b)));
            const Tensor a2 = operand(2 * m, k, l, dt, uint64_t(k + m + 6));
            CHECK(same_bits(compile(f_rows, strict)(a2.layout(), b.layout())(a2, b).as<Tensor>(), f_rows(a2, b)));
            // batched [2, m, k] with matrix 1 = a, B^T broadcast over the batch: contiguous,
            // transposed matrices, a batch step, a row step
            const Tensor a3 = stack({operand(m, k, l, dt, uint64_t(k + m + 5)), a});
            const Tensor a3t = transpose(stack({transpose(a), transpose(a)}));
            const Tensor a3b = slice(stack({a, a, a, a}), 0, 1, std::nullopt, 2);
            const Tensor a2i = reshape(stack({a, a}, 1), {2 * m, k});  // rows 2i and 2i + 1: a's row i
            const Tensor a3r = slice(stack({a2i, a2i}), 1, 0, std::nullopt, 2);
            for (const Tensor& x3 : {a3, a3t, a3b, a3r}) {
              const Tensor want3 = f_batch(x3, bt);
              check_reference(reshape(slice(want3, 0, 1, 2), {m, n}), a, transpose(bt), "eager batched");
              CHECK(same_bits(compile(f_batch, strict)(x3.layout(), bt.layout())(x3, bt).as<Tensor>(), want3));
            }
            // a batch axis of stride 0 (broadcast argument) times a transposed B
            const Tensor ab = broadcast_to(a, {3, m, k});
            CHECK(same_bits(compile(f_batch, strict)(ab.layout(), bt.layout())(ab, bt).as<Tensor>(), f_batch(ab, bt)));
          }
  }

  TEST_CASE("gemm steps: a float32 operand strided past the generated GEMM's leading dimension, bitwise eager") {
    // The generated GEMM takes leading dimensions up to 2^20: eager copies an
    // operand strided further first where the shape runs it (the shape alone
    // picks the GEMM), so a plan's GEMM with an epilogue, which reads a
    // contiguous copy, and its plain gemm step, which reads the view, give
    // eager's bits (eager ran the BLAS on such a view before).
    const auto strict = with({.strict = true});
    auto mm = [](Tensor a, Tensor b) { return matmul(a, b); };
    auto f_epi = [](Tensor a, Tensor b) { return relu(matmul(a, b)) * 0.5; };
    const int64_t ld = codegen::kSmallGemmMaxDim + 16;
    for (int64_t k : {33, 200}) {
      INFO("k=" << k);
      const Tensor big = kt::random_tensor({4, ld}, DType::float32, uint64_t(k), false, 1.0);
      const Tensor a = slice(big, 1, 0, k);  // [4, k], rows ld apart
      const Tensor b = kt::random_tensor({k, 40}, DType::float32, uint64_t(k + 1), false, 1.0);
      const Tensor want = mm(a, b);
      check_reference(want, a, b, "eager");
      if (codegen::eager_small_gemm_shape(4, 40, k)) CHECK(same_bits(want, mm(a.contiguous(), b)));
      CHECK(same_bits(compile(mm, strict)(a.layout(), b.layout())(a, b).as<Tensor>(), want));
      CHECK(same_bits(compile(f_epi, strict)(a.layout(), b.layout())(a, b).as<Tensor>(), f_epi(a, b)));
    }
  }
}

