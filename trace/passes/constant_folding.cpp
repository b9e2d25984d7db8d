// Constant folding. Results come from the eager kernels themselves
// (detail::eager_execute), not from a float64 reference: a folded constant
// then holds exactly the bits eager execution of the same node would
// produce, so folding never changes a result (a float64 reference rounded
// to the result dtype can differ in the last bit from the float32 kernels).
#include <optional>

#include "../realization_context.h"
#include "passes.h"
#include "rewriter.h"

namespace kiln {

bool detail::run_constant_folding(Graph& g, int64_t max_elements) {
  Rewriter rw(g);
  std::vector<Node>& nodes = rw.nodes();
  // Kernels that call other ops internally must run them eagerly, not record
  // them into a graph context that happens to be current.
  std::optional<EagerRealizationContext> eager;
  std::optional<RealizationScope> scope;
  std::vector<Tensor> args;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    if (n.kind != NodeKind::op) continue;
    const TensorType& out = g.type(n.outputs[0]);
    if (!out.device.is_cpu() || checked_numel(out.shape) > max_elements) continue;
    bool all_constant = true;
    for (int32_t v : n.inputs) {
      const Node& p = rw.producer(v);
      all_constant = all_constant && p.kind == NodeKind::constant && p.data.device().is_cpu();
    }
    if (!all_constant) continue;
    args.clear();
    for (int32_t v : n.inputs) args.push_back(rw.producer(v).data);
    if (!eager) {
      eager.emplace();
      scope.emplace(*eager);
    }
    Tensor r;
    try {
      r = detail::eager_execute(n.op, args, n.attrs);
    } catch (const Error&) {
      continue;  // e.g. integer division by zero: left for run time to report
    }
    if (r.dtype() != out.dtype || r.shape() != out.shape) continue;  // defensive: never change a type
    // A private contiguous copy: eager views share the input constant's storage.
    n.kind = NodeKind::constant;
    n.data = r.clone();
    n.inputs.clear();
    n.attrs = Attrs{};
    n.op = OpId{};
    rw.touched();
  }
  return rw.commit();
}

void constant_folding(Graph& g, int64_t max_elements) { detail::run_constant_folding(g, max_elements); }

}  // namespace kiln
