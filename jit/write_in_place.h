// kiln: which write-backs of a compiled call (in-place writes to arguments or
// mutable weights, StagedGraph::writes) can be computed straight into their
// destination's memory instead of into a new tensor copied there at the end.
#pragma once
#include <cstddef>
#include <vector>

#include "../trace/graph.h"
#include "plan.h"

namespace kiln::codegen {

/// Per write k (the graph outputs past the first `nresults`), true when the
/// plan may compute the final value directly into the destination (graph
/// input `writes[k].argument`, or the weight named `writes[k].weight`):
/// - the value is made by a step that writes memory of its own (not a view,
///   not an input, weight or constant passed through) and is no other
///   write's output (a result that is the same value is the written tensor
///   itself, which the call returns as the destination: jit/fresh_results.h);
/// - every other step that reads the old value, or a value that may alias it
///   (a view of it, or an eager op's result made from it), runs before that
///   step, and no graph output is such a value;
/// - the step itself reads the old value only as an elementwise operand of
///   the same shape in a generated (fused) step, which reads each element
///   before writing the same element.
/// Call-time conditions (the destination contiguous and sharing no memory
/// with another argument or weight) are the caller's to check.
std::vector<char> in_place_writes(const ExecutionPlan& plan, size_t nresults, const std::vector<WriteBack>& writes);

}  // namespace kiln::codegen
