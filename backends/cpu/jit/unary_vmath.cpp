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

InnerLoopFn cached_unary_vmath(OpId op) {
  int row = 0;
  switch (op) {
    case OpId::Exp: row = 0; break;
    case OpId::Tanh: row = 1; break;
    default: return nullptr;
  }
  const CpuTarget t = detect_cpu_target();
  // tanh below AVX-512: Eigen's vector tanh (eager's other path) is cheaper
  // than the generated one (AVX2, 1 thread, data in L2: 0.35 against
  // 0.40 ns per element), so eager keeps it there.
  if (op == OpId::Tanh && t != CpuTarget::avx512) return nullptr;
  constexpr int kTargets = 3;
  static std::array<std::atomic<InnerLoopFn>, 2 * kTargets> slots{};
  static std::mutex mu;
  std::atomic<InnerLoopFn>& slot = slots[size_t(row) * kTargets + size_t(t)];
  if (InnerLoopFn f = slot.load(std::memory_order_acquire)) return f;
  std::lock_guard<std::mutex> lock(mu);
  if (InnerLoopFn f = slot.load(std::memory_order_relaxed)) return f;
  ProgramBuilder b({DType::float32, DType::float32}, 1);
  b.store(0, b.op(op, DType::float32, b.load(1, DType::float32)));
  if (!can_generate(b.p, t)) throw Error("cached_unary_vmath: no generated " + std::string(op_name(op)) + " for " +
                                         cpu_target_name(t));
  // Process lifetime; the kernel stays reachable from `owners` (not only its
  // code address from `slots`), so leak checkers see it held, not lost.
  static std::array<const ElementwiseKernel*, 2 * kTargets> owners{};
  const ElementwiseKernel* k = generate_elementwise(b.p, t).release();
  owners[size_t(row) * kTargets + size_t(t)] = k;
  slot.store(k->fn(), std::memory_order_release);
  return k->fn();
}

}  // namespace kiln::codegen
