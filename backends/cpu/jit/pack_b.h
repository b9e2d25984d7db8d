// kiln (internal): the copy a generated GEMM (small_gemm.h) makes of a
// transposed B before it runs: B stored n x k (the weight of a Linear layer,
// [out, in]) becomes the row-major k x n matrix its kernel reads one vector
// of n at a time.
#pragma once
#include <cstdint>

namespace kiln::codegen {

/// Rows [i0, i1) of P = B^T, where B is n x k stored row-major with leading
/// dimension ldb (>= k) at b and P is k x n row-major with leading dimension
/// ldp (>= n) at p: p[i ldp + j] = b[j ldb + i] for i in [i0, i1), j in
/// [0, n) (P's columns past n are not written). An exact
/// copy (the bits of every element are kept). Works through 8 x 8 blocks
/// transposed in AVX2 registers, cache-blocked over i (scalar copies at the
/// edges: any n, k, ldb); the caller guarantees the CPU runs AVX2 (a
/// generated GEMM's target). 0 <= i0 <= i1 <= k, n >= 1.
void pack_transposed_b(const float* b, int64_t n, int64_t k, int64_t ldb, float* p, int64_t ldp, int64_t i0,
                       int64_t i1);

}  // namespace kiln::codegen
