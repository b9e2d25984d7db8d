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
#include <optional>
#include <span>
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
/// that machine code instead of generating it (KernelSource); a group that
/// becomes a GEMM's epilogue (plan_small_gemm.h) gets no kernel of its own,
/// and its GEMM comes from `images` too when they hold its key.
// ---- restoring steps (a MEF file's PLAN section, jit/mef_plan.cpp) ----------------------
// Each makes the step lower_cpu makes for node `node` of `g` (verified), or
// returns false when the node is out of range or lower_cpu would not make
// that kind of step for it.

/// An op step (the node's eager kernel).
bool restore_op_step(const Graph& g, int32_t node, PlanStep& s);
/// A row step; `pair` >= 0: the log_softmax node paired with softmax `node`.
bool restore_row_step(const Graph& g, int32_t node, int32_t pair, const KernelOptions& opt, PlanStep& s);
/// The last GEMM call restore_gemm_step planned (cpu::plan_gemm is a pure
/// function of these, up to eager's cache handing out its generated GEMM),
/// so a reader restoring many steps of one problem asks eager's GEMM cache
/// (a lock, a lookup) once, not once per step.
struct GemmCallMemo {
  bool valid = false;
  bool f64 = false;
  int64_t m = 0, n = 0, k = 0, rs[2] = {0, 0}, cs[2] = {0, 0};
  std::optional<cpu::GemmCall> call;
};
/// A gemm step for matmul `node` with operands `ops` (checked: each base is
/// the matmul's input, or, transposed, the input of a permute {1, 0} it reads).
/// `memo` (may be null): the last call planned, reused for the same problem.
bool restore_gemm_step(const Graph& g, int32_t node, const GemmOperands& ops, const KernelOptions& opt, PlanStep& s,
                       GemmCallMemo* memo = nullptr);
/// A column-sum step. One of a strided view (written by a kiln whose
/// plans summed views so; cpu_fusion_rules now leaves that sum an op step)
/// is restored too: run, it sums the view as eager does
/// (ExecutionPlan::run_stepwise).
bool restore_column_sum_step(const Graph& g, int32_t node, PlanStep& s);
/// The static loop of a fused step: operands (contiguous values, outputs
/// first, at most kMaxFusedOperands; each broadcasts to `shape`) over `shape`.
cpu::StridedLoop<kMaxFusedOperands> fused_loop(const Graph& g, std::span<const int32_t> operands, const Shape& shape);

std::vector<PlanStep> lower_cpu(const Graph& g, const FusionPlan& fusion, const KernelOptions& opt,
                                const CodeImages* images = nullptr);

}  // namespace kiln::codegen
