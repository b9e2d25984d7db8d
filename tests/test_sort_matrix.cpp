// sort/argsort/topk/cumprod (Scan rows) and the matrix compositions of
// tensor/matrix_ops.h, against float64 loops written here (std::stable_sort
// with numpy's NaN order), eagerly and compiled.
#include <algorithm>
#include <array>
#include <cfloat>
#include <cstring>
#include <limits>
#include <numeric>

#include "op_table_checks.h"
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;
using kt::all_dtypes;
using kt::random_tensor;
using kt::relayout;
using kt::values;
using kt::ViewKind;

namespace {

// Row-major index helpers over a shape: the positions of the line along
// `axis` that passes through the flat index `start` (whose axis coordinate is 0).
struct Lines {
  Shape s;
  int64_t axis, inner = 1;
  Lines(const Shape& shape, int64_t ax) : s(shape), axis(ax) {
    for (size_t d = static_cast<size_t>(ax) + 1; d < s.size(); ++d) inner *= s[d];
  }
  int64_t count() const { return s[axis] == 0 ? 0 : checked_numel(s) / s[axis]; }
  int64_t start(int64_t line) const { return (line / inner) * inner * s[axis] + line % inner; }
};

bool nan_last_less(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}

// Reference stable order of each line: positions along the axis.
std::vector<int64_t> ref_argsort(const std::vector<double>& v, const Lines& L, bool desc) {
  std::vector<int64_t> out(v.size());
  const int64_t n = L.s[L.axis];
  for (int64_t line = 0; line < L.count(); ++line) {
    const int64_t s0 = L.start(line);
    std::vector<int64_t> p(n);
    std::iota(p.begin(), p.end(), 0);
    std::stable_sort(p.begin(), p.end(), [&](int64_t a, int64_t b) {
      const double x = v[s0 + a * L.inner], y = v[s0 + b * L.inner];
      return desc ? nan_last_less(y, x) : nan_last_less(x, y);
    });
    for (int64_t i = 0; i < n; ++i) out[s0 + i * L.inner] = p[i];
  }
  return out;
}

using kt::same_bits;

// Sort or ArgSort on every dtype, layout, axis and direction against the
// reference order (ties from few distinct values test stability).
int check_sort_rows(OpId op) {
    const std::vector<Shape> shapes = {{0}, {1}, {7}, {3, 4}, {2, 0, 3}, {2, 3, 5}, {4, 1, 6}, {3, 700}};
    uint64_t seed = 11;
    int cases = 0;
    for (DType dt : all_dtypes()) {
      for (const Shape& s : shapes) {
        const int64_t nd = static_cast<int64_t>(s.size());
        for (int64_t axis = -nd; axis < nd; ++axis) {
          for (int k = 0; k < 4; ++k) {
            // Few distinct integers make ties, which stability must order.
            const Tensor x0 = random_tensor(s, dt, ++seed, k == 1, 2.0, -3, 3);
            const Tensor x = relayout(x0, static_cast<ViewKind>(k));
            const Lines L(s, axis < 0 ? axis + nd : axis);
            const std::vector<double> v = values(x0);
            for (bool desc : {false, true}) {
              CAPTURE(name(dt));
              CAPTURE(shape_str(s));
              CAPTURE(axis);
              CAPTURE(k);
              CAPTURE(desc);
              const std::vector<int64_t> want = ref_argsort(v, L, desc);
              if (op == OpId::ArgSort) {
                Tensor idx = argsort(x, axis, desc);
                REQUIRE(idx.dtype() == DType::int64);
                REQUIRE(idx.shape() == s);
                CHECK(idx.to_vector<int64_t>() == want);
                ++cases;
                continue;
              }
              Tensor sorted = sort(x, axis, desc);
              REQUIRE(sorted.dtype() == dt);
              const std::vector<double> got = values(sorted);
              for (int64_t line = 0; line < L.count(); ++line)
                for (int64_t i = 0; i < s[L.axis]; ++i) {
                  const int64_t at = L.start(line) + i * L.inner;
                  const double w = v[L.start(line) + want[at] * L.inner];
                  if (std::isnan(w)) CHECK(std::isnan(got[at]));
                  else CHECK(got[at] == w);
                }
              ++cases;
            }
          }
        }
      }
    }
    CHECK_THROWS_AS(sort(tensor({1.0f, 2.0f}), 1), IndexError);
    return cases;
}

  TEST_CASE("sort puts NaN last ascending and first descending, -0 and 0 keep their order") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    Tensor x = tensor({3.0f, nan, -inf, 0.0f, -0.0f, inf, 1.0f});
    const std::vector<int64_t> up = argsort(x).to_vector<int64_t>();
    CHECK(up == std::vector<int64_t>{2, 3, 4, 6, 0, 5, 1});
    const std::vector<int64_t> down = argsort(x, -1, true).to_vector<int64_t>();
    CHECK(down == std::vector<int64_t>{1, 5, 0, 6, 3, 4, 2});
  }

  TEST_CASE("topk: values and indices, ties keep the lower index, smallest, bad k") {
    Tensor x = tensor({{1.0f, 5.0f, 3.0f, 5.0f}, {-1.0f, -2.0f, 0.0f, 7.0f}});
    TopK t = topk(x, 2);
    CHECK(t.values.to_vector<float>() == std::vector<float>{5, 5, 7, 0});
    CHECK(t.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 3, 2});
    TopK s = topk(x, 1, 0, false);  // smallest along axis 0
    CHECK(s.values.shape() == Shape{1, 4});
    CHECK(s.values.to_vector<float>() == std::vector<float>{-1, -2, 0, 5});
    CHECK(s.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1, 0});
    CHECK(topk(x, 0).values.shape() == Shape{2, 0});
    CHECK_THROWS_WITH_AS(topk(x, 5), doctest::Contains("topk: k must be in [0, 4]"), ValueError);
    CHECK_THROWS_AS(topk(x, -1), ValueError);
  }

// topk on every dtype, layout, axis, k and direction against the first k of
// the reference stable order (values and indices), lines of up to 700 so
// both the heap (small k) and the selection (large k) paths run.
int check_topk_rows() {
    const std::vector<Shape> shapes = {{1}, {7}, {3, 4}, {2, 3, 5}, {4, 1, 6}, {3, 700}};
    uint64_t seed = 101;
    int cases = 0;
    for (DType dt : all_dtypes()) {
      for (const Shape& s : shapes) {
        const int64_t nd = static_cast<int64_t>(s.size());
        for (int64_t axis = 0; axis < nd; ++axis) {
          const int64_t n = s[axis];
          for (int v = 0; v < 4; ++v) {
            const Tensor x0 = random_tensor(s, dt, ++seed, v == 1, 2.0, -3, 3);
            const Tensor x = relayout(x0, static_cast<ViewKind>(v));
            const Lines L(s, axis);
            const std::vector<double> xv = values(x0);
            for (bool largest : {true, false}) {
              const std::vector<int64_t> want = ref_argsort(xv, L, largest);
              for (int64_t k : {int64_t(0), int64_t(1), std::min<int64_t>(3, n), std::min<int64_t>(40, n), n}) {
                CAPTURE(name(dt));
                CAPTURE(shape_str(s));
                CAPTURE(axis);
                CAPTURE(v);
                CAPTURE(largest);
                CAPTURE(k);
                TopK t = topk(x, k, axis - nd, largest);  // negative axis on purpose
                Shape ks = s;
                ks[axis] = k;
                REQUIRE(t.values.shape() == ks);
                REQUIRE(t.values.dtype() == dt);
                REQUIRE(t.indices.dtype() == DType::int64);
                const std::vector<int64_t> gi = t.indices.to_vector<int64_t>();
                const std::vector<double> gv = values(t.values);
                const Lines K(ks, axis);
                bool ok = true;
                for (int64_t line = 0; line < K.count(); ++line)
                  for (int64_t i = 0; i < k; ++i) {
                    const int64_t g = K.start(line) + i * K.inner, w = L.start(line) + i * L.inner;
                    const double wv = xv[L.start(line) + want[w] * L.inner];
                    ok = ok && gi[g] == want[w] && (std::isnan(wv) ? std::isnan(gv[g]) : gv[g] == wv);
                  }
                CHECK(ok);
                ++cases;
              }
            }
          }
        }
      }
    }
    return cases;
}

// A long float line of few distinct values: ties, -0 and +0, NaNs of both
// signs and two payloads, infinities. Radix argsort, the values sort and topk
// must give the stable sort's exact bits.
std::vector<float> tie_heavy_line(size_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  const float pool[] = {1.5f, -1.5f, 0.0f, -0.0f, 2.0f, -inf, inf, 3.0f, -7.0f, 1e-30f};
  std::vector<float> v(n);
  uint32_t r = 12345;
  for (size_t i = 0; i < n; ++i) {
    r = r * 1664525u + 1013904223u;
    const uint32_t c = (r >> 16) % 12;
    if (c < 10) v[i] = pool[c];
    else {
      const uint32_t bits = c == 10 ? 0x7FC00001u : 0xFFC00000u;  // +NaN with payload, -NaN
      std::memcpy(&v[i], &bits, 4);
    }
  }
  return v;
}

}  // namespace

TEST_SUITE("sort and matrix ops") {
  TEST_CASE("topk: every dtype, layout, axis, k and direction against the stable-sort reference") {
    CHECK(check_topk_rows() > 1000);
  }

  TEST_CASE("sort, argsort and topk of a long tie-heavy float line keep the stable sort's bits") {
    const std::vector<float> v = tie_heavy_line(5000);
    for (DType dt : {DType::float32, DType::float64, DType::float16, DType::bfloat16, DType::int32}) {
      // int32 through a float32 -> int32 cast would turn NaN into INT_MIN: keep integers NaN-free.
      std::vector<float> src = v;
      if (dt == DType::int32)
        for (float& f : src)
          if (std::isnan(f) || std::isinf(f)) f = 4.0f;
      const Tensor x = Tensor::from_vector(src, Shape{5000}).to(dt);
      const Lines L(Shape{5000}, 0);
      const std::vector<double> xv = values(x);
      for (bool desc : {false, true}) {
        CAPTURE(name(dt));
        CAPTURE(desc);
        const std::vector<int64_t> want = ref_argsort(xv, L, desc);
        const Tensor wi = Tensor::from_vector(want, Shape{5000});
        CHECK(argsort(x, 0, desc).to_vector<int64_t>() == want);
        CHECK(same_bits(sort(x, 0, desc), gather(x, 0, wi)));  // -0/+0 and NaN bits in stable order
        for (int64_t k : {int64_t(1), int64_t(10), int64_t(300), int64_t(5000)}) {
          TopK t = topk(x, k, 0, desc);
          const Tensor wk = slice(wi, 0, 0, k);
          CHECK(same_bits(t.indices, wk));
          CHECK(same_bits(t.values, gather(x, 0, wk)));
        }
      }
    }
  }

  TEST_CASE("topk of -0, +0 and NaN: ties by position, NaN largest") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    Tensor x = tensor({0.0f, -0.0f, nan, 1.0f, -0.0f, nan});
    TopK up = topk(x, 4);
    CHECK(up.indices.to_vector<int64_t>() == std::vector<int64_t>{2, 5, 3, 0});
    TopK dn = topk(x, 4, -1, false);
    CHECK(dn.indices.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 4, 3});
    CHECK(std::signbit(dn.values.to_vector<float>()[1]));
    CHECK_FALSE(std::signbit(dn.values.to_vector<float>()[0]));
  }
}

namespace {

// cumprod against a float64 running product; integers in int64.
int check_cumprod_row() {
    int cases = 0;
    uint64_t seed = 5;
    for (DType dt : all_dtypes()) {
      for (const Shape& s : std::vector<Shape>{{0}, {6}, {3, 4}, {2, 3, 4}}) {
        const int64_t nd = static_cast<int64_t>(s.size());
        for (int64_t axis = 0; axis < nd; ++axis) {
          const Tensor x = random_tensor(s, dt, ++seed, false, 1.0, -2, 2);
          Tensor got = cumprod(x, axis);
          CAPTURE(name(dt));
          CAPTURE(shape_str(s));
          CHECK(got.dtype() == (is_floating(dt) ? dt : is_unsigned(dt) ? DType::uint64 : DType::int64));
          const Lines L(s, axis);
          const std::vector<double> v = values(x), g = values(got);
          for (int64_t line = 0; line < L.count(); ++line) {
            double run = 1;
            for (int64_t i = 0; i < s[axis]; ++i) {
              const int64_t at = L.start(line) + i * L.inner;
              run = is_floating(dt) ? run * v[at] : static_cast<double>(static_cast<int64_t>(run) * static_cast<int64_t>(v[at]));
              if (is_floating(dt)) CHECK(kt::close(g[at], run, 8 * kt::rtol_for(dt), 1e-30));
              else CHECK(g[at] == run);
            }
          }
          ++cases;
        }
      }
    }
    return cases;
}

}  // namespace

int kt::check_order_op(OpId op) { return op == OpId::CumProd ? check_cumprod_row() : check_sort_rows(op); }

TEST_SUITE("sort and matrix ops") {
  TEST_CASE("sort and argsort: every dtype, layouts, axes, both directions, NaN order and stability") {
    CHECK(kt::check_order_op(OpId::Sort) > 500);
    CHECK(kt::check_order_op(OpId::ArgSort) > 500);
  }

  TEST_CASE("cumprod against a float64 running product; integers in int64") {
    CHECK(kt::check_order_op(OpId::CumProd) > 20);
  }

  TEST_CASE("sort, argsort, topk and cumprod compile to the eager bits") {
    auto f = [](Tensor x) {
      TopK t = topk(x, 3, -1);
      return std::make_tuple(sort(x, 0), argsort(x, -1, true), t.values, t.indices, cumprod(x, 1), tril(x, 1));
    };
    Tensor x = random_tensor({5, 8}, DType::float32, 3, true);
    auto want = f(x);
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {5, 8}));
    CallResult got = run(x);
    const std::vector<Tensor>& g = got.leaves;
    REQUIRE(g.size() == 6);
    CHECK(same_bits(g[0], std::get<0>(want)));
    CHECK(same_bits(g[1], std::get<1>(want)));
    CHECK(same_bits(g[2], std::get<2>(want)));
    CHECK(same_bits(g[3], std::get<3>(want)));
    CHECK(same_bits(g[4], std::get<4>(want)));
    CHECK(same_bits(g[5], std::get<5>(want)));
  }

  TEST_CASE("tril and triu against loops, batches and every k") {
    for (DType dt : {DType::float32, DType::int32, DType::bool_}) {
      Tensor x = random_tensor({2, 3, 4}, dt, 9);
      const std::vector<double> v = values(x);
      for (int64_t k = -4; k <= 4; ++k) {
        const std::vector<double> lo = values(tril(x, k)), up = values(triu(x, k));
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 4; ++j) {
              const int64_t at = (b * 3 + i) * 4 + j;
              CHECK(lo[at] == (j - i <= k ? v[at] : 0.0));
              CHECK(up[at] == (j - i >= k ? v[at] : 0.0));
            }
      }
      CHECK(tril(x).dtype() == dt);
    }
    CHECK_THROWS_AS(tril(tensor({1.0f, 2.0f})), ShapeError);
  }

  TEST_CASE("diag, diagonal and trace") {
    Tensor m = reshape(arange(12, DType::float32), {3, 4});
    CHECK(diagonal(m).to_vector<float>() == std::vector<float>{0, 5, 10});
    CHECK(diagonal(m, 1).to_vector<float>() == std::vector<float>{1, 6, 11});
    CHECK(diagonal(m, 3).to_vector<float>() == std::vector<float>{3});
    CHECK(diagonal(m, -1).to_vector<float>() == std::vector<float>{4, 9});
    CHECK(diagonal(m, 4).numel() == 0);
    CHECK(diagonal(m, -3).numel() == 0);
    CHECK(diagonal(transpose(m)).to_vector<float>() == std::vector<float>{0, 5, 10});
    Tensor d = diag(tensor({1.0f, 2.0f}), 1);
    CHECK(d.shape() == Shape{3, 3});
    CHECK(d.to_vector<float>() == std::vector<float>{0, 1, 0, 0, 0, 2, 0, 0, 0});
    Tensor e = diag(tensor({7, 8}), -1);
    CHECK(e.dtype() == DType::int32);
    CHECK(e.to_vector<int32_t>() == std::vector<int32_t>{0, 0, 0, 7, 0, 0, 0, 8, 0});
    CHECK(diag(m).to_vector<float>() == std::vector<float>{0, 5, 10});
    CHECK(trace(m).item<float>() == 15.0f);
    CHECK(trace(reshape(arange(9), {3, 3})).dtype() == DType::int64);
    CHECK_THROWS_AS(diag(zeros({2, 2, 2})), ShapeError);
    CHECK_THROWS_AS(trace(zeros({2})), ShapeError);
  }

  TEST_CASE("outer, cross and meshgrid") {
    Tensor o = outer(tensor({1.0f, 2.0f}), tensor({3.0f, 4.0f, 5.0f}));
    CHECK(o.shape() == Shape{2, 3});
    CHECK(o.to_vector<float>() == std::vector<float>{3, 4, 5, 6, 8, 10});
    Tensor a = tensor({{1.0, 0.0, 0.0}, {1.0, 2.0, 3.0}}), b = tensor({{0.0, 1.0, 0.0}, {4.0, 5.0, 6.0}});
    // (1,2,3) x (4,5,6) = (-3, 6, -3)
    CHECK(cross(a, b).to_vector<double>() == std::vector<double>{0, 0, 1, -3, 6, -3});
    CHECK(cross(transpose(a), transpose(b), 0).to_vector<double>() == std::vector<double>{0, -3, 0, 6, 1, -3});
    CHECK_THROWS_AS(cross(tensor({1.0, 2.0}), tensor({1.0, 2.0})), ShapeError);
    std::vector<Tensor> xy = meshgrid({tensor({1, 2, 3}), tensor({10, 20})});
    REQUIRE(xy.size() == 2);
    CHECK(xy[0].shape() == Shape{2, 3});
    CHECK(xy[0].to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 1, 2, 3});
    CHECK(xy[1].to_vector<int32_t>() == std::vector<int32_t>{10, 10, 10, 20, 20, 20});
    std::vector<Tensor> ij = meshgrid({tensor({1, 2, 3}), tensor({10, 20})}, "ij");
    CHECK(ij[0].shape() == Shape{3, 2});
    CHECK(ij[0].to_vector<int32_t>() == std::vector<int32_t>{1, 1, 2, 2, 3, 3});
    CHECK(ij[1].to_vector<int32_t>() == std::vector<int32_t>{10, 20, 10, 20, 10, 20});
    CHECK_THROWS_AS(meshgrid({zeros({2, 2})}), ShapeError);
    CHECK_THROWS_AS(meshgrid({zeros({2})}, "yx"), ValueError);
  }

  TEST_CASE("diff, nan_to_num and clip") {
    Tensor x = tensor({1.0f, 4.0f, 9.0f, 16.0f});
    CHECK(diff(x).to_vector<float>() == std::vector<float>{3, 5, 7});
    CHECK(diff(x, 2).to_vector<float>() == std::vector<float>{2, 2});
    CHECK(diff(x, 0).to_vector<float>() == x.to_vector<float>());
    CHECK(diff(x, 4).numel() == 0);
    CHECK_THROWS_AS(diff(x, 5), ValueError);
    CHECK(diff(tensor({true, false, false})).to_vector<bool>() == std::vector<bool>{true, false});
    CHECK(diff(reshape(arange(6), {2, 3}), 1, 0).to_vector<int64_t>() == std::vector<int64_t>{3, 3, 3});
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    Tensor y = nan_to_num(tensor({nan, inf, -inf, 2.0f}));
    CHECK(y.to_vector<float>() == std::vector<float>{0, FLT_MAX, -FLT_MAX, 2});
    CHECK(nan_to_num(tensor({nan, inf}), 1.0, 9.0).to_vector<float>() == std::vector<float>{1, 9});
    CHECK(nan_to_num(tensor({1, 2})).to_vector<int32_t>() == std::vector<int32_t>{1, 2});
    CHECK(clip(x, 2.0, 10.0).to_vector<float>() == std::vector<float>{2, 4, 9, 10});
  }
}

TEST_SUITE("sort and matrix ops") {
  TEST_CASE("matrix compositions on empty and size-1 extents, NaN and +-inf, every layout, against loops") {
    // (rows, cols) matrices with a batch axis in front; float64 values with NaN/inf sprinkled in
    const std::vector<Shape> shapes = {{2, 3, 4}, {1, 1, 1}, {2, 0, 3}, {3, 4, 0}, {0, 2, 2}, {1, 5, 1}};
    uint64_t seed = 900;
    for (const Shape& s : shapes)
      for (ViewKind k : {ViewKind::contiguous, ViewKind::transposed, ViewKind::strided, ViewKind::negative}) {
        const Tensor x = relayout(random_tensor(s, DType::float64, ++seed, true), k);
        const std::vector<double> v = values(x);
        const int64_t b = s[0], r = s[1], c = s[2];
        const std::string what = shape_str(s) + " " + kt::view_name(k);
        CAPTURE(what);
        auto at = [&](int64_t i, int64_t j, int64_t l) { return (i * r + j) * c + l; };
        auto same = [](double g, double w) { return (std::isnan(g) && std::isnan(w)) || g == w; };
        for (int64_t kd : {-1, 0, 2}) {  // tril / triu
          const std::vector<double> lo = values(tril(x, kd)), up = values(triu(x, kd));
          for (int64_t i = 0; i < b; ++i)
            for (int64_t j = 0; j < r; ++j)
              for (int64_t l = 0; l < c; ++l) {
                CHECK(same(lo[at(i, j, l)], l - j <= kd ? v[at(i, j, l)] : 0.0));
                CHECK(same(up[at(i, j, l)], l - j >= kd ? v[at(i, j, l)] : 0.0));
              }
        }
        if (c > 0) {  // diff along the last axis: x[..., l + 1] - x[..., l]
          const Tensor d = diff(x);
          REQUIRE(d.shape() == Shape{b, r, c - 1});
          const std::vector<double> dv = values(d);
          for (int64_t i = 0; i < b; ++i)
            for (int64_t j = 0; j < r; ++j)
              for (int64_t l = 0; l + 1 < c; ++l)
                CHECK(same(dv[(i * r + j) * (c - 1) + l], v[at(i, j, l + 1)] - v[at(i, j, l)]));
        }
        {  // nan_to_num and clip, elementwise
          const std::vector<double> nn = values(nan_to_num(x)), cl = values(clip(x, -1.0, 1.0));
          for (size_t e = 0; e < v.size(); ++e) {
            const double want = std::isnan(v[e])             ? 0.0
                                : v[e] == INFINITY           ? DBL_MAX
                                : v[e] == -INFINITY          ? -DBL_MAX
                                                             : v[e];
            CHECK(nn[e] == want);
            CHECK(same(cl[e], std::isnan(v[e]) ? v[e] : std::min(1.0, std::max(-1.0, v[e]))));
          }
        }
        if (b > 0) {  // diagonal and trace of the first matrix (a 2-d view of x)
          const Tensor m = x[0];
          for (int64_t kd : {-1, 0, 1}) {
            std::vector<double> want;
            double tr = 0.0;
            for (int64_t j = 0; j < r; ++j)
              if (j + kd >= 0 && j + kd < c) {
                want.push_back(v[at(0, j, j + kd)]);
                tr += v[at(0, j, j + kd)];
              }
            const std::vector<double> got = values(diagonal(m, kd));
            REQUIRE(got.size() == want.size());
            for (size_t e = 0; e < got.size(); ++e) CHECK(same(got[e], want[e]));
            CHECK(same(trace(m, kd).item<double>(), tr));
          }
        }
        {  // outer of the flattened x with a strided 3-vector
          const Tensor w = relayout(tensor({2.0, -0.5, 0.0}), k);
          const std::vector<double> o = values(outer(x, w));
          REQUIRE(o.size() == 3 * v.size());
          for (size_t e = 0; e < v.size(); ++e)
            for (size_t q = 0; q < 3; ++q) CHECK(same(o[e * 3 + q], v[e] * std::array<double, 3>{2.0, -0.5, 0.0}[q]));
        }
      }
    // cross over views with empty and size-1 batches: a x b by the formula
    for (const Shape& s : std::vector<Shape>{{0, 3}, {1, 3}, {4, 3}})
      for (ViewKind k : {ViewKind::contiguous, ViewKind::transposed, ViewKind::negative}) {
        const Tensor a = relayout(random_tensor(s, DType::float64, ++seed, true), k);
        const Tensor bb = relayout(random_tensor(s, DType::float64, ++seed), k);
        const std::vector<double> av = values(a), bv = values(bb), got = values(cross(a, bb));
        REQUIRE(got.size() == av.size());
        for (int64_t i = 0; i < s[0]; ++i) {
          const double* p = &av[3 * i];
          const double* q = &bv[3 * i];
          const double want[3] = {p[1] * q[2] - p[2] * q[1], p[2] * q[0] - p[0] * q[2], p[0] * q[1] - p[1] * q[0]};
          for (int e = 0; e < 3; ++e) {
            const double g = got[3 * i + e];
            CHECK(((std::isnan(g) && std::isnan(want[e])) || g == want[e]));
          }
        }
      }
    // searchsorted: empty and size-1 sequences, strided values with NaN (NaN sorts last)
    for (const std::vector<double>& seq : std::vector<std::vector<double>>{{}, {0.5}, {-2, -1, 0, 0, 3}}) {
      const Tensor sq = Tensor::from_vector(seq, {static_cast<int64_t>(seq.size())});
      const Tensor vals = relayout(tensor({-3.0, 0.0, 0.5, 3.0, std::numeric_limits<double>::quiet_NaN(), 9.0}),
                                   ViewKind::negative);
      const std::vector<double> vv = values(vals);
      for (bool right : {false, true}) {
        const std::vector<int64_t> got = searchsorted(sq, vals, right).to_vector<int64_t>();
        for (size_t e = 0; e < vv.size(); ++e) {
          int64_t want = 0;
          for (double q : seq) want += std::isnan(vv[e]) ? 1 : (right ? q <= vv[e] : q < vv[e]);
          CHECK(got[e] == want);
        }
      }
    }
  }

  TEST_CASE("searchsorted left and right against a linear scan, NaN last") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    Tensor seq = tensor({1.0f, 2.0f, 2.0f, 5.0f, nan});
    Tensor v = tensor({{0.0f, 2.0f, 3.0f}, {5.0f, 9.0f, nan}});
    CHECK(searchsorted(seq, v).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 3, 3, 4, 4});
    CHECK(searchsorted(seq, v, true).to_vector<int64_t>() == std::vector<int64_t>{0, 3, 3, 4, 4, 5});
    CHECK(searchsorted(seq, v).shape() == Shape{2, 3});
    CHECK_THROWS_AS(searchsorted(zeros({3, 2}), v), ShapeError);  // batched: leading extents 3 vs 2
  }

  TEST_CASE("unique: sorted values, inverse and counts; NaNs as one value; empty") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    Tensor x = tensor({{3.0, 1.0, nan}, {1.0, nan, 3.0}});
    Unique u = unique(x);
    const std::vector<double> vals = u.values.to_vector<double>();
    REQUIRE(vals.size() == 3);
    CHECK(vals[0] == 1.0);
    CHECK(vals[1] == 3.0);
    CHECK(std::isnan(vals[2]));
    CHECK(u.counts.to_vector<int64_t>() == std::vector<int64_t>{2, 2, 2});
    CHECK(u.inverse.shape() == Shape{2, 3});
    CHECK(u.inverse.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 2, 0, 2, 1});
    Unique b = unique(tensor({true, false, true, true}));
    CHECK(b.values.to_vector<bool>() == std::vector<bool>{false, true});
    CHECK(b.counts.to_vector<int64_t>() == std::vector<int64_t>{1, 3});
    Unique e = unique(zeros({0, 3}, DType::int32));
    CHECK(e.values.numel() == 0);
    CHECK(e.counts.numel() == 0);
    CHECK(e.inverse.shape() == Shape{0, 3});
    // values[inverse] rebuilds x, for random integers too
    Tensor r = kt::random_tensor({50}, DType::int32, 3, false, 1.0, -4, 4);
    Unique ur = unique(r);
    CHECK(index_select(ur.values, 0, ur.inverse).to_vector<int32_t>() == r.to_vector<int32_t>());
    CHECK(sum(ur.counts).item<int64_t>() == 50);
  }

  TEST_CASE("nonzero and argwhere; data-dependent ops refuse to be traced") {
    Tensor x = tensor({{0.0f, 2.0f, 0.0f}, {std::numeric_limits<float>::quiet_NaN(), 0.0f, -1.0f}});
    std::vector<Tensor> nz = nonzero(x);
    REQUIRE(nz.size() == 2);
    CHECK(nz[0].to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1});
    CHECK(nz[1].to_vector<int64_t>() == std::vector<int64_t>{1, 0, 2});
    Tensor aw = argwhere(x);
    CHECK(aw.shape() == Shape{3, 2});
    CHECK(aw.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0, 1, 2});
    CHECK(argwhere(full({}, 1.0f)).shape() == Shape{1, 0});
    CHECK(argwhere(full({}, 0.0f)).shape() == Shape{0, 0});
    CHECK(nonzero(zeros({0})).at(0).numel() == 0);
    auto f = [](Tensor t) { return nonzero(t)[0]; };
    CHECK_THROWS_WITH_AS(compile(f)(TensorLayout(DType::float32, {4})),
                         doctest::Contains("nonzero: the result's shape depends on the data"), RealizationError);
    auto g = [](Tensor t) { return unique(t).values; };
    CHECK_THROWS_WITH_AS(compile(g)(TensorLayout(DType::float32, {4})), doctest::Contains("unique:"), RealizationError);
  }

  TEST_CASE("randint, bernoulli and permutation: ranges, determinism, frequencies") {
    random::Generator g1(7), g2(7);
    Tensor a = random::randint(-3, 4, {10000}, DType::int64, &g1);
    CHECK(a.to_vector<int64_t>() == random::randint(-3, 4, {10000}, DType::int64, &g2).to_vector<int64_t>());
    std::vector<int64_t> hist(7, 0);
    for (int64_t v : a.to_vector<int64_t>()) {
      REQUIRE(v >= -3);
      REQUIRE(v < 4);
      ++hist[v + 3];
    }
    for (int64_t h : hist) CHECK(std::abs(h - 10000 / 7) < 200);  // ~5 sigma
    Tensor big = random::randint(INT64_MIN, INT64_MAX, {4}, DType::int64, &g1);  // the whole range
    CHECK(big.numel() == 4);
    CHECK(random::randint(0, 256, {5}, DType::uint8, &g1).dtype() == DType::uint8);
    CHECK_THROWS_AS(random::randint(0, 300, {5}, DType::uint8), ValueError);
    CHECK_THROWS_AS(random::randint(5, 5, {5}), ValueError);
    CHECK_THROWS_AS(random::randint(0, 5, {5}, DType::float32), DTypeError);
    Tensor b = random::bernoulli(0.25, {20000}, DType::bool_, &g1);
    const double share = sum(b).item<int64_t>() / 20000.0;
    CHECK(std::abs(share - 0.25) < 0.015);
    CHECK(sum(random::bernoulli(0.0, {100})).item<int64_t>() == 0);
    CHECK(sum(random::bernoulli(1.0, {100})).item<int64_t>() == 100);
    CHECK_THROWS_AS(random::bernoulli(1.5, {3}), ValueError);
    Tensor p = random::permutation(1000, &g1);
    CHECK(sort(p).to_vector<int64_t>() == arange(1000).to_vector<int64_t>());
    CHECK(p.to_vector<int64_t>() != arange(1000).to_vector<int64_t>());
    CHECK(random::permutation(0).numel() == 0);
  }
}
