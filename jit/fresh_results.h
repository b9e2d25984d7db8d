// kiln (internal): a compiled graph's results alias what eager execution's
// results alias, and nothing else, decided once when the graph is compiled
// and recorded in the optimised graph itself, so every way of running it
// (a checked call, execute_raw, engine::Model, a callable read back from a
// MEF file) gets it without a per-call memory check.
//
// Eagerly, `x * 1`, `x - 0`, `-(-x)`, `x.reshape(same) * 1` make new
// tensors, but the optimiser reduces them to x itself (passes.h), and the
// plan returns an input value as the caller's tensor: a result that shares
// the caller's memory where eager's does not. Before optimising, each
// result is classified on the graph as staged (calls inlined); after, the
// results that eager makes new but that the optimised graph reduced to an
// input, a weight, a view of a constant, or another output's value become
// a copy (a cast to their own dtype: exact), computed by the plan into new
// memory. A result returned as an argument (or weight) or a view of one
// keeps aliasing it, as eagerly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../trace/graph.h"

namespace kiln::detail {

/// How eager execution makes one result (graph output before the trailing
/// `nwrites` written values), as the staged graph says.
struct ResultKinds {
  /// Per result: k >= 0 when the result is the value written back by write
  /// k (the function returned the tensor it wrote in place, `x.exp_();
  /// return x;`: eagerly the result is that tensor); kViewResult for an
  /// input or weight or a view of one (eagerly that tensor or a view of it);
  /// kNewResult otherwise (eagerly a new tensor).
  std::vector<int32_t> kind;
  /// Per graph output (results and written values): the first output that
  /// was the same value before optimisation (outputs that are one tensor
  /// eagerly, `return (y, y)`, may stay one value).
  std::vector<int32_t> group;
  static constexpr int32_t kNewResult = -1, kViewResult = -2;
};

/// Classifies the results of `g` (flat: calls inlined, not yet optimised);
/// its last `nwrites` outputs are written values (StagedGraph::writes).
ResultKinds classify_results(const Graph& g, size_t nwrites);

/// After optimisation: adds a copy (Cast to the value's own dtype) for
///  - each kNewResult result the optimiser reduced to an input, a weight or
///    a view of one, or a view of a constant, or to the value of an output
///    it was not the same value as before (one copy per group);
///  - each written value that is also a kViewResult result's value or an
///    earlier written value it was not before (the copy is then computed
///    into the destination where the plan allows, as the write-back copy
///    would have been);
/// then sets each result that is written value k to that value. Afterwards
/// a result is the same value as written value k exactly when its kind is
/// k (written_results). Returns the number of copies added.
size_t separate_results(Graph& g, size_t nwrites, const ResultKinds& kinds);

/// Per result of an optimised graph whose last `nwrites` outputs are
/// written values: the first write k whose value the result is, or -1. For
/// a graph compiled by this kiln, the results returned as the written
/// tensor itself (ResultKinds::kind k >= 0).
std::vector<int32_t> written_results(const Graph& g, size_t nwrites);

}  // namespace kiln::detail
