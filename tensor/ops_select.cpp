// kiln: the selection, window and matrix-structure rows of the op table
// (TopK, SearchSorted, MaxPool2d, AvgPool2d, Tril, Triu, Diag, NanToNum,
// Cross): their shape rule (called from the Data category's rule in
// ops_data.cpp) and their public functions. The CPU kernels are in
// backends/cpu/select_kernels.cpp and backends/cpu/pool_kernels.cpp; the
// float64 references in ref_ops.cpp (ref_select_row).
#include "ops_select.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <limits>
#include <string>

#include "einsum.h"
#include "error.h"
#include "matrix_ops.h"
#include "ops.h"
#include "sorting.h"

namespace kiln {

namespace detail {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Shape topk_shape(const Shape& s, const Attrs& a) {
  if (s.empty()) throw IndexError("topk: a 0-d tensor has no axis " + str(a.axis));
  const int64_t ax = normalize_axis(a.axis, static_cast<int64_t>(s.size()), "topk");
  if (a.ints.size() != 1) throw ValueError("topk: attrs.ints must be {k}, got " + str(int64_t(a.ints.size())) + " entries");
  const int64_t k = a.ints[0], n = s[ax];
  if (k < 0 || k > n)
    throw ValueError("topk: k must be in [0, " + str(n) + "] (the extent of axis " + str(a.axis) + " of shape " +
                     shape_str(s) + "), got " + str(k));
  Shape r = s;
  r[ax] = k;
  return r;
}

Shape searchsorted_shape(std::span<const DType> dt, const Shape& seq, const Shape& v) {
  if (dt[0] != dt[1])
    throw DTypeError("searchsorted: sorted_sequence and values must have one dtype, got " + std::string(name(dt[0])) +
                     " and " + std::string(name(dt[1])) + " (searchsorted() promotes them first)");
  if (seq.empty()) throw ShapeError("searchsorted: sorted_sequence must have at least 1 axis, got a 0-d tensor");
  if (seq.size() > 1) {
    bool ok = v.size() == seq.size();
    for (size_t d = 0; ok && d + 1 < seq.size(); ++d) ok = v[d] == seq[d];
    if (!ok)
      throw ShapeError("searchsorted: sorted_sequence of shape " + shape_str(seq) + " needs values with its leading "
                       "extents " + shape_str(Shape(seq.begin(), seq.end() - 1)) + " and any last extent (or a 1-d "
                       "sorted_sequence), got values of shape " + shape_str(v));
  }
  return v;
}

// {kernel h, w, stride h, w, padding h, w[, dilation h, w]}: the pools' rule.
Shape pool_shape(OpId op, const Shape& s, const Attrs& a) {
  const std::string p = op_prefix(op);
  const bool max = op == OpId::MaxPool2d;
  const size_t want = max ? 8 : 6;
  if (a.ints.size() != want)
    throw ValueError(p + "attrs.ints must be {kernel h, w, stride h, w, padding h, w" +
                     std::string(max ? ", dilation h, w}" : "}") + ", got " + str(int64_t(a.ints.size())) + " entries");
  if (s.size() != 4) throw ShapeError(p + "x must be 4-d [N, C, H, W], got shape " + shape_str(s));
  const int64_t k[2] = {a.ints[0], a.ints[1]}, st[2] = {a.ints[2], a.ints[3]}, pd[2] = {a.ints[4], a.ints[5]};
  const int64_t dl[2] = {max ? a.ints[6] : 1, max ? a.ints[7] : 1};
  auto pair = [](const int64_t* v) { return "[" + str(v[0]) + ", " + str(v[1]) + "]"; };
  Shape r{s[0], s[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (k[i] <= 0) throw ValueError(p + "kernel must be positive, got " + pair(k));
    if (st[i] <= 0) throw ValueError(p + "stride must be positive, got " + pair(st));
    if (dl[i] <= 0) throw ValueError(p + "dilation must be positive, got " + pair(dl));
    if (pd[i] < 0) throw ValueError(p + "padding must not be negative, got " + pair(pd));
    // torch's rule: padding at most half the kernel, so no window is all padding.
    if (pd[i] > k[i] / 2)
      throw ValueError(p + "padding must be at most half the kernel, got padding " + pair(pd) + " for kernel " + pair(k));
    int64_t padded = 0, span = 0;
    if (__builtin_add_overflow(s[2 + i], 2 * pd[i], &padded))
      throw ShapeError(p + "the padded input's " + std::string(i ? "width" : "height") + " (" + str(s[2 + i]) +
                       " + 2 x " + str(pd[i]) + ") exceeds 2^63 - 1");
    if (__builtin_mul_overflow(dl[i], k[i] - 1, &span) || span == std::numeric_limits<int64_t>::max())
      throw ShapeError(p + "the kernel's span (dilation " + pair(dl) + " x (kernel " + pair(k) +
                       " - 1) + 1) exceeds 2^63 - 1");
    span += 1;
    if (span > padded)
      throw ShapeError(p + "the kernel spans " + str(span) + " along " + std::string(i ? "W" : "H") +
                       " but the padded input is " + str(padded) + " (x shape " + shape_str(s) + ", kernel " +
                       pair(k) + ", padding " + pair(pd) + (max ? ", dilation " + pair(dl) : std::string()) + ")");
    r[2 + i] = (padded - span) / st[i] + 1;  // floor mode
  }
  return r;
}

Shape diag_shape(const Shape& s, int64_t k) {
  if (s.size() == 1) {
    if (k <= -(int64_t(1) << 40) || k >= (int64_t(1) << 40))
      throw ValueError("diag: diagonal k = " + str(k) + " gives a matrix too large to allocate (" + str(s[0]) +
                       " + |k| rows)");
    const int64_t n = s[0] + (k >= 0 ? k : -k);
    return {n, n};
  }
  if (s.size() == 2) {
    const int64_t r = s[0], c = s[1];
    // (i, i + k) inside: 0 <= i < r and 0 <= i + k < c
    int64_t len = 0;
    if (k >= 0) len = k >= c ? 0 : std::min(r, c - k);
    else len = -k >= r ? 0 : std::min(r + k, c);
    return {std::max<int64_t>(len, 0)};
  }
  throw ShapeError("diag: x must be 1-d (a diagonal to place) or 2-d (a matrix to read), got shape " + shape_str(s));
}

Shape cross_shape(const Shape& a, const Shape& b, const Attrs& at) {
  const Shape r = broadcast_shapes(a, b, "cross");
  const int64_t nd = static_cast<int64_t>(r.size());
  if (nd == 0) throw IndexError("cross: 0-d operands have no axis " + str(at.axis));
  const int64_t ax = normalize_axis(at.axis, nd, "cross");
  const Shape* ops[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    const Shape& s = *ops[i];
    const int64_t d = ax - (nd - static_cast<int64_t>(s.size()));  // the operand's own axis (right-aligned)
    if (d < 0 || s[d] != 3)
      throw ShapeError(std::string("cross: ") + (i == 0 ? "a" : "b") + " of shape " + shape_str(s) +
                       " needs extent 3 along axis " + str(at.axis) + " of the broadcast shape " + shape_str(r) +
                       " (a and b have shapes " + shape_str(a) + " and " + shape_str(b) + ")");
  }
  return r;
}

}  // namespace

bool is_select_row(OpId op) {
  switch (op) {
    case OpId::TopK:
    case OpId::SearchSorted:
    case OpId::MaxPool2d:
    case OpId::AvgPool2d:
    case OpId::Tril:
    case OpId::Triu:
    case OpId::Diag:
    case OpId::NanToNum:
    case OpId::Cross: return true;
    default: return false;
  }
}

Shape select_row_shape(OpId op, std::span<const DType> dt, std::span<const Shape* const> in, const Attrs& a) {
  const Shape& s = *in[0];
  switch (op) {
    case OpId::TopK: return topk_shape(s, a);
    case OpId::SearchSorted: return searchsorted_shape(dt, s, *in[1]);
    case OpId::AvgPool2d:
      if (!is_floating(dt[0]))
        throw DTypeError("avg_pool2d: x must have a float dtype (float16, bfloat16, float32, float64), got " +
                         std::string(name(dt[0])) + " (cast it first)");
      return pool_shape(op, s, a);
    case OpId::MaxPool2d: return pool_shape(op, s, a);
    case OpId::Tril:
    case OpId::Triu:
      if (s.size() < 2)
        throw ShapeError(op_prefix(op) + "x must have at least 2 axes (a matrix or a batch of them), got shape " +
                         shape_str(s));
      return s;
    case OpId::Diag: return diag_shape(s, a.axis);
    case OpId::NanToNum:
      if (a.ints.size() != 2)
        throw ValueError("nan_to_num: attrs.ints must be {bits of posinf, bits of neginf}, got " +
                         str(int64_t(a.ints.size())) + " entries");
      return s;
    case OpId::Cross: return cross_shape(s, *in[1], a);
    default: throw ValueError(op_prefix(op) + "is not a selection row");
  }
}

}  // namespace detail

// ---- public functions ----------------------------------------------------------------

TopK topk(const Tensor& x, int64_t k, int64_t axis, bool largest) {
  Attrs a;
  a.axis = axis;
  a.ints = {k};
  a.flag = largest;
  Tensor idx = apply(OpId::TopK, x, a);  // checks x, axis and k
  return {gather(x, axis, idx), idx};    // the elements' own bits
}

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right) {
  if (!sorted_sequence.defined() || !values.defined())
    throw ValueError("searchsorted: sorted_sequence and values must be defined tensors");
  const DType d = promote_types(sorted_sequence.dtype(), values.dtype());
  Attrs a;
  a.flag = right;
  const Tensor s = sorted_sequence.dtype() == d ? sorted_sequence : cast(sorted_sequence, d);
  const Tensor v = values.dtype() == d ? values : cast(values, d);
  return apply(OpId::SearchSorted, s, v, a);
}

namespace {
Attrs k_attrs(int64_t k) {
  Attrs a;
  a.axis = k;
  return a;
}

double largest_finite(DType d) {
  switch (d) {
    case DType::float16: return 65504.0;
    case DType::bfloat16: return 3.3895313892515355e38;
    case DType::float32: return FLT_MAX;
    default: return DBL_MAX;
  }
}

std::array<int64_t, 2> pair_of(const std::vector<int64_t>& v, const char* op, const char* what) {
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  throw ValueError(std::string(op) + ": " + what + " must have 1 or 2 values ({h, w}), got " +
                   std::to_string(v.size()));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return apply(OpId::Tril, x, k_attrs(k)); }
Tensor triu(const Tensor& x, int64_t k) { return apply(OpId::Triu, x, k_attrs(k)); }
Tensor diag(const Tensor& x, int64_t k) { return apply(OpId::Diag, x, k_attrs(k)); }

Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf, std::optional<double> neginf) {
  if (!x.defined()) throw ValueError("nan_to_num: x is an undefined tensor");
  const double big = is_floating(x.dtype()) ? largest_finite(x.dtype()) : 0.0;
  Attrs a;
  a.scalar = nan;
  a.ints = {std::bit_cast<int64_t>(posinf.value_or(big)), std::bit_cast<int64_t>(neginf.value_or(-big))};
  return apply(OpId::NanToNum, x, a);
}

Tensor cross(const Tensor& a, const Tensor& b, int64_t axis) { return apply(OpId::Cross, a, b, k_attrs(axis)); }

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, std::vector<int64_t> dilation) {
  const auto k = pair_of(kernel, "max_pool2d", "kernel");
  const auto s = stride.empty() ? k : pair_of(stride, "max_pool2d", "stride");
  const auto p = pair_of(padding, "max_pool2d", "padding"), d = pair_of(dilation, "max_pool2d", "dilation");
  Attrs a;
  a.ints = {k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1]};
  return apply(OpId::MaxPool2d, x, a);
}

Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool count_include_pad) {
  const auto k = pair_of(kernel, "avg_pool2d", "kernel");
  const auto s = stride.empty() ? k : pair_of(stride, "avg_pool2d", "stride");
  const auto p = pair_of(padding, "avg_pool2d", "padding");
  Attrs a;
  a.ints = {k[0], k[1], s[0], s[1], p[0], p[1]};
  a.flag = count_include_pad;
  return apply(OpId::AvgPool2d, x, a);
}

}  // namespace kiln
