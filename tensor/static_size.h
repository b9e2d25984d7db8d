// kiln: nonzero and unique with a fixed result size, so they trace and
// compile (JAX's `size=` / `fill_value=` arguments of jnp.nonzero and
// jnp.unique). nonzero() and unique() (tensor/sorting.h) return as many
// entries as the data holds, a shape no graph can know in advance: inside
// jit/compile/stage they raise RealizationError naming the op. These
// variants always return `size` entries: the first ones found, then `fill`.
// They are composed from op-table rows (argsort, gather, cumsum,
// scatter_add, where, ...), so they run eagerly, lazily and compiled alike.
#pragma once
#include <cstdint>
#include <vector>

#include "scalar.h"
#include "tensor.h"

namespace kiln {

/// numpy.nonzero with a fixed size: one int64 tensor of shape [size] per
/// axis of x, holding the coordinates of the first `size` nonzero (true,
/// NaN included) elements in row-major order; entries past the number of
/// nonzero elements hold `fill`, and nonzero elements past `size` are
/// dropped (JAX's truncation). Any dtype. Throws ValueError for size < 0
/// and ShapeError for a 0-d x (it has no axis to give coordinates along).
std::vector<Tensor> nonzero_static(const Tensor& x, int64_t size, int64_t fill = 0);

/// unique() of the flattened x with a fixed size.
struct UniqueStatic {
  /// [size], x's dtype: the distinct values in ascending order (NaNs count
  /// as one value, sorted last), then `fill` (cast to x's dtype, Scalar's
  /// rules); distinct values past `size` are dropped.
  Tensor values;
  /// x's shape, int64: each element's position among all the distinct
  /// values (>= size for a value that was dropped).
  Tensor inverse;
  /// [size], int64: how often each kept value occurs; 0 in the fill slots.
  Tensor counts;
  /// 0-d int64: the number of distinct values (those kept and those dropped).
  Tensor count;
};
/// Throws ValueError for size < 0, and ValueError from Scalar's rules when
/// `fill` does not fit x's dtype (e.g. NaN into an integer tensor).
UniqueStatic unique_static(const Tensor& x, int64_t size, Scalar fill = 0);

}  // namespace kiln
