// kiln: sorting along an axis: sort, argsort, topk.
#pragma once
#include <cstdint>

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
/// order). values and indices have x's shape with extent k along `axis`.
struct TopK {
  Tensor values;
  Tensor indices;
};
/// Throws ValueError unless 0 <= k <= the axis' extent.
TopK topk(const Tensor& x, int64_t k, int64_t axis = -1, bool largest = true);

}  // namespace kiln
