// kiln (internal): CPU kernels of the RowNorm category.
#pragma once
#include "../../tensor/tensor.h"

namespace kiln::cpu {

/// softmax (or log_softmax when `log`) of x along `axis` into out. x and
/// out have the same shape and the same floating dtype. Max-subtracted:
/// a line holding NaN or +inf, or only -inf, gives NaN throughout.
void softmax(const Tensor& x, int64_t axis, bool log, const Tensor& out);

/// Layer normalisation (or RMS normalisation when `rms`) of x over its last
/// axis into out (same shape and floating dtype as x). weight and bias are
/// undefined or of shape [x.shape[-1]] (any dtype). Statistics accumulate
/// in double; the variance is biased; eps is added inside the square root.
/// float32 along the last axis (softmax too) runs the generated row kernel
/// instead, in float32 (backends/cpu/jit/row_kernels.h: its tolerances).
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, bool rms, const Tensor& out);

}  // namespace kiln::cpu
