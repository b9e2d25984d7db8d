// kiln (internal): an executable plan for one optimised, flat graph (no call
// nodes): a list of steps, each either a fused elementwise group running
// generated machine code, or one op running its eager CPU kernel.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../backends/cpu/strided_loop.h"
#include "../trace/graph.h"
#include "elementwise_program.h"
#include "inference_session.h"

namespace kiln::codegen {

/// Up to this many operands (outputs + inputs) per fused group.
inline constexpr int kMaxFusedOperands = 8;

struct PlanStep {
  enum class Kind : uint8_t { op, fused };
  Kind kind = Kind::op;
  // op step
  OpId op{};
  Attrs attrs;
  std::vector<int32_t> inputs;   // value ids
  int32_t output = -1;
  // fused step: operands = outputs first, then inputs (value ids)
  std::vector<int32_t> operands;
  int num_outputs = 0;
  std::vector<TensorLayout> out_layouts;
  std::shared_ptr<ElementwiseKernel> kernel;
  std::vector<int32_t> group_nodes;  // node indices fused (for dumps)
  std::string program;               // printed program (for dumps)
  // Loop structure, fixed at plan time (shapes are static): one per operand count.
  cpu::StridedLoop<kMaxFusedOperands> loop;
};

class ExecutionPlan {
 public:
  /// Plans `graph` (must verify and contain no call nodes).
  ExecutionPlan(std::shared_ptr<const Graph> graph, const KernelOptions& options);

  /// Weight slots in the order run() expects them: (name, type).
  const std::vector<std::pair<std::string, TensorType>>& weight_slots() const { return weight_slots_; }
  /// Runs the plan. `inputs` are contiguous tensors in graph-input order;
  /// `weights` are contiguous tensors in weight_slots() order. Results are
  /// written to `outputs` (resized to the output count).
  void run(std::span<const Tensor> inputs, std::span<const Tensor> weights, std::vector<Tensor>& outputs) const;

  const Graph& graph() const { return *graph_; }
  const std::vector<PlanStep>& steps() const { return steps_; }
  /// Total bytes of generated machine code.
  size_t code_bytes() const;
  /// The fusion groups and programs, one per line (KILN_JIT_DUMP).
  std::string describe(bool with_disassembly) const;

 private:
  std::shared_ptr<const Graph> graph_;
  std::vector<PlanStep> steps_;
  std::vector<std::pair<std::string, TensorType>> weight_slots_;
  std::vector<int32_t> weight_values_;  // value id per weight slot
};

/// Inlines every call node of `root` (recursively), resolving placeholder
/// weights through each call's prefix; returns a new flat graph.
std::unique_ptr<Graph> inline_calls(const Graph& root);

}  // namespace kiln::codegen
