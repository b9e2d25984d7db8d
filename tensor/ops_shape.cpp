// kiln: the shape and indexing front end (tensor/ops.h): thin wrappers that
// fill an op's attributes and call apply(), plus the compositions of rows
// (flatten, transpose, stack, split, chunk, embedding). Going through apply()
// is what lets a graph context record these calls.
#include <string>
#include <utility>
#include <vector>

#include "creation.h"
#include "op_table.h"
#include "ops.h"

namespace kiln {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Attrs ints_attrs(std::vector<int64_t> ints, int64_t axis = 0) {
  Attrs a;
  a.ints = std::move(ints);
  a.axis = axis;
  return a;
}

// Python's slice.indices(n) for one bound: negative counts from the end,
// then clamped to [lo, hi] (lo = 0, hi = n for a positive step; lo = -1,
// hi = n - 1 for a negative one).
int64_t slice_bound(std::optional<int64_t> b, int64_t dflt, int64_t n, int64_t lo, int64_t hi) {
  if (!b) return dflt;
  int64_t v = *b;
  if (v < 0) v += n;  // v >= INT64_MIN and n >= 0: cannot overflow
  return v < lo ? lo : v > hi ? hi : v;
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) { return apply(OpId::Reshape, x, ints_attrs(shape)); }

Tensor flatten(const Tensor& x, int64_t start, int64_t end) {
  // A 0-d tensor flattens to one element, as in numpy and PyTorch.
  const int64_t nd = std::max<int64_t>(x.ndim(), 1);
  const int64_t s = normalize_axis(start, nd, "flatten"), e = normalize_axis(end, nd, "flatten");
  if (s > e)
    throw ValueError("flatten: start axis " + str(start) + " comes after end axis " + str(end) + " for a " +
                     str(x.ndim()) + "-d tensor");
  if (x.ndim() == 0) return reshape(x, {1});
  const Shape& xs = x.shape();
  Shape r(xs.begin(), xs.begin() + s);
  r.push_back(checked_numel(Shape(xs.begin() + s, xs.begin() + e + 1), "flatten"));
  r.insert(r.end(), xs.begin() + e + 1, xs.end());
  return reshape(x, r);
}

Tensor permute(const Tensor& x, const Axes& axes) { return apply(OpId::Permute, x, ints_attrs(axes)); }

Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  if (!x.defined()) throw ValueError("transpose: x is an undefined tensor");
  const int64_t nd = x.ndim();
  const int64_t i = normalize_axis(a, nd, "transpose"), j = normalize_axis(b, nd, "transpose");
  Axes perm(nd);
  for (int64_t k = 0; k < nd; ++k) perm[k] = k;
  std::swap(perm[i], perm[j]);
  return permute(x, perm);
}

Tensor squeeze(const Tensor& x, const Axes& axes) { return apply(OpId::Squeeze, x, ints_attrs(axes)); }

Tensor unsqueeze(const Tensor& x, int64_t axis) { return apply(OpId::Unsqueeze, x, ints_attrs({}, axis)); }

Tensor broadcast_to(const Tensor& x, const Shape& shape) { return apply(OpId::BroadcastTo, x, ints_attrs(shape)); }

Tensor slice(const Tensor& x, int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  if (step == 0) throw ValueError("slice: step cannot be zero");
  const int64_t ax = normalize_axis(axis, x.ndim(), "slice");
  const int64_t n = x.shape()[ax];
  const int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
  const int64_t b = slice_bound(start, step > 0 ? lo : hi, n, lo, hi);
  const int64_t e = slice_bound(stop, step > 0 ? hi : lo, n, lo, hi);
  return apply(OpId::Slice, x, ints_attrs({b, e, step}, ax));
}

Tensor select(const Tensor& x, int64_t axis, int64_t index) {
  return apply(OpId::Select, x, ints_attrs({index}, axis));
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) throw ValueError("concat: expected at least one tensor, got an empty list");
  return apply(OpId::Concat, std::span<const Tensor>(xs), ints_attrs({}, axis));
}

Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) throw ValueError("stack: expected at least one tensor, got an empty list");
  for (size_t i = 0; i < xs.size(); ++i)
    if (!xs[i].defined())
      throw ValueError("stack: input " + str(static_cast<int64_t>(i)) + " is an undefined tensor");
  for (size_t i = 1; i < xs.size(); ++i)
    if (xs[i].shape() != xs[0].shape())
      throw ShapeError("stack: input " + str(static_cast<int64_t>(i)) + " has shape " + shape_str(xs[i].shape()) +
                       " but input 0 has shape " + shape_str(xs[0].shape()) + " (all shapes must be equal)");
  const int64_t ax = normalize_axis(axis, xs[0].ndim() + 1, "stack");
  std::vector<Tensor> u;
  u.reserve(xs.size());
  for (const Tensor& x : xs) u.push_back(unsqueeze(x, ax));
  return concat(u, ax);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis) {
  const int64_t ax = normalize_axis(axis, x.ndim(), "split");
  const int64_t n = x.shape()[ax];
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw ValueError("split: sizes must be non-negative, got " + shape_str(sizes));
    if (__builtin_add_overflow(total, s, &total)) total = -1;  // cannot match any extent
    if (total < 0) break;
  }
  if (total != n)
    throw ValueError("split: sizes " + shape_str(sizes) + " do not sum to the extent " + str(n) + " of axis " +
                     str(ax) + " (shape " + shape_str(x.shape()) + ")");
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, ax, at, at + s, 1));
    at += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t axis) {
  const int64_t ax = normalize_axis(axis, x.ndim(), "split");
  const int64_t n = x.shape()[ax];
  // PyTorch: size 0 is only allowed for an empty axis (one empty piece).
  if (size < 0 || (size == 0 && n != 0))
    throw ValueError("split: split size must be positive, got " + str(size) + " for axis " + str(ax) +
                     " with extent " + str(n));
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < n; at += size) sizes.push_back(std::min(size, n - at));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, ax);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis) {
  if (chunks <= 0) throw ValueError("chunk: number of chunks must be positive, got " + str(chunks));
  const int64_t ax = normalize_axis(axis, x.ndim(), "chunk");
  const int64_t n = x.shape()[ax];
  // torch.chunk: pieces of ceil(n / chunks), so there may be fewer than
  // `chunks`; an empty axis gives `chunks` empty pieces.
  if (n == 0) return split(x, std::vector<int64_t>(chunks, 0), ax);
  return split(x, n / chunks + (n % chunks != 0), ax);
}

Tensor tile(const Tensor& x, const Axes& reps) { return apply(OpId::Tile, x, ints_attrs(reps)); }

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pads, Scalar value) {
  const int64_t nd = x.ndim();
  if (static_cast<int64_t>(pads.size()) > nd)
    throw ValueError("pad: got pads for " + str(static_cast<int64_t>(pads.size())) + " axes but the tensor has shape " +
                     shape_str(x.shape()));
  // Pads name the last pads.size() axes; leading axes get none.
  Attrs a;
  a.ints.assign(2 * (nd - pads.size()), 0);
  for (const auto& [before, after] : pads) {
    a.ints.push_back(before);
    a.ints.push_back(after);
  }
  check_scalar_fits(value, x.dtype(), "pad");
  // The fill value travels as a double attribute: an integer a double cannot
  // hold (beyond 2^53) pads with 0 and puts the exact value in with where.
  const bool exact_in_double = value.value >= -9223372036854775808.0 && value.value < 9223372036854775808.0 &&
                               static_cast<int64_t>(value.value) == value.int_value;
  if (value.kind == ScalarKind::integer && is_integral(x.dtype()) && !exact_in_double) {
    const Tensor border = pad(zeros(x.shape(), DType::bool_), pads, true);
    return where(border, value, pad(x, pads, 0));
  }
  a.scalar = value.value;
  return apply(OpId::Pad, x, a);
}

Tensor flip(const Tensor& x, const Axes& axes) { return apply(OpId::Flip, x, ints_attrs(axes)); }

Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) {
  return apply(OpId::Gather, x, index, ints_attrs({}, axis));
}

Tensor index_select(const Tensor& x, int64_t axis, const Tensor& indices) {
  return apply(OpId::IndexSelect, x, indices, ints_attrs({}, axis));
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  if (!weight.defined()) throw ValueError("embedding: weight is an undefined tensor");
  if (!ids.defined()) throw ValueError("embedding: ids is an undefined tensor");
  if (weight.ndim() != 2)
    throw ShapeError("embedding: weight must be 2-d [num_embeddings, dim], got shape " + shape_str(weight.shape()));
  if (ids.dtype() != DType::int32 && ids.dtype() != DType::int64)
    throw DTypeError("embedding: ids must be int32 or int64, got " + std::string(name(ids.dtype())));
  Shape r = ids.shape();
  r.push_back(weight.shape()[1]);
  // index_select's row with attrs.scalar 2: its check (ops_data.cpp) refuses
  // ids outside [0, num_embeddings), negative ones included, and names
  // embedding, eagerly and when a compiled function runs the node.
  Attrs a = ints_attrs({}, 0);
  a.scalar = 2.0;
  return reshape(apply(OpId::IndexSelect, weight, flatten(ids), a), r);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes, DType dtype) {
  Attrs a;
  a.axis = num_classes;
  a.dtype = dtype;
  return apply(OpId::OneHot, indices, a);
}

Tensor Tensor::reshape(const Shape& shape) const { return kiln::reshape(*this, shape); }
Tensor Tensor::permute(const std::vector<int64_t>& axes) const { return kiln::permute(*this, axes); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return kiln::transpose(*this, a, b); }

}  // namespace kiln
