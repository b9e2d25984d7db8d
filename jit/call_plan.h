// kiln: what a cached compiled call checks and copies, decided once per
// CompiledCallable (at construction) instead of on every call.
//
// A call's fixed costs around the plan are the argument tree compare, the
// per-leaf layout checks and the captured-constant hashes. The parts that
// depend only on the compiled graph are computed here once:
//  - which results are the tensor a write-back writes (`x.exp_(); return
//    x;`): the call returns that argument or weight itself, as eagerly;
//    (a result eager makes new never aliases an argument or weight: the
//    compiled graph copies one the optimiser reduced to an input,
//    jit/fresh_results.h, so no call looks at result memory for that);
//  - which results are a captured tensor the function does not write, or a
//    view of one: the call returns that tensor (a view of it), as eagerly;
//  - the result tree, shared by every CallResult (no TreeDef copy per call);
//  - the last argument type whose type-determined tree (pytree_fixed.h) was
//    found equal to the signature, so a call with the same C++ argument
//    types compares one pointer instead of the whole tree.
// Copies of a CompiledCallable share one CallPlan.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../trace/stage.h"

namespace kiln::detail {

struct CallPlan {
  /// (result index, write index) for each result that is the value written
  /// back by that write (detail::written_results on the optimised graph),
  /// ascending by result.
  std::vector<std::pair<uint32_t, uint32_t>> written_results;
  /// A result that is a view of a written value (`x.mul_(2); return x[1];`,
  /// or `v = x[0]; x.add_(1); return v;`): eagerly a view of the tensor
  /// written, so the call returns `chain` (view ops, in order) replayed on
  /// that tensor after the write-back. Ascending by result.
  struct ViewOfWritten {
    uint32_t result = 0;
    uint32_t write = 0;
    std::vector<std::pair<OpId, Attrs>> chain;
  };
  std::vector<ViewOfWritten> views_of_written;
  /// A result that is a captured tensor the function does not write, or a
  /// view of one (`return state;`, `return state[1];`), held outside the
  /// trace (a tensor the function made while traced, `zeros(...)`, is new
  /// memory on each eager call, so it stays the graph's copy): eagerly that
  /// tensor or a view of it, so the call returns StagedGraph::captured[captured]
  /// .source with `chain` (view ops, in order) replayed on it, eager's
  /// strides included, in place of the graph's copy of the baked-in
  /// constant (equal contents: the call checked its hash). Found on the
  /// staged graph (a callable rebuilt from a compiled artifact or MEF file
  /// has no captured tensors: its constants are the file's). The contents
  /// check stays (a call after the tensor changed throws, as for any
  /// captured tensor). Ascending by result.
  struct CapturedResult {
    uint32_t result = 0;
    uint32_t captured = 0;
    std::vector<std::pair<OpId, Attrs>> chain;
  };
  std::vector<CapturedResult> captured_results;
  /// StagedGraph::writes.size(): the trailing results that are written values.
  size_t num_writes = 0;
  /// StagedGraph::out_tree, shared by the CallResults of every call.
  std::shared_ptr<const TreeDef> out_tree;
  /// Whether staged.in_layouts are, one for one, the types of the graph's
  /// inputs: then a checked call, having matched every argument against its
  /// layout, has made engine::Model::execute's checks (count, dtype, device,
  /// shape) and runs the plan without repeating them.
  bool inputs_are_graph_inputs = false;
  /// A TreeDef with static storage duration (pytree_fixed.h's
  /// fixed_treedef) found equal to StagedGraph::in_tree, or null.
  mutable std::atomic<const TreeDef*> fixed_in_tree{nullptr};
};

/// The call plan of `staged` compiled to `optimized` (the artifact's graph:
/// staged.graph may be null, for a callable rebuilt from a compiled artifact).
std::shared_ptr<const CallPlan> make_call_plan(const StagedGraph& staged, const Graph& optimized);

}  // namespace kiln::detail
