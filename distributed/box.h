// kiln (internal): copying an n-d box between contiguous row-major arrays,
// the one data movement redistribute() needs (slices, gathers, pieces of an
// all-to-all). Not part of the public headers.
#pragma once
#include <cstddef>
#include <cstring>

#include "../tensor/dtype.h"
#include "../tensor/shape.h"
#include "placement.h"

namespace kiln::distributed::detail {

/// A box of a tensor: per-axis offsets and extents.
struct Box {
  Shape offset, extent;
};
/// The intersection of two boxes (extents clamp at 0).
Box intersect(const Box& a, const Box& b);
/// a - b per axis.
Shape minus(const Shape& a, const Shape& b);

/// Copies the box of extent `ext` at `src_off` of the contiguous array `src`
/// (shape src_shape) to `dst_off` of the contiguous array `dst` (shape
/// dst_shape). Elements of `isz` bytes. Nothing happens for an empty box.
void copy_box(const void* src, const Shape& src_shape, const Shape& src_off, void* dst, const Shape& dst_shape,
              const Shape& dst_off, const Shape& ext, size_t isz);
/// As copy_box, but dst = op(dst, src) elementwise in `dtype`.
void combine_box(const void* src, const Shape& src_shape, const Shape& src_off, void* dst, const Shape& dst_shape,
                 const Shape& dst_off, const Shape& ext, DType dtype, ReduceOp op);

}  // namespace kiln::distributed::detail
