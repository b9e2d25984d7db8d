// ExecutionPlan's whole-call binding: every step is bound to its buffers
// before the first one runs (shapes are static and every intermediate has a
// planned arena slot), so running the steps is a walk over ready-made
// argument lists with no allocation or dispatch in between.
#include "../backends/cpu/copy.h"
#include "../tensor/cpu_memory_pools.h"
#include "plan.h"
#include "profile_clock.h"

#include <omp.h>

#include <algorithm>
#include <atomic>

namespace kiln::codegen {

namespace {
// is_contiguous(i.shape, i.strides) (tensor/shape.h's rule), inline.
inline bool contiguous_impl(const detail::TensorImpl& i) {
  const int64_t* sh = i.shape.data();
  const int64_t* st = i.strides.data();
  int64_t acc = 1;
  for (size_t d = i.shape.size(); d-- > 0;) {
    if (sh[d] == 0) return true;
    if (sh[d] != 1 && st[d] != acc) return false;
    acc *= sh[d];
  }
  return true;
}
// The same dimensions, inline (no memcmp call for a few of them).
inline bool same_shape(const Shape& a, const Shape& b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  for (size_t d = 0; d < n; ++d)
    if (a[d] != b[d]) return false;
  return true;
}
std::atomic<uint64_t> next_plan_id{1};
// i.strides == contiguous_strides(i.shape), without making that vector.
bool has_contiguous_strides(const detail::TensorImpl& i) {
  if (i.strides.size() != i.shape.size()) return false;
  int64_t acc = 1;
  for (size_t d = i.shape.size(); d-- > 0;) {
    if (i.strides[d] != acc) return false;
    acc *= i.shape[d] > 0 ? i.shape[d] : 1;
  }
  return true;
}
}  // namespace

// Called by the call that owns the plan only (ArenaLease): no lock.
Tensor ExecutionPlan::output_tensor(int32_t v, const TensorType& t) const {
  if (reused_outputs_.size() < graph_->num_values()) reused_outputs_.resize(graph_->num_values());
  std::array<Tensor, 2>& slots = reused_outputs_[static_cast<size_t>(v)];
  for (const Tensor& r : slots) {
    if (!r.defined() || r.impl_ptr().use_count() != 1) continue;
    const detail::TensorImpl& i = *r.impl_ptr();
    // Only this holds the handle, so nothing can change it now; it must
    // still be the plain tensor this made, its memory held by nothing else.
    if (i.state || i.storage.use_count() != 1 || i.offset != 0 || i.dtype != t.dtype || !(i.device == t.device) ||
        !same_shape(i.shape, t.shape) || !has_contiguous_strides(i))
      continue;
    // The caller's last accesses to it happen before this call writes it.
    std::atomic_thread_fence(std::memory_order_acquire);
    return r;
  }
  // Both held by the caller (or empty): a new tensor takes the older slot
  // (the caller keeps that one as long as it holds it). A value's first
  // tensor reserves both slots' bytes, within the plan's bound (past it,
  // the value's outputs are allocated per call).
  Tensor fresh = Tensor::empty(t.shape, t.dtype, t.device);
  if (!slots[1].defined()) {
    const size_t both = 2 * static_cast<size_t>(checked_numel(t.shape)) * size_of(t.dtype);
    if (reused_output_bytes_ + both > kReusedOutputTotal) return fresh;
    reused_output_bytes_ += both;
  }
  slots[0] = std::move(slots[1]);
  slots[1] = fresh;
  return fresh;
}

namespace {
// Every plan alive, for empty_cache (tensor/cpu_memory_pools.h's hook).
// Never destroyed: a plan held by a static object dies after every
// function-local static (a static MiniLM encoder did, under ASan).
std::mutex& plans_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<const ExecutionPlan*>& live_plans() {
  static auto* plans = new std::vector<const ExecutionPlan*>;
  return *plans;
}
}  // namespace

void ExecutionPlan::release_kept_memory() const {
  if (owner_busy_.exchange(true, std::memory_order_acquire)) return;  // a call runs it: it keeps its memory
  reused_outputs_.clear();
  reused_output_bytes_ = 0;
  owner_arena_ = Buffer();
  owner_busy_.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> lock(arena_mu_);
  free_arenas_.clear();
}

void ExecutionPlan::release_kept_memory_of_all_plans() {
  std::lock_guard<std::mutex> lock(plans_mu());
  for (const ExecutionPlan* p : live_plans()) p->release_kept_memory();
}

ExecutionPlan::~ExecutionPlan() {
  std::lock_guard<std::mutex> lock(plans_mu());
  auto& plans = live_plans();
  if (auto it = std::find(plans.begin(), plans.end(), this); it != plans.end()) plans.erase(it);
}

void ExecutionPlan::init_run_tables() {
  static const bool hooked = (kiln::detail::add_empty_cache_hook(&release_kept_memory_of_all_plans), true);
  (void)hooked;
  {
    std::lock_guard<std::mutex> lock(plans_mu());
    live_plans().push_back(this);
  }
  id_ = next_plan_id.fetch_add(1, std::memory_order_relaxed);
  const Graph& g = *graph_;
  view_steps_.assign(steps_.size(), 0);
  for (size_t k = 0; k < steps_.size(); ++k) view_steps_[k] = step_is_view(g, steps_[k]);
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::constant) constants_.emplace_back(n.outputs[0], &n.data);
  const auto& outs = g.output_ids();
  output_take_.assign(outs.size(), 1);
  std::vector<char> later(g.num_values(), 0);  // the value is an output after k (one pass from the back, not O(n^2))
  for (size_t k = outs.size(); k-- > 0;) {
    const bool again = later[static_cast<size_t>(outs[k])];
    later[static_cast<size_t>(outs[k])] = 1;
    if (g.node(g.producer(outs[k])).kind == NodeKind::constant) {
      output_take_[k] = 2;
      continue;
    }
    if (again) output_take_[k] = 0;  // handed out again below: copy here
  }
  reusable_bytes_.assign(g.num_values(), 0);
  // Values often share one type-table entry (a graph read from a MEF file's
  // GRPB section: a few types for a thousand values): the entry's bytes are
  // worked out once per run of values of one entry.
  const TensorType* last = nullptr;
  size_t last_bytes = 0;
  for (size_t v = 0; v < g.num_values(); ++v) {
    const TensorType& t = g.type(static_cast<int32_t>(v));
    if (&t != last) {
      last = &t;
      last_bytes = 0;
      if (!t.device.is_cpu()) continue;
      int64_t n = 0;
      try {
        n = checked_numel(t.shape);
      } catch (const Error&) {
        continue;  // destination() raises it, as before
      }
      const size_t nbytes = static_cast<size_t>(n) * size_of(t.dtype);
      if (nbytes <= kReusedOutputBytes) last_bytes = nbytes;
    }
    reusable_bytes_[v] = last_bytes;
  }
  // The bindings: bind_to with each value's slot marked by a tagged id
  // ((id << 2) | 1, | 2 when written); the constant tables' addresses are
  // real pointers (8-byte aligned: low bits 0).
  const size_t S = steps_.size();
  bind_base_.assign(S, {});
  bind_first_.assign(S + 1, 0);
  bind_values_first_.assign(S, 0);
  bind_patches_.clear();
  auto tag = [](int32_t v, uintptr_t w) { return reinterpret_cast<char*>((static_cast<uintptr_t>(v) << 2) | 1 | w); };
  for (size_t k = 0; k < S; ++k) {
    bind_first_[k] = static_cast<uint32_t>(bind_patches_.size());
    if (steps_[k].kind == PlanStep::Kind::op) continue;
    const BoundStep b = bind_to(
        k, [&](int32_t v) { return tag(v, 0); }, [&](int32_t v) { return tag(v, 2); },
        [](int32_t) { return Tensor(); });
    std::array<BindPatch, kMaxFusedOperands> values;  // the slots read by value (no allocation per step)
    size_t nvalues = 0;
    for (size_t j = 0; j < b.base.size(); ++j) {
      const uintptr_t x = reinterpret_cast<uintptr_t>(b.base[j]);
      if (!(x & 1)) {
        bind_base_[k][j] = b.base[j];
        continue;
      }
      BindPatch p;
      p.slot = static_cast<uint8_t>(j);
      p.out = (x & 2) != 0;
      p.value = static_cast<int32_t>(x >> 2);
      p.arena_offset = arena_offset_[static_cast<size_t>(p.value)];
      if (p.arena_offset >= 0)
        bind_patches_.push_back(p);
      else
        values[nvalues++] = p;
    }
    bind_values_first_[k] = static_cast<uint32_t>(bind_patches_.size());
    bind_patches_.insert(bind_patches_.end(), values.begin(), values.begin() + static_cast<std::ptrdiff_t>(nvalues));
  }
  bind_first_[S] = static_cast<uint32_t>(bind_patches_.size());
}

Tensor ExecutionPlan::destination(int32_t v, const Buffer& arena, bool owner) const {
  if (arena_offset_[v] < 0) {
    if (owner && reusable_bytes_[v]) return output_tensor(v, graph_->type(v));
    const TensorType& t = graph_->type(v);
    return Tensor::empty(t.shape, t.dtype, t.device);
  }
  const TensorType& t = graph_->type(v);
  return Tensor(arena, t.dtype, t.shape, contiguous_strides(t.shape),
                arena_offset_[v] / static_cast<int64_t>(size_of(t.dtype)));
}

bool ExecutionPlan::bind_all(Bound& b, const Buffer& arena) const {
  std::vector<Tensor>& vals = b.vals;
  const std::vector<const Tensor*>& src = b.src;
  const size_t S = steps_.size();
  b.arg_range.assign(S, {0, 0});
  b.run_view.assign(S, 0);
  char* const arena_data = arena_bytes_ ? static_cast<char*>(arena.data()) : nullptr;
  bool strided = false;
  // Generated code and BLAS calls need only addresses: an intermediate in
  // the arena gets a Tensor only when an eager op reads it.
  // An input, weight or constant is read where the caller keeps it (src);
  // the values this call makes are in vals.
  auto value = [&](int32_t v) -> const Tensor& {
    if (const Tensor* t = src[v]) return *t;
    if (!vals[v].defined()) vals[v] = destination(v, arena, b.owner);
    return vals[v];
  };
  // A realized tensor's memory, without Tensor's layered checks.
  auto memory = [](const detail::TensorImpl& i) {
    return static_cast<char*>(i.storage.data()) + (i.offset ? i.offset * static_cast<int64_t>(size_of(i.dtype)) : 0);
  };
  auto in = [&](int32_t v) -> char* {
    if (arena_offset_[v] >= 0) return arena_data + arena_offset_[v];
    const Tensor& t = src[v] ? *src[v] : vals[v];
    if (t.defined() && t.is_realized() && contiguous_impl(t.impl())) return memory(t.impl());
    if (!t.is_contiguous()) strided = true;  // bind() would copy data not computed yet
    return static_cast<char*>(t.data_ptr());
  };
  auto out = [&](int32_t v) -> char* {
    if (arena_offset_[v] >= 0) return arena_data + arena_offset_[v];
    const Tensor& t = value(v);
    return t.is_realized() ? memory(t.impl()) : static_cast<char*>(t.data_ptr());
  };
  if (b.plan_id != id_ || b.arena_data != arena_data || b.steps.size() != S) {
    // The thread's last call ran another plan, or another arena: the
    // binding made once (init_run_tables) copied in, its arena slots filled.
    b.plan_id = 0;
    b.steps.assign(S, BoundStep{});
    for (size_t k = 0; k < S; ++k) {
      BoundStep& bs = b.steps[k];
      bs.step = &steps_[k];
      if (steps_[k].kind == PlanStep::Kind::op) continue;
      bs.base = bind_base_[k];
      for (uint32_t i = bind_first_[k]; i < bind_values_first_[k]; ++i)
        bs.base[bind_patches_[i].slot] = arena_data + bind_patches_[i].arena_offset;
    }
    b.plan_id = id_;
    b.arena_data = arena_data;
  }
  for (size_t k = 0; k < S; ++k) {
    const PlanStep& s = steps_[k];
    if (s.kind != PlanStep::Kind::op) {
      // The slots of the call's inputs and outputs filled in.
      BoundStep& bs = b.steps[k];
      for (uint32_t i = bind_values_first_[k]; i < bind_first_[k + 1]; ++i) {
        const BindPatch& p = bind_patches_[i];
        bs.base[p.slot] = p.out ? out(p.value) : in(p.value);
      }
      if (s.kind == PlanStep::Kind::fused && s.reduce_operand >= 0) bs.out = value(s.reduce_output);  // as bind_to
      if (strided) return false;
      continue;
    }
    b.steps[k].step = &s;
    const uint32_t first = static_cast<uint32_t>(b.args.size());
    for (int32_t v : s.inputs) b.args.push_back(value(v));
    if (view_steps_[k]) {
      // A view reads no data: make it now when it shares its input's memory.
      // One that copies anyway (a reshape of an argument strided otherwise
      // than the plan assumed: step_is_view) would copy data not computed
      // yet: it runs when reached instead, into its own tensor, like an op
      // step. (A reshape the plan knows copies, attention's heads merged
      // back, is an op step with a planned tensor.)
      const bool strided_reshape = s.op == OpId::Reshape && !b.args[first].is_contiguous();
      if (!strided_reshape) {
        Tensor r = detail::eager_execute(s.op, std::span<const Tensor>(b.args.data() + first, s.inputs.size()), s.attrs);
        if (r.buffer() == value(s.inputs[0]).buffer()) {
          vals[s.output] = std::move(r);
          b.args.resize(first);
          continue;
        }
      }
      b.run_view[k] = 1;
    }
    b.arg_range[k] = {first, static_cast<uint32_t>(s.inputs.size())};
    b.steps[k].out = value(s.output);
  }
  return true;
}

void ExecutionPlan::run_bound(const Bound& b, uint64_t* stamps) const {
  for (size_t k = 0; k < steps_.size(); ++k) {
    if (stamps && k) stamps[k - 1] = profile_ticks();
    const BoundStep& bs = b.steps[k];
    const PlanStep& s = *bs.step;
    if (s.run_with_next && !(s.pair_writes_output && b.outputs_given) && omp_get_max_threads() > 1 &&
        !omp_in_parallel()) {
      // Two independent single-threaded GEMMs, one per thread (the handoff
      // is paid back: jit/step_pairs.h).
      const BoundStep* pair[2] = {&bs, &b.steps[k + 1]};
#pragma omp parallel num_threads(2)
      {
        if (omp_get_num_threads() == 1) {  // the runtime gave one thread (nested, dynamic): in order
          execute(*pair[0]);
          execute(*pair[1]);
        } else {
          execute(*pair[omp_get_thread_num()]);
        }
      }
      ++k;
      continue;
    }
    if (s.kind != PlanStep::Kind::op) {
      execute(bs);
      continue;
    }
    if (view_steps_[k] && !b.run_view[k]) continue;
    const auto [first, count] = b.arg_range[k];
    Tensor r;
    {
      detail::ScopedOutput into(bs.out);
      r = detail::eager_execute(s.op, std::span<const Tensor>(b.args.data() + first, count), s.attrs);
    }
    // A kernel that did not write into the planned tensor (an alias of an
    // input, say): copy its result there, where later steps read it.
    if (r.data_ptr() != bs.out.data_ptr() || r.strides() != bs.out.strides()) cpu::copy_into(r, bs.out);
  }
  if (stamps && !steps_.empty()) stamps[steps_.size() - 1] = profile_ticks();
}

}  // namespace kiln::codegen
