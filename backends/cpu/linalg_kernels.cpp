// kiln (internal): the Linalg category's kernel: one instantiation per
// compute dtype, each in its own file (linalg_kernels_f32.cpp / _f64.cpp).
#include "linalg_kernels.h"

namespace kiln::cpu {
void linalg(const KernelArgs& k) {
  if (k.out.dtype() == DType::float64) linalg_f64(k);
  else linalg_f32(k);
}
}  // namespace kiln::cpu
