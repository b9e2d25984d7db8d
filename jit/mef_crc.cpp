// The MEF checksum (jit/mef_crc.h). The folding follows Intel's "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ Instruction" (Gopal
// et al., 2009), with the bit-reflected constants of CRC-32 that zlib-ng
// and Chromium's zlib use: four 128-bit lanes are folded 64 bytes at a
// time, then into one lane, then reduced to 32 bits (Barrett). The bytes
// past the last multiple of 16, and any CPU without PCLMULQDQ, go through
// zlib's crc32(), which continues the same value.
#include "mef_crc.h"

#include <zlib.h>

#include <algorithm>
#include <cstddef>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KILN_MEF_CRC_PCLMUL 1
#endif

namespace kiln::mef {

namespace {

uint32_t zlib_crc(uint32_t crc, const unsigned char* p, size_t n) {
  uLong c = crc;
  while (n > 0) {  // zlib takes uInt lengths: large inputs in pieces
    const size_t k = std::min<size_t>(n, size_t{1} << 30);
    c = crc32(c, p, static_cast<uInt>(k));
    p += k;
    n -= k;
  }
  return static_cast<uint32_t>(c);
}

#ifdef KILN_MEF_CRC_PCLMUL

// The CRC register (not inverted: the caller passes ~crc and inverts the
// result) after `len` bytes at `buf`; len >= 64 and a multiple of 16.
__attribute__((target("pclmul,sse4.1"))) uint32_t fold_crc(const unsigned char* buf, size_t len, uint32_t crc) {
  alignas(16) static const uint64_t k1k2[2] = {0x0154442bd4, 0x01c6e41596};  // fold by 512 bits
  alignas(16) static const uint64_t k3k4[2] = {0x01751997d0, 0x00ccaa009e};  // fold by 128 bits
  alignas(16) static const uint64_t k5k0[2] = {0x0163cd6124, 0x0000000000};  // 64 -> 32 bits
  alignas(16) static const uint64_t poly[2] = {0x01db710641, 0x01f7011641};  // P(x)' and mu (Barrett)
  auto load = [](const unsigned char* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };

  __m128i x1 = load(buf), x2 = load(buf + 16), x3 = load(buf + 32), x4 = load(buf + 48);
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  buf += 64;
  len -= 64;
  // four lanes, 64 bytes a round
  while (len >= 64) {
    const __m128i x5 = _mm_clmulepi64_si128(x1, k, 0x00), x6 = _mm_clmulepi64_si128(x2, k, 0x00);
    const __m128i x7 = _mm_clmulepi64_si128(x3, k, 0x00), x8 = _mm_clmulepi64_si128(x4, k, 0x00);
    x1 = _mm_clmulepi64_si128(x1, k, 0x11);
    x2 = _mm_clmulepi64_si128(x2, k, 0x11);
    x3 = _mm_clmulepi64_si128(x3, k, 0x11);
    x4 = _mm_clmulepi64_si128(x4, k, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), load(buf));
    x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), load(buf + 16));
    x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), load(buf + 32));
    x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), load(buf + 48));
    buf += 64;
    len -= 64;
  }
  // the four lanes into one
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  auto fold = [&](__m128i acc, __m128i next) {
    const __m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
    const __m128i hi = _mm_clmulepi64_si128(acc, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(hi, next), lo);
  };
  x1 = fold(x1, x2);
  x1 = fold(x1, x3);
  x1 = fold(x1, x4);
  // the remaining 16-byte blocks
  while (len >= 16) {
    x1 = fold(x1, load(buf));
    buf += 16;
    len -= 16;
  }
  // 128 -> 64 bits
  __m128i x2b = _mm_clmulepi64_si128(x1, k, 0x10);
  const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2b);
  k = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x2b = _mm_srli_si128(x1, 4);
  x1 = _mm_and_si128(x1, mask32);
  x1 = _mm_clmulepi64_si128(x1, k, 0x00);
  x1 = _mm_xor_si128(x1, x2b);
  // Barrett reduction to 32 bits
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x2b = _mm_and_si128(x1, mask32);
  x2b = _mm_clmulepi64_si128(x2b, k, 0x10);
  x2b = _mm_and_si128(x2b, mask32);
  x2b = _mm_clmulepi64_si128(x2b, k, 0x00);
  x1 = _mm_xor_si128(x1, x2b);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

bool has_pclmul() {
  static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return yes;
}

#endif

}  // namespace

uint32_t crc32_of(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  uint32_t crc = 0;
#ifdef KILN_MEF_CRC_PCLMUL
  if (n >= 64 && has_pclmul()) {
    const size_t folded = n & ~size_t{15};
    crc = ~fold_crc(p, folded, ~crc);
    p += folded;
    n -= folded;
  }
#endif
  return zlib_crc(crc, p, n);
}

}  // namespace kiln::mef
