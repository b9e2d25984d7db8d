// kiln: process-wide runtime settings.
#pragma once

namespace kiln {

/// Threads used by CPU kernels. Default: the number of cores (or
/// OMP_NUM_THREADS). Sets the calling thread's OpenMP team size (and
/// OpenBLAS's pool, for code that calls the BLAS directly: kiln's own BLAS
/// and LAPACK calls run it on one thread); n < 1 or n > 1024 throws ValueError.
///
/// Results do not depend on the thread count: kiln's kernels (elementwise,
/// reductions, row kernels, the generated GEMMs, conv2d, Eigen's GEMM per
/// batch item, integer matmul) split work so that each output element is
/// computed the same way by whichever thread gets it, eager and compiled. A
/// product past the generated GEMM's sizes goes to OpenBLAS, one thread per
/// call; kiln cuts a large one into blocks of whole 64-element strips of C
/// chosen from the sizes alone (never from the thread count), one call per
/// block, and the threads share the blocks, so each block's bits are the
/// same whichever thread runs it (tests/test_linalg.cpp). linalg
/// solve runs LAPACK's gesv on one thread. Which kernel runs depends on the
/// shapes and dtypes only, never on the thread count or on what the process
/// ran before.
void set_num_threads(int n);
int get_num_threads();
/// "OpenBLAS" or "Eigen": the GEMM backend matmul calls.
const char* blas_backend();

}  // namespace kiln
