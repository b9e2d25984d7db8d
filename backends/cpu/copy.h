// kiln (internal): strided copy with dtype conversion, the building block of
// contiguous(), to(dtype), cast and data-movement kernels.
#pragma once
#include "../../tensor/tensor.h"

namespace kiln::cpu {

/// dst[...] = convert(src[...]); src broadcasts to dst's shape. dst must be
/// realized and writable; neither may be empty of storage.
void copy_into(const Tensor& src, const Tensor& dst);

}  // namespace kiln::cpu
