// kiln: what a cached compiled call checks and copies, decided once per
// CompiledCallable (at construction) instead of on every call.
//
// A call's fixed costs around the plan are the argument tree compare, the
// per-leaf layout checks, the captured-constant hashes, and the copy of a
// result the optimiser reduced to an argument or weight. The parts that
// depend only on the staged graph are computed here once:
//  - which results need the "reduced to an input" test at all (a result the
//    staged graph makes with a non-view op and that is not a written value;
//    every other result is skipped without looking at memory);
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
#include <vector>

#include "../trace/stage.h"

namespace kiln::detail {

struct CallPlan {
  /// Results (indices below out_tree's leaf count) the staged graph computes
  /// as new tensors with an op that is not a view and that are not also a
  /// written value: the only ones copy_results_reduced_to_inputs looks at.
  std::vector<uint32_t> reducible;
  /// StagedGraph::writes.size(): the trailing results that are written values.
  size_t num_writes = 0;
  /// StagedGraph::out_tree, shared by the CallResults of every call.
  std::shared_ptr<const TreeDef> out_tree;
  /// A TreeDef with static storage duration (pytree_fixed.h's
  /// fixed_treedef) found equal to StagedGraph::in_tree, or null.
  mutable std::atomic<const TreeDef*> fixed_in_tree{nullptr};
};

/// The call plan of `staged` (its graph may be null: a callable rebuilt from
/// a compiled artifact, which copies nothing).
std::shared_ptr<const CallPlan> make_call_plan(const StagedGraph& staged);

/// A result that eager execution computes as a new tensor (x * 1, x - 0,
/// -(-x): an op that is not a view in the staged graph) but that the
/// optimiser reduced to an argument or a weight is copied, so that writing
/// into the result does not write into the caller's tensor. A result the
/// function returns as the argument itself or a view of it (return x,
/// x.reshape(...)) aliases it, as it does eagerly; so does one that is an
/// argument's written value (x.add_(1); return x), which write_back handles.
/// Only plan.reducible results are looked at, and each is compared by buffer
/// identity first (no memory-range work unless a buffer is shared).
void copy_results_reduced_to_inputs(const CallPlan& plan, std::vector<Tensor>& results, std::span<const Tensor> args,
                                    const std::map<std::string, Tensor>& weights);

}  // namespace kiln::detail
