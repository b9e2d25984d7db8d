#include "subgraph.h"

#include <bit>
#include <cstring>
#include <sstream>

#include "../tensor/realize_hook.h"
#include "text_diff.h"
#include "weak_scalar.h"

namespace kiln::detail {

GraphRealizationContext* armed_context() {
  auto* g = dynamic_cast<GraphRealizationContext*>(&current_realization_context());
  return g && g->subgraph_cache ? g : nullptr;
}

std::string types_key(const std::vector<Tensor>& ts) {
  std::string r;
  // The stride class too: a body's arguments report their layout while
  // traced (Tensor::stride_class), and "?" where the operand's class is not
  // known while tracing (its body argument then reports none either).
  for (const auto& t : ts) {
    r += TensorType(t.dtype(), t.shape(), t.device()).str() + "/" +
         std::to_string(static_cast<int>(covering_stride_class(t)));
    if (weak_scalar_kind(t)) r += "w";  // a weak number (trace/weak_scalar.h): weak in the body too
    if (auto l = traced_layout(t); l && !l->cls_known) r += "?";
    r += ";";
  }
  return r;
}

uint64_t next_subgraph_id() {
  static std::atomic<uint64_t> n{0};
  return ++n;
}

namespace {

// Attrs equality with the scalar compared bit by bit (as Graph::equals does).
bool same_attrs_bits(const Attrs& a, const Attrs& b) {
  return a.ints == b.ints && a.axis == b.axis && std::bit_cast<uint64_t>(a.scalar) == std::bit_cast<uint64_t>(b.scalar) &&
         a.flag == b.flag && a.dtype == b.dtype;
}

// Two subgraph bodies compute the same thing: the same nodes, types, weight
// names and constant bytes (Graph::equals without the graph's own name).
bool same_body(const Graph& a, const Graph& b) {
  if (a.num_values() != b.num_values() || a.num_nodes() != b.num_nodes() || a.input_ids() != b.input_ids() ||
      a.output_ids() != b.output_ids())
    return false;
  for (size_t v = 0; v < a.num_values(); ++v)
    if (!(a.type(static_cast<int32_t>(v)) == b.type(static_cast<int32_t>(v)))) return false;
  for (size_t i = 0; i < a.num_nodes(); ++i) {
    const Node &x = a.node(i), &y = b.node(i);
    if (x.kind != y.kind || x.inputs != y.inputs || x.outputs != y.outputs || x.name != y.name ||
        x.prefix != y.prefix || x.placeholder != y.placeholder)
      return false;
    if (x.kind == NodeKind::op && (x.op != y.op || !same_attrs_bits(x.attrs, y.attrs))) return false;
    if (x.kind == NodeKind::constant) {
      if (x.data.dtype() != y.data.dtype() || x.data.shape() != y.data.shape()) return false;
      if (x.data.buffer() == y.data.buffer() && x.data.offset() == y.data.offset()) continue;
      size_t nb = static_cast<size_t>(x.data.numel()) * x.data.itemsize();
      if (std::memcmp(x.data.data_ptr(), y.data.data_ptr(), nb) != 0) return false;
    }
  }
  return true;
}

bool has_constants(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::constant) return true;
  return false;
}

// The first line where the text forms of bodies `a` and `b` differ (their
// names, on the first line, left out), as "line N was `...`, is now `...`".
std::string first_difference(const Graph& a, const Graph& b) {
  return detail::first_differing_line(a.to_text(), b.to_text(), 1);
}

}  // namespace

std::vector<Tensor> call_subgraph(
    GraphRealizationContext& parent, const std::string& base_name, const std::string& key,
    const std::vector<Tensor>& args, const std::string& prefix,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&, TreeDef&)>& trace_body, TreeDef& out_tree) {
  // Operands first, in the parent (a realized argument becomes a constant there).
  // A weak number is passed as it is (float64, int64, bool) and is weak in
  // the body (trace/weak_scalar.h).
  std::vector<GraphValue> vals;
  std::vector<char> weak(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    weak[i] = weak_scalar_kind(args[i]).has_value();
    if (weak[i]) {
      const WeakRawScope raw;
      vals.push_back(parent.value_of(args[i]));
    } else {
      vals.push_back(parent.value_of(args[i]));
    }
  }
  auto& cache = *parent.subgraph_cache;
  auto it = cache.find(key);
  std::string name;
  // A body whose trace embedded constants (tensors it captured, numbers it
  // used) is traced again on every call: what it captures may differ between
  // calls that share the key (a weight picked by a loop index), and reusing
  // the first trace would silently compute with the first call's tensors.
  // The new trace is then reused only when it is the same graph with the
  // same constants as an existing body; otherwise it becomes a new body. A
  // body without constants depends on its arguments (and weights named
  // through the prefix) alone and is reused without tracing again.
  const Graph* cached = it != cache.end() ? parent.graph().root()->subgraph(it->second) : nullptr;
  // Checking (StageOptions::check_subgraph_bodies, JitOptions::check_captures'
  // re-trace): a body without constants is traced again too, and must give
  // the body that serves its key (see below).
  const bool reuse = cached && !has_constants(*cached);
  if (reuse && !parent.check_subgraph_bodies) {
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
      for (size_t i = 0; i < body_args.size(); ++i)
        if (weak[i]) mark_weak_scalar(body_args[i]);
      // Each argument's layout is the operand's (contiguous strides when
      // contiguous; the class is in the key). An operand whose class is not
      // known gives an argument whose class is not known: the body sees what
      // the same code inlined would.
      for (size_t i = 0; i < args.size(); ++i) {
        TracedLayout l;
        l.cls = covering_stride_class(args[i]);
        if (auto al = traced_layout(args[i]); al && !al->cls_known) {
          l.cls_known = false;
          l.why = "a subgraph body's argument " + std::to_string(i) + " is an operand whose layout is not known (" +
                  al->why + ")";
        } else {
          l.strides = class_strides(args[i].shape(), l.cls);
          if (!l.strides)
            l.why = "a subgraph body's argument " + std::to_string(i) + " is traced for any layout of its stride class";
        }
        set_traced_value_layout(body.input_ids()[i], l);
      }
      std::vector<Tensor> outs = trace_body(body_args, out_tree);
      // A weak result is its kind's default dtype's tensor, as a traced function's.
      for (Tensor& o : outs)
        if (!o.is_realized() && weak_scalar_kind(o)) o = child.create_unrealized({child.value_of(o)});
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
    if (reuse && !same_body(*cached, body)) {
      // Unchecked, this call would have been served by `cached`, traced on
      // an earlier call with the same key: the compiled function computes
      // that body here, not what the function does now.
      const std::string diff = first_difference(*cached, body);
      const std::string served = it->second;
      parent.graph().remove_subgraph(name);
      throw ValueError("jit: check_captures: subgraph body '" + base_name + "' traced differently on this call than "
                       "on an earlier call with the same argument types (body '" + served + "', which serves every "
                       "such call, since a body without constants is traced once per key): it depends on a captured "
                       "C++ value that changed between calls; pass that value as an argument, or compile with "
                       "allow_subgraphs = false to trace each call inline. Body " + diff);
    }
    // An existing body that is the same graph (same constants) serves this call.
    std::string same;
    for (const auto& [n, g] : parent.graph().root()->subgraphs())
      if (n != name && same_body(*g, body)) {
        same = n;
        break;
      }
    if (!same.empty()) {
      parent.graph().remove_subgraph(name);
      name = same;
    }
    if (!cached) {
      cache[key] = name;
      parent.subgraph_out_defs[key] = out_tree;
    }
  }
  std::vector<Tensor> results;
  for (const auto& v : parent.graph().add_call(name, vals, prefix)) results.push_back(parent.create_unrealized({v}));
  return results;
}

}  // namespace kiln::detail
