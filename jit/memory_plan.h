// kiln (internal): the memory plan of a list of steps, whatever device runs
// them: when each value can be dropped, and where each intermediate lives in
// one scratch arena per call. It sees only which values each step reads and
// writes, so every lowering of a fusion plan (jit/fusion.h) shares it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../trace/graph.h"

namespace kiln::codegen {

/// What one step does to values (ids of the planned graph).
struct StepValues {
  std::vector<int32_t> reads;
  std::vector<int32_t> writes;
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

}  // namespace kiln::codegen
