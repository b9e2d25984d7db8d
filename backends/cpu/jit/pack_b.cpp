// kiln (internal): pack_transposed_b (pack_b.h).
//
// The copy is a transpose: row j of B (contiguous along i) becomes column j
// of P. Read element by element that is one load per cache line of B
// (strided gathers); here 8 rows of B are loaded 8 columns at a time
// (8 vector loads), transposed in registers (unpack, shuffle, 128-bit
// permute: 24 shuffles) and stored as 8 vectors into 8 rows of P. The i axis
// is walked in blocks of kBlockI columns so the rows of P being filled (kBlockI
// lines) stay in L1 while j walks all of n: every line of B and P is then
// brought in once.
#include "pack_b.h"

#include <immintrin.h>

#include <algorithm>

namespace kiln::codegen {

namespace {

constexpr int64_t kBlockI = 64;

// The 8 x 8 block at s (rows of stride lds) transposed into d (rows of stride ldd).
__attribute__((target("avx2"))) inline void transpose8(const float* s, int64_t lds, float* d, int64_t ldd) {
  const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lds), r2 = _mm256_loadu_ps(s + 2 * lds),
               r3 = _mm256_loadu_ps(s + 3 * lds), r4 = _mm256_loadu_ps(s + 4 * lds),
               r5 = _mm256_loadu_ps(s + 5 * lds), r6 = _mm256_loadu_ps(s + 6 * lds),
               r7 = _mm256_loadu_ps(s + 7 * lds);
  // pairs of rows interleaved: t0 = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5], ...
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
               t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  // quads: u0 = column 0 of rows 0..3 | column 4 of rows 0..3, ...
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  // halves joined: column c of rows 0..7
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}

}  // namespace

__attribute__((target("avx2"))) void pack_transposed_b(const float* b, int64_t n, int64_t k, int64_t ldb, float* p,
                                                       int64_t ldp, int64_t i0, int64_t i1) {
  (void)k;
  const int64_t n8 = n / 8 * 8;
  for (int64_t ib = i0; ib < i1; ib += kBlockI) {
    const int64_t ie = std::min(i1, ib + kBlockI), ie8 = ib + (ie - ib) / 8 * 8;
    for (int64_t j = 0; j < n8; j += 8) {
      const float* src = b + j * ldb;
      for (int64_t i = ib; i < ie8; i += 8) transpose8(src + i, ldb, p + i * ldp + j, ldp);
      for (int64_t i = ie8; i < ie; ++i)  // the block's last columns (fewer than 8)
        for (int64_t r = 0; r < 8; ++r) p[i * ldp + j + r] = src[r * ldb + i];
    }
    for (int64_t j = n8; j < n; ++j)  // the last rows of B (fewer than 8)
      for (int64_t i = ib; i < ie; ++i) p[i * ldp + j] = b[j * ldb + i];
  }
}

}  // namespace kiln::codegen
