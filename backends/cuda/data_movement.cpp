// CUDA kernels of the data-movement rows that are strided copies: concat,
// pad and tile run the Cast row's kernel (cast.cu) on views of the result
// (and, for tile, a broadcast view of the input); pad fills through the
// same kernel with a by-value scalar. Gather, index_select and one_hot need
// index kernels of their own (not built yet).
#include <vector>

#include "../../tensor/creation.h"
#include "../../tensor/kernel_registry.h"
#include "../../tensor/shape.h"
#include "dtypes.h"

namespace kiln::cuda {
namespace {

Tensor view(const Tensor& base, const Shape& shape, const Strides& strides, int64_t offset) {
  return Tensor(base.buffer(), base.dtype(), shape, strides, base.offset() + offset);
}

/// dst = value everywhere (the Cast kernel with a 0-d CPU input broadcasts it).
void fill(const Tensor& dst, double value) {
  const Tensor s[1] = {full({}, value, dst.dtype())};
  Attrs a;
  a.dtype = dst.dtype();
  detail::kernel_for(OpId::Cast, dst.device(), dst.dtype())(KernelArgs{OpId::Cast, s, dst, a});
}

void concat(const KernelArgs& k) {
  const Tensor& out = k.out;
  const int64_t axis = normalize_axis(k.attrs.axis, out.ndim(), "concat");
  int64_t pos = 0;
  for (const Tensor& x : k.in) {
    if (x.numel() > 0) detail::copy_into(x, view(out, x.shape(), out.strides(), pos * out.strides()[size_t(axis)]));
    pos += x.shape()[size_t(axis)];
  }
}

void pad(const KernelArgs& k) {
  const Tensor& out = k.out;
  const Tensor& x = k.in[0];
  fill(out, k.attrs.scalar);
  if (x.numel() == 0) return;
  int64_t off = 0;
  for (int64_t i = 0; i < x.ndim(); ++i) off += k.attrs.ints[size_t(2 * i)] * out.strides()[size_t(i)];
  detail::copy_into(x, view(out, x.shape(), out.strides(), off));
}

void tile(const KernelArgs& k) {
  const Tensor& out = k.out;
  const Tensor& x = k.in[0];
  if (out.numel() == 0) return;
  // out as [r0, s0, r1, s1, ...]; x broadcast along the r axes.
  const size_t nd = size_t(out.ndim());
  const size_t lead = nd - size_t(x.ndim());
  Shape shape;
  Strides ost, xst;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t s = i < lead ? 1 : x.shape()[i - lead];
    const int64_t r = out.shape()[i] / s;
    shape.push_back(r);
    shape.push_back(s);
    ost.push_back(s * out.strides()[i]);
    ost.push_back(out.strides()[i]);
    xst.push_back(0);
    xst.push_back(i < lead ? 0 : x.strides()[i - lead]);
  }
  detail::copy_into(view(x, shape, xst, 0), view(out, shape, ost, 0));
}

[[maybe_unused]] const bool registered = [] {
  detail::register_kernel(OpId::Concat, DeviceType::cuda, concat, kCudaDTypeMask);
  detail::register_kernel(OpId::Pad, DeviceType::cuda, pad, kCudaDTypeMask);
  detail::register_kernel(OpId::Tile, DeviceType::cuda, tile, kCudaDTypeMask);
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
