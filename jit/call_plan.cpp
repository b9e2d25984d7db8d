#include "call_plan.h"

#include "fresh_results.h"

namespace kiln::detail {

std::shared_ptr<const CallPlan> make_call_plan(const StagedGraph& staged, const Graph& optimized) {
  auto p = std::make_shared<CallPlan>();
  p->out_tree = std::make_shared<const TreeDef>(staged.out_tree);
  p->num_writes = staged.writes.size();
  if (p->num_writes == 0) return p;
  const std::vector<int32_t> w = written_results(optimized, p->num_writes);
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] >= 0) p->written_results.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(w[i]));
  return p;
}

}  // namespace kiln::detail
