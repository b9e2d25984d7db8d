// kiln: the public linalg functions (tensor/linalg.h): the Linalg rows
// (tensor/ops_linalg.cpp) and compositions of rows, so all of them trace.
#include "linalg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "creation.h"
#include "op_table.h"
#include "ops.h"

namespace kiln::linalg {
namespace {

Tensor row(OpId op, const Tensor& a, int64_t which = 0, bool flag = false, double scalar = 0) {
  Attrs at;
  at.axis = which;
  at.flag = flag;
  at.scalar = scalar;
  return apply(op, a, at);
}

void require_float(const Tensor& x, const char* who) {
  if (x.dtype() != DType::float32 && x.dtype() != DType::float64)
    throw DTypeError(std::string(who) + ": x has dtype " + std::string(name(x.dtype())) +
                     "; linalg computes in float32 or float64 only (cast with .to(...) first)");
}

void require_matrix(const Tensor& a, const char* who) {
  require_float(a, who);
  if (a.ndim() < 2)
    throw ShapeError(std::string(who) + ": expected a matrix or a batch of matrices [..., m, n], got shape " +
                     shape_str(a.shape()));
}

double eps_of(DType d) {
  return d == DType::float64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
}

int64_t rows(const Tensor& a) { return a.shape()[a.ndim() - 2]; }
int64_t cols(const Tensor& a) { return a.shape()[a.ndim() - 1]; }

// Per matrix: how many of the singular values s [..., K] exceed `thr` x s_max
// (thr_abs >= 0: exceed thr_abs instead). int64 [...].
Tensor count_above(const Tensor& s, double thr, double thr_abs) {
  if (s.shape().back() == 0) {
    Shape batch(s.shape().begin(), s.shape().end() - 1);
    return zeros(batch, DType::int64);
  }
  const Tensor cut = thr_abs >= 0 ? scalar_tensor(thr_abs, s.dtype()) : mul(max(s, {-1}, true), thr);
  return sum(greater(s, cut), {-1});
}

}  // namespace

Tensor solve(const Tensor& a, const Tensor& b) { return apply(OpId::LinalgSolve, a, b); }
Tensor inv(const Tensor& a) { return row(OpId::LinalgInv, a); }
Tensor det(const Tensor& a) { return row(OpId::LinalgDet, a); }
SlogDet slogdet(const Tensor& a) { return {row(OpId::LinalgSlogdet, a, 0), row(OpId::LinalgSlogdet, a, 1)}; }
Tensor cholesky(const Tensor& a, bool upper) { return row(OpId::LinalgCholesky, a, 0, upper); }

QR qr(const Tensor& a, QrMode mode) {
  const bool complete = mode == QrMode::complete;
  return {row(OpId::LinalgQr, a, 0, complete), row(OpId::LinalgQr, a, 1, complete)};
}

SVD svd(const Tensor& a, bool full_matrices) {
  return {row(OpId::LinalgSvd, a, 0, full_matrices), svdvals(a), row(OpId::LinalgSvd, a, 2, full_matrices)};
}
Tensor svdvals(const Tensor& a) { return row(OpId::LinalgSvd, a, 1, false); }

namespace {
bool upper_of(char uplo) {
  if (uplo != 'L' && uplo != 'U')
    throw ValueError(std::string("linalg_eigh: uplo must be 'L' or 'U', got '") + uplo + "'");
  return uplo == 'U';
}
}  // namespace

Eigh eigh(const Tensor& a, char uplo) {
  const bool up = upper_of(uplo);
  return {row(OpId::LinalgEigh, a, 0, up), row(OpId::LinalgEigh, a, 1, up)};
}
Tensor eigvalsh(const Tensor& a, char uplo) { return row(OpId::LinalgEigh, a, 0, upper_of(uplo)); }

Lstsq lstsq(const Tensor& a, const Tensor& b, double rcond) {
  Attrs at;
  at.scalar = rcond;
  Lstsq r;
  r.solution = apply(OpId::LinalgLstsq, a, b, at);
  r.singular_values = svdvals(a);
  const double thr = rcond >= 0 ? rcond : eps_of(r.singular_values.dtype()) * double(std::max(rows(a), cols(a)));
  r.rank = count_above(r.singular_values, thr, -1);
  if (rows(a) > cols(a)) {
    const bool vec = b.ndim() == 1;
    const Tensor ax = vec ? squeeze(matmul(a, unsqueeze(r.solution, -1)), {-1}) : matmul(a, r.solution);
    const Tensor res = sub(b, ax);
    r.residuals = sum(mul(res, res), {vec ? -1 : -2});
  } else {
    r.residuals = zeros({0}, r.solution.dtype());
  }
  return r;
}

Tensor vector_norm(const Tensor& x, double ord, const std::vector<int64_t>& axes, bool keepdim) {
  require_float(x, "vector_norm");
  if (std::isinf(ord)) {
    const Tensor ax = abs(x);
    if (ax.numel() == 0)
      throw ValueError("vector_norm: ord " + std::string(ord > 0 ? "inf" : "-inf") +
                       " over an empty tensor of shape " + shape_str(x.shape()) + " has no value");
    return ord > 0 ? max(ax, axes, keepdim) : min(ax, axes, keepdim);
  }
  if (ord == 0) return sum(not_equal(x, zeros_like(x)), axes, keepdim).to(x.dtype());
  if (ord == 1) return sum(abs(x), axes, keepdim);
  if (ord == 2) return sqrt(sum(mul(x, x), axes, keepdim));
  // Any other ord: scaled by m = max |x| (ord > 0) or min |x| (ord < 0), so
  // (sum (|x| / m)^ord)^(1/ord) * m neither overflows nor underflows: the
  // terms are in [0, 1] (ord > 0) and the one at m is 1, so a huge ord
  // tends to max |x| (the ord = inf limit) instead of overflowing to inf or,
  // where 1/ord underflows, giving x^0 = 1. An m of 0 or inf is replaced by
  // 1 (all-zero sets give 0, infinities give inf, as the formula does).
  const Tensor ax = abs(x);
  if (ax.numel() == 0) return pow(sum(pow(ax, ord), axes, keepdim), 1.0 / ord);
  const Tensor m = ord > 0 ? max(ax, axes, true) : min(ax, axes, true);
  const Tensor scale = where(logical_or(equal(m, zeros_like(m)), isinf(m)), ones_like(m), m);
  const Tensor s = sum(pow(ax / scale, ord), axes, keepdim);
  return pow(s, 1.0 / ord) * (keepdim ? scale : reshape(scale, s.shape()));
}

namespace {
// The two matrix axes of x normalized, distinct.
std::pair<int64_t, int64_t> matrix_axes(const Tensor& x, const std::vector<int64_t>& axes, const char* who) {
  require_float(x, who);
  if (axes.size() != 2)
    throw ValueError(std::string(who) + ": expected two axes (rows, cols), got " + std::to_string(axes.size()));
  const int64_t r = normalize_axis(axes[0], x.ndim(), who), c = normalize_axis(axes[1], x.ndim(), who);
  if (r == c) throw ValueError(std::string(who) + ": the row and column axes are both " + std::to_string(r));
  return {r, c};
}

// x with axes r, c moved last (in that order).
Tensor to_last(const Tensor& x, int64_t r, int64_t c) {
  Axes perm;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (i != r && i != c) perm.push_back(i);
  perm.push_back(r);
  perm.push_back(c);
  return permute(x, perm);
}

// A per-matrix result [...] of to_last(x) back in x's axes (size 1 at r, c when keepdim).
Tensor restore(const Tensor& v, int64_t r, int64_t c, bool keepdim) {
  if (!keepdim) return v;
  return unsqueeze(unsqueeze(v, std::min(r, c)), std::max(r, c));
}
}  // namespace

Tensor matrix_norm(const Tensor& x, const char* ord, const std::vector<int64_t>& axes, bool keepdim) {
  const auto [r, c] = matrix_axes(x, axes, "matrix_norm");
  const std::string o = ord ? ord : "";
  if (o == "fro") return sqrt(sum(mul(x, x), {r, c}, keepdim));
  if (o == "nuc") return restore(sum(svdvals(to_last(x, r, c)), {-1}), r, c, keepdim);
  throw ValueError("matrix_norm: ord must be \"fro\", \"nuc\", 1, -1, 2, -2, inf or -inf, got \"" + o + "\"");
}

Tensor matrix_norm(const Tensor& x, double ord, const std::vector<int64_t>& axes, bool keepdim) {
  const auto [r, c] = matrix_axes(x, axes, "matrix_norm");
  if (ord == 2 || ord == -2) {
    const Tensor s = svdvals(to_last(x, r, c));
    return restore(ord > 0 ? max(s, {-1}) : min(s, {-1}), r, c, keepdim);
  }
  if (std::abs(ord) != 1 && !std::isinf(ord))
    throw ValueError("matrix_norm: ord must be \"fro\", \"nuc\", 1, -1, 2, -2, inf or -inf, got " +
                     std::to_string(ord));
  // 1: the largest column sum of |x| (sum over rows); inf: the largest row sum.
  const int64_t summed = std::abs(ord) == 1 ? r : c, other = summed == r ? c : r;
  Tensor s = sum(abs(x), {summed}, true);
  Tensor m = ord > 0 ? max(s, {other}, true) : min(s, {other}, true);
  return keepdim ? m : squeeze(m, {r, c});
}

Tensor norm(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  if (axes.size() <= 1) return vector_norm(x, 2, axes, keepdim);
  if (axes.size() == 2) return matrix_norm(x, "fro", axes, keepdim);
  throw ValueError("norm: expected at most two axes, got " + std::to_string(axes.size()));
}

Tensor matrix_rank(const Tensor& a, double tol) {
  require_matrix(a, "matrix_rank");
  const Tensor s = svdvals(a);
  return count_above(s, eps_of(a.dtype()) * double(std::max(rows(a), cols(a))), tol);
}

Tensor pinv(const Tensor& a, double rcond) {
  require_matrix(a, "pinv");
  const int64_t m = rows(a), n = cols(a);
  if (std::min(m, n) == 0) {
    Shape s = a.shape();
    std::swap(s[s.size() - 2], s[s.size() - 1]);
    return zeros(s, a.dtype());
  }
  const SVD f = svd(a, false);
  const double thr = rcond >= 0 ? rcond : eps_of(a.dtype()) * double(std::max(m, n));
  const Tensor keep = greater(f.s, mul(max(f.s, {-1}, true), thr));
  const Tensor s_inv = where(keep, reciprocal(where(keep, f.s, 1.0)), 0.0);
  // pinv = V diag(1/s) U^T
  return matmul(transpose(f.vh), mul(unsqueeze(s_inv, -1), transpose(f.u)));
}

}  // namespace kiln::linalg
