// kiln: matrix and array helpers that numpy and PyTorch users reach for,
// op-table rows or composed from them (so they trace and compile like any op):
// tril/triu, diag/diagonal, trace, outer, cross, meshgrid, diff, nan_to_num,
// clip.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "scalar.h"
#include "tensor.h"

namespace kiln {

/// The lower (tril) / upper (triu) triangle of the last two axes of x (at
/// least 2-d, ShapeError otherwise): elements with column - row > k (tril)
/// or < k (triu) become 0 (false for bool). k = 0 is the main diagonal, k > 0
/// above it. Keeps x's dtype (every dtype) and shape. The op table's Tril /
/// Triu rows (attrs.axis = k).
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);

/// numpy.diagonal of a 2-d x: the elements (i, i + k), a 1-d tensor of
/// length max(0, min(rows, cols - k)) for k >= 0 (min(rows + k, cols) for
/// k < 0). ShapeError unless x is 2-d.
Tensor diagonal(const Tensor& x, int64_t k = 0);
/// numpy.diag: a 1-d x [n] becomes the 2-d square matrix [n + |k|, n + |k|]
/// with x on diagonal k and zeros elsewhere; a 2-d x gives its diagonal k
/// as a new 1-d tensor (a copy, unlike diagonal()'s view). x's dtype (every
/// dtype). The op table's Diag row (attrs.axis = k). ShapeError for other
/// ranks, ValueError for |k| >= 2^40 with a 1-d x.
Tensor diag(const Tensor& x, int64_t k = 0);
/// Sum of diagonal k of a 2-d x (integer/bool sum in int64, as sum).
Tensor trace(const Tensor& x, int64_t k = 0);

/// a[i] * b[j] over the flattened a and b: shape [a.numel(), b.numel()].
Tensor outer(const Tensor& a, const Tensor& b);
/// Cross product of 3-vectors along `axis` of the broadcast shape of a and
/// b (the other axes broadcast; both need extent 3 there, ShapeError
/// otherwise; IndexError for an axis outside it). Dtypes promote as mul/sub
/// (bool refused with DTypeError); integers wrap. Each component is
/// a[i] * b[j] - a[j] * b[i] with both products rounded to the compute dtype
/// (float32 for float16/bfloat16) and no fused multiply-add. The op table's
/// Cross row (attrs.axis).
Tensor cross(const Tensor& a, const Tensor& b, int64_t axis = -1);

/// numpy.meshgrid of 1-d tensors (every input 1-d, ShapeError otherwise):
/// indexing "xy" (numpy's default: the first two output axes swapped) or
/// "ij"; each result is a copy of the full grid's shape.
std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, std::string_view indexing = "xy");

/// n-th forward difference along `axis`: x[1:] - x[:-1] applied n times
/// (numpy.diff; bool inputs use logical_xor as numpy does). n >= 0 and at
/// most the extent (ValueError otherwise).
Tensor diff(const Tensor& x, int64_t n = 1, int64_t axis = -1);

/// NaN -> nan, +inf -> posinf, -inf -> neginf (defaults: the dtype's largest
/// and lowest finite values; replacements are rounded to x's dtype), for
/// floating x; other dtypes give a copy of x (numpy.nan_to_num). The op
/// table's NanToNum row (attrs.scalar = nan, attrs.ints = the bits of posinf
/// and neginf).
Tensor nan_to_num(const Tensor& x, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);

/// Alias of clamp (numpy.clip).
Tensor clip(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi);

}  // namespace kiln
