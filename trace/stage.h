// kiln: stage(fn)(specs...) traces `fn` into a graph without running it.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "graph.h"
#include "pytree.h"
#include "realization_context.h"

namespace kiln {

/// A realized tensor a traced function captured (closure), embedded in the
/// graph as a constant. Its content hash is checked before each compiled call
/// so a changed tensor is an error, never a stale result.
struct CapturedConstant {
  Tensor source;        ///< the captured tensor (kept alive)
  uint64_t hash = 0;    ///< content hash when traced
  int32_t value = -1;   ///< its constant's value id in the staged graph
  uint64_t version = 0; ///< its buffer's Buffer::version() when traced (for the error message)
};
/// 64-bit content hash (FNV-1a over 8-byte words) of a tensor's elements.
uint64_t content_hash(const Tensor& t);
/// content_hash of `n` bytes of contiguous elements at `p` (what
/// content_hash computes once it has the tensor's bytes in order; inline, so
/// a compiled call checks a captured scalar without a call).
inline uint64_t content_hash_bytes(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h ^ n;
}

/// What a traced function reads, in eager order, after it first writes one
/// destination (StagedGraph::writes): the tensors that, sharing memory with
/// that destination, would see the write eagerly but not in the compiled
/// code, which reads each as a separate tensor (jit/write_alias.h).
struct WriteReads {
  /// Per tensor leaf: read (or a view of it read) after the write, returned
  /// (or a view of it), or written by the function itself.
  std::vector<char> arguments;
  /// Per StagedGraph::captured entry: read after the write.
  std::vector<char> captured;
  /// Weights read after the write, and every mutable weight written.
  std::vector<std::string> weights;
};

/// A traced function: its graph and signature.
struct StagedGraph {
  std::shared_ptr<Graph> graph;
  std::vector<TensorLayout> in_layouts;  ///< one per tensor leaf of the arguments
  TreeDef in_tree;                       ///< structure of the argument tuple (static values included)
  std::vector<TensorLayout> out_layouts; ///< one per tensor leaf of the result
  TreeDef out_tree;
  /// Tensors captured by the function, in the order first used.
  std::vector<CapturedConstant> captured;
  /// In-place writes the function made to its arguments or to realized
  /// tensors (mutable sources): the graph outputs past out_tree's leaves
  /// (out_layouts lists them last), written back when a compiled call ends.
  std::vector<WriteBack> writes;
  /// The mutable sources, bound as weights by name (add_mutable_source).
  std::map<std::string, Tensor> mutable_weights;
  /// Weights the trace bound itself (GraphRealizationContext::bound_weights:
  /// nn::Module parameters by state_dict key, weights of inlined compiled
  /// callables); compile() binds them unless CompileOptions::weights names them.
  std::map<std::string, Tensor> bound_weights;
  /// Arguments traced as one tensor (StageOptions::same_as): per tensor
  /// leaf, the earlier leaf it was identical to, or -1; empty when none. A
  /// callable compiled from it must be called with those leaves identical.
  std::vector<int32_t> same_as;
  /// Per write (as `writes`), what the function reads after it; empty when
  /// not known (a callable rebuilt from a MEF file): every overlap counts.
  std::vector<WriteReads> write_reads;
  /// Range checks of jit runtime numbers (trace/weak_scalar.h): an integer
  /// number that met a tensor of a narrower integer dtype (or an unsigned
  /// one) and was cast to it. A compiled call checks the number's value
  /// against `dtype` first and throws ValueError naming `op`, as eager
  /// raises for `int8_x + 300` rather than wrap.
  struct NumberCheck {
    size_t leaf = 0;     ///< the number's tensor leaf
    DType dtype = DType::int64;
    OpId op = OpId::Add;
  };
  std::vector<NumberCheck> number_checks;
  /// The graph's text form (subgraph definitions first).
  std::string ir() const { return graph->to_text(); }
};

struct StageOptions {
  std::string name = "main";
  /// Arms subgraph dedup (as_subgraph / nn::Module calls become calls).
  bool allow_subgraphs = true;
  /// Arguments that are one tensor (jit's aliasing guard): per tensor leaf,
  /// the index of an earlier leaf it is identical to (same memory, dtype,
  /// shape and strides) or -1; empty when no two are. Such leaves are traced
  /// as one tensor (its graph input is the first leaf's; the later leaf's
  /// input is left unused), so a write through either is seen by reads of
  /// the other, as eagerly. ValueError when an entry is not -1 and not the
  /// index of an earlier leaf of the same layout.
  std::vector<int32_t> same_as = {};
  /// Traces every call of a subgraph body (as_subgraph, nn::Module calls)
  /// again, also one without constants that would be traced once per key
  /// and reused, and throws ValueError when a later call traced differently
  /// from the body that serves its key (the body branches on a captured C++
  /// value that changed between calls). JitOptions::check_captures sets it
  /// on its re-trace.
  bool check_subgraph_bodies = false;
};

namespace detail {

template <class F> struct fn_traits : fn_traits<decltype(&std::decay_t<F>::operator())> {};
template <class R, class... A> struct fn_traits<R (*)(A...)> {
  using args = std::tuple<std::decay_t<A>...>;
  using result = R;
};
template <class R, class... A> struct fn_traits<R(A...)> : fn_traits<R (*)(A...)> {};
template <class C, class R, class... A> struct fn_traits<R (C::*)(A...) const> : fn_traits<R (*)(A...)> {};
template <class C, class R, class... A> struct fn_traits<R (C::*)(A...)> : fn_traits<R (*)(A...)> {};

/// The non-template part of a trace: owns the graph and the context.
/// Throws ShapeError naming the argument path when a spec has a negative
/// extent, more elements than int64 counts, or more bytes than fit in int64.
void check_specs(const std::vector<TensorLayout>& layouts, const TreeDef& tree);

class TraceSession {
 public:
  TraceSession(const std::string& name, const std::vector<TensorLayout>& in_layouts, bool allow_subgraphs,
               std::vector<int32_t> same_as = {}, bool check_subgraph_bodies = false);
  ~TraceSession();
  /// Unrealized tensors for the graph's inputs.
  const std::vector<Tensor>& inputs() const { return inputs_; }
  /// Sets the outputs (checking that the result tree has only tensor leaves)
  /// and returns the staged graph; the context is left.
  StagedGraph finish(const std::vector<Tensor>& outs, TreeDef out_tree, TreeDef in_tree,
                     std::vector<TensorLayout> in_layouts);

 private:
  // StagedGraph::write_reads of `s` (writes, captured, outputs set; the context still live).
  std::vector<WriteReads> write_reads(const StagedGraph& s, size_t nresults) const;
  std::shared_ptr<Graph> graph_;
  std::optional<GraphRealizationContext> ctx_;
  std::vector<Tensor> inputs_;
  std::vector<int32_t> same_as_;
};

}  // namespace detail

/// The callable returned by stage(fn).
template <class F>
class Stager {
 public:
  Stager(F fn, StageOptions opts) : fn_(std::move(fn)), opts_(std::move(opts)) {}

  /// Traces fn on arguments described by `specs`: a TensorLayout (or an
  /// example Tensor, taken by its layout) for each tensor parameter, nested
  /// in the same containers as the parameters; other values are static.
  /// Throws ValueError naming the output path when a result is not a tensor.
  template <class... Specs>
  StagedGraph operator()(const Specs&... specs) const {
    using Args = typename detail::fn_traits<F>::args;
    static_assert(std::tuple_size_v<Args> == sizeof...(Specs),
                  "kiln::stage: give exactly one spec per parameter of the function");
    std::tuple<Specs...> spec_tuple(specs...);
    auto [layouts, in_tree] = tree_flatten_layouts(spec_tuple);
    detail::check_specs(layouts, in_tree);
    detail::TraceSession session(opts_.name, layouts, opts_.allow_subgraphs, opts_.same_as,
                                 opts_.check_subgraph_bodies);
    detail::LeafSource src{session.inputs().data(), session.inputs().size(), 0};
    Args args = detail::rebuild_node<Args>(spec_tuple, src);
    auto result = std::apply(fn_, args);
    auto [outs, out_tree] = tree_flatten(result);
    return session.finish(outs, std::move(out_tree), std::move(in_tree), std::move(layouts));
  }

 private:
  F fn_;
  StageOptions opts_;
};

/// stage(fn)(specs...) -> StagedGraph. See Stager::operator().
template <class F>
Stager<F> stage(F fn, StageOptions opts = {}) {
  return Stager<F>(std::move(fn), std::move(opts));
}

}  // namespace kiln
