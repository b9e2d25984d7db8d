// kiln tests: matmul (Matmul row) and the RowNorm rows (softmax,
// log_softmax, layer_norm, rms_norm) against a float64 reference written
// here, plus literals computed with numpy/scipy.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "op_table_checks.h"
#include "same_bits.h"
#include "test_util.h"

namespace kt {
namespace {

// Unit roundoff of the type results of dtype d are computed in.
double compute_eps(DType d) { return d == DType::float64 ? 2.3e-16 : 1.2e-7; }

// An exact integer sum stored in integer dtype d (wrapping as numpy does).
double wrap_to(DType d, int64_t v) {
  switch (d) {
    case DType::bool_: return v != 0 ? 1.0 : 0.0;
    case DType::uint8: return static_cast<double>(static_cast<uint8_t>(v));
    case DType::int8: return static_cast<double>(static_cast<int8_t>(v));
    case DType::int16: return static_cast<double>(static_cast<int16_t>(v));
    case DType::uint16: return static_cast<double>(static_cast<uint16_t>(v));
    case DType::int32: return static_cast<double>(static_cast<int32_t>(v));
    case DType::uint32: return static_cast<double>(static_cast<uint32_t>(v));
    case DType::uint64: return static_cast<double>(static_cast<uint64_t>(v));
    default: return static_cast<double>(v);
  }
}

// ---- matmul reference ----------------------------------------------------------

// numpy.matmul in float64 on logical values: returns the result values in
// row-major order of the result shape, and per element sum |a||b| (for the
// tolerance).
void matmul_ref(const Tensor& a, const Tensor& b, std::vector<double>& out, std::vector<double>& mag,
                Shape& out_shape) {
  Shape sa = a.shape(), sb = b.shape();
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa = {1, sa[0]};
  if (b1) sb = {sb[0], 1};
  const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const size_t nbd = std::max(ba.size(), bb.size());
  Shape batch(nbd);
  for (size_t i = 0; i < nbd; ++i) {
    const int64_t x = i + ba.size() >= nbd ? ba[i + ba.size() - nbd] : 1;
    const int64_t y = i + bb.size() >= nbd ? bb[i + bb.size() - nbd] : 1;
    batch[i] = x == 1 ? y : x;
  }
  out_shape = batch;
  if (!a1) out_shape.push_back(M);
  if (!b1) out_shape.push_back(N);
  const std::vector<double> av = values(a), bv = values(b);
  int64_t nbatch = 1;
  for (int64_t e : batch) nbatch *= e;
  out.assign(static_cast<size_t>(nbatch * M * N), 0.0);
  mag.assign(out.size(), 0.0);
  // Flat offset of a batch multi-index in an operand with batch extents `be`.
  auto offset = [&](const Shape& be, const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t i = 0; i < be.size(); ++i) {
      const int64_t e = be[i];
      off = off * e + (e == 1 ? 0 : idx[i + nbd - be.size()]);
    }
    return off;
  };
  std::vector<int64_t> idx(nbd, 0);
  for (int64_t t = 0; t < nbatch; ++t) {
    const int64_t oa = offset(ba, idx) * M * K, ob = offset(bb, idx) * K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, m = 0;
        for (int64_t k = 0; k < K; ++k) {
          s += av[oa + i * K + k] * bv[ob + k * N + j];
          m += std::fabs(av[oa + i * K + k] * bv[ob + k * N + j]);
        }
        out[(t * M + i) * N + j] = s;
        mag[(t * M + i) * N + j] = m;
      }
    for (size_t d = nbd; d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
}

int matmul_case(const Tensor& a0, const Tensor& b0, ViewKind va, ViewKind vb) {
  const Tensor a = relayout(a0, va), b = relayout(b0, vb);
  const std::string what = "matmul " + std::string(name(a.dtype())) + shape_str(a.shape()) + " " + view_name(va) +
                           " @ " + std::string(name(b.dtype())) + shape_str(b.shape()) + " " + view_name(vb);
  std::vector<double> want, mag;
  Shape want_shape;
  matmul_ref(a0, b0, want, mag, want_shape);
  const Tensor got = matmul(a, b);
  const DType dt = promote_types(a.dtype(), b.dtype());
  CHECK_MESSAGE(got.dtype() == dt, what);
  CHECK_MESSAGE(got.shape() == want_shape, what << ": got shape " << shape_str(got.shape()));
  const std::vector<double> g = values(got);
  REQUIRE_MESSAGE(g.size() == want.size(), what);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 3; ++i) {
    double w, tol = 0;
    if (is_floating(dt)) {
      w = round_to(dt, want[i]);
      tol = rtol_for(dt) * std::fabs(w) + 16 * compute_eps(dt) * mag[i];
    } else {
      w = wrap_to(dt, static_cast<int64_t>(want[i]));
    }
    if (!close(g[i], w, 0.0, tol)) {
      ++bad;
      FAIL_CHECK(what << ": element " << i << " got " << g[i] << " want " << w);
    }
  }
  return 1;
}

// ---- row normalisation reference ------------------------------------------------

// Applies f(line values, out values) to every line along `axis` of values v.
template <class F>
void for_lines(const std::vector<double>& v, const Shape& s, int64_t axis, std::vector<double>& out, F f) {
  out.assign(v.size(), 0.0);
  if (v.empty()) return;
  int64_t inner = 1;
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t len = s[axis], outer = static_cast<int64_t>(v.size()) / (len * inner);
  std::vector<double> line(len), res(len);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      for (int64_t i = 0; i < len; ++i) line[i] = v[(o * len + i) * inner + in];
      f(line, res);
      for (int64_t i = 0; i < len; ++i) out[(o * len + i) * inner + in] = res[i];
    }
}

int rownorm_compare(const Tensor& got, const std::vector<double>& want, const std::vector<double>& mag, DType dt,
                    const std::string& what) {
  CHECK_MESSAGE(got.dtype() == dt, what);
  const std::vector<double> g = values(got);
  REQUIRE_MESSAGE(g.size() == want.size(), what);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 3; ++i) {
    const double w = round_to(dt, want[i]);
    const double m = std::isfinite(mag[i]) ? mag[i] : 0.0;  // lines with inf/NaN: exact (0 or NaN)
    const double tol = rtol_for(dt) * std::fabs(w) + 16 * compute_eps(dt) * m;
    if (!close(g[i], w, 0.0, tol)) {
      ++bad;
      FAIL_CHECK(what << ": element " << i << " got " << g[i] << " want " << w);
    }
  }
  return 1;
}

int softmax_cases(OpId op) {
  const bool log = op == OpId::LogSoftmax;
  const std::vector<Shape> shapes = {{1}, {7}, {3, 4}, {2, 0, 3}, {2, 3, 5}, {4, 1, 300}};
  int cases = 0;
  uint64_t seed = 500 + static_cast<uint64_t>(op);
  for (DType dt : all_dtypes()) {
    const DType out_dt = is_floating(dt) ? dt : DType::float32;
    for (const Shape& s : shapes) {
      const int64_t nd = static_cast<int64_t>(s.size());
      for (int64_t axis = -nd; axis < nd; ++axis) {
        for (int k = 0; k < 4; ++k) {
          const ViewKind view = static_cast<ViewKind>(k);
          const Tensor x = random_tensor(s, dt, ++seed, k == 3);
          const Tensor got = log ? log_softmax(relayout(x, view), axis) : softmax(relayout(x, view), axis);
          std::vector<double> want, mag;
          const int64_t a = axis < 0 ? axis + nd : axis;
          for_lines(values(x), s, a, want, [&](const std::vector<double>& l, std::vector<double>& r) {
            double m = -std::numeric_limits<double>::infinity(), sum = 0;
            for (double v : l) m = std::isnan(v) || std::isnan(m) ? std::nan("") : std::max(m, v);
            for (double v : l) sum += std::exp(v - m);
            for (size_t i = 0; i < l.size(); ++i) r[i] = log ? l[i] - m - std::log(sum) : std::exp(l[i] - m) / sum;
          });
          for_lines(values(x), s, a, mag, [&](const std::vector<double>& l, std::vector<double>& r) {
            double m = -std::numeric_limits<double>::infinity(), sum = 0;
            for (double v : l) m = std::max(m, v);
            for (double v : l) sum += std::exp(v - m);
            for (size_t i = 0; i < l.size(); ++i)
              r[i] = log ? std::fabs(l[i] - m) + std::fabs(std::log(sum)) + 1
                         : std::exp(l[i] - m) / sum * (std::fabs(l[i] - m) + 2);
          });
          cases += rownorm_compare(got, want, mag, out_dt,
                                   std::string(op_name(op)) + " " + std::string(name(dt)) + " " + view_name(view) +
                                       " " + shape_str(s) + " axis " + std::to_string(axis));
        }
      }
    }
    CHECK_THROWS_AS(softmax(random_tensor({2, 3}, dt, 1), 2), kiln::IndexError);
  }
  return cases;
}

int norm_cases(OpId op) {
  const bool rms = op == OpId::RmsNorm;
  const std::vector<Shape> shapes = {{1}, {5}, {3, 4}, {2, 0, 3}, {3, 0}, {2, 3, 8}, {4, 300}};
  const double eps = 1e-5;
  int cases = 0;
  uint64_t seed = 900 + static_cast<uint64_t>(op);
  for (DType dt : all_dtypes()) {
    for (const Shape& s : shapes) {
      const int64_t D = s.back();
      for (int combo = 0; combo < (rms ? 3 : 4); ++combo) {
        // combo 0: no weight; 1: weight; 2: weight of another dtype (float32);
        // 3: weight and bias.
        const DType wdt = combo == 2 ? DType::float32 : (is_floating(dt) ? dt : DType::float64);
        const Tensor w = combo >= 1 ? random_tensor({D}, wdt, ++seed) : Tensor();
        const Tensor b = combo == 3 ? random_tensor({D}, wdt, ++seed) : Tensor();
        const DType p = w.defined() ? promote_types(dt, wdt) : dt;
        const DType out_dt = is_floating(p) ? p : DType::float32;
        for (int k = 0; k < 4; ++k) {
          const ViewKind view = static_cast<ViewKind>(k);
          const Tensor x = random_tensor(s, dt, ++seed, k == 3);
          const Tensor got = rms ? rms_norm(relayout(x, view), w, eps) : layer_norm(relayout(x, view), w, b, eps);
          const std::vector<double> wv = w.defined() ? values(w) : std::vector<double>(D, 1.0);
          const std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(D, 0.0);
          std::vector<double> want, mag;
          const int64_t last = static_cast<int64_t>(s.size()) - 1;
          for_lines(values(x), s, last, want, [&](const std::vector<double>& l, std::vector<double>& r) {
            double mean = 0, var = 0;
            if (!rms) {
              for (double v : l) mean += v;
              mean /= static_cast<double>(l.size());
            }
            for (double v : l) var += (v - mean) * (v - mean);
            var /= static_cast<double>(l.size());
            for (size_t i = 0; i < l.size(); ++i) r[i] = (l[i] - mean) / std::sqrt(var + eps) * wv[i] + bv[i];
          });
          mag = want;
          for (double& m : mag) m = std::fabs(m) + 1;
          cases += rownorm_compare(got, want, mag, out_dt,
                                   std::string(op_name(op)) + " " + std::string(name(dt)) + " " + view_name(view) +
                                       " " + shape_str(s) + " weight/bias combo " + std::to_string(combo));
        }
      }
    }
  }
  return cases;
}

}  // namespace

int check_matmul_op(OpId op) {
  REQUIRE(op == OpId::Matmul);
  struct Pair {
    Shape a, b;
  };
  const std::vector<Pair> small = {{{3, 4}, {4, 5}},       {{4}, {4}},          {{4}, {4, 3}},
                                   {{2, 4}, {4}},          {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {5, 4, 2}},
                                   {{0, 3}, {3, 4}},       {{3, 0}, {0, 4}},    {{1, 1}, {1, 1}},
                                   {{2, 3, 4}, {1, 4, 5}}, {{3, 5}, {5, 0}},    {{2, 0, 4}, {4, 3}},
                                   {{4}, {2, 4, 3}}};
  // Past 64^3 per matrix (one BLAS call each), and a batch of small ones.
  const std::vector<Pair> large = {{{70, 80}, {80, 90}}, {{5, 20, 30}, {5, 30, 10}}, {{3, 1, 65, 66}, {2, 66, 67}},
                                   {{130, 70}, {70}}};
  const std::vector<std::pair<ViewKind, ViewKind>> views = {
      {ViewKind::contiguous, ViewKind::contiguous}, {ViewKind::transposed, ViewKind::transposed},
      {ViewKind::strided, ViewKind::negative},      {ViewKind::negative, ViewKind::transposed},
      {ViewKind::transposed, ViewKind::contiguous}, {ViewKind::contiguous, ViewKind::strided}};
  int cases = 0;
  uint64_t seed = 3000;
  std::vector<std::pair<DType, DType>> dtypes;
  for (DType d : all_dtypes()) dtypes.push_back({d, d});
  dtypes.insert(dtypes.end(), {{DType::int32, DType::float32},
                               {DType::float16, DType::float32},
                               {DType::bool_, DType::int8},
                               {DType::uint8, DType::int8},
                               {DType::bfloat16, DType::float16}});
  for (auto [da, db] : dtypes) {
    for (const Pair& p : small)
      for (size_t v = 0; v < views.size(); ++v, seed += 2)
        cases += matmul_case(random_tensor(p.a, da, seed, v == 1), random_tensor(p.b, db, seed + 1, v == 2),
                             views[v].first, views[v].second);
  }
  for (DType d : {DType::float32, DType::float64, DType::float16, DType::int32})
    for (const Pair& p : large)
      for (size_t v = 0; v < 4; ++v, seed += 2)
        cases += matmul_case(random_tensor(p.a, d, seed), random_tensor(p.b, d, seed + 1), views[v].first,
                             views[v].second);
  CHECK_THROWS_AS(matmul(zeros({}), zeros({3})), kiln::ShapeError);
  CHECK_THROWS_AS(matmul(zeros({3, 4}), zeros({5, 2})), kiln::ShapeError);
  CHECK_THROWS_AS(matmul(zeros({2, 3, 4}), zeros({3, 4, 2})), kiln::ShapeError);
  return cases;
}

int check_rownorm_op(OpId op) {
  if (op == OpId::Softmax || op == OpId::LogSoftmax) return softmax_cases(op);
  return norm_cases(op);
}

}  // namespace kt

using namespace kiln;

namespace {

using kt::same_bits;
using kt::ThreadGuard;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("linalg") {
  TEST_CASE("matmul numpy literals") {
    // numpy: [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
    const Tensor a = tensor({{1.f, 2.f}, {3.f, 4.f}}), b = tensor({{5.f, 6.f}, {7.f, 8.f}});
    CHECK(matmul(a, b).to_vector<float>() == std::vector<float>{19, 22, 43, 50});
    // numpy: a.T @ b = [[26, 30], [38, 44]] (a transposed view, no copy needed)
    CHECK(matmul(a.transpose(), b).to_vector<float>() == std::vector<float>{26, 30, 38, 44});
    // numpy: [1, 2, 3] @ [4, 5, 6] = 32, a 0-d result
    const Tensor dot = matmul(tensor({1.0, 2.0, 3.0}), tensor({4.0, 5.0, 6.0}));
    CHECK(dot.shape() == Shape{});
    CHECK(dot.item() == 32.0);
    // numpy shapes: (2,3,4) @ (4,) -> (2,3); (4,) @ (2,4,3) -> (2,3); (2,1,3,4) @ (5,4,2) -> (2,5,3,2)
    CHECK(matmul(zeros({2, 3, 4}), zeros({4})).shape() == Shape{2, 3});
    CHECK(matmul(zeros({4}), zeros({2, 4, 3})).shape() == Shape{2, 3});
    CHECK(matmul(zeros({2, 1, 3, 4}), zeros({5, 4, 2})).shape() == Shape{2, 5, 3, 2});
    // K = 0 gives zeros
    CHECK(matmul(zeros({2, 0}), zeros({0, 3})).to_vector<float>() == std::vector<float>(6, 0.f));
  }

  TEST_CASE("matmul of broadcast views (zero strides)") {
    const Tensor a = tensor({{1.f, 2.f}, {3.f, 4.f}}), b = tensor({{5.f, 6.f}, {7.f, 8.f}});
    // A batch axis of stride 0 is not materialised; every batch equals a @ b.
    const Tensor r = matmul(broadcast_to(a, {3, 2, 2}), b);
    CHECK(r.shape() == Shape{3, 2, 2});
    CHECK(r.to_vector<float>() == std::vector<float>{19, 22, 43, 50, 19, 22, 43, 50, 19, 22, 43, 50});
    // A matrix with a zero-stride axis (each row [1, 2]) is copied first.
    const Tensor rows = broadcast_to(tensor({1.f, 2.f}), {2, 2});
    CHECK(matmul(rows, b).to_vector<float>() == std::vector<float>{19, 22, 19, 22});
    CHECK(matmul(b, rows).to_vector<float>() == std::vector<float>{11, 22, 15, 30});
  }

  TEST_CASE("integer and bool matmul") {
    // numpy: int8 [[100, 100]] @ [[2], [1]] = [[44]] (300 wraps)
    const Tensor a = Tensor::from_vector<int8_t>({100, 100}, {1, 2});
    const Tensor b = Tensor::from_vector<int8_t>({2, 1}, {2, 1});
    CHECK(matmul(a, b).dtype() == DType::int8);
    CHECK(matmul(a, b).to_vector<int8_t>() == std::vector<int8_t>{44});
    // numpy: int32 [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] -> int32 [[19, 22], [43, 50]]
    const Tensor c = tensor({{1, 2}, {3, 4}}), d = tensor({{5, 6}, {7, 8}});
    CHECK(matmul(c, d).dtype() == DType::int32);
    CHECK(matmul(c, d).to_vector<int32_t>() == std::vector<int32_t>{19, 22, 43, 50});
    // numpy: bool [[1, 0], [0, 0]] @ [[0, 1], [1, 1]] = [[False, True], [False, False]]
    const Tensor p = tensor({true, false, false, false}).reshape({2, 2});
    const Tensor q = tensor({false, true, true, true}).reshape({2, 2});
    CHECK(matmul(p, q).dtype() == DType::bool_);
    CHECK(matmul(p, q).to_vector<bool>() == std::vector<bool>{false, true, false, false});
    // numpy: int32 @ float32 -> float64
    CHECK(matmul(c, tensor({{1.f, 0.f}, {0.f, 1.f}})).dtype() == DType::float64);
  }

  TEST_CASE("matmul errors name the op") {
    CHECK(message_of([] { matmul(zeros({3, 4}), zeros({5, 2})); }).rfind("matmul: ", 0) == 0);
    CHECK(message_of([] { matmul(zeros({}), zeros({2})); }).rfind("matmul: ", 0) == 0);
    CHECK(message_of([] { matmul(zeros({2, 3, 4}), zeros({3, 4, 2})); }).rfind("matmul: ", 0) == 0);
  }

  TEST_CASE("matmul and solve do not depend on the thread count; a BLAS-sized product is eager's compiled") {
    ThreadGuard guard;
    // Up to 256^3 multiply-adds kiln runs its generated GEMM (or Eigen's,
    // per batch item). A larger product goes to OpenBLAS on one thread per
    // call, cut by kiln into blocks chosen from the sizes alone (runtime.h):
    // OpenBLAS's own threading (0.3.21, Haswell and SkylakeX kernels) gives
    // other bits at 2 threads for 257..1000-sized sgemm, dgemm and dgesv, and
    // a cut made per thread did too (Haswell sgemm 300 and 512, Cooperlake
    // dgemm 300). Run this case with OPENBLAS_CORETYPE=Haswell, SkylakeX and
    // Cooperlake where the CPU has them.
    const Tensor a = random::normal({256, 256}), b = random::normal({256, 256});
    const Tensor ba = random::normal({16, 40, 50}), bb = random::normal({16, 50, 30});
    const Tensor a3 = random::normal({300, 301}), b3 = random::normal({301, 299});
    const Tensor d3 = random::normal({300, 300}).to(DType::float64), e3 = random::normal({300, 300}).to(DType::float64);
    const Tensor sa = random::normal({512, 512}).to(DType::float64), sb = random::normal({512, 3}).to(DType::float64);
    set_num_threads(1);
    const Tensor one = matmul(a, b), one_t = matmul(a.transpose(), b), one_b = matmul(ba, bb);
    const Tensor one_3 = matmul(a3, b3), one_d = matmul(d3, e3), one_s = linalg::solve(sa, sb);
    set_num_threads(2);
    // solve first: set_num_threads(2) also set OpenBLAS's pool to 2
    CHECK(same_bits(one_s, linalg::solve(sa, sb)));
    CHECK(same_bits(one, matmul(a, b)));
    CHECK(same_bits(one_t, matmul(a.transpose(), b)));
    CHECK(same_bits(one_b, matmul(ba, bb)));
    CHECK(same_bits(one_3, matmul(a3, b3)));
    CHECK(same_bits(one_d, matmul(d3, e3)));
    const Tensor big_a = random::normal({512, 512}), big_b = random::normal({512, 512});
    const auto spec = TensorLayout(DType::float32, {512, 512});
    CompiledCallable mm = compile([](Tensor x, Tensor y) { return matmul(x, y); })(spec, spec);
    set_num_threads(1);
    const Tensor big_one = matmul(big_a, big_b);
    for (int t : {1, 2}) {
      CAPTURE(t);
      set_num_threads(t);
      CHECK(same_bits(big_one, matmul(big_a, big_b)));
      CHECK(same_bits(big_one, mm(big_a, big_b).leaves[0]));
    }
  }

  TEST_CASE("runtime settings") {
    ThreadGuard guard;
    set_num_threads(1);
    CHECK(get_num_threads() == 1);
    set_num_threads(2);
    CHECK(get_num_threads() == 2);
    CHECK_THROWS_AS(set_num_threads(0), kiln::ValueError);
    const std::string be = blas_backend();
    CHECK((be == "OpenBLAS" || be == "Eigen"));
  }

  TEST_CASE("softmax literals and infinities") {
    // scipy.special.softmax([1, 2, 3]) = [0.09003057317038046, 0.24472847105479767, 0.6652409557748219]
    const auto s = softmax(tensor({1.0, 2.0, 3.0})).to_vector<double>();
    CHECK(s[0] == doctest::Approx(0.09003057317038046).epsilon(1e-14));
    CHECK(s[2] == doctest::Approx(0.6652409557748219).epsilon(1e-14));
    // scipy.special.log_softmax([1, 2, 3]) = [-2.40760596444438, -1.4076059644443801, -0.4076059644443803]
    CHECK(log_softmax(tensor({1.0, 2.0, 3.0})).to_vector<double>()[0] == doctest::Approx(-2.40760596444438));
    // max-subtracted: no overflow
    CHECK(softmax(tensor({1000.f, 1000.f})).to_vector<float>() == std::vector<float>{0.5f, 0.5f});
    // a row of -inf has no maximum to subtract: NaN, as torch
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(std::isnan(softmax(tensor({-inf, -inf})).to_vector<double>()[0]));
    CHECK(softmax(tensor({-inf, 0.0})).to_vector<double>() == std::vector<double>{0.0, 1.0});
    // ints compute in float32
    CHECK(softmax(tensor({1, 2})).dtype() == DType::float32);
  }

  TEST_CASE("layer_norm and rms_norm") {
    // x = [1, 2, 3, 4]: mean 2.5, biased var 1.25
    const Tensor x = tensor({1.0, 2.0, 3.0, 4.0});
    const double r = 1.0 / std::sqrt(1.25 + 1e-5);
    CHECK(layer_norm(x).to_vector<double>()[0] == doctest::Approx(-1.5 * r).epsilon(1e-14));
    const Tensor w = tensor({1.0, 2.0, 3.0, 4.0}), b = tensor({0.5, 0.5, 0.5, 0.5});
    CHECK(layer_norm(x, w, b).to_vector<double>()[3] == doctest::Approx(1.5 * r * 4 + 0.5).epsilon(1e-14));
    // rms: mean(x^2) = 7.5
    CHECK(rms_norm(x, w).to_vector<double>()[1] == doctest::Approx(2.0 / std::sqrt(7.5 + 1e-6) * 2).epsilon(1e-14));
    CHECK_THROWS_AS(layer_norm(zeros({2, 4}), zeros({3})), kiln::ShapeError);
    CHECK_THROWS_AS(layer_norm(zeros({2, 4}), zeros({4}), zeros({2, 4})), kiln::ShapeError);
    CHECK_THROWS_AS(rms_norm(zeros({}), Tensor()), kiln::ShapeError);
    CHECK(message_of([] { layer_norm(zeros({2, 4}), zeros({3})); }).rfind("layer_norm: ", 0) == 0);
    Attrs a;
    a.ints = {0, 1};
    CHECK_THROWS_AS(apply(OpId::RmsNorm, std::vector<Tensor>{zeros({4}), zeros({4})}, a), kiln::ValueError);
    a.ints = {1, 1};
    CHECK_THROWS_AS(apply(OpId::LayerNorm, std::vector<Tensor>{zeros({4}), zeros({4})}, a), kiln::ValueError);
    // float16 x with a float32 weight: float32 result
    CHECK(layer_norm(ones({2, 3}, DType::float16), ones({3})).dtype() == DType::float32);
  }

  TEST_CASE("row ops do not depend on the thread count") {
    ThreadGuard guard;
    const Tensor x = random::normal({300, 500});
    const Tensor w = random::normal({500});
    set_num_threads(1);
    const Tensor s1 = softmax(x, 0), l1 = layer_norm(x, w), c1 = cumsum(x, 1);
    set_num_threads(2);
    CHECK(same_bits(s1, softmax(x, 0)));
    CHECK(same_bits(l1, layer_norm(x, w)));
    CHECK(same_bits(c1, cumsum(x, 1)));
  }
}
