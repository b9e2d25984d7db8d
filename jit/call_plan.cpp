#include "call_plan.h"

#include "fresh_results.h"

namespace kiln::detail {

std::shared_ptr<const CallPlan> make_call_plan(const StagedGraph& staged, const Graph& optimized) {
  auto p = std::make_shared<CallPlan>();
  p->out_tree = std::make_shared<const TreeDef>(staged.out_tree);
  p->num_writes = staged.writes.size();
  const auto& in_ids = optimized.input_ids();
  p->inputs_are_graph_inputs = staged.in_layouts.size() == in_ids.size();
  for (size_t i = 0; i < in_ids.size() && p->inputs_are_graph_inputs; ++i)
    p->inputs_are_graph_inputs = TensorType(staged.in_layouts[i]) == optimized.type(in_ids[i]);
  if (p->num_writes == 0) return p;
  const std::vector<int32_t> w = written_results(optimized, p->num_writes);
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] >= 0) p->written_results.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(w[i]));
  // Results made by a chain of view ops from a written value (the nearest one on the chain).
  const auto& outs = optimized.output_ids();
  const size_t nres = w.size();
  for (size_t i = 0; i < nres; ++i) {
    if (w[i] >= 0) continue;
    std::vector<std::pair<OpId, Attrs>> chain;
    int32_t v = outs[i];
    for (;;) {
      const Node& n = optimized.node(static_cast<size_t>(optimized.producer(v)));
      if (n.kind != NodeKind::op || op_info(n.op).category != OpCategory::View || n.inputs.size() != 1) break;
      chain.emplace(chain.begin(), n.op, n.attrs);
      v = n.inputs[0];
      size_t k = nres;
      while (k < outs.size() && outs[k] != v) ++k;
      if (k < outs.size()) {
        p->views_of_written.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(k - nres), std::move(chain)});
        break;
      }
    }
  }
  return p;
}

}  // namespace kiln::detail
