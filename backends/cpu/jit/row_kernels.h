// kiln (internal): generated row kernels for the RowNorm rows of the op
// table (softmax, log_softmax, layer_norm, rms_norm) on float32 rows that
// are contiguous along the normalised (last) axis. One generated function
// processes `rows` consecutive rows of n elements with vector passes over
// each row (the row stays in L1 between passes):
//
//   softmax      max; e = exp(x - max) stored and summed; y = e * (1 / sum)
//   log_softmax  max; sum of exp(x - max); y = (x - max) - log(sum)
//   softmax_and_log_softmax  both of one x in one kernel (y = softmax,
//                y2 = log_softmax; each the bits of its own kernel): a loss
//                and its gradient read the logits once
//   layer_norm   mean0; sums of d = x - mean0 and d^2 (corrected two-pass);
//                y = d * rstd - c * rstd [* w] [+ b] (one FMA), c = mean(d),
//                rstd = 1 / sqrt(mean(d^2) - c^2 + eps); the means are
//                sums times 1/n (rounded once per call)
//   rms_norm     mean of x^2 (sum times 1/n); y = x * rstd [* w]
//
// The eager kernels (backends/cpu/rownorm_kernels.cpp) and the compiled plan
// (jit/cpu_lowering.cpp) both run these kernels, taken from one process-wide cache,
// so eager and compiled results are bitwise equal (also in strict mode).
// Every row is computed whole by one thread with a fixed reduction order, so
// results never depend on the thread count.
//
// Numerics (tests/test_row_kernels.cpp checks them against a float64
// reference on every CPU target of the machine):
// - Statistics are accumulated in float32: several vector accumulators,
//   combined in a fixed order, then a horizontal tree. exp and log are the
//   code generator's vector math (backends/cpu/jit/vmath_alg.h: <= 2 ulp).
// - softmax: relative error <= (|x - max| + 9 + log2 n) 2^-23 (measured:
//   <= 4.3 (|x - max| + 1) 2^-23 on normal rows, n = 1024); the float32
//   sum's error is about log2(n) ulp on such rows (n/64 ulp at worst).
// - log_softmax: absolute error <= (|x - max| + |log sum| + 1) 2^-23 plus
//   the float32 sum's relative error (log sum takes it as an absolute error:
//   up to about (8 + 2 log2 n) 2^-24, as for softmax: rows of 10 whose sum
//   is near 1 exceed the first term alone) plus 2 ulp of the result (measured <= 4 (|x - max| + 1) 2^-23).
// - layer_norm / rms_norm: absolute error <= 2e-6 (|y0| + 1) |w| plus 2 ulp
//   of the result, y0 = (x - mean) rstd, also for rows whose mean is far
//   from 0 (the corrected two-pass form removes the float mean's error),
//   for rows whose squares do not overflow float32 (|x - mean| < 1.8e19;
//   eager's float64 statistics have no such limit).
// - Special values as the eager float64-accumulating kernel: a row holding
//   NaN is NaN throughout; softmax/log_softmax of a row holding +inf or of
//   only -inf is NaN throughout; -inf elements of other rows give 0 (softmax)
//   and -inf (log_softmax); layer_norm/rms_norm of a row holding +-inf is NaN.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "../../../jit/elementwise_program.h"

namespace kiln::codegen {

enum class RowOp : uint8_t { softmax, log_softmax, layer_norm, rms_norm, softmax_and_log_softmax };
const char* row_op_name(RowOp op);
/// The RowOp of op-table row `op`; nullopt for rows of other categories.
std::optional<RowOp> row_op_of(OpId op);

/// What selects one generated row kernel.
struct RowKernelKey {
  RowOp op = RowOp::softmax;
  bool has_weight = false;  ///< layer_norm / rms_norm: multiply by weight[j]
  bool has_bias = false;    ///< layer_norm: add bias[j]
  DType dtype = DType::float32;
  CpuTarget target = CpuTarget::sse2;
  friend bool operator==(const RowKernelKey&, const RowKernelKey&) = default;
};

/// Arguments of a generated row kernel. x and y hold rows * n floats, row
/// after row; weight and bias hold n floats (ignored unless the key has them).
struct RowArgs {
  const float* x = nullptr;
  float* y = nullptr;
  float* y2 = nullptr;  ///< softmax_and_log_softmax: the log_softmax rows (y gets softmax)
  const float* weight = nullptr;
  const float* bias = nullptr;
  int64_t rows = 0;
  int64_t n = 0;  ///< >= 1
  float eps = 0.0f;
};
using RowKernelFn = void (*)(const RowArgs* args);

/// Generated machine code for one RowKernelKey. Frees its code when destroyed.
class RowKernel {
 public:
  RowKernel(RowKernelKey key, RowKernelFn fn, size_t code_size, std::string disassembly);
  ~RowKernel();
  RowKernel(const RowKernel&) = delete;
  RowKernel& operator=(const RowKernel&) = delete;

  const RowKernelKey& key() const { return key_; }
  RowKernelFn fn() const { return fn_; }
  size_t code_size() const { return size_; }
  const std::string& disassembly() const { return dis_; }
  /// e.g. "row kernel layer_norm(weight, bias) float32 [avx512]".
  std::string str() const;
  /// Runs the kernel on a.rows rows, split into ranges of whole rows among
  /// the OpenMP threads (backends/cpu/parallel_ranges.h). Nothing when
  /// a.rows * a.n == 0.
  void run(const RowArgs& a) const;

 private:
  RowKernelKey key_;
  RowKernelFn fn_;
  size_t size_;
  std::string dis_;
};

/// True when `key` has a generated form (dtype float32, rms_norm without
/// bias, a target this CPU runs).
bool can_generate_row(const RowKernelKey& key);
/// Generates the kernel for `key`; throws kiln::Error when can_generate_row
/// is false. `want_disassembly` fills disassembly() (for KILN_JIT_DUMP).
std::unique_ptr<RowKernel> generate_row_kernel(const RowKernelKey& key, bool want_disassembly = false);
/// The process-wide cached kernel of (op, weight, bias, dtype) for
/// detect_cpu_target(), generated on first use (thread-safe; never freed);
/// null when there is no generated form.
const RowKernel* cached_row_kernel(RowOp op, bool has_weight, bool has_bias, DType dtype);

}  // namespace kiln::codegen
