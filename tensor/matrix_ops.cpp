// The compositions of tensor/matrix_ops.h. Each is built from op-table rows
// only, so a traced function records them as ordinary nodes (tril, triu,
// diag, cross and nan_to_num are rows themselves: ops_select.cpp).
#include "matrix_ops.h"

#include <algorithm>
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

}  // namespace

Tensor diagonal(const Tensor& x, int64_t k) {
  require_ndim(x, 2, "diagonal");
  const int64_t n = x.shape()[0], m = x.shape()[1];
  const int64_t len = std::max<int64_t>(0, k >= 0 ? std::min(n, m - k) : std::min(n + k, m));
  if (len == 0) return slice(reshape(x, {-1}), 0, 0, 0);
  // Element (i, i + k) of the row-major flattening sits at start + i (m + 1).
  const int64_t start = k >= 0 ? k : -k * m;
  return slice(reshape(x, {n * m}), 0, start, start + (len - 1) * (m + 1) + 1, m + 1);
}

Tensor trace(const Tensor& x, int64_t k) {
  require_ndim(x, 2, "trace");
  return sum(diagonal(x, k));
}

Tensor outer(const Tensor& a, const Tensor& b) { return mul(reshape(a, {-1, 1}), reshape(b, {1, -1})); }

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

Tensor clip(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) { return clamp(x, lo, hi); }

}  // namespace kiln
