// kiln (internal): batched matrix multiplication on the CPU.
#pragma once
#include "../../tensor/tensor.h"

namespace kiln::cpu {

/// out[i] = a[i] @ b[i] for every batch index i. a: [batch..., M, K] and
/// b: [batch..., K, N] with any strides (broadcast batch axes have stride 0)
/// and any dtype; out: contiguous [batch..., M, N]. Operands are converted to
/// out's dtype. float32/float64 go to the BLAS (OpenBLAS when built with it,
/// else Eigen's GEMM); float16/bfloat16 compute in float32; integer dtypes
/// accumulate in int64 (wrapping), bool is the OR of ANDs. The GEMM chosen
/// depends on the shapes only, so results do not depend on the thread count.
void matmul(const Tensor& a, const Tensor& b, const Tensor& out);

/// "OpenBLAS" or "Eigen".
const char* gemm_backend();

}  // namespace kiln::cpu
