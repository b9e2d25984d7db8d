// Graphviz DOT writer: one box per node, edges labelled with value types.
#include <sstream>

#include "graph.h"

namespace kiln {

namespace {
std::string escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

void dot_graph(const Graph& g, std::ostringstream& os, const std::string& id_prefix) {
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    std::string label, shape = "box";
    switch (n.kind) {
      case NodeKind::input: label = "input " + g.type(n.outputs[0]).str(); shape = "ellipse"; break;
      case NodeKind::op: label = std::string(op_name(n.op)); break;
      case NodeKind::constant: label = "constant " + g.type(n.outputs[0]).str(); shape = "note"; break;
      case NodeKind::weight: label = "weight " + n.name; shape = "cylinder"; break;
      case NodeKind::call: label = "call @" + n.name + (n.prefix.empty() ? "" : " " + n.prefix); shape = "component"; break;
    }
    os << "  \"" << id_prefix << i << "\" [label=\"" << escape(label) << "\", shape=" << shape << "];\n";
    for (int32_t v : n.inputs)
      os << "  \"" << id_prefix << g.producer(v) << "\" -> \"" << id_prefix << i << "\" [label=\""
         << escape(g.type(v).str()) << "\"];\n";
  }
  for (size_t k = 0; k < g.output_ids().size(); ++k) {
    os << "  \"" << id_prefix << "out" << k << "\" [label=\"output " << k << "\", shape=ellipse];\n";
    os << "  \"" << id_prefix << g.producer(g.output_ids()[k]) << "\" -> \"" << id_prefix << "out" << k << "\";\n";
  }
}
}  // namespace

std::string Graph::to_dot() const {
  std::ostringstream os;
  os << "digraph \"" << escape(name_) << "\" {\n  rankdir=TB;\n";
  dot_graph(*this, os, "n");
  int k = 0;
  if (!root_)
    for (const auto& [nm, sg] : subgraphs_) {
      os << " subgraph \"cluster_" << escape(nm) << "\" {\n  label=\"@" << escape(nm) << "\";\n";
      dot_graph(*sg, os, "s" + std::to_string(k++) + "_");
      os << " }\n";
    }
  os << "}\n";
  return os.str();
}

}  // namespace kiln
