// kiln: process-wide runtime settings.
#pragma once

namespace kiln {

/// Threads used by CPU kernels (OpenMP and the BLAS). Default: the number of
/// cores (or OMP_NUM_THREADS). Results never depend on this value. Sets the
/// calling thread's OpenMP team size and OpenBLAS's pool; n < 1 or n > 1024
/// throws ValueError.
void set_num_threads(int n);
int get_num_threads();
/// "OpenBLAS" or "Eigen": the GEMM backend matmul calls.
const char* blas_backend();

}  // namespace kiln
