// kiln (internal): the generated float32 vector math of single unary rows,
// for the eager CPU kernels (backends/cpu/unary_kernels.cpp).
//
// Eager exp on float32 (every target) and tanh on float32 (AVX2 and AVX-512
// targets) run the code generator's kernel of the one-op program `y = op(x)`
// for detect_cpu_target() (so KILN_JIT_TARGET caps them as it caps compiled
// code), taken from a process-wide cache. They therefore give the bits of a
// compiled plan's fused group of that op on the same target, and the
// accuracy of the generated vector math (backends/cpu/jit/vmath_alg.h:
// exp <= 2 ulp, tanh <= 4 ulp against a correctly rounded result; NaN,
// +-inf, -0 and subnormal results exact), instead of Eigen's (<= 6 ulp, with
// a scalar recheck of inputs beyond its clamp). Why: Eigen's AVX-512 exp
// costs ~0.31 ns per element on one core with its data in L2 (the generated
// one 0.19 ns), more than the ~0.30 ns per element and core that a
// 16M-element exp may take to stream at two threads, so eager exp ran
// 1.3-1.4x the copy loop's time (issue 18). On AVX2 the generated exp is
// also the cheaper (0.42 against Eigen's 0.63 ns); so is the generated tanh
// since its exp-free form (0.28 ns, was 0.41; Eigen's 0.35), and its
// streaming-store form (`streaming`) helps where the time goes to memory
// (unary_vmath.cpp). SSE2 keeps Eigen's tanh.
#pragma once
#include "../../../jit/elementwise_program.h"

namespace kiln::codegen {

/// The generated kernel of unary row `op` on float32 for detect_cpu_target():
/// fn(ptrs, strides, n) writes y[i] = op(x[i]) for i < n, ptrs = {y, x}
/// (unit-stride float arrays, any alignment; y may equal x; strides are not
/// read). A value's result does not depend on its position in the run (the
/// tail is padded and run through the vector loop). Generated on first use,
/// thread-safe, never freed. nullptr for rows other than Exp and Tanh, and
/// for Tanh on the SSE2 target (the caller uses its own kernel).
/// With `streaming`, the kernel of the same program with streaming stores
/// (ElementwiseProgram::streaming_stores): the same values, written with
/// non-temporal stores on runs of at least kStreamMinElements whose output
/// is 64-byte aligned (ordinary stores otherwise), with an sfence after
/// such a run. For outputs too large to stay in the caches (the eager
/// kernels' ew::kStreamMinBytes).
InnerLoopFn cached_unary_vmath(OpId op, bool streaming = false);

}  // namespace kiln::codegen
