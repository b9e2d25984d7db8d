#include "subgraph.h"

namespace kiln::detail {

GraphRealizationContext* armed_context() {
  auto* g = dynamic_cast<GraphRealizationContext*>(&current_realization_context());
  return g && g->subgraph_cache ? g : nullptr;
}

std::string types_key(const std::vector<Tensor>& ts) {
  std::string r;
  for (const auto& t : ts) r += TensorType(t.dtype(), t.shape(), t.device()).str() + ";";
  return r;
}

uint64_t next_subgraph_id() {
  static std::atomic<uint64_t> n{0};
  return ++n;
}

std::vector<Tensor> call_subgraph(
    GraphRealizationContext& parent, const std::string& base_name, const std::string& key,
    const std::vector<Tensor>& args, const std::string& prefix,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&, TreeDef&)>& trace_body, TreeDef& out_tree) {
  // Operands first, in the parent (a realized argument becomes a constant there).
  std::vector<GraphValue> vals;
  for (const auto& a : args) vals.push_back(parent.value_of(a));
  auto& cache = *parent.subgraph_cache;
  auto it = cache.find(key);
  std::string name;
  if (it != cache.end()) {
    name = it->second;
    out_tree = parent.subgraph_out_defs.at(key);
  } else {
    name = parent.graph().unique_subgraph_name(base_name);
    std::vector<TensorType> types;
    for (const auto& v : vals) types.push_back(v.type());
    Graph& body = parent.graph().define_subgraph(name, types);
    try {
      // The body's context has no cache, so calls nested in it are inlined.
      GraphRealizationContext child(body, {}, prefix);
      child.bound_weights = parent.bound_weights;  // a body's parameters bind in the root trace
      std::vector<Tensor> body_args;
      for (const auto& v : body.inputs()) body_args.push_back(child.create_unrealized({v}));
      std::vector<Tensor> outs = trace_body(body_args, out_tree);
      // In-place writes are functionalised per context: a write made inside
      // a deduplicated body could not reach the caller's tensors. Refuse it
      // rather than drop it (tracing inline, allow_subgraphs = false, works).
      const char* why = nullptr;
      for (size_t i = 0; i < body_args.size() && !why; ++i)
        if (body_args[i].impl().state->values[0].id != body.inputs()[i].id) why = "writes into an argument";
      if (!why && !child.mutable_sources().empty()) why = "writes into a captured tensor";
      for (const auto& [t, v] : child.sources())
        if (!why && parent.is_mutable_source(t)) why = "reads a tensor the caller writes in place";
      if (why)
        throw RealizationError("subgraph call '" + base_name + "': the body " + std::string(why) +
                               "; in-place writes do not cross a subgraph call (compile with "
                               "allow_subgraphs = false to inline it)");
      body.output(outs);
      // Tensors the body captured are the root trace's captured constants
      // too, so a compiled call checks their contents as it checks its own
      // (a changed tensor is an error, never a stale result), and a later
      // in-place write to one by the caller is refused as for any constant.
      for (const auto& [t, v] : child.sources()) (void)parent.value_of(t);
    } catch (...) {
      parent.graph().remove_subgraph(name);
      throw;
    }
    cache[key] = name;
    parent.subgraph_out_defs[key] = out_tree;
  }
  std::vector<Tensor> results;
  for (const auto& v : parent.graph().add_call(name, vals, prefix)) results.push_back(parent.create_unrealized({v}));
  return results;
}

}  // namespace kiln::detail
