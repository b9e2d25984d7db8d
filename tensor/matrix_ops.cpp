// The compositions of tensor/matrix_ops.h. Each is built from op-table rows
// only, so a traced function records them as ordinary nodes.
#include "matrix_ops.h"

#include <algorithm>
#include <cfloat>
#include <string>

#include "creation.h"
#include "error.h"
#include "ops.h"

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

void require_ndim(const Tensor& x, int64_t want, const char* op) {
  if (x.ndim() != want)
    throw ShapeError(std::string(op) + ": expected a " + str(want) + "-d tensor, got shape " + shape_str(x.shape()));
}

/// A 0-d zero of x's dtype (a tensor, so where() keeps x's dtype, bool included).
Tensor zero_of(const Tensor& x) { return zeros({}, x.dtype()); }

/// mask[i][j] = (j - i) <= k (lower) or >= k (upper), shape [rows, cols].
Tensor triangle_mask(int64_t rows, int64_t cols, int64_t k, bool lower) {
  Tensor i = reshape(arange(rows), {rows, 1});
  Tensor j = reshape(arange(cols), {1, cols});
  Tensor d = j - i;  // int64 [rows, cols]
  return lower ? less_equal(d, full({}, k, DType::int64)) : greater_equal(d, full({}, k, DType::int64));
}

Tensor triangle(const Tensor& x, int64_t k, bool lower, const char* op) {
  if (x.ndim() < 2) throw ShapeError(std::string(op) + ": expected at least 2 axes, got shape " + shape_str(x.shape()));
  const int64_t rows = x.shape()[x.ndim() - 2], cols = x.shape()[x.ndim() - 1];
  return where(triangle_mask(rows, cols, k, lower), x, zero_of(x));
}

double largest_finite(DType d) {
  switch (d) {
    case DType::float16: return 65504.0;
    case DType::bfloat16: return 3.3895313892515355e38;
    case DType::float32: return FLT_MAX;
    default: return DBL_MAX;
  }
}

}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return triangle(x, k, true, "tril"); }
Tensor triu(const Tensor& x, int64_t k) { return triangle(x, k, false, "triu"); }

Tensor diagonal(const Tensor& x, int64_t k) {
  require_ndim(x, 2, "diagonal");
  const int64_t n = x.shape()[0], m = x.shape()[1];
  const int64_t len = std::max<int64_t>(0, k >= 0 ? std::min(n, m - k) : std::min(n + k, m));
  if (len == 0) return slice(reshape(x, {-1}), 0, 0, 0);
  // Element (i, i + k) of the row-major flattening sits at start + i (m + 1).
  const int64_t start = k >= 0 ? k : -k * m;
  return slice(reshape(x, {n * m}), 0, start, start + (len - 1) * (m + 1) + 1, m + 1);
}

Tensor diag(const Tensor& x, int64_t k) {
  if (x.ndim() == 2) return diagonal(x, k);
  if (x.ndim() != 1)
    throw ShapeError("diag: expected a 1-d or 2-d tensor, got shape " + shape_str(x.shape()));
  const int64_t len = x.shape()[0];
  if (k <= -(int64_t(1) << 40) || k >= (int64_t(1) << 40))
    throw ValueError("diag: diagonal " + str(k) + " gives a matrix too large to allocate (" + str(len) + " + |k| rows)");
  const int64_t a = k >= 0 ? k : -k, n = len + a;
  // Row i of the result holds x[i] at column i + k (k >= 0); column j holds
  // x[j] at row j - k (k < 0). Pad x to n and broadcast it along the other axis.
  Tensor padded = pad(x, {{0, a}}, 0);
  Tensor along = k >= 0 ? reshape(padded, {n, 1}) : reshape(padded, {1, n});
  Tensor i = reshape(arange(n), {n, 1}), j = reshape(arange(n), {1, n});
  return where(equal(j - i, full({}, k, DType::int64)), along, zero_of(x));
}

Tensor trace(const Tensor& x, int64_t k) {
  require_ndim(x, 2, "trace");
  return sum(diagonal(x, k));
}

Tensor outer(const Tensor& a, const Tensor& b) { return mul(reshape(a, {-1, 1}), reshape(b, {1, -1})); }

Tensor cross(const Tensor& a, const Tensor& b, int64_t axis) {
  const int64_t aa = normalize_axis(axis, a.ndim(), "cross"), ba = normalize_axis(axis, b.ndim(), "cross");
  if (a.shape()[aa] != 3 || b.shape()[ba] != 3)
    throw ShapeError("cross: both operands need extent 3 along axis " + str(axis) + ", got shapes " +
                     shape_str(a.shape()) + " and " + shape_str(b.shape()));
  auto c = [&](const Tensor& t, int64_t ax, int64_t i) { return select(t, ax, i); };
  Tensor x = c(a, aa, 1) * c(b, ba, 2) - c(a, aa, 2) * c(b, ba, 1);
  Tensor y = c(a, aa, 2) * c(b, ba, 0) - c(a, aa, 0) * c(b, ba, 2);
  Tensor z = c(a, aa, 0) * c(b, ba, 1) - c(a, aa, 1) * c(b, ba, 0);
  // The result axis sits where a's axis was (numpy's default axisc = -1
  // when axis = -1).
  return stack({x, y, z}, normalize_axis(axis, x.ndim() + 1, "cross"));
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, std::string_view indexing) {
  if (indexing != "xy" && indexing != "ij")
    throw ValueError("meshgrid: indexing must be \"xy\" or \"ij\", got \"" + std::string(indexing) + "\"");
  const size_t nd = xs.size();
  Shape grid(nd);
  for (size_t i = 0; i < nd; ++i) {
    if (xs[i].ndim() != 1)
      throw ShapeError("meshgrid: input " + str(int64_t(i)) + " must be 1-d, got shape " + shape_str(xs[i].shape()));
    grid[i] = xs[i].shape()[0];
  }
  const bool xy = indexing == "xy" && nd >= 2;
  if (xy) std::swap(grid[0], grid[1]);
  std::vector<Tensor> out;
  for (size_t i = 0; i < nd; ++i) {
    const size_t at = xy && i < 2 ? 1 - i : i;  // the grid axis input i varies along
    Shape s(nd, 1);
    s[at] = grid[at];
    Axes reps(grid.begin(), grid.end());
    reps[at] = 1;
    out.push_back(tile(reshape(xs[i], s), reps));  // a copy, as numpy's default
  }
  return out;
}

Tensor diff(const Tensor& x, int64_t n, int64_t axis) {
  const int64_t ax = normalize_axis(axis, x.ndim(), "diff");
  const int64_t len = x.shape()[ax];
  if (n < 0 || n > std::max<int64_t>(len, 0))
    throw ValueError("diff: order n must be in [0, " + str(len) + "] (the extent of axis " + str(axis) + "), got " +
                     str(n));
  Tensor r = x;
  for (int64_t i = 0; i < n; ++i) {
    Tensor hi = slice(r, ax, 1, std::nullopt), lo = slice(r, ax, 0, -1);
    r = r.dtype() == DType::bool_ ? logical_xor(hi, lo) : hi - lo;
  }
  return r;
}

Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf, std::optional<double> neginf) {
  if (!is_floating(x.dtype())) return x;
  const double big = largest_finite(x.dtype());
  Tensor r = where(isnan(x), full({}, nan, x.dtype()), x);
  Tensor inf = isinf(x);
  r = where(logical_and(inf, greater(x, full({}, 0.0, x.dtype()))), full({}, posinf.value_or(big), x.dtype()), r);
  return where(logical_and(inf, less(x, full({}, 0.0, x.dtype()))), full({}, neginf.value_or(-big), x.dtype()), r);
}

Tensor clip(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) { return clamp(x, lo, hi); }

}  // namespace kiln
