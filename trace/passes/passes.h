// kiln: graph passes. Each pass rewrites one Graph in place, keeps its
// inputs (count, order, types) and its outputs (count, order, types; an
// output may come to name another, equal value), leaves a graph that passes
// Graph::verify(), and runs in time near-linear in the node count (hash
// maps, one walk in topological order, at most one Graph::remove_nodes).
// Passes other than optimize() touch only the graph given, not its subgraphs.
//
// Semantics are preserved exactly: a rewritten graph computes results
// bit-identical to the original when executed with the eager kernels (NaN
// payloads aside), so no rewrite relies on algebra that fails in IEEE
// arithmetic (x + 0.0 is not x for x = -0.0; a + b is not reassociated).
#pragma once
#include <cstdint>
#include <memory>

#include "../graph.h"

namespace kiln {

/// Removes nodes none of whose values reach a graph output. Input nodes
/// always stay; unused constants, weights, ops and calls go.
void dead_code_elimination(Graph& g);

/// Merges op nodes with the same op, the same (already merged) inputs and
/// equal attributes (the scalar compared bit by bit, so pad with -0.0 and
/// pad with 0.0 stay apart), and constants with equal dtype, shape, device
/// and bytes. A later duplicate is removed and its uses read the first
/// occurrence; nothing else is removed (that is DCE's job). Inputs, weights
/// and calls are never merged, and operands are not reordered (a + b and
/// b + a stay apart: NaN payloads would differ).
void common_subexpression_elimination(Graph& g);

/// Replaces each op node whose inputs are all constants and whose result has
/// at most `max_elements` elements by a constant holding its result. The
/// result is computed with the eager kernels (detail::eager_execute), so a
/// folded graph gives bit-identical results to eager execution. Folding
/// chains (a folded result feeds the next fold). An op whose kernel throws
/// (e.g. integer division by zero, an index out of range) stays, so the
/// error surfaces when the graph runs. Only CPU constants are folded.
void constant_folding(Graph& g, int64_t max_elements = 1024);

/// Local rewrites that remove work without changing any result bit:
///  - x * 1, 1 * x, x / 1 -> x; x - 0 -> x (0 = +0.0 for floats);
///    x + c, c + x -> x when every element of c is 0 for integer/bool dtypes
///    and -0.0 for floats (x + (+0.0) is not an identity: -0.0 + 0.0 = +0.0).
///    Only when c is a constant whose elements all equal the identity and the
///    result type (dtype, shape, device) equals x's type exactly, so neither
///    a promotion nor a broadcast is lost.
///  - neg(neg(x)) -> x.
///  - permute(permute(x, p), q) -> permute(x, p∘q); an identity permute -> x.
///  - reshape(reshape(x, a), b) -> reshape(x, b); a reshape to x's shape -> x.
///  - cast(reshape(x, a)) to the reshape's own dtype -> reshape(x, a) when
///    the cast is no graph output (a reshape eager copies is recorded as the
///    reshape and such a copy; where the plan's reshape cannot be a view, it
///    copies itself).
///  - broadcast_to(x, x's shape) -> x; broadcast_to of a one-element
///    constant -> a constant of the broadcast shape when it has at most 1024
///    elements (larger ones stay a broadcast, which costs no memory).
void algebraic_simplification(Graph& g);

/// Normalises attributes so equal ops compare equal (helps CSE): negative
/// axes become non-negative (reduce, cumsum, softmax/log_softmax, the view
/// ops, concat/gather/index_select), a select's negative index is resolved,
/// reduce/squeeze/flip axes are sorted and deduplicated (empty, "all axes",
/// stays empty), and a reshape's -1 is replaced by the extent it stands for.
/// A node whose normalised attributes would change its type is left alone.
void canonicalize_shapes(Graph& g);

/// Runs canonicalize_shapes, algebraic_simplification, constant_folding,
/// common_subexpression_elimination and dead_code_elimination in rounds
/// until nothing changes (at most 4 rounds), on `g` and, when `g` is a root
/// graph, on each of its subgraph definitions (whose signatures are kept).
void optimize(Graph& g);

/// Inlines every call node of `root` (recursively), resolving placeholder
/// weights through each call's prefix; returns a new flat graph (no call
/// nodes, no subgraphs) with root's inputs and outputs. Unlike the passes
/// above it builds a new graph instead of rewriting one in place, and it is
/// not part of optimize(): the JIT inlines a staged graph, then optimizes
/// the flat result, then plans it (jit/engine.cpp). Throws ValueError when
/// a call names an unknown subgraph.
std::unique_ptr<Graph> inline_calls(const Graph& root);

}  // namespace kiln
