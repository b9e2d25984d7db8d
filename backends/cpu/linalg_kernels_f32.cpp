// kiln (internal): the Linalg kernels in float (linalg_kernels_impl.h).
#include "linalg_kernels_impl.h"

namespace kiln::cpu {
void linalg_f32(const KernelArgs& k) { linalg_impl::dispatch<float>(k); }
}  // namespace kiln::cpu
