// ExecutionPlan, the CPU plan of one flat graph: built from the fusion
// plan (fusion.h), lowered to CPU steps (cpu_lowering.h) with the memory
// plan of their reads and writes (memory_plan.h); run one call at a time per
// thread, a scratch arena per call.
#include "plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "../tensor/realize_hook.h"
#include "cpu_lowering.h"
#include "fusion.h"
#include "memory_plan.h"
#include "profile_clock.h"
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
  MemoryPlan memory = plan_memory(g, memory_step_values(g, steps_), fusion.is_output);
  release_after_.assign(memory.release_after.begin(), memory.release_after.end());
  arena_offset_ = std::move(memory.arena_offset);
  arena_bytes_ = memory.arena_bytes;
  init_run_tables();
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
  init_run_tables();
}

std::vector<int32_t> step_reads(const PlanStep& s) {
  std::vector<int32_t> r;
  for_each_read(s, [&](int32_t v) { r.push_back(v); });
  return r;
}

void planned_strides(const Graph& g, int32_t v, Shape& shape, Strides& strides) {
  // The view chain ending at v, replayed from its base's contiguous strides.
  std::vector<const Node*> chain;
  for (;;) {
    const Node& n = g.node(static_cast<size_t>(g.producer(v)));
    if (n.kind != NodeKind::op || op_info(n.op).category != OpCategory::View || n.inputs.empty()) break;
    chain.push_back(&n);
    v = n.inputs[0];
  }
  shape = g.type(v).shape;
  strides = contiguous_strides(shape);
  Shape s2;
  Strides st2;
  for (size_t j = chain.size(); j-- > 0;) {
    detail::view_strides(chain[j]->op, shape, strides, chain[j]->attrs, s2, st2);
    shape.swap(s2);
    strides.swap(st2);
  }
}

bool step_is_view(const Graph& g, const PlanStep& s) {
  if (s.kind != PlanStep::Kind::op || op_info(s.op).category != OpCategory::View) return false;
  if (s.op != OpId::Reshape || s.inputs.empty()) return true;
  Shape shape, s2;
  Strides strides, st2;
  planned_strides(g, s.inputs[0], shape, strides);
  return detail::view_strides(OpId::Reshape, shape, strides, s.attrs, s2, st2);
}

std::vector<StepValues> memory_step_values(const Graph& g, const std::vector<PlanStep>& steps) {
  std::vector<StepValues> io(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) {
    for_each_read(steps[k], [&](int32_t v) { io[k].reads.push_back(v); });
    for_each_write(steps[k], [&](int32_t v) { io[k].writes.push_back(v); });
    io[k].view = step_is_view(g, steps[k]);
  }
  // A pair running at once is one step to the memory plan: both steps'
  // reads live until both end, and neither output may take the memory of
  // a value the other still reads.
  for (size_t k = 0; k + 1 < steps.size(); ++k)
    if (steps[k].run_with_next) {
      StepValues& next = io[k + 1];
      for (int32_t v : io[k].reads) next.reads.push_back(v);
      for (int32_t v : io[k].writes) next.writes.push_back(v);
      io[k] = StepValues{};
    }
  return io;
}

std::vector<int32_t> step_writes(const PlanStep& s) {
  std::vector<int32_t> w;
  for_each_write(s, [&](int32_t v) { w.push_back(v); });
  return w;
}

// A call's arena and whether the call owns the plan. The owner (one call at
// a time: one atomic exchange, no lock) runs in the plan's own arena; a call
// made while another owns the plan takes one a finished call gave back,
// else a new one. Either is given up when the call ends if something else (a
// result viewing an intermediate) still holds it: the next call would
// overwrite that result.
struct ExecutionPlan::ArenaLease {
  const ExecutionPlan& plan;
  const bool owner;
  Buffer own;                // a non-owner's arena
  const Buffer* arena = &own;
  explicit ArenaLease(const ExecutionPlan& p) : plan(p), owner(!p.owner_busy_.exchange(true, std::memory_order_acquire)) {
    if (!p.arena_bytes_) return;
    if (owner) {
      if (!p.owner_arena_) {
        try {
          p.owner_arena_ = Buffer::allocate(p.arena_bytes_);
        } catch (...) {
          p.owner_busy_.store(false, std::memory_order_release);
          throw;
        }
      }
      arena = &p.owner_arena_;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(p.arena_mu_);
      if (!p.free_arenas_.empty()) {
        own = std::move(p.free_arenas_.back());
        p.free_arenas_.pop_back();
      }
    }
    if (!own) own = Buffer::allocate(p.arena_bytes_);
  }
  ~ArenaLease() {
    if (owner) {
      // A result views it: it is the result's now (the next call makes another).
      if (plan.owner_arena_ && plan.owner_arena_.use_count() != 1) plan.owner_arena_ = Buffer();
      plan.owner_busy_.store(false, std::memory_order_release);
      return;
    }
    if (!own || own.use_count() != 1) return;
    std::lock_guard<std::mutex> lock(plan.arena_mu_);
    plan.free_arenas_.push_back(std::move(own));
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
};

namespace {

// KILN_PLAN_PROFILE: per plan, time stamp counter samples of each run()'s
// parts, printed at exit (ExecutionPlan::profiling).
struct PlanProfile {
  std::vector<std::string> names;              // per step: its describe() line
  std::vector<std::vector<uint32_t>> steps;    // per step: ticks
  std::vector<uint32_t> bind, finish, total, gap;
  uint64_t last_end = 0;
};
struct ProfileRegistry {
  std::mutex mu;
  std::map<const void*, std::unique_ptr<PlanProfile>> plans;
  uint64_t tsc0 = profile_ticks();
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};
ProfileRegistry& profile_registry();

void print_profiles() {
  ProfileRegistry& r = profile_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const double ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - r.t0).count());
  const double tick_ns = ns / double(profile_ticks() - r.tsc0);
  auto line = [&](const char* what, std::vector<uint32_t>& v) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (uint32_t x : v) sum += x;
    std::fprintf(stderr, "  %9.3f %9.3f %9.3f  %s\n", v.front() * tick_ns * 1e-3, v[v.size() / 2] * tick_ns * 1e-3,
                 sum / double(v.size()) * tick_ns * 1e-3, what);
  };
  for (auto& [plan, p] : r.plans) {
    if (p->total.size() < 1000) continue;
    std::fprintf(stderr, "KILN_PLAN_PROFILE: plan %p, %zu runs (us: min, median, mean)\n", plan, p->total.size());
    line("run() in all", p->total);
    line("gap before run() (the caller's work since the previous run ended)", p->gap);
    line("bind", p->bind);
    for (size_t k = 0; k < p->steps.size(); ++k) line(p->names[k].c_str(), p->steps[k]);
    line("outputs handed out", p->finish);
  }
}

ProfileRegistry& profile_registry() {
  static ProfileRegistry* r = [] {
    auto* x = new ProfileRegistry();  // never destroyed: printed at exit
    std::atexit(print_profiles);
    return x;
  }();
  return *r;
}

PlanProfile& plan_profile(const ExecutionPlan& plan) {
  ProfileRegistry& r = profile_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::unique_ptr<PlanProfile>& p = r.plans[&plan];
  if (!p || p->steps.size() != plan.steps().size()) {
    p = std::make_unique<PlanProfile>();
    p->steps.resize(plan.steps().size());
    std::istringstream d(plan.describe(false));
    std::string l;
    while (std::getline(d, l))
      if (l.rfind("step ", 0) == 0) p->names.push_back(l.substr(0, 110));
    p->names.resize(plan.steps().size());
  }
  return *p;
}

}  // namespace

bool ExecutionPlan::profiling() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_PLAN_PROFILE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return on;
}

void ExecutionPlan::run(detail::TensorRefs inputs, std::span<const Tensor> weights,
                        std::vector<Tensor>& outputs) const {
  const bool prof = profiling();
  const uint64_t t_start = prof ? profile_ticks() : 0;
  uint64_t t_bound = 0;
  thread_local std::vector<uint64_t> stamps;
  const Graph& g = *graph_;
  // Declared first, so it is given back after every view of it below is gone.
  const ArenaLease lease(*this);
  // One scratch buffer per call (calls may run concurrently) for every
  // intermediate (the lease above); graph outputs get their own memory.
  const Buffer& arena = *lease.arena;
  // The value table and the binding's vectors are reused by the next call on
  // this thread (no allocation per call); a call made while one runs on this
  // thread (an eager kernel calling compiled code) gets its own.
  thread_local Bound reused;
  thread_local bool in_use = false;
  std::optional<Bound> local;  // made only for a nested call
  Bound& bound = in_use ? local.emplace() : reused;
  struct Release {
    bool* flag;
    Bound& b;
    ~Release() {
      b.clear();
      if (flag) *flag = false;
    }
  } release{in_use ? nullptr : &in_use, bound};
  in_use = true;
  bound.owner = lease.owner;
  // The caller's tensors and the constants are read where they are (no
  // handle copied); vals holds only the values this call makes.
  const size_t nv = g.num_values();
  std::vector<const Tensor*>& src = bound.src;
  src.assign(nv, nullptr);
  const auto& in_ids = g.input_ids();
  for (size_t i = 0; i < in_ids.size(); ++i) src[in_ids[i]] = &inputs[i];
  for (size_t i = 0; i < weight_values_.size(); ++i) src[weight_values_[i]] = &weights[i];
  for (const auto& [v, t] : constants_) src[v] = t;
  std::vector<Tensor>& vals = bound.vals;
  vals.resize(nv);  // empty handles (clear() dropped the last call's)
  // A defined outputs[k] is where output k is computed (in-place write-back,
  // jit/write_in_place.h); a step run one by one may still put it elsewhere.
  const auto& out_ids = g.output_ids();
  for (size_t k = 0; k < outputs.size() && k < out_ids.size(); ++k)
    if (outputs[k].defined() && !src[out_ids[k]] && !vals[out_ids[k]].defined()) {
      vals[out_ids[k]] = outputs[k];
      bound.outputs_given = true;
    }
  if (bind_all(bound, arena)) {
    if (prof) {
      stamps.assign(steps_.size(), 0);
      t_bound = profile_ticks();
    }
    run_bound(bound, prof ? stamps.data() : nullptr);
  } else {
    for (size_t v = 0; v < nv; ++v)
      if (src[v]) vals[v] = *src[v];
    std::fill(src.begin(), src.end(), nullptr);
    run_stepwise(vals, arena, lease.owner);
  }
  outputs.resize(out_ids.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    const int32_t v = out_ids[k];
    const Tensor& t = src[v] ? *src[v] : vals[v];
    switch (output_take_[k]) {
      case 2: outputs[k] = t.clone(); break;  // never hand out the plan's own constant storage
      case 1:
        if (!src[v]) {
          outputs[k] = std::move(vals[v]);
          break;
        }
        [[fallthrough]];
      default: outputs[k] = t;
    }
  }
  if (prof && t_bound) {
    const uint64_t t_end = profile_ticks();
    PlanProfile& p = plan_profile(*this);
    if (p.last_end) p.gap.push_back(uint32_t(t_start - p.last_end));
    p.bind.push_back(uint32_t(t_bound - t_start));
    uint64_t t = t_bound;
    for (size_t k = 0; k < steps_.size(); ++k) {
      if (!stamps[k]) continue;
      p.steps[k].push_back(uint32_t(stamps[k] - t));
      t = stamps[k];
    }
    p.finish.push_back(uint32_t(t_end - t));
    p.total.push_back(uint32_t(t_end - t_start));
    p.last_end = profile_ticks();
  }
}

// Binds and runs one step at a time (a step's input is then a computed
// value that bind() may copy to make contiguous; a column sum of a strided
// view runs eager's reduce() on it instead (runs_eager_kernel), and a gemm
// step makes eager's call for a strided operand); values outside the arena
// are dropped after their last use.
void ExecutionPlan::run_stepwise(std::vector<Tensor>& vals, const Buffer& arena, bool owner) const {
  auto destination = [&](int32_t v) { return this->destination(v, arena, owner); };
  std::vector<Tensor> args;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const PlanStep& s = steps_[k];
    if (runs_eager_kernel(s, vals)) {
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
    } else if (s.kind == PlanStep::Kind::gemm &&
               (!vals[s.inputs[0]].is_contiguous() || !vals[s.inputs[1]].is_contiguous())) {
      // An operand that is a strided view now (an argument passed
      // transposed or sliced, a view step's result): the call eager's
      // matmul makes for the view, read in place where eager reads it so
      // (bind() would copy it contiguous, and the BLAS sums another
      // layout's product in another order: float64, and float32 without
      // the generated GEMM).
      auto operand = [&](int j) {  // the matmul's operand: the value, or its transpose (a folded permute)
        const Tensor& t = vals[s.inputs[static_cast<size_t>(j)]];
        if (!s.gemm_transposed[j]) return t;
        return Tensor(t.buffer(), t.dtype(), {t.shape()[1], t.shape()[0]}, {t.strides()[1], t.strides()[0]}, t.offset());
      };
      const void* bias = nullptr;
      if (s.gemm.bias) {
        Tensor& b = vals[s.inputs[2]];
        if (!b.is_contiguous()) b = b.contiguous();
        bias = b.data_ptr();
      }
      vals[s.output] = destination(s.output);
      cpu::gemm_strided(s.gemm, operand(0), operand(1), vals[s.output].data_ptr(), bias);
    } else {
      execute(bind(k, vals, destination));
    }
    for (int32_t v : release_after_[k]) vals[v] = Tensor();  // memory outside the arena goes back early
  }
}

}  // namespace kiln::codegen
