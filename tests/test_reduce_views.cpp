// kiln tests: sum, prod and mean of non-contiguous views (transposed,
// sliced with a step, permuted 3-d, broadcast) over each axis, the view made
// inside the traced function (graph view ops) or passed as a strided
// argument: compile (strict and default) and jit give eager's bits, and
// eager agrees with a float64 reference written here. Sizes sit around the
// SIMD lane counts and reduce()'s block of 128 rows (1..130, a few random).
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "same_bits.h"
#include "test_util.h"

namespace kt {
namespace {

using ReduceFn = Tensor (*)(const Tensor&, const Axes&, bool);
struct ReduceOp {
  const char* name;
  ReduceFn fn;
};
const ReduceOp kOps[] = {{"sum", &kiln::sum}, {"prod", &kiln::prod}, {"mean", &kiln::mean}};

// A view of extents r x c of a contiguous base tensor of shape base(r, c).
struct View {
  const char* name;
  std::function<Shape(int64_t, int64_t)> base;
  std::function<Tensor(const Tensor&, int64_t, int64_t)> make;
};
const std::vector<View>& views() {
  static const std::vector<View> v = {
      {"transposed", [](int64_t r, int64_t c) { return Shape{c, r}; },
       [](const Tensor& x, int64_t, int64_t) { return x.transpose(); }},
      {"rows step 2", [](int64_t r, int64_t c) { return Shape{2 * r, c}; },
       [](const Tensor& x, int64_t, int64_t) { return x.index({Slice(None, None, 2)}); }},
      {"columns step -3", [](int64_t r, int64_t c) { return Shape{r, 3 * c}; },
       [](const Tensor& x, int64_t, int64_t) { return x.index({Slice(), Slice(None, None, -3)}); }},
      {"rows step 2, transposed", [](int64_t r, int64_t c) { return Shape{2 * c, r}; },
       [](const Tensor& x, int64_t, int64_t) { return x.index({Slice(None, None, 2)}).transpose(); }},
      {"broadcast rows", [](int64_t, int64_t c) { return Shape{1, c}; },
       [](const Tensor& x, int64_t r, int64_t c) { return broadcast_to(x, {r, c}); }},
      {"broadcast columns", [](int64_t r, int64_t) { return Shape{r, 1}; },
       [](const Tensor& x, int64_t r, int64_t c) { return broadcast_to(x, {r, c}); }},
  };
  return v;
}

// float64 reference of op over `axes` of `v` (row-major values of any rank).
std::vector<double> reference(const char* op, const Tensor& v, const std::vector<bool>& red, std::vector<double>& bound,
                              double eps) {
  const Shape& s = v.shape();
  const std::vector<double> x = values(v);
  Shape os;
  int64_t nred = 1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (red[d]) nred *= s[d];
    else os.push_back(s[d]);
  }
  const int64_t nout = checked_numel(os);
  const bool is_prod = std::string(op) == "prod";
  std::vector<double> acc(static_cast<size_t>(nout), is_prod ? 1.0 : 0.0), mag(static_cast<size_t>(nout), is_prod ? 1.0 : 0.0);
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    const Index ix = unravel(i, s);
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); ++d)
      if (!red[d]) o = o * s[d] + ix[d];
    if (is_prod) {
      acc[o] *= x[i];
      mag[o] *= std::fabs(x[i]);
    } else {
      acc[o] += x[i];
      mag[o] += std::fabs(x[i]);
    }
  }
  // Rounding bound: each of the nred steps rounds once (twice for mean's divide).
  bound.assign(acc.size(), 0.0);
  for (size_t o = 0; o < acc.size(); ++o) {
    if (std::string(op) == "mean") {
      acc[o] /= static_cast<double>(nred);
      mag[o] /= static_cast<double>(nred);
    }
    bound[o] = 2.0 * static_cast<double>(nred + 1) * eps * mag[o] + 1e-300;
  }
  return acc;
}

// Values for op: normal(0, 20) for sum and mean (the tester's), 1 +
// normal(0, 0.05) for prod (130 factors stay far from over- and underflow).
Tensor data(const char* op, const Shape& shape, DType dt, uint64_t seed) {
  if (std::string(op) == "prod") return (random_tensor(shape, DType::float64, seed, false, 0.05) + 1.0).to(dt);
  return random_tensor(shape, DType::float64, seed, false, 20.0).to(dt);
}

CompileOptions strict_options(bool strict) {
  CompileOptions o;
  o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = strict});
  return o;
}

struct Counter {
  int failures = 0;
};

// Checks op over `axes` of view(x): eager against the reference, then
// compile (strict, default) and jit against eager, with the view made in
// the function (x contiguous) and with the view as the argument.
void check_case(const ReduceOp& op, const std::function<Tensor(const Tensor&)>& view, const Tensor& x,
                const Axes& axes, const std::string& what, Counter& bad) {
  const Tensor v = view(x);
  const Tensor eager = op.fn(v, axes, false);
  std::vector<bool> red(v.shape().size(), false);
  for (int64_t a : axes) red[static_cast<size_t>(a)] = true;
  std::vector<double> bound;
  const double eps = x.dtype() == DType::float64 ? 1.2e-16 : 6e-8;
  const std::vector<double> want = reference(op.name, v, red, bound, eps), got = values(eager);
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < want.size(); ++o)
    if (!(std::fabs(got[o] - want[o]) <= bound[o]) && bad.failures++ < 10)
      FAIL_CHECK(what << ": eager element " << o << " is " << got[o] << ", the float64 reference " << want[o]
                      << " (bound " << bound[o] << ")");
  auto in_graph = [&](Tensor t) { return op.fn(view(t), axes, false); };
  auto of_arg = [&](Tensor t) { return op.fn(t, axes, false); };
  auto expect_eager = [&](const Tensor& r, const std::string& how) {
    if (!same_bits(r, eager) && bad.failures++ < 10)
      FAIL_CHECK(what << ": " << how << " differs from eager (max ulp " << max_ulp_diff(r, eager) << ")");
  };
  for (bool strict : {true, false}) {
    const CompileOptions o = strict_options(strict);
    expect_eager(compile(in_graph, o)(x.layout())(x).as<Tensor>(),
                 strict ? "strict compile, view in the graph" : "default compile, view in the graph");
    expect_eager(compile(of_arg, o)(v.layout())(v).as<Tensor>(),
                 strict ? "strict compile, strided argument" : "default compile, strided argument");
  }
  expect_eager(jit(in_graph)(x).as<Tensor>(), "jit, view in the graph");
  expect_eager(jit(of_arg)(v).as<Tensor>(), "jit, strided argument");
}

// Extents around the lane counts (8, 16, 32 floats; 8, 16 doubles) and
// reduce()'s 128-row block, and a few random ones.
std::vector<std::pair<int64_t, int64_t>> extents() {
  std::vector<std::pair<int64_t, int64_t>> e = {{1, 5},   {2, 2},   {3, 33},  {7, 8},    {8, 7},    {15, 16},
                                                {16, 15}, {17, 3},  {31, 33}, {32, 33},  {33, 64},  {63, 2},
                                                {64, 33}, {65, 17}, {127, 9}, {128, 33}, {129, 4},  {130, 130},
                                                {33, 128}, {5, 129}};
  std::mt19937_64 rng(2026);
  std::uniform_int_distribution<int64_t> d(1, 130);
  for (int i = 0; i < 4; ++i) e.emplace_back(d(rng), d(rng));
  return e;
}

}  // namespace

TEST_SUITE("reduce") {
  TEST_CASE("sum, prod and mean of 2-d views: compiled and jit bitwise eager, eager close to float64") {
    Counter bad;
    uint64_t seed = 1;
    for (DType dt : {DType::float32, DType::float64})
      for (const View& view : views())
        for (auto [r, c] : extents())
          for (const ReduceOp& op : kOps)
            for (const Axes& axes : {Axes{0}, Axes{1}}) {
              auto make = [&view, r = r, c = c](const Tensor& x) { return view.make(x, r, c); };
              const Tensor x = data(op.name, view.base(r, c), dt, seed++);
              const std::string what = std::string(op.name) + " over axis " + std::to_string(axes[0]) + " of " +
                                       std::string(name(dt)) + " [" + std::to_string(r) + ", " + std::to_string(c) + "] " +
                                       view.name;
              check_case(op, make, x, axes, what, bad);
            }
    CHECK_MESSAGE(bad.failures == 0, bad.failures << " cases failed (the first 10 are listed)");
  }

  TEST_CASE("sum, prod and mean of permuted 3-d views and of a transposed matmul") {
    Counter bad;
    uint64_t seed = 1000;
    for (DType dt : {DType::float32, DType::float64})
      for (Shape s : {Shape{3, 33, 5}, Shape{17, 2, 40}, Shape{64, 3, 9}, Shape{2, 130, 3}})
        for (const Axes& perm : {Axes{2, 0, 1}, Axes{1, 2, 0}, Axes{2, 1, 0}})
          for (const ReduceOp& op : kOps)
            for (const Axes& axes : {Axes{0}, Axes{1}, Axes{2}, Axes{0, 2}}) {
              const Tensor x = data(op.name, s, dt, seed++);
              const std::string what = std::string(op.name) + " over axes " + shape_str(axes) + " of " +
                                       std::string(name(dt)) + " " + shape_str(s) + " permuted " + shape_str(perm);
              check_case(op, [perm = perm](const Tensor& t) { return t.permute(perm); }, x, axes, what, bad);
            }
    // The tester's third case: column sums of a transposed product.
    for (DType dt : {DType::float32, DType::float64})
      for (auto [m, n] : {std::pair<int64_t, int64_t>{33, 64}, {64, 33}, {128, 17}, {16, 16}}) {
        const Tensor a = data("sum", {m, 12}, dt, seed++), b = data("sum", {12, n}, dt, seed++);
        auto f = [](Tensor a, Tensor b) { return sum(matmul(a, b).transpose(), {0}); };
        const Tensor eager = f(a, b);
        for (bool strict : {true, false}) {
          const Tensor got = compile(f, strict_options(strict))(a.layout(), b.layout())(a, b).as<Tensor>();
          CHECK_MESSAGE(same_bits(got, eager), std::string(name(dt)) << " [" << m << ", " << n << "] strict " << strict
                                                              << ": max ulp " << max_ulp_diff(got, eager));
        }
        CHECK(same_bits(jit(f)(a, b).as<Tensor>(), eager));
      }
    CHECK_MESSAGE(bad.failures == 0, bad.failures << " cases failed (the first 10 are listed)");
  }
}

}  // namespace kt
