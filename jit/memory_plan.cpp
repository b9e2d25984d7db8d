#include "memory_plan.h"

#include <algorithm>

namespace kiln::codegen {

// Liveness of every value a step writes, then arena offsets for the
// intermediates: a value lives from the step that writes it to the last step
// that reads it or any view of it (a view aliases its base's memory); graph
// outputs live past the end. Offsets come from a greedy first fit over the
// values live at the same time, so the arena is the peak of live
// intermediates (rounded to 64 bytes each), not their sum.
namespace {

struct Liveness {
  std::vector<int> def, last_read, live_until;
  std::vector<char> planned;  // an arena intermediate: written by a non-view step, not an output, not empty
};

Liveness liveness(const Graph& g, const std::vector<StepValues>& steps, const std::vector<char>& is_output) {
  const int S = static_cast<int>(steps.size());
  const size_t nv = g.num_values();
  std::vector<int32_t> root(nv);
  for (size_t v = 0; v < nv; ++v) root[v] = static_cast<int32_t>(v);
  Liveness l{std::vector<int>(nv, -1), std::vector<int>(nv, -1), std::vector<int>(nv, -1), std::vector<char>(nv, 0)};
  std::vector<int>&def = l.def, &last_read = l.last_read, &live_until = l.live_until;
  for (int k = 0; k < S; ++k) {
    const StepValues& s = steps[k];
    for (int32_t v : s.reads) {
      last_read[v] = k;
      live_until[root[v]] = std::max(live_until[root[v]], k);
    }
    for (int32_t v : s.writes) {
      def[v] = k;
      live_until[v] = std::max(live_until[v], k);
      if (s.view)
        root[v] = root[s.reads[0]];
      else
        l.planned[v] = !is_output[v] && g.type(v).layout().numel() > 0;
    }
  }
  for (int32_t v : g.output_ids()) live_until[root[v]] = S;
  // Views keep their base alive: extend each base to its views' last reads.
  for (size_t v = 0; v < nv; ++v)
    if (root[v] != static_cast<int32_t>(v)) live_until[root[v]] = std::max(live_until[root[v]], std::max(last_read[v], def[v]));
  return l;
}

int64_t arena_size(const Graph& g, int32_t v) {
  const TensorType& t = g.type(v);
  return (t.layout().numel() * static_cast<int64_t>(size_of(t.dtype)) + 63) / 64 * 64;
}

}  // namespace

MemoryPlan plan_memory(const Graph& g, const std::vector<StepValues>& steps, const std::vector<char>& is_output) {
  MemoryPlan m;
  const int S = static_cast<int>(steps.size());
  const size_t nv = g.num_values();
  const Liveness l = liveness(g, steps, is_output);
  const std::vector<int>&def = l.def, &last_read = l.last_read, &live_until = l.live_until;
  const std::vector<char>& planned = l.planned;

  m.release_after.assign(static_cast<size_t>(S), {});
  for (size_t v = 0; v < nv; ++v)
    if (def[v] >= 0 && !is_output[v]) m.release_after[std::max(def[v], last_read[v])].push_back(static_cast<int32_t>(v));

  m.arena_offset.assign(nv, -1);
  struct Live {
    int64_t offset, size;
    int until;
  };
  std::vector<Live> live;
  int64_t top = 0;
  for (int k = 0; k < S; ++k) {
    // Blocks whose values died before this step are free again.
    std::erase_if(live, [k](const Live& l) { return l.until < k; });
    for (int32_t v : steps[k].writes) {
      if (!planned[v]) continue;
      const int64_t size = arena_size(g, v);
      std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.offset < b.offset; });
      int64_t off = 0;
      for (const Live& l : live) {
        if (l.offset - off >= size) break;
        off = std::max(off, l.offset + l.size);
      }
      m.arena_offset[v] = off;
      live.push_back({off, size, live_until[v]});
      top = std::max(top, off + size);
    }
  }
  m.arena_bytes = static_cast<size_t>(top);
  return m;
}

std::optional<std::pair<int32_t, int32_t>> find_arena_overlap(const Graph& g, const std::vector<StepValues>& steps,
                                                               const std::vector<char>& is_output,
                                                               const std::vector<int64_t>& arena_offset) {
  const Liveness l = liveness(g, steps, is_output);
  struct Live {
    int32_t v;
    int64_t offset, size;
    int until;
  };
  std::vector<Live> live;
  for (int k = 0; k < static_cast<int>(steps.size()); ++k) {
    std::erase_if(live, [k](const Live& b) { return b.until < k; });  // as plan_memory frees them
    for (int32_t v : steps[k].writes) {
      if (!l.planned[v] || arena_offset[v] < 0) continue;
      const Live me{v, arena_offset[v], arena_size(g, v), l.live_until[v]};
      for (const Live& b : live)
        if (me.offset < b.offset + b.size && b.offset < me.offset + me.size) return std::make_pair(b.v, v);
      live.push_back(me);
    }
  }
  return std::nullopt;
}

}  // namespace kiln::codegen
