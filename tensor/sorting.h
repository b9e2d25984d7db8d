// kiln: sorting along an axis: sort, argsort, topk, searchsorted, unique.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor.h"

namespace kiln {

/// Sorts along `axis` (stable: equal elements keep their order, also when
/// `descending`). NaN sorts above +inf, as numpy's order: last ascending,
/// first descending. The result has x's dtype and shape. A 0-d x has no
/// axis (IndexError).
Tensor sort(const Tensor& x, int64_t axis = -1, bool descending = false);
/// The int64 positions that sort `x` along `axis` (same order as sort):
/// gather(x, axis, argsort(x, axis)) == sort(x, axis).
Tensor argsort(const Tensor& x, int64_t axis = -1, bool descending = false);

/// The k largest (or smallest) elements along `axis`, sorted, and their
/// int64 positions; ties keep the lower position first (torch.topk's sorted
/// order), NaN counts as the largest value (first when `largest`, last
/// otherwise). values and indices have x's shape with extent k along `axis`;
/// values have x's dtype (every dtype). The op table's TopK row gives the
/// indices (a selection per line, not a sort), values = gather(x, axis,
/// indices).
struct TopK {
  Tensor values;
  Tensor indices;
};
/// Throws ValueError unless 0 <= k <= the axis' extent, IndexError for a
/// 0-d x or an axis outside [-ndim, ndim).
TopK topk(const Tensor& x, int64_t k, int64_t axis = -1, bool largest = true);

/// Insertion positions of `values` in `sorted_sequence` (ascending along its
/// last axis; numpy.searchsorted / torch.searchsorted): the first position
/// whose element is not below the value (`right`: not at or below it), by
/// binary search in the order where NaN sorts last. sorted_sequence is 1-d
/// [n] (values of any shape) or [..., n] with values [..., m] of the same
/// leading extents (one sequence per row). The operands are promoted to one
/// dtype first. int64, values' shape. The op table's SearchSorted row.
/// Throws ShapeError for a 0-d sequence or leading extents that differ.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right = false);

// The results below have shapes that depend on the data: they run eagerly
// and raise RealizationError inside jit/compile/stage (no graph can hold them).

/// numpy.unique of the flattened x: the sorted distinct values, and for
/// each the index of its first occurrence is not kept; `inverse` maps every
/// element of x (x's shape) to its value's position, `counts` gives how
/// often each value occurs (both int64). NaNs count as one value (numpy 2's
/// equal_nan=True), sorted last.
struct Unique {
  Tensor values;
  Tensor inverse;
  Tensor counts;
};
Unique unique(const Tensor& x);
/// numpy.nonzero: one int64 tensor per axis with the coordinates of the
/// nonzero (true, NaN included) elements in row-major order.
std::vector<Tensor> nonzero(const Tensor& x);
/// numpy.argwhere: the same coordinates as one int64 [count, ndim] tensor.
Tensor argwhere(const Tensor& x);

}  // namespace kiln
