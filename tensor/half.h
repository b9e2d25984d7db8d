// kiln: 16-bit floating storage types. Arithmetic is done in float32; these
// only convert (IEEE 754 binary16, and bfloat16 = the top half of a float32),
// rounding to nearest even and keeping NaN a NaN.
#pragma once
#include <cstdint>
#include <cstring>

namespace kiln {

namespace detail {
inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
}  // namespace detail

/// IEEE 754 binary16 (numpy float16). Conversions round to nearest even.
struct float16_t {
  uint16_t bits = 0;
  float16_t() = default;
  explicit float16_t(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t x = detail::f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)  // inf or NaN (keep a quiet-NaN payload bit)
      return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to inf
    if (ax < 0x38800000u) {  // result is subnormal or zero: add 0.5 to use FP rounding
      float r = detail::bits_f32(ax) + 0.5f;
      return uint16_t(sign | (detail::f32_bits(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round half to even
    return uint16_t(sign | (ax >> 13));
  }
  static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return detail::bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {  // zero or subnormal: mant * 2^-24
      float v = float(mant) * 5.9604644775390625e-8f;
      return sign ? -v : v;
    }
    return detail::bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

/// bfloat16: float32's sign, exponent and top 7 mantissa bits.
struct bfloat16_t {
  uint16_t bits = 0;
  bfloat16_t() = default;
  explicit bfloat16_t(float f) : bits(from_float(f)) {}
  explicit operator float() const { return detail::bits_f32(uint32_t(bits) << 16); }

  static uint16_t from_float(float f) {
    uint32_t x = detail::f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return uint16_t(x >> 16);
  }
};

}  // namespace kiln
