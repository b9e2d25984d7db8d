// kiln tests: kiln::linalg (solve, inv, det, slogdet, cholesky, qr, svd,
// eigh, lstsq, norms, matrix_rank, pinv) checked by reconstruction in
// float64 with loops written here (independent of kiln's matmul), against
// an independent float64 LU for det, against numpy-computed literals, and
// compiled against eager. float32 tolerances scale with the condition number.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "op_table_checks.h"
#include "same_bits.h"
#include "test_util.h"

namespace {
using namespace kiln;
using namespace kt;

// A float64 matrix, row-major.
struct M {
  int64_t r = 0, c = 0;
  std::vector<double> v;
  double& operator()(int64_t i, int64_t j) { return v[size_t(i * c + j)]; }
  double operator()(int64_t i, int64_t j) const { return v[size_t(i * c + j)]; }
};

M mm(const M& a, const M& b) {
  REQUIRE(a.c == b.r);
  M o{a.r, b.c, std::vector<double>(size_t(a.r * b.c), 0.0)};
  for (int64_t i = 0; i < a.r; ++i)
    for (int64_t k = 0; k < a.c; ++k)
      for (int64_t j = 0; j < b.c; ++j) o(i, j) += a(i, k) * b(k, j);
  return o;
}
M tr(const M& a) {
  M o{a.c, a.r, std::vector<double>(a.v.size())};
  for (int64_t i = 0; i < a.r; ++i)
    for (int64_t j = 0; j < a.c; ++j) o(j, i) = a(i, j);
  return o;
}
M eye_ref(int64_t n) {
  M o{n, n, std::vector<double>(size_t(n * n), 0.0)};
  for (int64_t i = 0; i < n; ++i) o(i, i) = 1;
  return o;
}
M diag_of(const std::vector<double>& d, int64_t r, int64_t c) {
  M o{r, c, std::vector<double>(size_t(r * c), 0.0)};
  for (size_t i = 0; i < d.size(); ++i) o(int64_t(i), int64_t(i)) = d[i];
  return o;
}
double max_abs(const M& a) {
  double m = 0;
  for (double x : a.v) m = std::max(m, std::fabs(x));
  return m;
}
double max_diff(const M& a, const M& b) {
  REQUIRE(a.r == b.r);
  REQUIRE(a.c == b.c);
  double m = 0;
  for (size_t i = 0; i < a.v.size(); ++i) m = std::max(m, std::fabs(a.v[i] - b.v[i]));
  return m;
}

// The matrices of a [..., r, c] tensor (a 1-d [..., n] tensor with vec: columns).
std::vector<M> mats(const Tensor& t, bool vec = false) {
  const std::vector<double> v = values(t);
  const int64_t nd = t.ndim();
  const int64_t r = vec ? t.shape()[nd - 1] : t.shape()[nd - 2], c = vec ? 1 : t.shape()[nd - 1];
  const int64_t per = r * c, count = per ? int64_t(v.size()) / per : 0;
  std::vector<M> out;
  for (int64_t b = 0; b < count; ++b) out.push_back(M{r, c, std::vector<double>(v.begin() + b * per, v.begin() + (b + 1) * per)});
  return out;
}

// Independent float64 LU with partial pivoting: the determinant.
double det_ref(M a) {
  double d = 1;
  for (int64_t k = 0; k < a.r; ++k) {
    int64_t p = k;
    for (int64_t i = k + 1; i < a.r; ++i)
      if (std::fabs(a(i, k)) > std::fabs(a(p, k))) p = i;
    if (a(p, k) == 0) return 0;
    if (p != k) {
      for (int64_t j = 0; j < a.c; ++j) std::swap(a(p, j), a(k, j));
      d = -d;
    }
    d *= a(k, k);
    for (int64_t i = k + 1; i < a.r; ++i) {
      const double f = a(i, k) / a(k, k);
      for (int64_t j = k; j < a.c; ++j) a(i, j) -= f * a(k, j);
    }
  }
  return d;
}

// The 2-norm condition number from kiln's float64 singular values (a check
// of the scale only; the factorizations are checked by reconstruction).
double cond_of(const M& a) {
  Tensor t = Tensor::from_vector(a.v, {a.r, a.c});
  std::vector<double> s = values(linalg::svdvals(t));
  if (s.empty() || s.back() == 0) return 1e300;
  return s.front() / s.back();
}

// Tolerance for a reconstruction of a matrix of size n in dtype d, relative
// to the data's magnitude: n eps cond (cond scales the forward error of
// solve/inv; the decompositions are backward stable, cond = 1).
double tol(DType d, int64_t n, double scale, double cond = 1) {
  const double eps = d == DType::float64 ? 2.2e-16 : 1.2e-7;
  return 50 * eps * double(std::max<int64_t>(n, 1)) * std::max(scale, 1.0) * cond;
}

// Random well-conditioned square inputs: random + n I (diagonally dominant-ish).
Tensor square_input(const Shape& s, DType d, uint64_t seed) {
  const int64_t n = s.back();
  Tensor x = random_tensor(s, DType::float64, seed, false, 1.0);
  Tensor e = Tensor::from_vector(eye_ref(n).v, {n, n});
  return add(x, mul(e, double(n))).to(d);
}
// Symmetric positive-definite: x x^T + n I.
Tensor spd_input(const Shape& s, DType d, uint64_t seed) {
  const int64_t n = s.back();
  Tensor x = random_tensor(s, DType::float64, seed, false, 1.0);
  Tensor e = Tensor::from_vector(eye_ref(n).v, {n, n});
  return add(matmul(x, transpose(x)), mul(e, double(n))).to(d);
}

bool orthonormal_cols(const M& q, double t) { return max_diff(mm(tr(q), q), eye_ref(q.c)) <= t; }

// One row on one input: checks the row's defining property; returns 1.
int linalg_case(OpId op, const Tensor& a, const Tensor& b) {
  const DType d = a.dtype();
  CAPTURE(op_name(op));
  CAPTURE(shape_str(a.shape()));
  const std::vector<M> A = mats(a);
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape()[a.ndim() - 1];
  switch (op) {
    case OpId::LinalgSolve: {
      const bool vec = b.ndim() == 1;
      Tensor x = linalg::solve(a, b);
      const std::vector<M> X = mats(x, vec), B = mats(b, vec);
      REQUIRE(X.size() == A.size());
      for (size_t i = 0; i < A.size(); ++i) {
        const M& Bi = B[vec ? 0 : i];
        CHECK(max_diff(mm(A[i], X[i]), Bi) <= tol(d, n, max_abs(Bi), cond_of(A[i])));
      }
      return 1;
    }
    case OpId::LinalgInv: {
      const std::vector<M> X = mats(linalg::inv(a));
      for (size_t i = 0; i < A.size(); ++i) CHECK(max_diff(mm(A[i], X[i]), eye_ref(n)) <= tol(d, n, 1, cond_of(A[i])));
      return 1;
    }
    case OpId::LinalgDet:
    case OpId::LinalgSlogdet: {
      const std::vector<double> got = values(linalg::det(a));
      const linalg::SlogDet sl = linalg::slogdet(a);
      const std::vector<double> sg = values(sl.sign), la = values(sl.logabsdet);
      REQUIRE(got.size() == A.size());
      for (size_t i = 0; i < A.size(); ++i) {
        const double want = det_ref(A[i]);
        CHECK(close(got[i], want, tol(d, n, 1, cond_of(A[i])), 0));
        CHECK(sg[i] == (want > 0 ? 1.0 : want < 0 ? -1.0 : 0.0));
        CHECK(close(la[i], std::log(std::fabs(want)), 0, tol(d, n, 1, cond_of(A[i]))));
      }
      return 1;
    }
    case OpId::LinalgCholesky: {
      const std::vector<M> L = mats(linalg::cholesky(a)), U = mats(linalg::cholesky(a, true));
      for (size_t i = 0; i < A.size(); ++i) {
        CHECK(max_diff(mm(L[i], tr(L[i])), A[i]) <= tol(d, n, max_abs(A[i])));
        CHECK(max_diff(mm(tr(U[i]), U[i]), A[i]) <= tol(d, n, max_abs(A[i])));
        for (int64_t r = 0; r < n; ++r)
          for (int64_t c = r + 1; c < n; ++c) {
            CHECK(L[i](r, c) == 0);  // lower triangular
            CHECK(U[i](c, r) == 0);
          }
      }
      return 1;
    }
    case OpId::LinalgQr: {
      for (linalg::QrMode mode : {linalg::QrMode::reduced, linalg::QrMode::complete}) {
        const linalg::QR f = linalg::qr(a, mode);
        const std::vector<M> Q = mats(f.q), R = mats(f.r);
        const int64_t kk = mode == linalg::QrMode::complete ? m : std::min(m, n);
        CHECK(f.q.shape().back() == kk);
        for (size_t i = 0; i < A.size(); ++i) {
          CHECK(max_diff(mm(Q[i], R[i]), A[i]) <= tol(d, std::max(m, n), max_abs(A[i])));
          CHECK(orthonormal_cols(Q[i], tol(d, m, 1)));
          for (int64_t r = 0; r < R[i].r; ++r)
            for (int64_t c = 0; c < std::min(r, n); ++c) CHECK(R[i](r, c) == 0);
        }
      }
      return 1;
    }
    case OpId::LinalgSvd: {
      for (bool full : {true, false}) {
        const linalg::SVD f = linalg::svd(a, full);
        const std::vector<M> U = mats(f.u), V = mats(f.vh), S = mats(f.s, true);
        for (size_t i = 0; i < A.size(); ++i) {
          const M Si = diag_of(S[i].v, U[i].c, V[i].r);
          CHECK(max_diff(mm(mm(U[i], Si), V[i]), A[i]) <= tol(d, std::max(m, n), max_abs(A[i])));
          CHECK(orthonormal_cols(U[i], tol(d, m, 1)));
          CHECK(orthonormal_cols(tr(V[i]), tol(d, n, 1)));
          for (size_t j = 0; j < S[i].v.size(); ++j) {
            CHECK(S[i].v[j] >= 0);
            if (j) CHECK(S[i].v[j] <= S[i].v[j - 1]);  // descending
          }
        }
      }
      return 1;
    }
    case OpId::LinalgEigh: {
      for (char uplo : {'L', 'U'}) {
        const linalg::Eigh e = linalg::eigh(a, uplo);
        const std::vector<M> V = mats(e.eigenvectors), W = mats(e.eigenvalues, true);
        for (size_t i = 0; i < A.size(); ++i) {
          CHECK(max_diff(mm(mm(V[i], diag_of(W[i].v, n, n)), tr(V[i])), A[i]) <= tol(d, n, max_abs(A[i])));
          CHECK(orthonormal_cols(V[i], tol(d, n, 1)));
          CHECK(std::is_sorted(W[i].v.begin(), W[i].v.end()));  // ascending
        }
      }
      return 1;
    }
    case OpId::LinalgLstsq: {
      // The normal equations a^T (a x - b) == 0 (a has full column rank here).
      const bool vec = b.ndim() == 1;
      const linalg::Lstsq r = linalg::lstsq(a, b);
      const std::vector<M> X = mats(r.solution, vec), B = mats(b, vec);
      const std::vector<double> rank = values(r.rank);
      for (size_t i = 0; i < A.size(); ++i) {
        M res = mm(A[i], X[i]);
        const M& Bi = B[vec ? 0 : i];
        for (size_t j = 0; j < res.v.size(); ++j) res.v[j] -= Bi.v[j];
        CHECK(max_abs(mm(tr(A[i]), res)) <= tol(d, m, max_abs(A[i]) * max_abs(Bi), cond_of(A[i])));
        CHECK(rank[i] == double(std::min(m, n)));
      }
      return 1;
    }
    default: FAIL("not a linalg row"); return 0;
  }
}

Tensor input_for(OpId op, const Shape& s, DType d, uint64_t seed) {
  if (op == OpId::LinalgCholesky || op == OpId::LinalgEigh) return spd_input(s, d, seed);
  if (op == OpId::LinalgQr || op == OpId::LinalgSvd || op == OpId::LinalgLstsq)
    return random_tensor(s, DType::float64, seed, false, 1.0).to(d);
  return square_input(s, d, seed);
}

}  // namespace

namespace kt {
int check_linalg_op(OpId op) {
  const bool rect = op == OpId::LinalgQr || op == OpId::LinalgSvd || op == OpId::LinalgLstsq;
  std::vector<Shape> shapes = {{1, 1}, {4, 4}, {3, 5, 5}, {2, 1, 3, 3}, {17, 17}};
  if (rect) shapes.insert(shapes.end(), {{5, 3}, {2, 7, 4}, {3, 6}});
  if (op == OpId::LinalgLstsq) shapes = {{1, 1}, {4, 4}, {5, 3}, {2, 7, 4}, {20, 6}};
  int cases = 0;
  uint64_t seed = 9100;
  for (DType d : {DType::float32, DType::float64})
    for (const Shape& s : shapes)
      for (ViewKind v : {ViewKind::contiguous, ViewKind::transposed, ViewKind::negative}) {
        CAPTURE(view_name(v));
        Tensor a = relayout(input_for(op, s, d, ++seed), v);
        Tensor b;
        if (op == OpId::LinalgSolve || op == OpId::LinalgLstsq) {
          Shape bs = s;
          bs.back() = 2;
          b = relayout(random_tensor(bs, d, ++seed), v);
          cases += linalg_case(op, a, b);
          b = random_tensor({s[s.size() - 2]}, d, ++seed);  // a 1-d b: one vector for the whole batch
        }
        cases += linalg_case(op, a, b);
      }
  return cases;
}
}  // namespace kt

TEST_SUITE("linalg_decomp") {
  TEST_CASE("solve broadcasts a's batch against b's") {
    Tensor a = square_input({3, 1, 4, 4}, DType::float64, 1);
    Tensor b = random_tensor({2, 4, 3}, DType::float64, 2);
    Tensor x = linalg::solve(a, b);
    CHECK(x.shape() == Shape{3, 2, 4, 3});
    const std::vector<M> A = mats(a), B = mats(b), X = mats(x);
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < 2; ++j) CHECK(max_diff(mm(A[i], X[i * 2 + j]), B[j]) <= 1e-12);
    // mixed dtypes promote
    CHECK(linalg::solve(a.to(DType::float32), b).dtype() == DType::float64);
  }

  TEST_CASE("float32 solve error grows with the condition number, within n eps cond") {
    // Hilbert-like matrices: cond grows fast with n.
    for (int64_t n : {3, 5, 6}) {
      M h{n, n, std::vector<double>(size_t(n * n))};
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) h(i, j) = 1.0 / double(i + j + 1);
      const double c = cond_of(h);
      CAPTURE(c);
      Tensor a = Tensor::from_vector(h.v, {n, n}).to(DType::float32);
      Tensor x = linalg::solve(a, ones({n, 1}, DType::float32));
      const M X = mats(x)[0], A = mats(a)[0];
      M r = mm(A, X);
      for (double& v : r.v) v -= 1;
      CHECK(max_abs(r) <= tol(DType::float32, n, 1, c));
    }
  }

  TEST_CASE("literals computed with numpy 2 (numpy.linalg, float64)") {
    // a = [[4, 1, 2], [1, 3, 0], [2, 0, 5]]
    Tensor a = Tensor::from_vector(std::vector<double>{4, 1, 2, 1, 3, 0, 2, 0, 5}, {3, 3});
    // numpy.linalg.det(a) -> 43.0 (4*15 - 1*5 + 2*(-6))
    CHECK(linalg::det(a).item<double>() == doctest::Approx(43.0).epsilon(1e-14));
    // numpy.linalg.inv(a)[0] -> [15/43, -5/43, -6/43]
    check_all_close(select(linalg::inv(a), 0, 0), {15.0 / 43, -5.0 / 43, -6.0 / 43}, 1e-13, 1e-15, "inv row 0");
    // numpy.linalg.solve(a, [1, 2, 3]) * 43 -> [-13, 33, 31]
    check_all_close(linalg::solve(a, Tensor::from_vector(std::vector<double>{1, 2, 3})),
                    {-13.0 / 43, 33.0 / 43, 31.0 / 43}, 1e-13, 1e-15, "solve");
    // numpy.linalg.cholesky(a) -> [[2, 0, 0], [0.5, 1.6583124, 0], [1, -0.30151134, 1.97714211]]
    // (closed forms: sqrt(2.75), -0.5 / sqrt(2.75), sqrt(4 - 0.25 / 2.75))
    Tensor l = linalg::cholesky(a);
    check_all_close(l, {2, 0, 0, 0.5, std::sqrt(2.75), 0, 1, -0.5 / std::sqrt(2.75), std::sqrt(4 - 0.25 / 2.75)},
                    1e-14, 1e-15, "cholesky");
    // numpy.linalg.eigvalsh([[2, 1], [1, 2]]) -> [1, 3]
    check_all_close(linalg::eigvalsh(Tensor::from_vector(std::vector<double>{2, 1, 1, 2}, {2, 2})), {1, 3}, 1e-14,
                    1e-14, "eigvalsh");
    // Only the named triangle is read: numpy.linalg.eigvalsh([[2, 100], [1, 2]]) -> [1, 3],
    // eigvalsh(..., UPLO='U') -> [-98, 102]; numpy.linalg.cholesky([[4, 999], [2, 5]]) -> [[2, 0], [1, 2]]
    Tensor ns = Tensor::from_vector(std::vector<double>{2, 100, 1, 2}, {2, 2});
    check_all_close(linalg::eigvalsh(ns), {1, 3}, 1e-14, 1e-14, "eigvalsh L");
    check_all_close(linalg::eigvalsh(ns, 'U'), {-98, 102}, 1e-14, 1e-12, "eigvalsh U");
    check_all_close(linalg::cholesky(Tensor::from_vector(std::vector<double>{4, 999, 2, 5}, {2, 2})), {2, 0, 1, 2},
                    1e-15, 1e-15, "cholesky reads the lower triangle");
    // numpy.linalg.svd([[3, 0], [4, 5]], compute_uv=False) -> [3*sqrt(5), sqrt(5)]
    check_all_close(linalg::svdvals(Tensor::from_vector(std::vector<double>{3, 0, 4, 5}, {2, 2})),
                    {3 * std::sqrt(5.0), std::sqrt(5.0)}, 1e-14, 1e-14, "svdvals");
    // numpy.linalg.lstsq([[1, 0], [1, 1], [1, 2]], [6, 0, 0]) -> x [5, -3], residuals [6], rank 2
    Tensor A = Tensor::from_vector(std::vector<double>{1, 0, 1, 1, 1, 2}, {3, 2});
    linalg::Lstsq r = linalg::lstsq(A, Tensor::from_vector(std::vector<double>{6, 0, 0}));
    check_all_close(r.solution, {5, -3}, 1e-13, 1e-13, "lstsq x");
    check_all_close(r.residuals, {6}, 1e-12, 1e-12, "lstsq residuals");
    CHECK(r.rank.item<int64_t>() == 2);
    // numpy.linalg.matrix_rank([[1, 2], [2, 4]]) -> 1; pinv([[1, 2], [2, 4]]) -> [[0.04, 0.08], [0.08, 0.16]]
    Tensor s = Tensor::from_vector(std::vector<double>{1, 2, 2, 4}, {2, 2});
    CHECK(linalg::matrix_rank(s).item<int64_t>() == 1);
    check_all_close(linalg::pinv(s), {0.04, 0.08, 0.08, 0.16}, 1e-13, 1e-15, "pinv");
    // numpy.linalg.slogdet([[0, 1], [1, 0]]) -> (-1.0, 0.0)
    linalg::SlogDet sd = linalg::slogdet(Tensor::from_vector(std::vector<double>{0, 1, 1, 0}, {2, 2}));
    CHECK(sd.sign.item<double>() == -1.0);
    CHECK(sd.logabsdet.item<double>() == 0.0);
  }

  TEST_CASE("pinv and matrix_rank on rectangular and rank-deficient batches") {
    Tensor x = random_tensor({2, 5, 3}, DType::float64, 41, false, 1.0);
    Tensor p = linalg::pinv(x);
    CHECK(p.shape() == Shape{2, 3, 5});
    const std::vector<M> X = mats(x), P = mats(p);
    for (size_t i = 0; i < X.size(); ++i) CHECK(max_diff(mm(mm(X[i], P[i]), X[i]), X[i]) <= 1e-12);  // Penrose 1
    Tensor low = matmul(random_tensor({4, 2}, DType::float64, 5), random_tensor({2, 6}, DType::float64, 6));
    CHECK(linalg::matrix_rank(low).item<int64_t>() == 2);
    CHECK(linalg::matrix_rank(zeros({3, 3}, DType::float64)).item<int64_t>() == 0);
  }

  TEST_CASE("norms against float64 loops") {
    Tensor x = random_tensor({3, 4}, DType::float64, 77);
    const std::vector<double> v = values(x);
    auto vsum = [&](auto f) { double s = 0; for (double e : v) s += f(e); return s; };
    CHECK(linalg::norm(x).item<double>() == doctest::Approx(std::sqrt(vsum([](double e) { return e * e; }))));
    CHECK(linalg::vector_norm(x, 1).item<double>() == doctest::Approx(vsum([](double e) { return std::fabs(e); })));
    CHECK(linalg::vector_norm(x, 3).item<double>() ==
          doctest::Approx(std::cbrt(vsum([](double e) { return std::pow(std::fabs(e), 3); }))));
    double mx = 0, mn = 1e300;
    for (double e : v) mx = std::max(mx, std::fabs(e)), mn = std::min(mn, std::fabs(e));
    CHECK(linalg::vector_norm(x, INFINITY).item<double>() == mx);
    CHECK(linalg::vector_norm(x, -INFINITY).item<double>() == mn);
    CHECK(linalg::vector_norm(x, 0).item<double>() == 12);
    // per row, keepdim
    Tensor rn = linalg::vector_norm(x, 2, {1}, true);
    CHECK(rn.shape() == Shape{3, 1});
    for (int64_t i = 0; i < 3; ++i) {
      double s = 0;
      for (int64_t j = 0; j < 4; ++j) s += v[size_t(i * 4 + j)] * v[size_t(i * 4 + j)];
      CHECK(values(rn)[size_t(i)] == doctest::Approx(std::sqrt(s)));
    }
    // matrix norms: 1 = max column abs sum, inf = max row abs sum
    double c1 = 0, ci = 0;
    for (int64_t j = 0; j < 4; ++j) {
      double s = 0;
      for (int64_t i = 0; i < 3; ++i) s += std::fabs(v[size_t(i * 4 + j)]);
      c1 = std::max(c1, s);
    }
    for (int64_t i = 0; i < 3; ++i) {
      double s = 0;
      for (int64_t j = 0; j < 4; ++j) s += std::fabs(v[size_t(i * 4 + j)]);
      ci = std::max(ci, s);
    }
    CHECK(linalg::matrix_norm(x, 1.0).item<double>() == doctest::Approx(c1));
    CHECK(linalg::matrix_norm(x, INFINITY).item<double>() == doctest::Approx(ci));
    CHECK(linalg::matrix_norm(x, 1.0, {1, 0}).item<double>() == doctest::Approx(ci));  // axes swapped
    const std::vector<double> s = values(linalg::svdvals(x));
    CHECK(linalg::matrix_norm(x, 2.0).item<double>() == doctest::Approx(s.front()));
    CHECK(linalg::matrix_norm(x, -2.0).item<double>() == doctest::Approx(s.back()));
    CHECK(linalg::matrix_norm(x, "nuc").item<double>() == doctest::Approx(std::accumulate(s.begin(), s.end(), 0.0)));
    CHECK(linalg::matrix_norm(x, "fro").item<double>() == doctest::Approx(linalg::norm(x).item<double>()));
    // batch with matrix axes first and keepdim
    Tensor b3 = random_tensor({3, 4, 2}, DType::float32, 8);
    Tensor nn = linalg::matrix_norm(b3, "nuc", {0, 1}, true);
    CHECK(nn.shape() == Shape{1, 1, 2});
    CHECK(values(nn)[1] == doctest::Approx(values(linalg::matrix_norm(select(b3, 2, 1), "nuc"))[0]).epsilon(1e-5));
    CHECK_THROWS_AS(linalg::matrix_norm(x, 3.0), ValueError);
    CHECK_THROWS_AS(linalg::matrix_norm(x, "max"), ValueError);
    CHECK_THROWS_AS(linalg::vector_norm(zeros({0}), INFINITY), ValueError);
    CHECK(linalg::norm(zeros({0})).item<double>() == 0);
  }

  TEST_CASE("vector_norm: a huge finite ord tends to max |x| (min |x| for a huge negative one); no overflow") {
    // (sum |x|^p)^(1/p) in float64, the terms scaled by max |x| by hand (an independent loop)
    auto ref = [](const std::vector<double>& v, double p) {
      double m = 0;
      for (double e : v) m = std::max(m, std::fabs(e));
      if (p < 0) {
        m = INFINITY;
        for (double e : v) m = std::min(m, std::fabs(e));
      }
      double s = 0;
      for (double e : v) s += std::pow(std::fabs(e) / m, p);
      return m * std::pow(s, 1.0 / p);
    };
    const std::vector<double> ten{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (DType dt : {DType::float32, DType::float64}) {
      CAPTURE(name(dt));
      Tensor x = arange(10, dt);
      // 1/1e308 rounds to 0 in float32: the plain formula gave x^0 summed, 1 (numpy overflows to inf); the limit is 9
      CHECK(linalg::vector_norm(x, 1e308).item<double>() == 9);
      CHECK(linalg::vector_norm(-x, 1e308).item<double>() == 9);
      // ord 100: 9^100 overflows float32 (was inf)
      CHECK(linalg::vector_norm(x, 100).item<double>() == doctest::Approx(ref(ten, 100)).epsilon(1e-6));
      // negative ord: 3^-100 underflows float32 (was inf); the limit is min |x|
      Tensor y = Tensor::from_vector(std::vector<double>{3, 4, -5}).to(dt);
      CHECK(linalg::vector_norm(y, -100).item<double>() == doctest::Approx(ref({3, 4, -5}, -100)).epsilon(1e-6));
      CHECK(linalg::vector_norm(y, -1e308).item<double>() == 3);
      // a zero with a negative ord gives 0, all zeros with a positive ord 0, an infinity inf
      CHECK(linalg::vector_norm(x, -3).item<double>() == 0);
      CHECK(linalg::vector_norm(zeros({4}, dt), 3).item<double>() == 0);
      CHECK(linalg::vector_norm(Tensor::from_vector(std::vector<double>{1, INFINITY}).to(dt), 3).item<double>() == INFINITY);
      CHECK(std::isnan(linalg::vector_norm(Tensor::from_vector(std::vector<double>{1, NAN}).to(dt), 3).item<double>()));
    }
    // ordinary ords per row, keepdim or not, against the loop
    Tensor r = random_tensor({3, 5}, DType::float64, 91);
    const std::vector<double> rv = values(r);
    for (double p : {0.5, 3.0, -2.0, 700.0}) {
      CAPTURE(p);
      Tensor n = linalg::vector_norm(r, p, {1});
      Tensor nk = linalg::vector_norm(r, p, {1}, true);
      CHECK(n.shape() == Shape{3});
      CHECK(nk.shape() == Shape{3, 1});
      for (size_t i = 0; i < 3; ++i) {
        const std::vector<double> row(rv.begin() + long(i * 5), rv.begin() + long(i * 5 + 5));
        CHECK(values(n)[i] == doctest::Approx(ref(row, p)).epsilon(1e-12));
        CHECK(values(nk)[i] == values(n)[i]);
      }
    }
    CHECK(linalg::vector_norm(zeros({0}), 3).item<double>() == 0);
  }

  TEST_CASE("errors name the op and the matrix of the batch") {
    // matrix 1 of 3 singular
    Tensor a = square_input({3, 3, 3}, DType::float64, 3);
    Tensor sing = a.contiguous();
    std::vector<double> v = values(sing);
    for (int j = 0; j < 3; ++j) v[size_t(9 + 3 + j)] = v[size_t(9 + j)];  // row 1 == row 0 of matrix 1
    sing = Tensor::from_vector(v, {3, 3, 3});
    CHECK_THROWS_WITH_AS(linalg::solve(sing, ones({3, 3, 1}, DType::float64)),
                         doctest::Contains("linalg_solve: matrix 1 of the batch is singular"), ValueError);
    CHECK_THROWS_WITH_AS(linalg::inv(sing), doctest::Contains("linalg_inv: matrix 1 of the batch is singular"),
                         ValueError);
    CHECK(values(linalg::det(sing))[1] == 0.0);
    CHECK(values(linalg::slogdet(sing).sign)[1] == 0.0);
    CHECK(values(linalg::slogdet(sing).logabsdet)[1] == -INFINITY);
    // matrix 3 not positive-definite at leading minor 2: [[1, 2], [2, 1]] block
    Tensor s = spd_input({4, 3, 3}, DType::float32, 4);
    std::vector<double> w = values(s);
    w[size_t(27 + 0)] = 1, w[size_t(27 + 1)] = 2, w[size_t(27 + 3)] = 2, w[size_t(27 + 4)] = 1;
    CHECK_THROWS_WITH_AS(linalg::cholesky(Tensor::from_vector(w, {4, 3, 3}).to(DType::float32)),
                         "linalg_cholesky: matrix 3 of the batch is not positive-definite (leading minor 2)",
                         ValueError);
    CHECK_THROWS_WITH_AS(linalg::cholesky(full({2, 2}, -1.0, DType::float64)),
                         "linalg_cholesky: matrix 0 of the batch is not positive-definite (leading minor 1)",
                         ValueError);
    CHECK_THROWS_AS(linalg::cholesky(full({3, 3}, NAN, DType::float64)), ValueError);
    // shapes and dtypes
    CHECK_THROWS_WITH_AS(linalg::inv(zeros({2, 3})), doctest::Contains("expected square matrices, got shape [2, 3]"),
                         ShapeError);
    CHECK_THROWS_AS(linalg::det(zeros({3})), ShapeError);
    CHECK_THROWS_AS(linalg::solve(zeros({3, 3}), zeros({4})), ShapeError);
    CHECK_THROWS_AS(linalg::solve(zeros({2, 3, 3}), zeros({3, 3, 1})), ShapeError);
    CHECK_THROWS_WITH_AS(linalg::inv(zeros({2, 2}, DType::int32)), doctest::Contains("dtype int32"), DTypeError);
    CHECK_THROWS_AS(linalg::svd(zeros({2, 2}, DType::float16)), DTypeError);
    CHECK_THROWS_AS(linalg::norm(zeros({2}, DType::int64)), DTypeError);
    CHECK_THROWS_AS(linalg::eigh(zeros({2, 2}), 'X'), ValueError);
    CHECK_THROWS_WITH_AS(linalg::svd(full({2, 2}, NAN)), doctest::Contains("linalg_svd: matrix 0 of the batch holds NaN"),
                         ValueError);
    CHECK_THROWS_AS(linalg::eigh(full({2, 2}, INFINITY)), ValueError);
  }

  TEST_CASE("empty matrices give numpy's results") {
    CHECK(linalg::det(zeros({0, 0})).item<double>() == 1.0);
    CHECK(linalg::det(zeros({0, 2, 2})).shape() == Shape{0});
    CHECK(values(linalg::det(zeros({2, 0, 0}))) == std::vector<double>{1, 1});
    CHECK(linalg::slogdet(zeros({0, 0})).logabsdet.item<double>() == 0.0);
    CHECK(linalg::inv(zeros({0, 0})).shape() == Shape{0, 0});
    CHECK(linalg::cholesky(zeros({3, 0, 0})).shape() == Shape{3, 0, 0});
    CHECK(linalg::solve(zeros({0, 0}), zeros({0, 2})).shape() == Shape{0, 2});
    linalg::SVD f = linalg::svd(zeros({3, 0}));
    CHECK(f.u.shape() == Shape{3, 3});
    check_all_close(f.u, eye_ref(3).v, 0, 0, "svd u of 3x0");
    CHECK(f.s.shape() == Shape{0});
    CHECK(f.vh.shape() == Shape{0, 0});
    linalg::SVD g = linalg::svd(zeros({0, 2}), false);
    CHECK(g.u.shape() == Shape{0, 0});
    CHECK(g.vh.shape() == Shape{0, 2});
    linalg::QR q = linalg::qr(zeros({3, 0}), linalg::QrMode::complete);
    CHECK(q.q.shape() == Shape{3, 3});
    check_all_close(q.q, eye_ref(3).v, 0, 0, "qr q of 3x0");
    CHECK(q.r.shape() == Shape{3, 0});
    linalg::Eigh e = linalg::eigh(zeros({0, 0}));
    CHECK(e.eigenvalues.shape() == Shape{0});
    CHECK(linalg::lstsq(zeros({0, 3}), zeros({0, 2})).solution.shape() == Shape{3, 2});
    CHECK(values(linalg::lstsq(zeros({0, 3}), zeros({0, 2})).solution) == std::vector<double>(6, 0.0));
    CHECK(linalg::pinv(zeros({2, 0})).shape() == Shape{0, 2});
    CHECK(linalg::matrix_rank(zeros({2, 0})).item<int64_t>() == 0);
  }

  TEST_CASE("every linalg function compiles to the eager bits") {
    auto f = [](Tensor a, Tensor b) {
      linalg::QR q = linalg::qr(a);
      linalg::SVD s = linalg::svd(a, false);
      linalg::Eigh e = linalg::eigh(a);
      linalg::SlogDet sd = linalg::slogdet(a);
      return std::make_tuple(linalg::solve(a, b), linalg::inv(a), linalg::det(a), sd.logabsdet, q.q, q.r, s.u, s.s,
                             s.vh, e.eigenvectors, linalg::lstsq(a, b).solution, linalg::norm(a),
                             linalg::matrix_norm(a, "nuc"), linalg::pinv(a));
    };
    auto g = [](Tensor a) { return linalg::cholesky(a); };
    Tensor a = spd_input({2, 4, 4}, DType::float32, 12), b = random_tensor({2, 4, 3}, DType::float32, 13);
    auto want = f(a, b);
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {2, 4, 4}), TensorLayout(DType::float32, {2, 4, 3}));
    const std::vector<Tensor> got = run(a, b).leaves;
    REQUIRE(got.size() == 14);
    std::vector<Tensor> w;
    std::apply([&](auto&... t) { (w.push_back(t), ...); }, want);
    for (size_t i = 0; i < w.size(); ++i) {
      CAPTURE(i);
      CHECK(same_bits(got[i], w[i]));
    }
    CompiledCallable rc = compile(g)(TensorLayout(DType::float64, {3, 3}));
    Tensor a64 = spd_input({3, 3}, DType::float64, 14);
    CHECK(same_bits(rc(a64).leaves.at(0), linalg::cholesky(a64)));
    // a compiled cholesky raises the eager error
    CHECK_THROWS_AS(rc(full({3, 3}, -1.0, DType::float64)), ValueError);
  }
}
