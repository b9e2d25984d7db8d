// kiln (internal): CPU kernels of the Linalg category (linalg_kernels*.cpp).
#pragma once
#include "../../tensor/kernel_registry.h"

namespace kiln::cpu {
/// Every Linalg row: inputs as [batch..., rows, cols] of float32/float64,
/// `out` contiguous in the compute dtype. Throws ValueError naming the
/// matrix of the batch for singular / non-positive-definite / non-finite input.
void linalg(const KernelArgs& k);
/// The float32 / float64 instantiations linalg() picks from.
void linalg_f32(const KernelArgs& k);
void linalg_f64(const KernelArgs& k);
}  // namespace kiln::cpu
