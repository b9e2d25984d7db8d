// Subgraph inlining: every call node is replaced by a copy of its body
// (recursively), so an execution plan sees one flat graph. A placeholder
// weight of a body is renamed with the call's prefix, which is how one
// body called twice (two layers of one type) reads two sets of weights.
#include "passes.h"

namespace kiln {

namespace {
void inline_into(const Graph& src, Graph& dst, const std::vector<GraphValue>& args, const std::string& prefix,
                 std::vector<GraphValue>& results) {
  std::vector<GraphValue> map(src.num_values());
  for (size_t i = 0; i < src.input_ids().size(); ++i) map[src.input_ids()[i]] = args.at(i);
  for (const Node& n : src.nodes()) {
    switch (n.kind) {
      case NodeKind::input: break;
      case NodeKind::constant: map[n.outputs[0]] = dst.add_constant(n.data, false); break;
      case NodeKind::weight:
        map[n.outputs[0]] = dst.add_weight(n.placeholder ? prefix + n.name : n.name, src.type(n.outputs[0]));
        break;
      case NodeKind::op: {
        std::vector<GraphValue> in;
        for (int32_t v : n.inputs) in.push_back(map[v]);
        map[n.outputs[0]] = dst.add_op(n.op, in, n.attrs);
        break;
      }
      case NodeKind::call: {
        const Graph* body = src.subgraph(n.name);
        if (!body) throw ValueError("inline_calls: unknown subgraph @" + n.name);
        std::vector<GraphValue> in, out;
        for (int32_t v : n.inputs) in.push_back(map[v]);
        inline_into(*body, dst, in, prefix + n.prefix, out);
        for (size_t k = 0; k < n.outputs.size(); ++k) map[n.outputs[k]] = out.at(k);
        break;
      }
    }
  }
  for (int32_t v : src.output_ids()) results.push_back(map[v]);
}
}  // namespace

std::unique_ptr<Graph> inline_calls(const Graph& root) {
  std::vector<TensorType> in_types;
  for (int32_t v : root.input_ids()) in_types.push_back(root.type(v));
  auto g = std::make_unique<Graph>(root.name(), in_types);
  std::vector<GraphValue> results;
  inline_into(root, *g, g->inputs(), "", results);
  g->output_values(results);
  return g;
}

}  // namespace kiln
