// kiln (internal): CPU kernels of the op table's selection, window and
// matrix-structure rows (TopK, SearchSorted, MaxPool2d, AvgPool2d, Tril,
// Triu, Diag, NanToNum, Cross). The front end (tensor/ops_select.cpp, via
// the Data category's rule) has checked shapes, dtypes and attributes and
// allocated `out`; inputs may be any strided (also negative-stride) views.
#pragma once
#include <cstdint>
#include <vector>

#include "../../tensor/tensor.h"

namespace kiln::cpu {

/// out (int64, x's shape with k along `axis`) = the positions of the first k
/// of a stable sort of each line of x along `axis` (descending when
/// `largest`; NaN largest; equal keys, -0/+0 included, by lower position),
/// by selection (a bounded heap or nth_element), not a full sort.
void topk_into(const Tensor& out, const Tensor& x, int64_t k, int64_t axis, bool largest);

/// out (int64, values' shape) = insertion positions of values in seq (one
/// dtype; seq [n], or [..., n] with values [..., m]) by binary search in the
/// NaN-last order: the first i with !(seq[i] < v) (left) or v < seq[i] (right).
void searchsorted_into(const Tensor& out, const Tensor& seq, const Tensor& values, bool right);

/// out [N, C, OH, OW] = max over each window of x [N, C, H, W];
/// p = {kh, kw, sh, sw, ph, pw, dh, dw}. torch's rule: start from the
/// dtype's lowest value (-inf), take a tap when it is greater or NaN.
void max_pool2d_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& p);

/// out [N, C, OH, OW] (a float dtype) = the float64 sum of each window of x
/// in row-major order over the taps inside x, divided by the window's size
/// clipped to the padded input (count_include_pad) or by the number of taps
/// inside x; p = {kh, kw, sh, sw, ph, pw}.
void avg_pool2d_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& p, bool count_include_pad);

/// out = x where column - row <= k (lower) or >= k (upper) in the last two
/// axes, 0 elsewhere (the element's own bits are copied).
void triangle_into(const Tensor& out, const Tensor& x, int64_t k, bool lower);

/// 1-d x: out [n + |k|, n + |k|] zero but x on diagonal k; 2-d x: out [len]
/// = x[i - min(k, 0), i + max(k, 0)].
void diag_into(const Tensor& out, const Tensor& x, int64_t k);

/// Floats: NaN -> nan, +inf -> posinf, -inf -> neginf (converted to out's
/// dtype), other elements' bits kept; other dtypes: a copy.
void nan_to_num_into(const Tensor& out, const Tensor& x, double nan, double posinf, double neginf);

/// out = a x b along `axis` (normalized) of out's shape; a and b broadcast to
/// it and are converted to out's dtype first. Floats compute in
/// compute_t (float for 16-bit floats) with each product rounded (the file
/// is built with -ffp-contract=off); integers wrap.
void cross_into(const Tensor& out, const Tensor& a, const Tensor& b, int64_t axis);

}  // namespace kiln::cpu
