// kiln (internal, test-visible): the scalar model of the generated vector
// math. ScalarBackend runs the algorithms of vmath_alg.h on one float with
// the same operation sequence as the generated code: `fused` selects the
// FMA targets' form (avx2, avx512) or SSE2's (separate multiply and add).
// The generated code is checked bit-for-bit against it, and it lets the
// accuracy sweeps cover all 2^32 inputs in seconds.
//
// GCC contracts a*b + c into an FMA by default (-ffp-contract=fast, also in
// ISO C++ mode); every product therefore passes through an empty asm
// statement that forces it to be rounded to float first.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "vmath_alg.h"

namespace kiln::codegen::vm {

struct ScalarBackend {
  using V = float;
  using I = int32_t;
  using M = bool;
  bool fma = true;

  bool fused() const { return fma; }
  static V cf(float c) { return c; }
  static I ci(int32_t c) { return c; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  /// a*b rounded to float (not contractible into a following add).
  static V mul(V a, V b) {
    V p = a * b;
    __asm__("" : "+x"(p));
    return p;
  }
  static V div(V a, V b) { return a / b; }
  V madd(V a, V b, V c) const {
    if (fma) return std::fma(a, b, c);
    return mul(a, b) + c;
  }
  static V load(V a) { return a; }
  V madd_acc(V p, V x, V c) const { return madd(p, x, c); }
  V msub(V a, V b, V c) const {
    if (fma) return std::fma(a, b, -c);
    return mul(a, b) - c;
  }
  V nmadd(V a, V b, V c) const {
    if (fma) return std::fma(-a, b, c);
    return c - mul(a, b);
  }
  /// -(a*b) - c
  V nmsub(V a, V b, V c) const {
    if (fma) return std::fma(-a, b, -c);
    return -(mul(a, b) + c);
  }
  V madd_in(V a, V b, V c) const { return madd(a, b, c); }
  V nmsub_in(V a, V b, V c) const { return nmsub(a, b, c); }
  // x86 maxps / minps
  static V maxx(V a, V b) { return a > b ? a : b; }
  static V minx(V a, V b) { return a < b ? a : b; }
  /// min(max(x, -c), c), NaN kept.
  static V clamp_sym(V x, float c) { return minx(c, maxx(-c, x)); }
  static uint32_t u(V a) { return std::bit_cast<uint32_t>(a); }
  static V f(uint32_t a) { return std::bit_cast<float>(a); }
  static V vand(V a, V b) { return f(u(a) & u(b)); }
  static V vor(V a, V b) { return f(u(a) | u(b)); }
  static V vxor(V a, V b) { return f(u(a) ^ u(b)); }
  static I as_i(V a) { return std::bit_cast<int32_t>(a); }
  static V as_f(I a) { return std::bit_cast<float>(a); }
  static I iadd(I a, I b) { return int32_t(uint32_t(a) + uint32_t(b)); }
  static I isub(I a, I b) { return int32_t(uint32_t(a) - uint32_t(b)); }
  static I iand(I a, I b) { return a & b; }
  static I ishl(I a, int n) { return int32_t(uint32_t(a) << n); }
  static I isra(I a, int n) { return a >> n; }
  static V i2f(I a) { return float(a); }
  static M lt(V a, V b) { return a < b; }
  static M le(V a, V b) { return a <= b; }
  static M gt(V a, V b) { return a > b; }
  static M ge(V a, V b) { return a >= b; }
  static M eq(V a, V b) { return a == b; }
  static M unord(V a, V b) { return a != a || b != b; }
  static M ieq(I a, I b) { return a == b; }
  static V sel(M m, V a, V b) { return m ? a : b; }
  /// +0 where m, else v.
  static V zero_where(M m, V v) { return m ? 0.0f : v; }
  /// v 2^k with one rounding: two exact power-of-two factors (k in [-300, 254]).
  static V scale(V v, I k) {
    I k1 = k >> 1, k2 = k - k1;
    V s1 = f(uint32_t(k1 + 127) << 23), s2 = f(uint32_t(k2 + 127) << 23);
    return mul(mul(v, s1), s2);
  }
  /// p 2^k with k = t - bits(kMagic) (scale_t of the code generator's backend).
  static V scale_t(V v, I t, V /*kf*/) { return scale(v, isub(t, I(std::bit_cast<uint32_t>(kMagic)))); }
  static double dmul(double a, double b) {
    double p = a * b;
    __asm__("" : "+x"(p));
    return p;
  }
  static V large_arg(V x, V r, int fn) { return std::fabs(x) >= kTrigMaxArg ? trig_slow(x, fn) : r; }
  /// ax - qf pi/2 in double (SSE2's reduction).
  static V reduce_double(V ax, V qf) {
    double q = qf, r = double(ax) - dmul(q, kPio2D1);
    r -= dmul(q, kPio2D2);
    r -= dmul(q, kPio2D3);
    return float(r);
  }
};

/// The functions of the generated code, by name, on one float.
enum class MathFn : uint8_t { exp, exp2, expm1, log, log2, log1p, tanh, sigmoid, silu, gelu, gelu_tanh, erf, sin, cos, tan, atanh };

inline float model(MathFn fn, float x, bool fma) {
  ScalarBackend b{fma};
  switch (fn) {
    case MathFn::exp: return vm::exp(b, x);
    case MathFn::exp2: return vm::exp2(b, x);
    case MathFn::expm1: return vm::expm1(b, x);
    case MathFn::log: return vm::log(b, x);
    case MathFn::log2: return vm::log2(b, x);
    case MathFn::log1p: return vm::log1p(b, x);
    case MathFn::tanh: return vm::tanh(b, x);
    case MathFn::sigmoid: return vm::sigmoid(b, x);
    case MathFn::silu: return vm::silu(b, x);
    case MathFn::gelu: return vm::gelu(b, x);
    case MathFn::gelu_tanh: return vm::gelu_tanh(b, x);
    case MathFn::erf: return vm::erf(b, x);
    case MathFn::sin: return vm::sin(b, x);
    case MathFn::cos: return vm::cos(b, x);
    case MathFn::tan: return vm::tan(b, x);
    case MathFn::atanh: return vm::atanh(b, x);
  }
  return x;
}

}  // namespace kiln::codegen::vm
