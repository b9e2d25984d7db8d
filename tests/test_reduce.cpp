// kiln tests: reductions (Reduce rows) and cumsum (Scan rows) against a
// float64 reference written here, plus literals computed with numpy.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "op_table_checks.h"
#include "same_bits.h"
#include "test_util.h"

namespace kt {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Unit roundoff of the type an op on dtype d accumulates in (float32 for the
// 16-bit floats, the dtype itself otherwise; ints are exact).
double acc_eps(DType d) {
  if (d == DType::float64) return 2.3e-16;
  if (is_floating(d)) return 1.2e-7;
  return 2.3e-16;  // integer inputs of mean/var/logsumexp compute in double
}

std::string shape_axes(const Shape& s, const Axes& axes, bool keepdim) {
  return shape_str(s) + " axes " + (axes.empty() ? std::string("all") : shape_str(axes)) +
         (keepdim ? " keepdim" : "");
}

DType reduce_result_dtype(OpId op, DType in) {
  const bool exact = !is_floating(in);
  switch (op) {
    case OpId::Sum:
    case OpId::Prod: return exact ? (is_unsigned(in) ? DType::uint64 : DType::int64) : in;
    case OpId::Mean:
    case OpId::Var:
    case OpId::Std:
    case OpId::LogSumExp: return exact ? DType::float32 : in;
    case OpId::ArgMax:
    case OpId::ArgMin: return DType::int64;
    case OpId::Any:
    case OpId::All: return DType::bool_;
    default: return in;
  }
}

struct RefValue {
  double want;
  double tol;
};

// The float64 reference of reduction `op` of one group.
RefValue reduce_ref(OpId op, const std::vector<double>& g, DType in, double correction) {
  const DType out = reduce_result_dtype(op, in);
  const double n = static_cast<double>(g.size());
  const double eps = acc_eps(in);
  const double K = 32.0;
  bool any_nan = false;
  double sum = 0, abs_sum = 0;
  for (double x : g) {
    any_nan = any_nan || std::isnan(x);
    sum += x;
    abs_sum += std::fabs(x);
  }
  auto finish = [&](double want, double mag) {
    want = round_to(out, want);
    return RefValue{want, is_floating(out) ? rtol_for(out) * std::fabs(want) + K * eps * mag : 0.0};
  };
  switch (op) {
    case OpId::Sum: return finish(sum, abs_sum);
    case OpId::Mean: return finish(sum / n, abs_sum / n);
    case OpId::Prod: {
      if (!is_floating(in)) {  // int64 with wrap-around, as numpy
        uint64_t p = 1;
        for (double x : g) p *= static_cast<uint64_t>(static_cast<int64_t>(x));
        return {out == DType::uint64 ? static_cast<double>(p) : static_cast<double>(static_cast<int64_t>(p)), 0.0};
      }
      double p = 1;
      for (double x : g) p *= x;
      return finish(p, std::fabs(p) * n);
    }
    case OpId::Max:
    case OpId::Min: {
      double m = op == OpId::Max ? -kInf : kInf;
      for (double x : g) m = op == OpId::Max ? std::max(m, x) : std::min(m, x);
      return {any_nan ? kNaN : m, 0.0};
    }
    case OpId::ArgMax:
    case OpId::ArgMin: {
      size_t best = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        if (std::isnan(g[i])) return {static_cast<double>(i), 0.0};
        if (op == OpId::ArgMax ? g[i] > g[best] : g[i] < g[best]) best = i;
      }
      return {static_cast<double>(best), 0.0};
    }
    case OpId::Any:
    case OpId::All: {
      bool r = op == OpId::All;
      for (double x : g) r = op == OpId::All ? (r && x != 0) : (r || x != 0);
      return {r ? 1.0 : 0.0, 0.0};
    }
    case OpId::Var:
    case OpId::Std: {
      const double mean = sum / n;
      double ss = 0, sq = 0;
      for (double x : g) {
        ss += (x - mean) * (x - mean);
        sq += x * x;
      }
      const double div = std::max(n - correction, 0.0);
      double v = ss / div;
      double mag = (ss + sq) / div;
      if (op == OpId::Std) {
        v = std::sqrt(v);
        mag = std::sqrt(mag);
      }
      return finish(v, mag);
    }
    case OpId::LogSumExp: {
      double m = -kInf;
      for (double x : g) m = std::max(m, x);
      double s = 0;
      if (std::isfinite(m)) {
        for (double x : g) s += std::exp(x - m);
        return finish(any_nan ? kNaN : m + std::log(s), std::fabs(m) + 1.0);
      }
      for (double x : g) s += std::exp(x);
      return finish(any_nan ? kNaN : std::log(s), 1.0);
    }
    default: FAIL("not a reduction"); return {0, 0};
  }
}


// Axis sets to try on an nd-tensor: all, each axis (also negative), and
// pairs (not for argmax/argmin, which take one axis).
std::vector<Axes> axis_sets(int64_t nd, bool one_axis) {
  std::vector<Axes> r = {{}};
  for (int64_t a = 0; a < nd; ++a) r.push_back({a % 2 ? a - nd : a});
  if (!one_axis) {
    for (int64_t a = 0; a + 1 < nd; ++a) r.push_back({a, nd - 1});
    if (nd >= 3) r.push_back({-1, 0});  // unsorted
  }
  return r;
}

// random_tensor of a 0-d shape, kept 0-d.
Tensor random_of(const Shape& s, DType dt, uint64_t seed, bool specials) {
  Tensor x = random_tensor(s, dt, seed, specials);
  return s.empty() ? x.reshape({}) : x;
}

// One case: runs op on `x` laid out as `view`, compares with the reference.
// Returns 1 when it compared something.
int reduce_case(OpId op, const Tensor& x0, ViewKind view, const Axes& axes, bool keepdim, double correction) {
  const Tensor x = relayout(x0, view);
  const Shape& s = x.shape();
  const std::string what = std::string(op_name(op)) + " " + std::string(name(x.dtype())) + " " + view_name(view) +
                           " " + shape_axes(s, axes, keepdim);
  std::vector<bool> red(s.size(), axes.empty());
  for (int64_t a : axes) red[a < 0 ? a + static_cast<int64_t>(s.size()) : a] = true;
  Shape want_shape;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!red[d]) want_shape.push_back(s[d]);
    else if (keepdim) want_shape.push_back(1);
  }
  const auto groups = group_reduced(values(x0), s, red);
  const bool no_identity = op == OpId::Max || op == OpId::Min || op == OpId::ArgMax || op == OpId::ArgMin;
  const bool empty_groups = !groups.empty() && groups[0].empty();
  if (no_identity && empty_groups) {
    CHECK_THROWS_AS_MESSAGE(run_reduce(op, x, axes, keepdim, correction), kiln::ValueError, what);
    return 1;
  }
  Tensor got = run_reduce(op, x, axes, keepdim, correction);
  CHECK_MESSAGE(got.dtype() == reduce_result_dtype(op, x.dtype()), what);
  CHECK_MESSAGE(got.shape() == want_shape, what << ": got shape " << shape_str(got.shape()));
  const std::vector<double> g = values(got);
  REQUIRE_MESSAGE(g.size() == groups.size(), what);
  int bad = 0;
  for (size_t o = 0; o < groups.size() && bad < 3; ++o) {
    const RefValue r = reduce_ref(op, groups[o], x.dtype(), correction);
    if (!close(g[o], r.want, 0.0, r.tol)) {
      ++bad;
      FAIL_CHECK(what << ": output " << o << " got " << g[o] << " want " << r.want << " (tol " << r.tol << ")");
    }
  }
  return 1;
}

}  // namespace

int check_reduce_op(OpId op) {
  const bool one_axis = op == OpId::ArgMax || op == OpId::ArgMin;
  const std::vector<Shape> small = {{}, {0}, {1}, {7}, {3, 4}, {2, 0, 3}, {1, 5, 1}, {2, 3, 4}, {3, 1, 2, 2}};
  // Larger shapes reach the blocked paths (several blocks per output, the
  // outer loop shape with several row blocks, chunked outputs).
  const std::vector<Shape> large = {{20000}, {3, 9000}, {300, 7}, {5, 200, 33}};
  const std::vector<double> corrections = {1.0, 0.0};
  int cases = 0;
  uint64_t seed = static_cast<uint64_t>(op) * 1000;
  for (DType dt : all_dtypes()) {
    for (const Shape& s : small) {
      for (const Axes& axes : axis_sets(static_cast<int64_t>(s.size()), one_axis)) {
        for (int k = 0; k < 4; ++k) {
          const ViewKind view = static_cast<ViewKind>(k);
          const Tensor x = random_of(s, dt, ++seed, /*specials=*/k % 2 == 1);
          cases += reduce_case(op, x, view, axes, k >= 2, corrections[k % 2]);
        }
      }
    }
  }
  for (DType dt : {DType::float32, DType::float64, DType::int32, DType::float16, DType::bool_}) {
    for (const Shape& s : large) {
      if (op == OpId::Prod && is_floating(dt)) continue;  // products of thousands of normals over/underflow
      for (const Axes& axes : axis_sets(static_cast<int64_t>(s.size()), one_axis)) {
        for (ViewKind view : {ViewKind::contiguous, ViewKind::transposed, ViewKind::negative}) {
          const Tensor x = random_tensor(s, dt, ++seed, /*specials=*/false);
          cases += reduce_case(op, x, view, axes, view == ViewKind::transposed, 1.0);
        }
      }
    }
  }
  return cases;
}

int check_scan_op(OpId op) {
  if (op != OpId::CumSum) return check_order_op(op);  // cumprod, sort, argsort: test_sort_matrix.cpp
  const std::vector<Shape> shapes = {{0}, {1}, {9}, {3, 4}, {2, 0, 3}, {2, 3, 5}, {4, 1, 3}, {2, 3000}};
  int cases = 0;
  uint64_t seed = 77;
  for (DType dt : all_dtypes()) {
    const DType out_dt = is_floating(dt) ? dt : is_unsigned(dt) ? DType::uint64 : DType::int64;
    for (const Shape& s : shapes) {
      const int64_t nd = static_cast<int64_t>(s.size());
      for (int64_t axis = -nd; axis < nd; ++axis) {
        for (int k = 0; k < 4; ++k) {
          const ViewKind view = static_cast<ViewKind>(k);
          const Tensor x0 = random_tensor(s, dt, ++seed, k == 1);
          const Tensor got = cumsum(relayout(x0, view), axis);
          const std::string what = std::string("cumsum ") + std::string(name(dt)) + " " + view_name(view) + " " +
                                   shape_str(s) + " axis " + std::to_string(axis);
          CHECK_MESSAGE(got.dtype() == out_dt, what);
          CHECK_MESSAGE(got.shape() == s, what);
          // Reference: running sums along the axis in float64.
          const int64_t a = axis < 0 ? axis + nd : axis;
          int64_t inner = 1;
          for (int64_t d = a + 1; d < nd; ++d) inner *= s[d];
          const std::vector<double> v = values(x0), g = values(got);
          std::vector<double> run(v.size()), mag(v.size());
          for (size_t i = 0; i < v.size(); ++i) {
            const int64_t pos = (static_cast<int64_t>(i) / inner) % s[a];
            run[i] = v[i] + (pos > 0 ? run[i - inner] : 0.0);
            mag[i] = std::fabs(v[i]) + (pos > 0 ? mag[i - inner] : 0.0);
          }
          int bad = 0;
          for (size_t i = 0; i < v.size() && bad < 3; ++i) {
            const double want = round_to(out_dt, run[i]);
            const double tol = is_floating(out_dt) ? rtol_for(out_dt) * std::fabs(want) + 8 * acc_eps(dt) * mag[i] : 0;
            if (!close(g[i], want, 0.0, tol)) {
              ++bad;
              FAIL_CHECK(what << ": element " << i << " got " << g[i] << " want " << want);
            }
          }
          ++cases;
        }
      }
    }
    CHECK_THROWS_AS(cumsum(random_tensor({2, 3}, dt, 1), 2), kiln::IndexError);
    // a 0-d tensor has only axes 0 / -1 (its own value: tests/test_zero_d.cpp)
    CHECK_THROWS_AS(cumsum(random_of({}, dt, 1, false), 1), kiln::IndexError);
  }
  return cases;
}

}  // namespace kt

using namespace kiln;

namespace {

using kt::same_bits;
using kt::ThreadGuard;

}  // namespace

TEST_SUITE("reduce") {
  TEST_CASE("numpy literals") {
    const Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
    // numpy: x.sum(0) = [5, 7, 9]; x.sum(1) = [6, 15]; x.sum() = 21
    CHECK(sum(x, {0}).to_vector<double>() == std::vector<double>{5, 7, 9});
    CHECK(sum(x, {-1}).to_vector<double>() == std::vector<double>{6, 15});
    CHECK(sum(x).item() == 21.0);
    CHECK(sum(x, {1}, true).shape() == Shape{2, 1});
    // numpy: x.mean(0) = [2.5, 3.5, 4.5]; x.prod(1) = [6, 120]
    CHECK(mean(x, {0}).to_vector<double>() == std::vector<double>{2.5, 3.5, 4.5});
    CHECK(prod(x, {1}).to_vector<double>() == std::vector<double>{6, 120});
    // numpy: x.var(ddof=1) = 3.5; x.var(axis=1) = [0.6666666666666666, 0.6666666666666666]
    CHECK(var(x).item() == doctest::Approx(3.5).epsilon(1e-15));
    CHECK(var(x, {1}, 0.0).to_vector<double>()[0] == doctest::Approx(2.0 / 3.0).epsilon(1e-15));
    // numpy: x.std(ddof=1) = 1.8708286933869707
    CHECK(kiln::std(x).item() == doctest::Approx(1.8708286933869707).epsilon(1e-15));
    // scipy.special.logsumexp(x, axis=1) = [3.40760596444438, 6.40760596444438]
    const auto lse = logsumexp(x, {1}).to_vector<double>();
    CHECK(lse[0] == doctest::Approx(3.40760596444438).epsilon(1e-14));
    CHECK(lse[1] == doctest::Approx(6.40760596444438).epsilon(1e-14));
    // numpy: argmax of [[1, 3, 3], [7, 7, 0]] -> 3 (flattened), [1, 1, 0] (axis 0), [1, 0] (axis 1)
    const Tensor y = tensor({{1, 3, 3}, {7, 7, 0}});
    CHECK(argmax(y).item<int64_t>() == 3);
    CHECK(argmax(y, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0});
    CHECK(argmax(y, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
    CHECK(argmin(y, 1, true).shape() == Shape{2, 1});
    CHECK(argmax(y, std::nullopt, true).shape() == Shape{1, 1});
    // numpy: int32 sums are int64; mean of ints is floating
    CHECK(sum(y).dtype() == DType::int64);
    CHECK(sum(y).item<int64_t>() == 21);
    CHECK(mean(y).dtype() == DType::float32);
    CHECK(max(y, {0}).to_vector<int32_t>() == std::vector<int32_t>{7, 7, 3});
    CHECK(any(tensor({0, 0, 1})).item<bool>());
    CHECK_FALSE(all(tensor({0, 0, 1})).item<bool>());
  }

  TEST_CASE("empty reductions follow numpy") {
    const Tensor e = zeros({0, 3});
    CHECK(sum(e).item() == 0.0);
    CHECK(prod(e).item() == 1.0);
    CHECK(std::isnan(mean(e).item()));
    CHECK(std::isnan(var(e).item()));
    CHECK(logsumexp(e).item() == -std::numeric_limits<double>::infinity());
    CHECK_FALSE(any(e).item<bool>());
    CHECK(all(e).item<bool>());
    CHECK(sum(e, {0}).to_vector<double>() == std::vector<double>{0, 0, 0});
    // max over the empty axis has no identity; over the full axis the result is empty.
    CHECK_THROWS_AS(max(e, {0}), kiln::ValueError);
    CHECK_THROWS_AS(argmax(e), kiln::ValueError);
    CHECK_THROWS_AS(min(e), kiln::ValueError);
    CHECK(max(e, {1}).shape() == Shape{0});
    CHECK(argmin(e, 1).shape() == Shape{0});
    try {
      max(e, {0});
    } catch (const kiln::ValueError& err) {
      CHECK(std::string(err.what()).rfind("max: ", 0) == 0);
    }
  }

  TEST_CASE("NaN propagates through max, min, argmax, argmin") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Tensor x = Tensor::from_vector<float>({1.f, float(nan), 5.f, float(nan), -2.f});
    CHECK(std::isnan(max(x).item()));
    CHECK(std::isnan(min(x).item()));
    CHECK(argmax(x).item<int64_t>() == 1);
    CHECK(argmin(x).item<int64_t>() == 1);
    // Long enough for the lane loop and several blocks.
    Tensor big = zeros({100000});
    big.data<float>()[70001] = float(nan);
    big.data<float>()[90001] = 3.f;
    CHECK(std::isnan(max(big).item()));
    CHECK(argmax(big).item<int64_t>() == 70001);
    big.data<float>()[70001] = 0.f;
    CHECK(max(big).item() == 3.0);
    CHECK(argmax(big).item<int64_t>() == 90001);
  }

  TEST_CASE("var/std correction past the count gives numpy's inf or nan") {
    // numpy: np.var([1., 2.], ddof=2) = inf; np.var([1.], ddof=1) = nan; np.var([1., 2.], ddof=1.5) = 1.0
    CHECK(var(tensor({1.0, 2.0}), {}, 2.0).item() == std::numeric_limits<double>::infinity());
    CHECK(std::isnan(var(tensor({1.0}), {}, 1.0).item()));
    CHECK(var(tensor({1.0, 2.0}), {}, 1.5).item() == doctest::Approx(1.0));
  }

  TEST_CASE("logsumexp and infinities") {
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(logsumexp(tensor({-inf, -inf})).item() == -inf);
    CHECK(logsumexp(tensor({inf, 1.0})).item() == inf);
    CHECK(std::isnan(logsumexp(tensor({inf, -inf, std::nan("")})).item()));
    // scipy: logsumexp([1000., 1000.]) = 1000.6931471805599 (no overflow)
    CHECK(logsumexp(tensor({1000.0, 1000.0})).item() == doctest::Approx(1000.6931471805599).epsilon(1e-15));
  }

  TEST_CASE("integer sums and products wrap in int64 like numpy") {
    const int64_t big = std::numeric_limits<int64_t>::max();
    const Tensor x = Tensor::from_vector<int64_t>({big, 1});
    CHECK(sum(x).item<int64_t>() == std::numeric_limits<int64_t>::min());
    // numpy: np.prod(np.array([2**62, 4], dtype=np.int64)) = 0
    CHECK(prod(Tensor::from_vector<int64_t>({int64_t(1) << 62, 4})).item<int64_t>() == 0);
    CHECK(cumsum(x, 0).to_vector<int64_t>()[1] == std::numeric_limits<int64_t>::min());
    CHECK(sum(tensor({true, true, false})).item<int64_t>() == 2);
  }

  TEST_CASE("float16/bfloat16 accumulate in float32") {
    // 4096 ones: a float16 accumulator would stop at 2048.
    const Tensor h = ones({4096}, DType::float16);
    CHECK(sum(h).item() == 4096.0);
    CHECK(sum(h).dtype() == DType::float16);
    CHECK(cumsum(h, 0).to_vector<double>().back() == 4096.0);
    CHECK(mean(ones({3000}, DType::bfloat16)).item() == 1.0);
  }

  TEST_CASE("bad axes") {
    const Tensor x = zeros({2, 3});
    CHECK_THROWS_AS(sum(x, {2}), kiln::IndexError);
    CHECK_THROWS_AS(sum(x, {-3}), kiln::IndexError);
    CHECK_THROWS_AS(sum(x, {0, -2}), kiln::IndexError);
    CHECK_THROWS_AS(mean(x, {1, 1}), kiln::IndexError);
    CHECK_THROWS_AS(argmax(x, 5), kiln::IndexError);
    CHECK_THROWS_AS(sum(zeros({}), {0}), kiln::IndexError);
    Attrs a;
    a.ints = {0, 1};
    CHECK_THROWS_AS(apply(OpId::ArgMax, x, a), kiln::ValueError);
    try {
      sum(x, {0, 0});
    } catch (const kiln::IndexError& e) {
      CHECK(std::string(e.what()).rfind("sum: ", 0) == 0);
    }
  }

  TEST_CASE("results do not depend on the thread count") {
    ThreadGuard guard;
    const Tensor x = random::normal({1 << 20}, 0.0, 1.0, DType::float32);
    const Tensor m = x.reshape({1024, 1024});
    auto run_all = [&] {
      return std::vector<Tensor>{sum(x), mean(x), sum(m, {0}), sum(m, {1}), var(m, {0}), logsumexp(m, {1}),
                                 max(m, {0}), argmax(m, 1), sum(m.transpose(), {0}), cumsum(m, 0), prod(m, {1})};
    };
    set_num_threads(1);
    const auto one = run_all();
    set_num_threads(2);
    const auto two = run_all();
    for (size_t i = 0; i < one.size(); ++i) CHECK_MESSAGE(same_bits(one[i], two[i]), "result " << i);
  }

  TEST_CASE("reductions of broadcast views (zero strides)") {
    const Tensor b = broadcast_to(tensor({1.0, 2.0, 3.0}), {4, 3});
    CHECK(sum(b, {0}).to_vector<double>() == std::vector<double>{4, 8, 12});
    CHECK(sum(b).item() == 24.0);
    CHECK(max(b, {1}).to_vector<double>() == std::vector<double>{3, 3, 3, 3});
    CHECK(argmax(b, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
    CHECK(argmax(b).item<int64_t>() == 2);
    CHECK(var(b, {0}).to_vector<double>() == std::vector<double>{0, 0, 0});
    CHECK(cumsum(b, 0).to_vector<double>()[9] == 4.0);
  }

  TEST_CASE("a long float32 sum stays accurate") {
    // 16M copies of 0.1f: a naive float32 loop drifts by more than 10%.
    const int64_t n = 1 << 24;
    const Tensor x = full({n}, 0.1, DType::float32);
    const double want = static_cast<double>(0.1f) * static_cast<double>(n);
    CHECK(sum(x).item() == doctest::Approx(want).epsilon(1e-5));
    CHECK(sum(x.reshape({4096, 4096}), {0}).to_vector<double>()[17] == doctest::Approx(409.6f).epsilon(1e-5));
  }
}
