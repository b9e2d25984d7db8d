// kiln: subgraph dedup. Inside a root trace (stage/compile/jit, which arm
// the context's subgraph_cache), a function wrapped with as_subgraph is
// traced into a subgraph definition per key — function identity, argument
// TreeDef (static values included), operand types and stride classes, and
// whether a prefix is used — and every call becomes a `call` node. Calls
// nested inside a body are inlined; outside a trace the function simply runs.
//
// Captures: a body whose trace embedded constants (tensors it captured, or
// numbers such as `x * 0.5`) is traced again on every call, since what it
// captures can differ between calls with the same key (a weight picked by a
// loop index); each call then uses an existing body only when its trace is
// the same graph with the same constant values, and a new body otherwise.
// So each call computes with its own captures, as eagerly. A body without
// constants (its tensors all arguments, or module parameters read through
// the call prefix) is traced once per key and reused as is: pass weights as
// arguments (or use an nn::Module marked set_subgraph) to keep that saving.
// A body must not depend on anything else that varies between calls (control
// flow on a captured C++ value that embeds no constant is not seen; the jit's
// JitOptions::check_captures re-trace traces every call of a body again and
// reports a call that traces differently: StageOptions::check_subgraph_bodies).
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "pytree.h"
#include "realization_context.h"

namespace kiln {

namespace detail {
/// The current context when it is a graph context with dedup armed, else null.
GraphRealizationContext* armed_context();
/// Calls (tracing first if the key is new) a subgraph in `parent`. `trace_body`
/// receives the body's argument tensors and returns the body's result leaves,
/// setting `out_tree`. Returns the call's result tensors; sets `out_tree`.
std::vector<Tensor> call_subgraph(
    GraphRealizationContext& parent, const std::string& base_name, const std::string& key,
    const std::vector<Tensor>& args, const std::string& prefix,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&, TreeDef&)>& trace_body, TreeDef& out_tree);
/// "float32[3, 4] cpu;float32[4] cpu" for a cache key.
std::string types_key(const std::vector<Tensor>& ts);
uint64_t next_subgraph_id();
}  // namespace detail

/// The callable returned by as_subgraph(fn, name).
template <class F>
class SubgraphFn {
 public:
  SubgraphFn(F fn, std::string name) : fn_(std::move(fn)), name_(std::move(name)), id_(detail::next_subgraph_id()) {}

  template <class... A>
  auto operator()(const A&... a) const {
    using R = std::invoke_result_t<const F&, const A&...>;
    GraphRealizationContext* ctx = detail::armed_context();
    if (!ctx) return fn_(a...);
    std::tuple<A...> argt(a...);
    auto [leaves, tree] = tree_flatten(argt);
    const std::string key = name_ + "#" + std::to_string(id_) + "|" + tree.str() + "|" + detail::types_key(leaves) + "|0";
    TreeDef out_tree;
    auto outs = detail::call_subgraph(
        *ctx, name_, key, leaves, "",
        [&](const std::vector<Tensor>& body_args, TreeDef& ot) {
          detail::LeafSource src{body_args.data(), body_args.size(), 0};
          auto args2 = detail::rebuild_node<std::tuple<A...>>(argt, src);
          R r = std::apply(fn_, args2);
          auto [o, t] = tree_flatten(r);
          ot = std::move(t);
          return o;
        },
        out_tree);
    return tree_unflatten<R>(out_tree, outs);
  }

 private:
  F fn_;
  std::string name_;
  uint64_t id_;
};

/// Wraps `fn` so that, inside a root trace, its calls share one subgraph body
/// per key (see the file comment). `name` names the body (`block`, `block_1`, ...).
/// A body that captures tensors (or uses numbers) is traced again per call
/// and shared only by calls whose captures have equal values, so a capture
/// that changes between calls (`W[i]`) gives eager's answer; arguments and
/// module parameters keep one trace per key.
template <class F>
SubgraphFn<F> as_subgraph(F fn, std::string name = "subgraph") {
  return SubgraphFn<F>(std::move(fn), std::move(name));
}

}  // namespace kiln
