// kiln (internal): the cache of generated single-op float32 kernels that the
// eager exp and tanh kernels run (see unary_vmath.h).
#include "unary_vmath.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "../../../jit/program_builder.h"
#include "../../../tensor/error.h"

namespace kiln::codegen {

InnerLoopFn cached_unary_vmath(OpId op, bool streaming) {
  int row = 0;
  switch (op) {
    case OpId::Exp: row = 0; break;
    case OpId::Tanh: row = 1; break;
    default: return nullptr;
  }
  const CpuTarget t = detect_cpu_target();
  // tanh on SSE2: Eigen's vector tanh (eager's other path). On AVX2 the
  // generated one costs less per element in L2 since its exp-free form
  // (0.28 ns, the expm1 form 0.41; Eigen's 0.35), streams its output as it
  // computes (cached with `streaming`) and prefetches its input: 16M
  // float32 on this project's VM, 1 thread 4.7-4.8 ms (expm1 form: 6.8-8.0),
  // 2 threads 2.6-2.7 ms (3.5-8.0), 0.64-0.73x the copy loop's time in the
  // same runs (expm1 form: 0.92-1.39x); eager gives compiled code's bits.
  if (op == OpId::Tanh && t == CpuTarget::sse2) return nullptr;
  constexpr int kTargets = 3, kSlots = 2 * kTargets * 2;
  static std::array<std::atomic<InnerLoopFn>, kSlots> slots{};
  static std::mutex mu;
  const size_t at = (size_t(row) * kTargets + size_t(t)) * 2 + (streaming ? 1 : 0);
  std::atomic<InnerLoopFn>& slot = slots[at];
  if (InnerLoopFn f = slot.load(std::memory_order_acquire)) return f;
  std::lock_guard<std::mutex> lock(mu);
  if (InnerLoopFn f = slot.load(std::memory_order_relaxed)) return f;
  ProgramBuilder b({DType::float32, DType::float32}, 1);
  b.p.streaming_stores = streaming;
  b.store(0, b.op(op, DType::float32, b.load(1, DType::float32)));
  if (!can_generate(b.p, t)) throw Error("cached_unary_vmath: no generated " + std::string(op_name(op)) + " for " +
                                         cpu_target_name(t));
  // Process lifetime; the kernel stays reachable from `owners` (not only its
  // code address from `slots`), so leak checkers see it held, not lost.
  static std::array<const ElementwiseKernel*, kSlots> owners{};
  const ElementwiseKernel* k = generate_elementwise(b.p, t).release();
  owners[at] = k;
  slot.store(k->fn(), std::memory_order_release);
  return k->fn();
}

}  // namespace kiln::codegen
