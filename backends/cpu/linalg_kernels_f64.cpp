// kiln (internal): the Linalg kernels in double (linalg_kernels_impl.h).
#include "linalg_kernels_impl.h"

namespace kiln::cpu {
void linalg_f64(const KernelArgs& k) { linalg_impl::dispatch<double>(k); }
}  // namespace kiln::cpu
