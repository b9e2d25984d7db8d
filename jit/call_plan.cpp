#include "call_plan.h"

#include "fresh_results.h"
#include "../trace/made_in_trace.h"

#include <algorithm>
#include <map>

namespace kiln::detail {

std::shared_ptr<const CallPlan> make_call_plan(const StagedGraph& staged, const Graph& optimized) {
  auto p = std::make_shared<CallPlan>();
  p->out_tree = std::make_shared<const TreeDef>(staged.out_tree);
  p->num_writes = staged.writes.size();
  const auto& in_ids = optimized.input_ids();
  p->inputs_are_graph_inputs = staged.in_layouts.size() == in_ids.size();
  for (size_t i = 0; i < in_ids.size() && p->inputs_are_graph_inputs; ++i)
    p->inputs_are_graph_inputs = TensorType(staged.in_layouts[i]) == optimized.type(in_ids[i]);
  // Results that are a captured (unwritten) tensor or a chain of view ops
  // of one, on the staged graph (the optimised one may have folded the view
  // into a new constant). A captured tensor the function writes is a
  // mutable weight there, not a constant, and is handled as a written value.
  // Only a tensor held outside the trace: one the function made while
  // traced (`Tensor z = zeros({3}); return z[1];`) is held by nothing but
  // this StagedGraph's captured entry (its trace has ended), and eagerly
  // each call makes a new one, so its result stays a copy. A copy of the
  // StagedGraph kept by the caller holds it too: where the trace's end
  // already showed it held by nothing else (trace/made_in_trace.h) it is
  // not captured whatever the count says now.
  if (staged.graph && !staged.captured.empty()) {
    const Graph& g = *staged.graph;
    std::map<int32_t, uint32_t> captured_of;  // constant value -> captured index
    for (size_t c = 0; c < staged.captured.size(); ++c)
      if (staged.captured[c].source.impl_ptr().use_count() > 1 && !made_in_trace(staged.captured[c].source))
        captured_of.emplace(staged.captured[c].value, static_cast<uint32_t>(c));
    const auto& souts = g.output_ids();
    const size_t sres = souts.size() - std::min(souts.size(), p->num_writes);
    for (size_t i = 0; i < sres; ++i) {
      std::vector<std::pair<OpId, Attrs>> chain;
      int32_t v = souts[i];
      for (;;) {
        const Node& n = g.node(static_cast<size_t>(g.producer(v)));
        if (n.kind == NodeKind::constant) {
          if (auto it = captured_of.find(v); it != captured_of.end())
            p->captured_results.push_back({static_cast<uint32_t>(i), it->second, std::move(chain)});
          break;
        }
        if (n.kind != NodeKind::op || op_info(n.op).category != OpCategory::View || n.inputs.size() != 1) break;
        chain.emplace(chain.begin(), n.op, n.attrs);
        v = n.inputs[0];
      }
    }
  }
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
