#include "box.h"

#include <algorithm>
#include <functional>

#include "reduce_kernels.h"

namespace kiln::distributed::detail {

Box intersect(const Box& a, const Box& b) {
  Box r{Shape(a.offset.size()), Shape(a.offset.size())};
  for (size_t i = 0; i < a.offset.size(); ++i) {
    const int64_t lo = std::max(a.offset[i], b.offset[i]);
    const int64_t hi = std::min(a.offset[i] + a.extent[i], b.offset[i] + b.extent[i]);
    r.offset[i] = lo;
    r.extent[i] = std::max<int64_t>(0, hi - lo);
  }
  return r;
}

Shape minus(const Shape& a, const Shape& b) {
  Shape r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] - b[i];
  return r;
}

namespace {
// Calls row(dst, src, n) for each innermost run of the box.
void walk(const std::byte* src, const Shape& src_shape, const Shape& src_off, std::byte* dst, const Shape& dst_shape,
          const Shape& dst_off, const Shape& ext, size_t isz,
          const std::function<void(std::byte*, const std::byte*, size_t)>& row) {
  const size_t nd = ext.size();
  for (int64_t e : ext)
    if (e == 0) return;
  if (nd == 0) return row(dst, src, 1);
  const Strides ss = contiguous_strides(src_shape), ds = contiguous_strides(dst_shape);
  const std::byte* s0 = src;
  std::byte* d0 = dst;
  for (size_t a = 0; a < nd; ++a) {
    s0 += src_off[a] * ss[a] * isz;
    d0 += dst_off[a] * ds[a] * isz;
  }
  std::vector<int64_t> idx(nd, 0);
  const size_t run = static_cast<size_t>(ext[nd - 1]);
  while (true) {
    const std::byte* s = s0;
    std::byte* d = d0;
    for (size_t a = 0; a + 1 < nd; ++a) {
      s += idx[a] * ss[a] * isz;
      d += idx[a] * ds[a] * isz;
    }
    row(d, s, run);
    size_t a = nd - 1;
    while (a-- > 0) {
      if (++idx[a] < ext[a]) break;
      idx[a] = 0;
    }
    if (a == static_cast<size_t>(-1)) return;
  }
}
}  // namespace

void copy_box(const void* src, const Shape& src_shape, const Shape& src_off, void* dst, const Shape& dst_shape,
              const Shape& dst_off, const Shape& ext, size_t isz) {
  walk(static_cast<const std::byte*>(src), src_shape, src_off, static_cast<std::byte*>(dst), dst_shape, dst_off, ext,
       isz, [isz](std::byte* d, const std::byte* s, size_t n) { std::memcpy(d, s, n * isz); });
}

void combine_box(const void* src, const Shape& src_shape, const Shape& src_off, void* dst, const Shape& dst_shape,
                 const Shape& dst_off, const Shape& ext, DType dtype, ReduceOp op) {
  walk(static_cast<const std::byte*>(src), src_shape, src_off, static_cast<std::byte*>(dst), dst_shape, dst_off, ext,
       size_of(dtype), [&](std::byte* d, const std::byte* s, size_t n) { combine(dtype, op, d, s, n); });
}

}  // namespace kiln::distributed::detail
