// kiln (internal): a compiled plan's small GEMMs with their epilogues. A
// float32 gemm step that runs eager's generated GEMM (GemmCall::small) and
// whose product is read only by one later fused elementwise step, over the
// m x n result, merges with that step into one gemm_fused step: the group's
// program becomes the generated GEMM's epilogue (backends/cpu/jit/small_gemm.h),
// applied while each tile is in registers, and the product is never stored.
// The GEMM's tile arithmetic is eager's generated GEMM's (the same FMA chain
// per element), and the epilogue computes each op as the elementwise code
// generator does without FMA contraction; a strict program has no vector
// math, so in strict mode the step is bitwise eager's.
#pragma once
#include <vector>

#include "plan.h"

namespace kiln::codegen {

/// Merges gemm steps into the fused steps that read their product, where
/// every operand of the group is float32 and is the m x n result's shape (a
/// matrix), a row of n (a bias), or one element; outputs are m x n; the
/// operands, the constant table, A and B fit the step's kMaxFusedOperands
/// pointers. The merged step runs where the fused step ran (the GEMM's
/// inputs exist there too). Call before the memory plan.
/// Also: a small float32 GEMM whose bias row the fusion folded into the
/// call runs the add as its epilogue; a float32 column_sum step of an
/// output of a gemm_fused step that runs on one thread is merged into it
/// (the column sums made in the epilogue, SmallGemmKey::column_sums:
/// PlanStep::column_sum_output). Both keep the bits of the steps they
/// replace (strict mode too).
/// A GEMM whose key's text (SmallGemmKey::str()) `images` (may be null)
/// holds is placed from that image instead of generated.
void merge_gemm_epilogues(const Graph& g, std::vector<PlanStep>& steps, const KernelOptions& opt,
                          const CodeImages* images = nullptr);

}  // namespace kiln::codegen
