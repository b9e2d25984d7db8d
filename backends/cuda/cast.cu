// The CUDA kernel of the Cast row: copies across any strides, converting
// between any two dtypes with numpy's rules (hd::cast_to). Also what
// contiguous(), clone() and Tensor::to(DType) of a CUDA tensor run.
#include "elementwise.cuh"

namespace kiln::cuda {
namespace {

/// The conversion to storage type S2 as an elementwise op on the source's
/// compute type. double to float16/bfloat16 rounds once, directly.
template <class S2> struct CastTo {
  template <class C> __device__ __forceinline__ auto operator()(C x) const {
    if constexpr (std::is_same_v<C, double> && std::is_same_v<S2, __half>) return __double2half(x);
    else if constexpr (std::is_same_v<C, double> && std::is_same_v<S2, __nv_bfloat16>) return __double2bfloat16(x);
    else return hd::cast_to<compute_t<S2>>(x);
  }
};

void cast_kernel(const KernelArgs& k) {
  const Tensor& src = k.in[0];
  const Tensor& dst = k.out;
  require_cuda_dtype(OpId::Cast, dst.device(), src.dtype());  // the registry checked dst's dtype
  // (A 0-d CPU source is a by-value fill: the kernel broadcasts it.)
  if (!src.device().is_cpu() && src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous() &&
      src.shape() == dst.shape()) {
    const int dev = dst.device().index;
    use_device(dev);
    const size_t n = size_t(dst.numel()) * dst.itemsize();
    if (n) check(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), n, cudaMemcpyDeviceToDevice, stream(dev)), dev,
                 "cudaMemcpyAsync (copy)");
    return;
  }
  visit_storage(src.dtype(), [&](auto from) {
    using S1 = typename decltype(from)::type;
    visit_storage(dst.dtype(), [&](auto to) {
      using S2 = typename decltype(to)::type;
      launch_elementwise<CastTo<S2>, S2, S1, S1, 1>(k.in, dst);
    });
  });
}

[[maybe_unused]] const bool registered = [] {
  detail::register_kernel(OpId::Cast, DeviceType::cuda, cast_kernel, kCudaDTypeMask);
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
