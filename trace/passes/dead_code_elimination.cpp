// Dead-code elimination: one backward walk marks the values that reach an
// output; nodes defining none of them go (input nodes always stay).
#include "passes.h"
#include "rewriter.h"

namespace kiln {

bool detail::run_dead_code_elimination(Graph& g) {
  std::vector<char> live(g.num_values(), 0);
  for (int32_t v : g.output_ids()) live[static_cast<size_t>(v)] = 1;
  const std::vector<Node>& nodes = g.nodes();
  std::vector<char> dead(nodes.size(), 0);
  size_t removed = 0;
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    bool k = n.kind == NodeKind::input;
    for (int32_t v : n.outputs) k = k || live[static_cast<size_t>(v)];
    if (!k) {
      dead[i] = 1;
      ++removed;
      continue;
    }
    for (int32_t v : n.inputs) live[static_cast<size_t>(v)] = 1;
  }
  if (removed == 0) return false;
  std::vector<int32_t> outs = g.output_ids();
  g.remove_nodes(dead, std::move(outs));
  return true;
}

void dead_code_elimination(Graph& g) { detail::run_dead_code_elimination(g); }

}  // namespace kiln
