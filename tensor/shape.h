// kiln: shapes, strides and the checked arithmetic on them.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// Extents of each axis, outermost first. A 0-d tensor has an empty shape.
using Shape = std::vector<int64_t>;
/// Element (not byte) strides of each axis; may be zero (broadcast) or negative.
using Strides = std::vector<int64_t>;

/// "[3, 4]".
std::string shape_str(const Shape& s);
/// Product of the extents. Throws ShapeError naming `op` on a negative extent
/// or when the product overflows int64.
int64_t checked_numel(const Shape& s, std::string_view op = "shape");
/// Row-major (C order) strides for `s`.
Strides contiguous_strides(const Shape& s);
/// True when strides are row-major for `s` (axes of extent 1 are ignored).
bool is_contiguous(const Shape& s, const Strides& st);
/// numpy broadcasting of two shapes; throws ShapeError
/// "`op`: cannot broadcast shapes [3, 4] and [5]".
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);
/// Maps axis in [-ndim, ndim) to [0, ndim); throws IndexError naming `op`.
int64_t normalize_axis(int64_t axis, int64_t ndim, std::string_view op);

}  // namespace kiln
