// kiln (internal): the memory plan of a list of steps, whatever device runs
// them: when each value can be dropped, and where each intermediate lives in
// one scratch arena per call. It sees only which values each step reads and
// writes, so every lowering of a fusion plan (jit/fusion.h) shares it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "../trace/graph.h"

namespace kiln::codegen {

/// What one step does to values (ids of the planned graph).
struct StepValues {
  ValueList reads;
  ValueList writes;
  /// The step is a view op: its one written value aliases the memory of its
  /// first read value (so it gets no memory of its own and keeps its base
  /// alive).
  bool view = false;
};

struct MemoryPlan {
  /// Per step: values nothing reads after it (not graph outputs).
  std::vector<std::vector<int32_t>> release_after;
  /// Per value: byte offset in the arena (a multiple of 64), or -1 when the
  /// value is not an arena intermediate (an input, weight, constant, graph
  /// output, view, empty value, or a value no step writes).
  std::vector<int64_t> arena_offset;
  /// Bytes of the arena (the peak of intermediates live at once).
  size_t arena_bytes = 0;
};

/// Plans memory for `steps` of `g`, run in order; `is_output[v]` marks graph
/// outputs (they get memory of their own and live past the last step).
MemoryPlan plan_memory(const Graph& g, const std::vector<StepValues>& steps, const std::vector<char>& is_output);

/// Checks arena offsets made elsewhere (a MEF file's PLAN section) against
/// the liveness plan_memory uses: the first two arena values (the earlier
/// first) that are live at the same step and whose blocks (sizes rounded
/// to 64 bytes, as planned) overlap, or nullopt. Values without an offset
/// (-1) are not checked.
std::optional<std::pair<int32_t, int32_t>> find_arena_overlap(const Graph& g, const std::vector<StepValues>& steps,
                                                               const std::vector<char>& is_output,
                                                               const std::vector<int64_t>& arena_offset);

}  // namespace kiln::codegen
