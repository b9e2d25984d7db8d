// kiln: process-wide runtime settings.
#pragma once

namespace kiln {

/// Threads used by CPU kernels (OpenMP and the BLAS). Default: the number of
/// cores (or OMP_NUM_THREADS). Sets the calling thread's OpenMP team size and
/// OpenBLAS's pool; n < 1 or n > 1024 throws ValueError.
///
/// What the thread count changes in results: kiln's own kernels
/// (elementwise, reductions, row kernels, the generated GEMMs of
/// codegen::small_gemm_eager_size's sizes, float32 conv2d, Eigen's GEMM per
/// batch item, integer matmul) give the same bits at any thread count, eager
/// and compiled. A call into OpenBLAS does not promise that: a float32 GEMM
/// past the generated sizes (or on a CPU below AVX2), a float64 matmul, the
/// GEMMs of float64 conv2d, large batched matmuls, and LAPACK's solve may
/// differ at rounding level (the last bits) between thread counts (measured:
/// OpenBLAS's Haswell/SkylakeX sgemm and dgemm, 1 vs 2 threads). Which kernel
/// runs depends on the shapes and dtypes only, never on the thread count or
/// on what the process ran before.
void set_num_threads(int n);
int get_num_threads();
/// "OpenBLAS" or "Eigen": the GEMM backend matmul calls.
const char* blas_backend();

}  // namespace kiln
