// kiln (internal): the CUDA lowering of a fusion plan (jit/fusion.h), beside
// the CPU one (jit/cpu_lowering.h). Device-neutral C++: it writes CUDA C++
// source and launch configurations and needs no CUDA header, so plans for
// CUDA layouts are built (and tested) on a machine without a GPU.
//   - an elementwise group becomes one generated kernel: a grid-stride loop
//     over the group's elements calling the kernel templates' functors
//     (backends/cuda/kernel_templates.h: kiln::hd::<Id> for each op-table
//     row, named from tensor/ops.def, never spelled per op here) in the
//     group's order; broadcast inputs are indexed through the static shape;
//   - a group with a trailing sum/max/min (float32/float64, at most
//     kReduceChunk elements reduced per row) runs it inside: one block per
//     output row, the block size and combination order of the eager CUDA
//     reduction (launch_plan.h reduce_launch, block_reduce.cuh), the reduced
//     input never stored;
//   - float16/bfloat16 values are loaded into float, each op computes in
//     float as its eager kernel does and its result is rounded to the 16-bit
//     format (and held as that float) before the next op reads it, as eager
//     stores each op's result: compiled equals eager bit for bit. Casts go
//     through the kernel templates' hd::cast_to (eager's cast kernel), so
//     float->int casts of NaN, infinities or out-of-range values match;
//   - strict mode (opt.strict): the module is compiled with -fmad=false
//     (cuda::module_options), so no multiply-add is contracted across the
//     ops of a group or into a fused reduction;
//   - a gemm item becomes one cuBLASLt call with the bias epilogue
//     (cuda::matmul_epilogue), a row item the eager row kernel, anything else
//     (and a group the generator declines: int16/uint16/uint32/uint64
//     values, a float64 -> bfloat16 cast, more than max_operands) its eager
//     kernel per node.
// Memory: plan_memory over the steps gives one device arena.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fusion.h"
#include "memory_plan.h"

namespace kiln::codegen {

/// What the CUDA backend runs, for plan_fusion: up to kCudaMaxOperands
/// operands per generated kernel, sum/max/min inside groups, 2-d
/// float32/float64 matmuls as cuBLASLt calls, softmax/log_softmax/
/// layer_norm/rms_norm as row steps; no column-sum steps. Strict: no GEMM
/// steps (each matmul its eager kernel, so its bits are eager's).
FusionRules cuda_fusion_rules(const KernelOptions& opt);
inline constexpr int kCudaMaxOperands = 16;

/// A launch configuration, computed once when the plan is built.
struct CudaLaunch {
  uint32_t grid = 1, block = 1;
  uint32_t shared_bytes = 0;
  friend bool operator==(const CudaLaunch&, const CudaLaunch&) = default;
};

/// One generated kernel: `name` in `source` (extern "C"), called with the
/// operands' device pointers in order (outputs first, then inputs) and
/// then `numel` (int64).
struct CudaKernelSource {
  std::string name;
  std::string source;
  int64_t numel = 0;
  CudaLaunch launch;
};

/// One step of a CUDA plan.
struct CudaStep {
  enum class Kind : uint8_t {
    kernel,  // a generated kernel (kernel, operands, num_outputs)
    gemm,    // a cuBLASLt call: node's matmul of gemm_operands, + gemm_bias (or -1), writing gemm_output
    row,     // node through the eager CUDA row kernel (launch: its row_threads configuration)
    op,      // node through its eager CUDA kernel
  };
  Kind kind = Kind::op;
  int32_t node = -1;
  CudaKernelSource kernel;
  std::vector<int32_t> operands;  // kernel: values, outputs first
  int num_outputs = 0;
  std::vector<int32_t> group_nodes;  // kernel: nodes computed (the reduction's last)
  GemmOperands gemm_operands;
  int32_t gemm_bias = -1, gemm_output = -1;
  CudaLaunch launch;  // kernel (same as kernel.launch), row
};

/// A fusion plan lowered for CUDA device `device`.
struct CudaPlan {
  int device = 0;
  bool strict = false;  // compile the module with -fmad=false (KernelOptions::strict)
  std::vector<CudaStep> steps;
  MemoryPlan memory;  // one device arena of memory.arena_bytes
  /// Every generated kernel's source in one translation unit (the unit
  /// NVRTC compiles; its hash keys the caches).
  std::string module_source;
  /// Human-readable steps (one per line), for dumps and tests.
  std::string describe() const;
};

/// Lowers `fusion` (planned for `g` with cuda_fusion_rules(opt)) for CUDA
/// device `device`.
CudaPlan lower_cuda(const Graph& g, const FusionPlan& fusion, const KernelOptions& opt, int device);

/// One translation unit of `kernels` (each name once), with the kernel
/// templates' include: what NVRTC compiles.
std::string cuda_module_source(const std::vector<CudaKernelSource>& kernels);

/// The C++ spelling of the kernel templates' functor for op-table row `op`
/// ("kiln::hd::Add"): from tensor/ops.def's ids. Throws ValueError for a
/// row that is not Unary/Binary/Ternary.
std::string cuda_functor_name(OpId op);

/// The CUDA C type of `d` ("float", "int64_t", ...); nullptr for
/// float16/bfloat16 (generated kernels store them as unsigned short and
/// compute in float) and the dtypes without CUDA kernels.
const char* cuda_c_type(DType d);

}  // namespace kiln::codegen
