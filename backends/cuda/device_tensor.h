// kiln (internal): host helpers of the CUDA kernels that want contiguous
// operands (reductions, scans, rows, index kernels): a contiguous copy on
// the device when the view is not one, and a contiguous result written back
// into a strided `out`.
#pragma once
#include "../../tensor/kernel_registry.h"

namespace kiln::cuda {

/// `x` itself when it is contiguous and of dtype `d`, else a contiguous copy
/// in dtype `d` on x's device (the Cast row's kernel).
inline Tensor contiguous_as(const Tensor& x, DType d) {
  if (x.is_contiguous() && x.dtype() == d) return x;
  Tensor c = Tensor::empty(x.shape(), d, x.device());
  detail::copy_into(x, c);
  return c;
}

/// Runs `f(dst)` with dst contiguous: `out` itself, or a temporary copied
/// into `out` afterwards.
template <class F> void write_contiguous(const Tensor& out, F&& f) {
  if (out.is_contiguous()) return f(out);
  Tensor t = Tensor::empty(out.shape(), out.dtype(), out.device());
  f(t);
  detail::copy_into(t, out);
}

}  // namespace kiln::cuda
