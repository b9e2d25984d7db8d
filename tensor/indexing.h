// kiln: numpy indexing, `x[i]`, `x.index({Slice(1, None, 2), 0, None,
// Ellipsis, mask, idx})`, and writes through it (`x.index({...}).assign(v)`,
// `x.index_put_({...}, v)`).
//
// The rules (numpy's, https://numpy.org/doc/stable/user/basics.indexing.html):
// - Basic indices give a view sharing x's storage: an integer i (negative
//   counts from the end) removes its axis; Slice(start, stop, step) keeps it
//   (Python's clamping; negative steps walk backwards; step 0 is a
//   ValueError); None inserts an axis of extent 1; Ellipsis stands for as
//   many full slices as needed (at most one). Fewer indices than axes leave
//   the last axes whole.
// - Advanced indices give a copy: an int32/int64 tensor picks entries along
//   its axis (negative from the end); a bool tensor of k dims selects the
//   entries where it is true over the k axes it covers (it is replaced by
//   the k integer tensors of nonzero(mask), so it runs eagerly only: the
//   result's shape depends on the data). The index tensors broadcast against
//   each other to a shape B; the result holds B's axes in place of the
//   indexed axes when those are next to each other, else in front. Integers
//   mixed with index tensors count as 0-d index tensors (numpy's rule).
// - Errors: an integer out of range is an IndexError naming the axis and its
//   extent ("index 5 is out of range for axis 0 with extent 3 (expected -3 <= index < 3)"), so is an index
//   tensor's entry, too many indices, a second Ellipsis, a bool mask whose
//   extents differ from the axes it covers, or a float index tensor; index
//   tensors that do not broadcast are a ShapeError.
// - Writes: the value broadcasts to the indexed shape (ShapeError) and is
//   cast to x's dtype with same_kind casting (DTypeError otherwise); the
//   write lands in x's memory (a view of x writes through to its base).
//   With advanced indices a repeated position keeps the value written last
//   in row-major order of the index result (numpy). Traced (jit, compile,
//   lazy), a write into a traced tensor is recorded as one scatter into the
//   whole tensor, for basic and advanced indices alike (`y[0] = v` compiles);
//   a write through a view of a traced tensor (`y.index({Slice(1, None)})`
//   indexed again, `y[0][1] = v`) lands in the view's base, as eagerly
//   (tensor/mutation.h).
// - Errors of a compiled function: an index tensor's entry out of range
//   names the axis of x it indexes, as eagerly (the check runs when the
//   compiled function is called), and names index_put_ for a write.
#pragma once
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "tensor.h"

namespace kiln {

/// numpy's None/newaxis in an index list, and an absent Slice bound.
inline constexpr std::nullopt_t None = std::nullopt;

/// numpy's `...` in an index list.
struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};

/// Python's start:stop:step. Absent bounds are the whole extent in the
/// step's direction; step defaults to 1.
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start(start), stop(stop), step(step.value_or(1)) {}
};

/// One entry of an index list: an integer, Slice, None, Ellipsis or an
/// int32/int64/bool tensor.
class TensorIndex {
 public:
  enum class Kind : uint8_t { integer, slice, none, ellipsis, tensor };
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  TensorIndex(I i) : kind_(Kind::integer), integer_(static_cast<int64_t>(i)) {}
  TensorIndex(Slice s) : kind_(Kind::slice), slice_(s) {}
  TensorIndex(std::nullopt_t) : kind_(Kind::none) {}
  TensorIndex(EllipsisIndex) : kind_(Kind::ellipsis) {}
  TensorIndex(Tensor t) : kind_(Kind::tensor), tensor_(std::move(t)) {}

  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

/// The result of `x[i]` and `x.index({...})`: a Tensor (a view of x for
/// basic indices, a copy with advanced ones) that remembers x and the
/// indices, so that assignment to it writes into x in both cases, as
/// numpy's and PyTorch's `x[...] = v` and `x[...] += v` do:
///
///   x[0] = v;  x.index({Slice(), idx}) = 0.0;  x.index({mask}) += 1.0;
///
/// In-place *methods* (`add_`, `copy_`, `fill_`, `exp_`, ...) act on this
/// tensor, as they do on the result of `x[...]` in numpy, PyTorch and
/// LibTorch: through basic indices (a view) they write into x, after
/// advanced indices they change only the copy (`x.index({mask}).add_(1)`
/// leaves x as it was). A named IndexedTensor keeps rebinding on
/// assignment (`auto r = x[0]; r = y;` changes r, not x).
class IndexedTensor : public Tensor {
 public:
  IndexedTensor(Tensor result, Tensor base, std::vector<TensorIndex> indices)
      : Tensor(std::move(result)), base_(std::move(base)), indices_(std::move(indices)) {}
  /// t as an IndexedTensor of itself (no indices): writes land in t.
  static IndexedTensor whole(const Tensor& t) { return IndexedTensor(t, t, {}); }
  IndexedTensor(const IndexedTensor&) = default;
  IndexedTensor(IndexedTensor&&) noexcept = default;
  IndexedTensor& operator=(const IndexedTensor&) & = default;
  IndexedTensor& operator=(IndexedTensor&&) & noexcept = default;
  /// A named IndexedTensor rebinds: it becomes whole(v) (nothing is written).
  IndexedTensor& operator=(const Tensor& v) & { return *this = whole(v); }
  /// `x[...] = v`: assign(v).
  const Tensor& operator=(const Tensor& v) && { return assign(v); }
  const Tensor& operator=(const IndexedTensor& v) && { return assign(v); }
  const Tensor& operator=(Scalar v) && { return assign(v); }

  /// x[indices] = v (the rules above); returns x. This handle keeps the
  /// value it had (with advanced indices it is a copy taken before the write).
  const Tensor& assign(const Tensor& v) const;
  const Tensor& assign(Scalar v) const;
  /// The tensor indexed (x) and the indices.
  const Tensor& base() const { return base_; }
  const std::vector<TensorIndex>& indices() const { return indices_; }

 private:
  Tensor base_;
  std::vector<TensorIndex> indices_;
};

/// `x[...] op= v` on the temporary x[...]: x[...] = x[...] op v, written
/// into x (numpy's and PyTorch's `x[mask] += 1`; a position indexed twice is
/// updated once, by the last write). Returns x. On a named IndexedTensor
/// (`auto t = x.index({mask}); t += 1;`) op= is the tensor's own in-place
/// op, as `t += 1` on numpy's `t = x[mask]` (a copy) is.
const Tensor& operator+=(IndexedTensor&& a, const Tensor& b);
const Tensor& operator-=(IndexedTensor&& a, const Tensor& b);
const Tensor& operator*=(IndexedTensor&& a, const Tensor& b);
const Tensor& operator/=(IndexedTensor&& a, const Tensor& b);
const Tensor& operator+=(IndexedTensor&& a, Scalar b);
const Tensor& operator-=(IndexedTensor&& a, Scalar b);
const Tensor& operator*=(IndexedTensor&& a, Scalar b);
const Tensor& operator/=(IndexedTensor&& a, Scalar b);

/// x[indices] as a free function (same as x.index(indices)).
Tensor index(const Tensor& x, const std::vector<TensorIndex>& indices);
/// x[indices] = values in place (same as x.index_put_(indices, values)).
const Tensor& index_put_(const Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& values);

}  // namespace kiln
