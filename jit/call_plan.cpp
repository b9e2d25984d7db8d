#include "call_plan.h"

#include <algorithm>

#include "../tensor/mutation.h"

namespace kiln::detail {

std::shared_ptr<const CallPlan> make_call_plan(const StagedGraph& staged) {
  auto p = std::make_shared<CallPlan>();
  p->out_tree = std::make_shared<const TreeDef>(staged.out_tree);
  p->num_writes = staged.writes.size();
  if (!staged.graph) return p;
  const Graph& g = *staged.graph;
  const auto& outs = g.output_ids();
  const size_t nres = outs.size() - std::min(outs.size(), staged.writes.size());
  for (size_t i = 0; i < nres; ++i) {
    const Node& prod = g.node(g.producer(outs[i]));
    if (prod.kind != NodeKind::op || op_info(prod.op).category == OpCategory::View) continue;
    bool written_value = false;
    for (size_t k = nres; k < outs.size(); ++k) written_value = written_value || outs[k] == outs[i];
    if (!written_value) p->reducible.push_back(static_cast<uint32_t>(i));
  }
  return p;
}

namespace {
// The storage of a realized tensor (null for an undefined or unrealized
// one): may_share_memory is false unless two of these are equal.
const Buffer* realized_storage(const Tensor& t) {
  if (!t.defined() || !t.is_realized()) return nullptr;
  return &t.impl().storage;
}
}  // namespace

void copy_results_reduced_to_inputs(const CallPlan& plan, std::vector<Tensor>& results, std::span<const Tensor> args,
                                    const std::map<std::string, Tensor>& weights) {
  if (plan.reducible.empty()) return;
  const size_t nres = results.size() - std::min(results.size(), plan.num_writes);
  for (uint32_t i : plan.reducible) {
    if (i >= nres) break;  // (reducible is ascending)
    const Buffer* r = realized_storage(results[i]);
    if (!r) continue;
    // A buffer compare per argument and weight; the byte ranges only where
    // one is shared.
    bool shares = false;
    for (const Tensor& a : args)
      if (const Buffer* b = realized_storage(a); b && *b == *r && may_share_memory(results[i], a)) {
        shares = true;
        break;
      }
    if (!shares)
      for (const auto& [name, w] : weights)
        if (const Buffer* b = realized_storage(w); b && *b == *r && may_share_memory(results[i], w)) {
          shares = true;
          break;
        }
    if (shares) results[i] = results[i].clone();
  }
}

}  // namespace kiln::detail
