// kiln (internal): fusion grouping of one flat graph (no call nodes), the
// device-neutral half of planning. It decides which nodes run together:
// elementwise groups (with a trailing reduction run inside, or taken over by
// a row op reading their one output), 2-d matmuls as one GEMM call (with a
// bias row added inside it and transposing permutes folded into it), row
// ops (softmax and log_softmax of one input paired), column sums, and op
// nodes left to their eager kernels. A backend says what it can run through
// FusionRules and lowers the resulting FusionPlan into its own steps (the
// CPU's: jit/cpu_lowering.h); memory is then planned from the steps' reads
// and writes (jit/memory_plan.h).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "../trace/graph.h"
#include "inference_session.h"

namespace kiln::codegen {

/// The operands of a 2-d matmul as one GEMM call: base[j] is the value whose
/// memory operand j reads (contiguous as the graph types it; a strided view
/// at run time gets eager's call for the view: cpu::gemm_strided); transposed[j] when that
/// value is the input of a transposing permute (permute {1, 0}) that the call
/// folds into its transpose flag, so the permute need not run.
struct GemmOperands {
  int32_t base[2] = {-1, -1};
  bool transposed[2] = {false, false};
};

/// What a backend can run, as the grouping asks for it. Every hook must be
/// set; each is a pure function of its arguments (the plan of a graph must
/// not depend on when it is built).
struct FusionRules {
  /// Most operands (outputs + inputs, + 1 when the group reads a constant
  /// table of one-element constants) one generated elementwise kernel takes:
  /// a larger group is split in two.
  int max_operands = 8;
  /// A reduction by `op` over trailing axes can run inside the elementwise
  /// group computing its input (the reduced value is then never stored).
  std::function<bool(OpId op)> reduce_in_group;
  /// Matmul node `n` (2-d, float32/float64, non-empty, operands `ops`) runs
  /// as one GEMM call.
  std::function<bool(const Graph& g, const Node& n, const GemmOperands& ops)> gemm;
  /// Op node `n` runs as a row step (softmax, log_softmax, layer_norm,
  /// rms_norm along the last axis, for which the backend has a row kernel).
  std::function<bool(const Graph& g, const Node& n)> row;
  /// Op node `n` (a sum over axis 0 of a matrix) runs as a column-sum step.
  std::function<bool(const Graph& g, const Node& n)> column_sum;
};

/// Elementwise op nodes of one shape run as one loop.
struct FusionGroup {
  Shape shape;
  /// Node indices, in an order where each node's inputs exist when it runs
  /// (inputs computed in the group come first). May be empty (every node
  /// moved into a later group): such a group has no item.
  std::vector<int32_t> nodes;
  /// Values the loop stores: read outside the group or graph outputs, in
  /// node order.
  std::vector<int32_t> outputs;
  /// A reduction node run inside the group's step, or -1: its input is one
  /// of `outputs` that nothing else reads (never stored); it reduces the
  /// last reduce_nred elements of each of reduce_nout rows of that value.
  int32_t reduce_node = -1;
  int64_t reduce_nout = 0, reduce_nred = 0;
  /// A row node (a FusionItem::Kind::row item later in the plan) whose x is
  /// the group's one output, read by nothing else: the two may run as one
  /// fused_row step, x never stored. A candidate: the lowering decides
  /// (the group's step must have room for the row op's other inputs), and
  /// when it declines, the group and the row op run as steps of their own.
  int32_t absorbed_by = -1;
};

/// One step to be, in execution order.
struct FusionItem {
  enum class Kind : uint8_t {
    op,          // node runs its op (the eager kernel on CPU)
    group,       // groups[group] runs as one generated loop
    gemm,        // matmul node as one GEMM call (gemm_operands, bias)
    row,         // node as a row step; partner: the other of a softmax/log_softmax pair
    column_sum,  // node (sum over axis 0) as a column-sum step
  };
  Kind kind = Kind::op;
  int32_t node = -1;     // op, gemm, row, column_sum
  int group = -1;        // group: the group; row: the group whose absorbed_by is this node, or -1
  int32_t partner = -1;  // row: the softmax (log_softmax) node of the same input and axis, or -1
  GemmOperands gemm_operands;  // gemm
  int32_t gemm_bias = -1;      // gemm: a bias row [n] or [1, n] added after the product, or -1
  int32_t gemm_output = -1;    // gemm: the value written (the bias add's when gemm_bias >= 0)
};

/// A row pair runs as one step where the first of the two runs; when a
/// backend cannot pair them, each runs as its own row step at its own item.
struct FusionPlan {
  std::vector<FusionGroup> groups;
  std::vector<FusionItem> items;  // execution order
  /// Per value: 1 for graph outputs.
  std::vector<char> is_output;
};

/// Groups `g` (verified, no call nodes). opt.fuse off: every op node is an
/// op item. opt.strict: only ops whose generated code is bitwise the eager
/// kernel's (IEEE correctly rounded or exact) join elementwise groups.
FusionPlan plan_fusion(const Graph& g, const KernelOptions& opt, const FusionRules& rules);

}  // namespace kiln::codegen
