// kiln (internal): what the graph passes share: a rewriter that substitutes
// values and removes nodes in one walk and commits with a single
// Graph::remove_nodes, attribute hashing, and the passes' "did anything change"
// forms used by optimize().
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../graph.h"

namespace kiln::detail {

/// In-place rewriting of a graph's node list. A pass walks the nodes in
/// order, calls `read_inputs(i)` first (so a node reads the substitutes of
/// removed values), then edits node i in place or calls `replace`. Every
/// intermediate state is a valid graph with some dead nodes, so an exception
/// mid-pass leaves a usable graph. `commit` drops removed nodes (one
/// Graph::remove_nodes) and renames the graph outputs.
class Rewriter {
 public:
  explicit Rewriter(Graph& g);
  Graph& graph() { return g_; }
  std::vector<Node>& nodes() { return g_.mutable_nodes(); }
  /// Rewrites node i's inputs to the values that replace them.
  void read_inputs(size_t i);
  /// Node i (single output) is removed; its value's uses read `value`
  /// (defined by an earlier node) instead.
  void replace(size_t i, int32_t value);
  /// Records an in-place edit (for the "changed" result).
  void touched() { changed_ = true; }
  /// The node defining `value` (valid during the walk: nodes do not move).
  Node& producer(int32_t value) { return g_.mutable_nodes()[static_cast<size_t>(g_.producer(value))]; }
  /// Applies removals and output renames; returns whether the graph changed.
  bool commit();

 private:
  Graph& g_;
  std::vector<int32_t> subst_;  // per value: the value read instead (itself when kept)
  std::vector<char> removed_;   // per node
  bool any_removed_ = false, changed_ = false;
};

/// Hash and equality of attributes; the scalar is compared bit by bit (pad
/// with -0.0 differs from pad with 0.0; a NaN equals the same NaN).
size_t hash_attrs(const Attrs& a);
bool same_attrs(const Attrs& a, const Attrs& b);
inline size_t hash_mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

/// The passes, returning whether they changed the graph (optimize's fixed point).
bool run_dead_code_elimination(Graph& g);
bool run_common_subexpression_elimination(Graph& g);
bool run_constant_folding(Graph& g, int64_t max_elements);
bool run_algebraic_simplification(Graph& g);
bool run_canonicalize_shapes(Graph& g);

}  // namespace kiln::detail
