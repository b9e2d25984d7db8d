// kiln (internal): the CPU lowering of a fusion plan (jit/fusion.h): each
// elementwise group becomes an asmjit kernel over a static strided loop
// (with its trailing reduction run through cpu::reduce_produced), a gemm
// item one bound BLAS call (cpu::GemmCall), a row item the cached generated
// row kernel eager runs too (a group taken over by it: a fused_row step),
// a column sum cpu::column_sum, and anything else its eager kernel. Running
// a bound step (ExecutionPlan::execute) and printing the steps
// (ExecutionPlan::describe, code_bytes) are defined in cpu_lowering.cpp too.
// A lowering for another device sits beside this one, taking the same
// FusionPlan and giving its own steps.
#pragma once
#include <vector>

#include "fusion.h"
#include "plan.h"

namespace kiln::codegen {

/// What the CPU runs, for plan_fusion: kMaxFusedOperands per kernel,
/// cpu::can_reduce_produced, cpu::plan_gemm, the cached row kernels and
/// cpu::kColumnSumMaxRows.
FusionRules cpu_fusion_rules(const KernelOptions& opt);

/// The CPU steps of `fusion` (planned for `g` with cpu_fusion_rules(opt)),
/// in its item order. A group whose kernel cannot be generated for this CPU
/// (too many operands, an op the generator refuses) falls back to one op
/// step per node (and its reduction's); a row pair without a pair kernel to
/// a row step each; an absorption without room for the row op's inputs to
/// the two steps. A group whose program `images` (may be null) holds runs
/// that machine code instead of generating it (KernelSource).
std::vector<PlanStep> lower_cpu(const Graph& g, const FusionPlan& fusion, const KernelOptions& opt,
                                const CodeImages* images = nullptr);

}  // namespace kiln::codegen
