// ExecutionPlan, the CPU plan of one flat graph: built from the fusion
// plan (fusion.h), lowered to CPU steps (cpu_lowering.h) with the memory
// plan of their reads and writes (memory_plan.h); run one call at a time per
// thread, a scratch arena per call.
#include "plan.h"

#include <vector>

#include "cpu_lowering.h"
#include "fusion.h"
#include "memory_plan.h"
#include "step_pairs.h"

namespace kiln::codegen {

ExecutionPlan::ExecutionPlan(std::shared_ptr<const Graph> graph, const KernelOptions& opt, const CodeImages* images)
    : graph_(std::move(graph)) {
  const Graph& g = *graph_;
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::call) throw ValueError("ExecutionPlan: inline calls first (graph '" + g.name() + "')");
    else if (n.kind == NodeKind::weight) {
      weight_slots_.emplace_back(n.name, g.type(n.outputs[0]));
      weight_values_.push_back(n.outputs[0]);
    }
  const FusionPlan fusion = plan_fusion(g, opt, cpu_fusion_rules(opt));
  steps_ = lower_cpu(g, fusion, opt, images);
  pairs_ = interop_enabled();
  pair_independent_steps(steps_, fusion.is_output, pairs_);
  code_key_ = codegen_feature_key(detect_cpu_target(), opt.strict);
  fuse_ = opt.fuse;
  std::vector<StepValues> io(steps_.size());
  for (size_t k = 0; k < steps_.size(); ++k) {
    const PlanStep& s = steps_[k];
    io[k] = {step_reads(s), step_writes(s), s.kind == PlanStep::Kind::op && op_info(s.op).category == OpCategory::View};
  }
  // A pair running at once is one step to the memory plan: both steps'
  // reads live until both end, and neither output may take the memory of
  // a value the other still reads.
  for (size_t k = 0; k + 1 < steps_.size(); ++k)
    if (steps_[k].run_with_next) {
      StepValues& next = io[k + 1];
      next.reads.insert(next.reads.end(), io[k].reads.begin(), io[k].reads.end());
      next.writes.insert(next.writes.end(), io[k].writes.begin(), io[k].writes.end());
      io[k] = StepValues{};
    }
  MemoryPlan memory = plan_memory(g, io, fusion.is_output);
  release_after_.assign(memory.release_after.begin(), memory.release_after.end());
  arena_offset_ = std::move(memory.arena_offset);
  arena_bytes_ = memory.arena_bytes;
}

ExecutionPlan::ExecutionPlan(std::shared_ptr<const Graph> graph, const KernelOptions& opt, Parts parts)
    : graph_(std::move(graph)),
      steps_(std::move(parts.steps)),
      release_after_(std::move(parts.release_after)),
      arena_offset_(std::move(parts.arena_offset)),
      arena_bytes_(parts.arena_bytes),
      code_key_(codegen_feature_key(detect_cpu_target(), opt.strict)),
      fuse_(opt.fuse) {
  for (const Node& n : graph_->nodes())
    if (n.kind == NodeKind::weight) {
      weight_slots_.emplace_back(n.name, graph_->type(n.outputs[0]));
      weight_values_.push_back(n.outputs[0]);
    }
  // The writer's pairs (the PLAN key carries whether it paired; its memory
  // plan counts on them).
  std::vector<char> is_output(graph_->num_values(), 0);
  for (int32_t v : graph_->output_ids()) is_output[static_cast<size_t>(v)] = 1;
  pairs_ = interop_enabled();
  mark_adjacent_pairs(steps_, is_output, pairs_);
}

std::vector<int32_t> step_reads(const PlanStep& s) {
  if (s.kind == PlanStep::Kind::fused_row) {  // the group's inputs and the row op's, but not x
    std::vector<int32_t> r(s.operands.begin() + s.num_outputs, s.operands.end());
    r.insert(r.end(), s.inputs.begin() + 1, s.inputs.end());
    return r;
  }
  if (s.kind == PlanStep::Kind::gemm_fused) {  // A, B and the group's inputs but the product
    std::vector<int32_t> r = s.inputs;
    for (size_t j = s.num_outputs; j < s.operands.size(); ++j)
      if (static_cast<int>(j) != s.product_operand) r.push_back(s.operands[j]);
    return r;
  }
  if (s.kind != PlanStep::Kind::fused) return s.inputs;
  return std::vector<int32_t>(s.operands.begin() + s.num_outputs, s.operands.end());
}

std::vector<int32_t> step_writes(const PlanStep& s) {
  if (s.kind != PlanStep::Kind::fused && s.kind != PlanStep::Kind::gemm_fused) {
    if (s.output2 >= 0) return {s.output, s.output2};
    return {s.output};
  }
  std::vector<int32_t> w;
  for (int j = 0; j < s.num_outputs; ++j)
    if (j != s.reduce_operand) w.push_back(s.operands[j]);
  if (s.reduce_operand >= 0) w.push_back(s.reduce_output);
  return w;
}

// A call's arena: one a finished call gave back, else a new one. Given back
// when the call ends, unless something else (a result viewing an
// intermediate) still holds it: the next call would overwrite that result.
struct ExecutionPlan::ArenaLease {
  const ExecutionPlan& plan;
  Buffer arena;
  explicit ArenaLease(const ExecutionPlan& p) : plan(p) {
    if (!p.arena_bytes_) return;
    {
      std::lock_guard<std::mutex> lock(p.arena_mu_);
      if (!p.free_arenas_.empty()) {
        arena = std::move(p.free_arenas_.back());
        p.free_arenas_.pop_back();
      }
    }
    if (!arena) arena = Buffer::allocate(p.arena_bytes_);
  }
  ~ArenaLease() {
    if (!arena || arena.use_count() != 1) return;
    std::lock_guard<std::mutex> lock(plan.arena_mu_);
    plan.free_arenas_.push_back(std::move(arena));
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
};

void ExecutionPlan::run(std::span<const Tensor> inputs, std::span<const Tensor> weights,
                        std::vector<Tensor>& outputs) const {
  const Graph& g = *graph_;
  // Declared first, so it is given back after every view of it below is gone.
  const ArenaLease lease(*this);
  // One scratch buffer per call (calls may run concurrently) for every
  // intermediate (the lease above); graph outputs get their own memory.
  const Buffer& arena = lease.arena;
  // The value table and the binding's vectors are reused by the next call on
  // this thread (no allocation per call); a call made while one runs on this
  // thread (an eager kernel calling compiled code) gets its own.
  thread_local Bound reused;
  thread_local bool in_use = false;
  Bound local;
  Bound& bound = in_use ? local : reused;
  struct Release {
    bool* flag;
    Bound& b;
    ~Release() {
      b.clear();
      if (flag) *flag = false;
    }
  } release{in_use ? nullptr : &in_use, bound};
  in_use = true;
  std::vector<Tensor>& vals = bound.vals;
  vals.resize(g.num_values());  // empty handles (clear() dropped the last call's)
  const auto& in_ids = g.input_ids();
  for (size_t i = 0; i < in_ids.size(); ++i) vals[in_ids[i]] = inputs[i];
  for (size_t i = 0; i < weight_values_.size(); ++i) vals[weight_values_[i]] = weights[i];
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::constant) vals[n.outputs[0]] = n.data;
  // A defined outputs[k] is where output k is computed (in-place write-back,
  // jit/write_in_place.h); a step run one by one may still put it elsewhere.
  for (size_t k = 0; k < outputs.size() && k < g.output_ids().size(); ++k)
    if (outputs[k].defined() && !vals[g.output_ids()[k]].defined()) {
      vals[g.output_ids()[k]] = outputs[k];
      bound.outputs_given = true;
    }
  if (bind_all(bound, vals, arena)) {
    run_bound(bound);
  } else {
    run_stepwise(vals, arena);
  }
  outputs.resize(g.output_ids().size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    int32_t v = g.output_ids()[k];
    const Node& prod = g.node(g.producer(v));
    // Never hand out the plan's own constant storage.
    outputs[k] = prod.kind == NodeKind::constant ? vals[v].clone() : vals[v];
  }
}

// Binds and runs one step at a time (a step's input is then a computed
// value that bind() may copy to make contiguous); values outside the arena
// are dropped after their last use.
void ExecutionPlan::run_stepwise(std::vector<Tensor>& vals, const Buffer& arena) const {
  auto destination = [&](int32_t v) { return this->destination(v, arena); };
  std::vector<Tensor> args;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const PlanStep& s = steps_[k];
    if (s.kind == PlanStep::Kind::op) {
      args.clear();
      for (int32_t v : s.inputs) args.push_back(vals[v]);
      if (arena_offset_[s.output] >= 0) {
        const Tensor dst = destination(s.output);
        detail::ScopedOutput into(dst);
        Tensor r = detail::eager_execute(s.op, args, s.attrs);
        // A result elsewhere in the arena (an alias the plan did not expect)
        // would be overwritten later: keep a private copy.
        vals[s.output] = r.buffer() == arena && r.data_ptr() != dst.data_ptr() ? r.clone() : std::move(r);
      } else {
        vals[s.output] = detail::eager_execute(s.op, args, s.attrs);
      }
    } else {
      execute(bind(k, vals, destination));
    }
    for (int32_t v : release_after_[k]) vals[v] = Tensor();  // memory outside the arena goes back early
  }
}

}  // namespace kiln::codegen
