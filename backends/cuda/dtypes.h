// kiln (internal): the dtypes the CUDA backend has device kernels for.
// int16, uint16, uint32 and uint64 have none yet: their bits are left out of
// every registration, so the registry raises its DeviceError ("<op>: no
// kernel for cuda:0 of dtype uint16") before a kernel could misread them.
#pragma once
#include "../../tensor/kernel_registry.h"

namespace kiln::cuda {

inline constexpr DType kCudaDTypes[] = {DType::bool_,   DType::uint8,    DType::int8,    DType::int32, DType::int64,
                                        DType::float16, DType::bfloat16, DType::float32, DType::float64};
inline constexpr DTypeMask kCudaDTypeMask = [] {
  DTypeMask m = 0;
  for (DType d : kCudaDTypes) m |= dtype_bit(d);
  return m;
}();

/// Raises the registry's DeviceError for `op` unless `d` is one of kCudaDTypes
/// (for kernels that read an input of another dtype than the one looked up).
inline void require_cuda_dtype(OpId op, Device dev, DType d) {
  if ((kCudaDTypeMask & dtype_bit(d)) == 0) detail::kernel_for(op, dev, d);
}

}  // namespace kiln::cuda
