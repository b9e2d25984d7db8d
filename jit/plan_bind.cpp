// ExecutionPlan's whole-call binding: every step is bound to its buffers
// before the first one runs (shapes are static and every intermediate has a
// planned arena slot), so running the steps is a walk over ready-made
// argument lists with no allocation or dispatch in between.
#include "../backends/cpu/copy.h"
#include "plan.h"

#include <omp.h>

#include <atomic>

namespace kiln::codegen {

namespace {
bool is_view(const PlanStep& s) { return s.kind == PlanStep::Kind::op && op_info(s.op).category == OpCategory::View; }
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

Tensor ExecutionPlan::output_tensor(int32_t v, const TensorType& t) const {
  std::lock_guard<std::mutex> lock(arena_mu_);
  if (reused_outputs_.size() < graph_->num_values()) reused_outputs_.resize(graph_->num_values());
  std::array<Tensor, 2>& slots = reused_outputs_[static_cast<size_t>(v)];
  for (const Tensor& r : slots) {
    if (!r.defined() || r.impl_ptr().use_count() != 1) continue;
    const detail::TensorImpl& i = *r.impl_ptr();
    // Only this holds the handle, so nothing can change it now; it must
    // still be the plain tensor this made, its memory held by nothing else.
    if (i.state || i.storage.use_count() != 1 || i.offset != 0 || i.dtype != t.dtype || !(i.device == t.device) ||
        i.shape != t.shape || !has_contiguous_strides(i))
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

Tensor ExecutionPlan::destination(int32_t v, const Buffer& arena) const {
  const TensorType& t = graph_->type(v);
  if (arena_offset_[v] < 0) {
    const size_t nbytes = static_cast<size_t>(checked_numel(t.shape)) * size_of(t.dtype);
    if (!t.device.is_cpu() || nbytes == 0 || nbytes > kReusedOutputBytes) return Tensor::empty(t.shape, t.dtype, t.device);
    return output_tensor(v, t);
  }
  return Tensor(arena, t.dtype, t.shape, contiguous_strides(t.shape),
                arena_offset_[v] / static_cast<int64_t>(size_of(t.dtype)));
}

bool ExecutionPlan::bind_all(Bound& b, std::vector<Tensor>& vals, const Buffer& arena) const {
  const size_t S = steps_.size();
  b.steps.resize(S);
  b.arg_range.assign(S, {0, 0});
  b.run_view.assign(S, 0);
  char* const arena_data = arena_bytes_ ? static_cast<char*>(arena.data()) : nullptr;
  bool strided = false;
  // Generated code and BLAS calls need only addresses: an intermediate in
  // the arena gets a Tensor only when an eager op reads it.
  auto value = [&](int32_t v) -> const Tensor& {
    if (!vals[v].defined()) vals[v] = destination(v, arena);
    return vals[v];
  };
  auto in = [&](int32_t v) -> char* {
    if (arena_offset_[v] >= 0) return arena_data + arena_offset_[v];
    if (!vals[v].is_contiguous()) strided = true;  // bind() would copy data not computed yet
    return static_cast<char*>(vals[v].data_ptr());
  };
  auto out = [&](int32_t v) -> char* {
    if (arena_offset_[v] >= 0) return arena_data + arena_offset_[v];
    return static_cast<char*>(value(v).data_ptr());
  };
  for (size_t k = 0; k < S; ++k) {
    const PlanStep& s = steps_[k];
    if (s.kind != PlanStep::Kind::op) {
      b.steps[k] = bind_to(k, in, out, value);
      if (strided) return false;
      continue;
    }
    b.steps[k].step = &s;
    const uint32_t first = static_cast<uint32_t>(b.args.size());
    for (int32_t v : s.inputs) b.args.push_back(value(v));
    if (is_view(s)) {
      // A view reads no data: make it now when it shares its input's memory.
      // One that copies (a reshape of a strided input: attention's heads
      // merged back, say) would copy data not computed yet: it runs when
      // reached instead, into its own tensor, like an op step.
      const bool strided_reshape = s.op == OpId::Reshape && !b.args[first].is_contiguous();
      if (!strided_reshape) {
        Tensor r = detail::eager_execute(s.op, std::span<const Tensor>(b.args.data() + first, s.inputs.size()), s.attrs);
        if (r.buffer() == vals[s.inputs[0]].buffer()) {
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

void ExecutionPlan::run_bound(const Bound& b) const {
  for (size_t k = 0; k < steps_.size(); ++k) {
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
    if (is_view(s) && !b.run_view[k]) continue;
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
}

}  // namespace kiln::codegen
