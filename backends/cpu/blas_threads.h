// kiln: OpenBLAS runs one thread per call from kiln.
#pragma once

#ifdef KILN_HAVE_OPENBLAS
#include <cblas.h>

namespace kiln::cpu {

/// Sets OpenBLAS's pool to one thread before kiln calls the BLAS or LAPACK
/// (set_num_threads also sets that pool, for code calling the BLAS directly).
/// kiln splits large products among its own OpenMP threads instead
/// (matmul.cpp, blas_gemm): two pools spinning on the same cores fought, and a
/// call whose pool size depended on what ran before would make results depend
/// on history and on the thread count.
inline void blas_one_thread() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

}  // namespace kiln::cpu
#endif
