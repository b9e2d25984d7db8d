// The CUDA kernels of the index rows: gather (take_along_axis) and
// index_select (which the front end passes as a gather with a broadcast
// index; embedding is index_select), and one_hot. The front end has checked
// that every index lies in [-n, n) (one_hot: [0, classes)); negative
// indices count from the end. Elements are moved as bits (1, 2, 4 or 8
// bytes), so one kernel serves every dtype of that size.
#include <cstring>

#include "../../tensor/creation.h"
#include "device_tensor.h"
#include "dtypes.h"
#include "elementwise.cuh"
#include "launch_plan.h"

namespace kiln::cuda {
namespace {

constexpr unsigned kMaxIndexBlocks = 1u << 20;  // grid-stride loops cover the rest

template <int B> struct bits_of;
template <> struct bits_of<1> { using type = uint8_t; };
template <> struct bits_of<2> { using type = uint16_t; };
template <> struct bits_of<4> { using type = uint32_t; };
template <> struct bits_of<8> { using type = uint64_t; };

/// Operand offsets: 0 out, 1 x (0 along the axis and where x broadcasts),
/// 2 the index. x's element is x[off1 + wrap(index) * axis_stride].
template <class T, class I>
__global__ void gather_kernel(OffsetCalc<3, int64_t> oc, T* out, const T* x, const I* idx, int64_t n,
                              int64_t axis_stride, int64_t extent) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    oc.get(i, off);
    int64_t j = int64_t(idx[off[2]]);
    if (j < 0) j += extent;
    out[off[0]] = x[off[1] + j * axis_stride];
  }
}

void gather(const KernelArgs& k) {
  const Tensor& out = k.out;
  const int64_t n = out.numel();
  if (n == 0) return;
  const Tensor& x = k.in[0];
  // A 0-d CPU index (a scalar operand beside a 0-d x) is read on the device.
  const Tensor idx = k.in[1].device().is_cpu() ? k.in[1].to(out.device()) : k.in[1];
  const int dev = out.device().index;
  use_device(dev);
  const int64_t ax = normalize_axis(k.attrs.axis, x.ndim(), op_name(k.op));
  const size_t nd = size_t(out.ndim());
  std::vector<int64_t> shape(out.shape().begin(), out.shape().end());
  std::vector<std::vector<int64_t>> st(3, std::vector<int64_t>(nd, 0));
  for (size_t d = 0; d < nd; ++d) {
    st[0][d] = out.strides()[d];
    st[1][d] = (int64_t(d) == ax || x.shape()[d] == 1) ? 0 : x.strides()[d];
    st[2][d] = idx.shape()[d] == 1 ? 0 : idx.strides()[d];
  }
  OffsetCalc<3, int64_t> oc;
  if (!make_offset_calc(coalesce(shape, st), oc))
    throw ShapeError(detail::op_prefix(k.op) + "more than 12 non-mergeable dimensions on CUDA");
  const int64_t axis_stride = x.strides()[size_t(ax)], extent = x.shape()[size_t(ax)];
  const unsigned grid = std::min(grid_for(n, 256), kMaxIndexBlocks);
  auto launch = [&](auto bits, auto itag) {
    using T = typename decltype(bits)::type;
    using I = typename decltype(itag)::type;
    gather_kernel<T, I><<<grid, 256, 0, stream(dev)>>>(oc, static_cast<T*>(out.data_ptr()),
                                                       static_cast<const T*>(x.data_ptr()),
                                                       static_cast<const I*>(idx.data_ptr()), n, axis_stride, extent);
  };
  auto by_index = [&](auto bits) {
    if (idx.dtype() == DType::int32) launch(bits, type_tag<int32_t>{});
    else launch(bits, type_tag<int64_t>{});
  };
  switch (x.itemsize()) {
    case 1: by_index(bits_of<1>{}); break;
    case 2: by_index(bits_of<2>{}); break;
    case 4: by_index(bits_of<4>{}); break;
    default: by_index(bits_of<8>{}); break;
  }
  check(cudaGetLastError(), dev, "gather kernel launch");
}

/// out[p * classes + c] = (idx[p] == c) ? one : zero, out contiguous.
template <class T, class I>
__global__ void one_hot_kernel(T* out, const I* idx, int64_t n, int64_t classes, T one) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = int64_t(idx[i / classes]) == i % classes ? one : T(0);
}

void one_hot(const KernelArgs& k) {
  const Tensor& out = k.out;
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  use_device(dev);
  const Tensor idx = contiguous_as(k.in[0], k.in[0].dtype());
  const int64_t classes = k.attrs.axis;
  // The bits of 1 in out's dtype (zero is all-zero bits in every dtype).
  const Tensor one_t = full({}, 1.0, out.dtype());
  uint64_t one = 0;
  std::memcpy(&one, one_t.data_ptr(), out.itemsize());
  write_contiguous(out, [&](const Tensor& dst) {
    const unsigned grid = std::min(grid_for(n, 256), kMaxIndexBlocks);
    auto launch = [&](auto bits, auto itag) {
      using T = typename decltype(bits)::type;
      using I = typename decltype(itag)::type;
      T v;
      std::memcpy(&v, &one, sizeof(T));
      one_hot_kernel<T, I><<<grid, 256, 0, stream(dev)>>>(static_cast<T*>(dst.data_ptr()),
                                                          static_cast<const I*>(idx.data_ptr()), n, classes, v);
    };
    auto by_index = [&](auto bits) {
      if (idx.dtype() == DType::int32) launch(bits, type_tag<int32_t>{});
      else launch(bits, type_tag<int64_t>{});
    };
    switch (dst.itemsize()) {
      case 1: by_index(bits_of<1>{}); break;
      case 2: by_index(bits_of<2>{}); break;
      case 4: by_index(bits_of<4>{}); break;
      default: by_index(bits_of<8>{}); break;
    }
  });
  check(cudaGetLastError(), dev, "one_hot kernel launch");
}

[[maybe_unused]] const bool registered = [] {
  detail::register_kernel(OpId::Gather, DeviceType::cuda, gather, kCudaDTypeMask);
  detail::register_kernel(OpId::IndexSelect, DeviceType::cuda, gather, kCudaDTypeMask);
  detail::register_kernel(OpId::OneHot, DeviceType::cuda, one_hot, kCudaDTypeMask);
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
