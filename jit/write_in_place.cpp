#include "write_in_place.h"

#include <algorithm>

namespace kiln::codegen {

namespace {
bool is_view_step(const PlanStep& s) {
  return s.kind == PlanStep::Kind::op && op_info(s.op).category == OpCategory::View;
}
bool contains(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

bool safe_in_place(const ExecutionPlan& plan, int32_t old_value, int32_t new_value, size_t output_index,
                   size_t nresults) {
  const Graph& g = plan.graph();
  const auto& steps = plan.steps();
  const auto& outs = g.output_ids();
  // Also another write's value: that destination would alias this one. A
  // result of the same value is the written tensor itself (the call returns
  // the destination for it, fresh_results.h), so it may be the destination.
  for (size_t k = nresults; k < outs.size(); ++k)
    if (k != output_index && outs[k] == new_value) return false;
  // The step that writes the new value.
  size_t producer = steps.size();
  for (size_t k = 0; k < steps.size() && producer == steps.size(); ++k)
    if (contains(step_writes(steps[k]), new_value)) producer = k;
  if (producer == steps.size() || is_view_step(steps[producer])) return false;
  if (!(g.type(old_value) == g.type(new_value))) return false;
  // Values that may share the old value's memory, in step order: views of
  // it, and (conservatively) results of eager op steps reading one of them.
  std::vector<char> alias(g.num_values(), 0);
  alias[static_cast<size_t>(old_value)] = 1;
  for (size_t k = 0; k < steps.size(); ++k) {
    const PlanStep& s = steps[k];
    const std::vector<int32_t> reads = step_reads(s);
    const bool reads_alias = std::any_of(reads.begin(), reads.end(), [&](int32_t v) { return alias[static_cast<size_t>(v)]; });
    if (!reads_alias) continue;
    if (k == producer) {
      // Only an elementwise operand of a generated step, read at the index it
      // is written (a gemm_fused step's A and B are read across whole tiles).
      if (s.kind != PlanStep::Kind::fused && s.kind != PlanStep::Kind::gemm_fused) return false;
      if (s.kind == PlanStep::Kind::gemm_fused)
        for (int32_t v : s.inputs)
          if (alias[static_cast<size_t>(v)]) return false;
      for (int32_t v : reads)
        if (alias[static_cast<size_t>(v)] && (v != old_value || g.type(v).shape != g.type(new_value).shape)) return false;
    } else if (k > producer) {
      return false;  // reads the old value after it was overwritten
    }
    if (s.kind == PlanStep::Kind::op && k != producer)
      for (int32_t v : step_writes(s)) alias[static_cast<size_t>(v)] = 1;
  }
  for (int32_t v : outs)
    if (v != new_value && alias[static_cast<size_t>(v)]) return false;  // a result still holds the old memory
  return true;
}
}  // namespace

std::vector<char> in_place_writes(const ExecutionPlan& plan, size_t nresults, const std::vector<WriteBack>& writes) {
  const Graph& g = plan.graph();
  std::vector<char> ok(writes.size(), 0);
  for (size_t k = 0; k < writes.size(); ++k) {
    const WriteBack& w = writes[k];
    int32_t old_value = -1;
    if (w.argument >= 0) {
      if (static_cast<size_t>(w.argument) < g.input_ids().size()) old_value = g.input_ids()[static_cast<size_t>(w.argument)];
    } else {
      for (const Node& n : g.nodes())
        if (n.kind == NodeKind::weight && n.name == w.weight) old_value = n.outputs[0];
    }
    const size_t out_index = nresults + k;
    if (old_value < 0 || out_index >= g.output_ids().size()) continue;
    ok[k] = safe_in_place(plan, old_value, g.output_ids()[out_index], out_index, nresults) ? 1 : 0;
  }
  return ok;
}

}  // namespace kiln::codegen
