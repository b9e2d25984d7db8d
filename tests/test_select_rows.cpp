// The selection, window and matrix-structure rows of the op table (TopK,
// SearchSorted, MaxPool2d, AvgPool2d, Tril, Triu, Diag, NanToNum, Cross):
// the table walk's checker (check_select_row, called from check_data_op for
// every dtype, shape and layout) against the float64 reference
// (ref_select_row, tensor/ref_ops.cpp), compiled = eager bit for bit, the
// errors, and hand-computed literals.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cfloat>
#include <filesystem>
#include <limits>
#include <string>

#include "../tensor/kernel_registry.h"
#include "../tensor/ref_ops.h"
#include "op_table_checks.h"
#include "test_util.h"

namespace kt {
namespace {

RefArray ref_of(const Tensor& t) { return {t.shape(), values(t)}; }

std::string what_of(OpId op, DType d, const Shape& s, ViewKind k, const std::string& extra) {
  return std::string(op_name(op)) + " " + std::string(name(d)) + " " + shape_str(s) + " " + view_name(k) + " " + extra;
}

// got against the reference: equal (NaN == NaN) everywhere, or within
// rtol_for(d) relative where `tol` (avg_pool2d of 16-bit floats: the kernel
// rounds the float64 mean to float32 first).
int compare_ref(const Tensor& got, DType want_dtype, const RefArray& want, bool tol, const std::string& what) {
  CHECK_MESSAGE(got.dtype() == want_dtype, what << ": dtype " << name(got.dtype()));
  REQUIRE_MESSAGE(got.shape() == want.shape, what << ": shape " << shape_str(got.shape()) << " want "
                                                  << shape_str(want.shape));
  const std::vector<double> g = values(got);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 3; ++i) {
    const double w = want.v[i];
    const bool ok = (std::isnan(g[i]) && std::isnan(w)) || g[i] == w ||
                    (tol && close(g[i], w, rtol_for(want_dtype), 0.0));
    if (!ok) {
      ++bad;
      FAIL_CHECK(what << ": element " << i << " got " << g[i] << " want " << w);
    }
  }
  return 1;
}

// Runs the row on `in` and checks it against the reference.
int run_case(OpId op, std::vector<Tensor> in, const Attrs& a, DType compute, const std::string& what) {
  const Tensor got = apply(op, in, a);
  std::vector<RefArray> r;
  for (const Tensor& t : in) r.push_back(ref_of(t));
  const DType rd = op_info(op).dtype_rule == DTypeRule::Index ? DType::int64 : compute;
  return compare_ref(got, rd, ref_select_row(op, r, a, compute),
                     op == OpId::AvgPool2d && (compute == DType::float16 || compute == DType::bfloat16), what);
}

// seq sorted along its last axis in the NaN-last order (an independent sort
// of the float64 values, written back through the dtype's conversion).
Tensor sorted_rows(const Tensor& x) {
  std::vector<double> v = values(x);
  const int64_t n = x.ndim() == 0 ? 1 : x.shape().back();
  for (size_t r = 0; n > 0 && r < v.size(); r += static_cast<size_t>(n))
    std::sort(v.begin() + static_cast<int64_t>(r), v.begin() + static_cast<int64_t>(r) + n, [](double p, double q) {
      if (std::isnan(p)) return false;
      if (std::isnan(q)) return true;
      return p < q;
    });
  return Tensor::from_vector(v, x.shape()).to(x.dtype());
}

Shape with_extent(Shape s, int64_t at, int64_t e) {
  s.insert(s.begin() + at, e);
  return s;
}

}  // namespace

int check_select_row(OpId op, DType d, const Shape& shape, ViewKind k, uint64_t seed) {
  int cases = 0;
  // shape {} arrives as 0-d; random_tensor makes it [1] (from_vector's default), 0-d is made here
  const Tensor x = relayout(shape.empty() ? random_tensor({1}, d, seed, true).reshape({}) : random_tensor(shape, d, seed, true), k);
  const Shape s = x.shape();
  const int64_t nd = static_cast<int64_t>(s.size());
  switch (op) {
    case OpId::TopK: {
      if (nd == 0) {
        Attrs a;
        a.ints = {0};
        CHECK_THROWS_AS(apply(op, x, a), IndexError);
        return 1;
      }
      for (int64_t ax = 0; ax < nd; ++ax)
        for (int64_t kk : {int64_t{0}, int64_t{1}, s[ax]}) {
          if (kk > s[ax]) continue;
          for (bool largest : {true, false}) {
            Attrs a;
            a.axis = ax - (ax % 2 ? nd : 0);  // negative axes too
            a.ints = {kk};
            a.flag = largest;
            cases += run_case(op, {x}, a, d,
                              what_of(op, d, s, k, "axis " + std::to_string(a.axis) + " k " + std::to_string(kk) +
                                                       (largest ? " largest" : " smallest")));
          }
        }
      return cases;
    }
    case OpId::SearchSorted: {
      for (bool right : {false, true}) {
        Attrs a;
        a.flag = right;
        // 1-d sequence, values of shape s
        const Tensor seq1 = relayout(sorted_rows(random_tensor({5}, d, seed + 1, true)), k);
        cases += run_case(op, {seq1, x}, a, d, what_of(op, d, s, k, std::string("1-d seq") + (right ? " right" : "")));
        if (nd >= 1) {  // batched: seq [..., 4], values of shape s (leading extents shared)
          Shape ss = s;
          ss.back() = 4;
          const Tensor seq = relayout(sorted_rows(random_tensor(ss, d, seed + 2, true)), k);
          cases += run_case(op, {seq, x}, a, d, what_of(op, d, s, k, std::string("batched") + (right ? " right" : "")));
        }
      }
      return cases;
    }
    case OpId::MaxPool2d:
    case OpId::AvgPool2d: {
      Shape xs = s;
      while (xs.size() < 4) xs.insert(xs.begin(), 1);
      const Tensor x4 = relayout(random_tensor(xs, d, seed, true), k);
      const bool mx = op == OpId::MaxPool2d;
      // {kh, kw, sh, sw, ph, pw, dh, dw}, count_include_pad
      struct Geo { std::vector<int64_t> p; bool include; };
      const Geo geos[] = {{{2, 2, 1, 1, 1, 1, 1, 1}, true}, {{3, 2, 2, 1, 1, 0, 1, 2}, false}, {{1, 1, 1, 2, 0, 0, 1, 1}, true}};
      for (const Geo& g : geos) {
        Attrs a;
        a.ints = g.p;
        if (!mx) {
          a.ints.resize(6);
          a.flag = g.include;
        }
        const std::string what = what_of(op, d, xs, k, shape_str(a.ints));
        const int64_t dh = mx ? g.p[6] : 1, dw = mx ? g.p[7] : 1;
        ++cases;
        if (!mx && !is_floating(d)) {
          CHECK_THROWS_AS(apply(op, x4, a), DTypeError);
          continue;
        }
        if (dh * (g.p[0] - 1) + 1 > xs[2] + 2 * g.p[4] || dw * (g.p[1] - 1) + 1 > xs[3] + 2 * g.p[5]) {
          CHECK_THROWS_WITH_AS(apply(op, x4, a), doctest::Contains("the kernel spans"), ShapeError);
          continue;
        }
        run_case(op, {x4}, a, d, what);
      }
      return cases;
    }
    case OpId::Tril:
    case OpId::Triu:
    case OpId::Diag: {
      const bool ok = op == OpId::Diag ? nd == 1 || nd == 2 : nd >= 2;
      for (int64_t kd : {int64_t{-1}, int64_t{0}, int64_t{2}}) {
        Attrs a;
        a.axis = kd;
        if (!ok) {
          CHECK_THROWS_AS(apply(op, x, a), ShapeError);
          ++cases;
          continue;
        }
        cases += run_case(op, {x}, a, d, what_of(op, d, s, k, "k " + std::to_string(kd)));
      }
      return cases;
    }
    case OpId::NanToNum: {
      Attrs a;
      a.scalar = 0.5;
      a.ints = {std::bit_cast<int64_t>(7.25), std::bit_cast<int64_t>(-1e300)};  // -1e300: -inf in floats below float64
      cases += run_case(op, {x}, a, d, what_of(op, d, s, k, "0.5 7.25 -1e300"));
      return cases;
    }
    case OpId::Cross: {
      // a [..s, 3] with b [3] (broadcast) along -1; a [3, ..s] with b [3, 1..] along 0
      const Tensor a1 = relayout(random_tensor(with_extent(s, nd, 3), d, seed, true, 2.0, -9, 9), k);
      const Tensor b1 = relayout(random_tensor({3}, d, seed + 5, true, 2.0, -9, 9), k);
      Shape bs(static_cast<size_t>(nd) + 1, 1);
      bs[0] = 3;
      const Tensor a0 = relayout(random_tensor(with_extent(s, 0, 3), d, seed + 6, true, 2.0, -9, 9), k);
      const Tensor b0 = relayout(random_tensor(bs, d, seed + 7, true, 2.0, -9, 9), k);
      struct C { Tensor a, b; int64_t axis; };
      for (const C& c : {C{a1, b1, -1}, C{b1, a1, -1}, C{a0, b0, 0}}) {
        Attrs at;
        at.axis = c.axis;
        const std::string what = what_of(op, d, c.a.shape(), k, "x " + shape_str(c.b.shape()) + " axis " +
                                                                    std::to_string(c.axis));
        ++cases;
        if (d == DType::bool_) {  // the Promote rule refuses bool, as mul/sub do
          CHECK_THROWS_AS(apply(op, c.a, c.b, at), DTypeError);
          continue;
        }
        run_case(op, {c.a, c.b}, at, d, what);
      }
      return cases;
    }
    default: return 0;
  }
}

}  // namespace kt

namespace {
using namespace kiln;
using kt::values;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<size_t>(ca.numel()) * ca.itemsize()) == 0;
}
TensorLayout lay(DType d, Shape s) { return TensorLayout(d, std::move(s)); }
}  // namespace

TEST_SUITE("select rows") {
  TEST_CASE("compiled functions of every selection row equal eager bit for bit") {
    for (DType d : {DType::float32, DType::float64, DType::int32, DType::float16}) {
      CAPTURE(name(d));
      const Tensor x = kt::random_tensor({2, 3, 5, 6}, d, 11, true);
      const Tensor v = kt::random_tensor({2, 3, 5, 3}, d, 12, true);
      const Tensor seq = sort(kt::random_tensor({2, 3, 5, 4}, d, 13, true), -1);
      auto f = [](Tensor a, Tensor q, Tensor s) {
        TopK t = topk(a, 3, 2, true);
        TopK u = topk(transpose(a, 1, 3), 2, -1, false);  // a strided view inside the graph
        Tensor pooled = max_pool2d(a, {3, 3}, {2, 2}, {1, 1});
        Tensor dil = max_pool2d(a, {2, 2}, {1, 1}, {1, 0}, {2, 2});
        Tensor lo = tril(a, 1), up = triu(a, -1);
        Tensor dg = diag(diag(select(select(a, 0, 1), 0, 2), 1), -1);
        Tensor ss = searchsorted(s, q, true);
        Tensor s1 = searchsorted(reshape(s, {-1}), q);  // one (unsorted) 1-d sequence: bits still agree
        Tensor cr = cross(q, slice(a, 3, 0, 3), -1);
        Tensor nn = nan_to_num(a, 1.5, 3.0);
        return std::vector<Tensor>{t.values, t.indices, u.values, u.indices, pooled, dil, lo, up, dg, ss, s1, cr, nn};
      };
      CompiledCallable run = compile(f)(lay(d, x.shape()), lay(d, v.shape()), lay(d, seq.shape()));
      const std::vector<Tensor> want = f(x, v, seq);
      const std::vector<Tensor> got = run(x, v, seq).as<std::vector<Tensor>>();
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(same_bits(got[i], want[i]), "output " << i);
      if (d == DType::float32) {  // the attributes survive a MEF file (its graph text): same bits read back
        const std::string path = (std::filesystem::temp_directory_path() /
                                  ("kiln_select_rows_" + std::to_string(getpid()) + ".mef")).string();
        run.export_mef(path, false);
        CompiledCallable back = CompiledCallable::from_mef(path, run.weights());
        std::filesystem::remove(path);
        const std::vector<Tensor> gb = back(x, v, seq).as<std::vector<Tensor>>();
        REQUIRE(gb.size() == want.size());
        for (size_t i = 0; i < gb.size(); ++i) CHECK_MESSAGE(same_bits(gb[i], want[i]), "MEF output " << i);
      }
      if (is_floating(d)) {
        auto g = [](Tensor a) {
          return std::vector<Tensor>{avg_pool2d(a, {3, 2}, {2, 1}, {1, 1}, false), avg_pool2d(a, {2, 2})};
        };
        CompiledCallable rg = compile(g)(lay(d, x.shape()));
        const std::vector<Tensor> ga = rg(x).as<std::vector<Tensor>>(), wa = g(x);
        REQUIRE(ga.size() == 2);
        CHECK(same_bits(ga[0], wa[0]));
        CHECK(same_bits(ga[1], wa[1]));
      }
    }
  }

  TEST_CASE("literals: topk ties and NaN, searchsorted batches, pools, diag, cross, nan_to_num") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // topk: NaN largest, ties by the lower position (torch.topk's sorted result)
    Tensor x = tensor({1.0, nan, 3.0, 3.0, -0.0, 0.0});
    TopK t = topk(x, 3);
    CHECK(t.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
    TopK s = topk(x, 3, 0, false);
    CHECK(s.indices.to_vector<int64_t>() == std::vector<int64_t>{4, 5, 0});
    CHECK(t.indices.dtype() == DType::int64);
    // searchsorted, one sequence per row (torch.searchsorted of [[1,3,5],[2,4,6]] and [[3,6],[1,7]]): [[1,3],[0,3]]
    Tensor sq = tensor({{1, 3, 5}, {2, 4, 6}}), vv = tensor({{3, 6}, {1, 7}});
    CHECK(searchsorted(sq, vv).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 3});
    CHECK(searchsorted(sq, vv, true).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 0, 3});
    // an int32 sequence with float64 values promotes to float64: 2.5 lands at 1 in [1, 3, 5]
    CHECK(searchsorted(tensor({1, 3, 5}), tensor({2.5})).to_vector<int64_t>() == std::vector<int64_t>{1});
    // max_pool2d 3x3 s2 p1 of 0..15 as 4x4: windows' maxima 5, 7, 13, 15 (torch.nn.functional.max_pool2d)
    Tensor img = reshape(arange(16, DType::float32), {1, 1, 4, 4});
    CHECK(max_pool2d(img, {3, 3}, {2, 2}, {1, 1}).to_vector<float>() == std::vector<float>{5, 7, 13, 15});
    // avg_pool2d 3x3 s2 p1: count_include_pad divides by 9: (0+1+4+5)/9; without, by 4
    const std::vector<float> inc = avg_pool2d(img, {3, 3}, {2, 2}, {1, 1}).to_vector<float>();
    const std::vector<float> exc = avg_pool2d(img, {3, 3}, {2, 2}, {1, 1}, false).to_vector<float>();
    CHECK(inc[0] == static_cast<float>(10.0 / 9.0));
    CHECK(exc[0] == 2.5f);
    CHECK(exc[3] == static_cast<float>((5 + 6 + 7 + 9 + 10 + 11 + 13 + 14 + 15) / 9.0));
    // max_pool2d dilation 2 on 4x4, kernel 2: taps (0,0),(0,2),(2,0),(2,2) -> 10, then 11, 14, 15
    CHECK(max_pool2d(img, {2, 2}, {1, 1}, {0, 0}, {2, 2}).to_vector<float>() == std::vector<float>{10, 11, 14, 15});
    // diag of a 2-d matrix is a copy, not a view
    Tensor m = reshape(arange(6, DType::int32), {2, 3});
    Tensor dg = diag(m, 1);
    CHECK(dg.to_vector<int32_t>() == std::vector<int32_t>{1, 5});
    CHECK(dg.buffer() != m.buffer());
    CHECK(diag(zeros({0}), -2).shape() == Shape{2, 2});
    // cross of int8 wraps: (100,0,0) x (0,2,0) = (0,0,200) -> -56
    Tensor cx = cross(tensor({100, 0, 0}).to(DType::int8), tensor({0, 2, 0}).to(DType::int8));
    CHECK(cx.to_vector<int8_t>() == std::vector<int8_t>{0, 0, -56});
    // float32 cross: products rounded before the subtraction (no FMA): a = (0, 1 + 2^-12, 1),
    // b = (0, 1, 1 + 2^-12): x = a1*b2 - a2*b1 = (1 + 2^-12)^2 - 1, and (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24
    // rounds (a tie, to even) to 1 + 2^-11 in float32, so x = 2^-11 (a fused multiply-add gives 2^-11 + 2^-24)
    const float e = std::ldexp(1.0f, -12);
    Tensor ca = tensor({0.0f, 1.0f + e, 1.0f}), cb = tensor({0.0f, 1.0f, 1.0f + e});
    CHECK(cross(ca, cb).to_vector<float>()[0] == std::ldexp(1.0f, -11));
    // nan_to_num of float16: the default +inf replacement is float16's largest (65504)
    Tensor h = nan_to_num(tensor({nan, std::numeric_limits<double>::infinity()}).to(DType::float16));
    CHECK(h.to(DType::float64).to_vector<double>() == std::vector<double>{0.0, 65504.0});
  }

  TEST_CASE("pools: a window far larger than the input costs the input's size; its tap count does not overflow") {
    const Tensor x = arange(25, DType::float32).reshape({1, 1, 5, 5});
    // kernel 2^30 with padding 2^29: every one of the 6x6 windows holds all of x
    const Tensor m = max_pool2d(x, {int64_t(1) << 30}, {1}, {int64_t(1) << 29});
    CHECK(m.shape() == Shape{1, 1, 6, 6});
    for (float v : m.to_vector<float>()) CHECK(v == 24.0f);
    // count_include_pad divides by the window's 2^40 x 2^40 taps (2^80, beyond int64): 300 / 2^80
    const Tensor a = avg_pool2d(x, {int64_t(1) << 40}, {1}, {int64_t(1) << 39}, true);
    const float want = static_cast<float>(300.0 / std::ldexp(1.0, 80));
    for (float v : a.to_vector<float>()) CHECK(v == want);
    const Tensor b = avg_pool2d(x, {int64_t(1) << 40}, {1}, {int64_t(1) << 39}, false);
    for (float v : b.to_vector<float>()) CHECK(v == 12.0f);
  }

  TEST_CASE("bad inputs raise kiln errors naming the op and the argument") {
    Tensor x = zeros({2, 4});
    CHECK_THROWS_WITH_AS(topk(x, 5), doctest::Contains("topk: k must be in [0, 4]"), ValueError);
    CHECK_THROWS_WITH_AS(topk(x, -1), doctest::Contains("topk: k must be in"), ValueError);
    CHECK_THROWS_AS(topk(x, 1, 2), IndexError);
    CHECK_THROWS_WITH_AS(topk(zeros({}), 0), doctest::Contains("topk: a 0-d tensor"), IndexError);
    Tensor img = zeros({1, 1, 3, 3});
    CHECK_THROWS_WITH_AS(max_pool2d(img, {5, 5}, {1, 1}, {0, 0}), doctest::Contains("max_pool2d: the kernel spans 5 along H but the padded input is 3"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(max_pool2d(img, {2, 2}, {1, 1}, {0, 0}, {3, 3}), doctest::Contains("kernel spans 4 along H"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(avg_pool2d(img, {2, 2}, {1, 1}, {2, 2}), doctest::Contains("avg_pool2d: padding must be at most half"),
                         ValueError);
    // sizes whose arithmetic would overflow int64 are refused by name, not wrapped into the message
    const int64_t big = std::numeric_limits<int64_t>::max();
    CHECK_THROWS_WITH_AS(max_pool2d(img, {2}, {}, {0}, {big}), doctest::Contains("max_pool2d: the kernel's span"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(max_pool2d(img, {big}, {1}, {big / 2}),
                         doctest::Contains("max_pool2d: the padded input's height (3 + 2 x 4611686018427387903)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(max_pool2d(img, {2, 2}, {0, 1}), doctest::Contains("max_pool2d: stride must be positive"),
                         ValueError);
    CHECK_THROWS_WITH_AS(max_pool2d(img, {2, 2, 2}), doctest::Contains("max_pool2d: kernel must have 1 or 2 values"),
                         ValueError);
    CHECK_THROWS_WITH_AS(max_pool2d(zeros({3, 3}), {2, 2}), doctest::Contains("max_pool2d: x must be 4-d"), ShapeError);
    CHECK_THROWS_WITH_AS(avg_pool2d(zeros({1, 1, 3, 3}, DType::int32), {2, 2}),
                         doctest::Contains("avg_pool2d: x must have a float dtype"), DTypeError);
    CHECK_THROWS_WITH_AS(cross(zeros({2, 2}), zeros({2, 2})), doctest::Contains("cross: a of shape [2, 2] needs extent 3"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(cross(zeros({2, 3}), zeros({2, 3}), 0), doctest::Contains("cross: a of shape [2, 3]"),
                         ShapeError);
    CHECK_THROWS_AS(cross(zeros({2, 3}), zeros({4, 3})), ShapeError);  // no broadcast
    CHECK_THROWS_WITH_AS(searchsorted(zeros({2, 3}), zeros({3, 1})),
                         doctest::Contains("searchsorted: sorted_sequence of shape [2, 3] needs values"), ShapeError);
    CHECK_THROWS_WITH_AS(searchsorted(zeros({}), zeros({3})), doctest::Contains("searchsorted: sorted_sequence"),
                         ShapeError);
    const Tensor seq[2] = {zeros({3}), zeros({2}, DType::int32)};
    CHECK_THROWS_WITH_AS(apply(OpId::SearchSorted, seq), doctest::Contains("one dtype"), DTypeError);
    CHECK_THROWS_WITH_AS(tril(zeros({3})), doctest::Contains("tril: x must have at least 2 axes"), ShapeError);
    CHECK_THROWS_WITH_AS(diag(zeros({2, 2, 2})), doctest::Contains("diag: x must be 1-d"), ShapeError);
    CHECK_THROWS_AS(diag(zeros({2}), int64_t(1) << 50), ValueError);
    // A result too large for memory names the op (it used to say only "Buffer::allocate: out of memory").
    CHECK_THROWS_WITH_AS(diag(zeros({2}), int64_t(1) << 30), doctest::Contains("diag: out of memory for its result"),
                         ValueError);
    // CUDA kernels (backends/cuda/select.cu) in a CUDA build, for the CUDA
    // dtypes only (uint16 has none); without CUDA the registry's DeviceError.
    for (OpId op : {OpId::TopK, OpId::SearchSorted, OpId::MaxPool2d, OpId::AvgPool2d, OpId::Tril, OpId::Triu, OpId::Diag,
                    OpId::NanToNum, OpId::Cross}) {
      CAPTURE(op_name(op));
      CHECK(detail::has_kernel(op, DeviceType::cpu, DType::float32));
      const std::string want = std::string(op_name(op)) + ": no kernel for cuda:0";
#if KILN_TEST_CUDA_BUILT
      for (DType d : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int64, DType::int32,
                      DType::int8, DType::uint8, DType::bool_})
        CHECK(detail::has_kernel(op, DeviceType::cuda, d));
      CHECK_THROWS_WITH_AS(detail::kernel_for(op, Device::cuda(0), DType::uint16), doctest::Contains(want.c_str()),
                           DeviceError);
#else
      CHECK_THROWS_WITH_AS(detail::kernel_for(op, Device::cuda(0), DType::float32), doctest::Contains(want.c_str()),
                           DeviceError);
#endif
    }
  }
}
