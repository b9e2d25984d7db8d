// kiln (internal): the float32 vector math algorithms of the CPU code
// generator, written once as templates over a "backend" B. The code
// generator instantiates them with an asmjit backend that emits one SIMD
// instruction per call (vmath.cpp); vmath_model.h instantiates them with a
// scalar C++ backend, the "scalar model", which performs the very same
// operation sequence on one float, so the accuracy sweeps can run over all
// 2^32 inputs quickly and the generated code can be checked bit-for-bit
// against it.
//
// Constructions (all standard; the code and the polynomial fits are kiln's
// own, the fits made with a Lawson/Remez iteration in 40-digit arithmetic):
// - exp, exp2, expm1: Cody-Waite reduction x = k ln2 + r with a 15-bit ln2_hi
//   so that k ln2_hi is exact (W. J. Cody, W. Waite, "Software Manual for the
//   Elementary Functions", 1980); e^r - 1 = r + r^2 P(r), P of degree 5, on
//   |r| <= ln2/2; the result is scaled by 2^k in one rounding (vscalefps on
//   AVX-512; elsewhere two exact power-of-two factors, so results down in the
//   subnormal range are rounded once, not flushed).
// - log, log2, log1p: x = 2^e m with m in [sqrt(1/2), sqrt(2)) taken from the
//   bits (subnormals are scaled by 2^23 first); log(1+f) = f - f^2/2 + f^3
//   P(f), P of degree 7 (the form of Cephes' logf, S. L. Moshier); log1p adds
//   the rounding error of 1+x as (x - (u-1))/u.
// - tanh: no exp. The double-angle identity tanh x = 2t / (1 + t^2),
//   t = tanh(x/2), with t from an odd rational x P(x^2) / Q(x^2) of degree
//   5/6 (the rational form of tanh in Cody and Waite's tanh and in Eigen's
//   float tanh; kiln's fit is for t, weighting t's error by 1/cosh(x), the
//   factor by which the identity damps it, so five coefficients hold the
//   whole range), x clamped to +-kTanhClamp where tanh rounds to 1. The
//   identity is what lets a low degree reach 4 ulp: a rational for tanh
//   itself, evaluated in float, loses up to 5.7 ulp near 1 (measured with
//   a degree 9/8 fit: every Horner rounding of P and Q at large x^2 reaches
//   the result); here those roundings are damped like the fit's error. One
//   division; vector ALU instructions per vector (KILN_JIT_DUMP): AVX2 16,
//   AVX-512 16, SSE2 24 (the expm1 form -m/(m+2) it replaced: 20, 17, 31).
//   In L1 on this project's VM (AMD EPYC, 1024 floats): AVX2 0.39 -> 0.28
//   ns per element, AVX-512 0.24 -> 0.21. Max 3.75 ulp over all 2^32
//   inputs on FMA targets (the expm1 form: 2.5).
// - atanh: log1p(2|x| / (1 - |x|)) / 2, sign put back last.
// - sigmoid, silu, gelu_tanh: e^{-|x|} = p 2^k from the exp reduction; the
//   quotient is formed on p and scaled by 2^k last, so tiny (subnormal)
//   results keep their accuracy.
// - sin, cos, tan: q = round(x 2/pi), r = x - q pi/2 with pi/2 in three parts
//   (FMA targets: three float parts, each product exact in the FMA; SSE2: the
//   subtraction is done in double with a 30+30+53-bit split); minimax
//   polynomials for sin, cos (degree 9/8) and tan (odd, degree 15) on
//   |r| <= pi/4 and the quadrant picks sin/cos/-1/tan and the sign.
//   This holds for |x| < 2^17 (kTrigMaxArg); lanes beyond it (rare in
//   practice) are recomputed out of line by the C library in double
//   (trig_slow) when any lane of a vector needs it, instead of a vector
//   Payne-Hanek reduction.
// - erf: x + x P(x^2) for |x| < 0.921875; else 1 - erfc with
//   erfc(t) = e^{-t^2} H(1/t) / t, H a polynomial on two intervals, e^{-t^2}
//   taken as e^{-hi} (1 - lo) with t^2 = hi + lo exact (FMA, or Dekker's
//   product on SSE2). gelu uses the same erfc for negative x (no cancellation),
//   as x erfc(t) / 2 = -e^{-t^2} H(1/t) / sqrt2 (t = -x/sqrt2): no rounded
//   1/t or product by x in the result (<= 4 ulp on [-13.5, -4), was 5.5).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln::codegen::vm {

// ---- constants ----------------------------------------------------------------------------
inline constexpr float kMagic = 0x1.8p23f;       // 1.5 * 2^23: x + kMagic rounds x to an integer
inline constexpr float kLog2e = 0x1.715476p+0f;  // 1/ln 2
inline constexpr float kLog2eLo = 0x1.4ae0c0p-26f;
inline constexpr float kLn2Hi = 0x1.62e400p-1f;  // 0.693145751953125: 15 significant bits
inline constexpr float kLn2Lo = 0x1.7f7d1cp-20f;  // ln 2 - kLn2Hi
inline constexpr float kLn2 = 0x1.62e430p-1f;
// e^r - 1 = r + r^2 (c0 + c1 r + ... + c5 r^5), |r| <= ln2/2 (rel. error 1.1e-9)
inline constexpr float kExpP[] = {5.000000000e-01f, 1.666666567e-01f, 4.166629165e-02f,
                                  8.333498612e-03f, 1.394486870e-03f, 1.979014050e-04f};
// log(1+f) = f - f^2/2 + f^3 (c0 + ... + c7 f^7), f in [sqrt(.5)-1, sqrt(2)-1] (rel. 6.4e-9)
inline constexpr float kLogP[] = {3.333333135e-01f,  -2.500082552e-01f, 2.000123560e-01f,  -1.662314385e-01f,
                                  1.420137286e-01f, -1.316201687e-01f, 1.276540160e-01f, -7.634320855e-02f};
// sin(r) = r + r^3 (s0 + s1 z + s2 z^2 + s3 z^3), cos(r) = 1 - z/2 + z^2 (c0 + ... + c3 z^3), |r| <= pi/4
inline constexpr float kSinP[] = {-1.666666716e-01f, 8.333329111e-03f, -1.983930415e-04f, 2.718046517e-06f};
inline constexpr float kCosP[] = {4.166666791e-02f, -1.388888340e-03f, 2.479945215e-05f, -2.720504426e-07f};
// tan(r) = r + r^3 (t0 + t1 z + ... + t6 z^6), |r| <= 1.01 pi/4 (rel. 1.5e-9)
inline constexpr float kTanP[] = {3.333335221e-01f, 1.333257109e-01f, 5.407097563e-02f, 2.122264169e-02f,
                                  1.099543180e-02f, -1.185915680e-04f, 4.481462762e-03f};
inline constexpr float kTwoOverPi = 0x1.45f306p-1f;
inline constexpr float kPio2F1 = 0x1.921fb6p+0f, kPio2F2 = -0x1.777a5cp-25f, kPio2F3 = -0x1.ee59dap-50f;
inline constexpr double kPio2D1 = 0x1.921fb54p+0, kPio2D2 = 0x1.10b46118p-30, kPio2D3 = 0x1.313198a2e0370p-61;
/// |x| below which sin/cos/tan keep their accuracy bound: q is exact and
/// x 2/pi in float is off by less than 0.005, so |r| <= 1.01 pi/4.
inline constexpr float kTrigMaxArg = 0x1p17f;
// erf(x) = x + x (c0 + c1 z + ... + c6 z^6), z = x^2, |x| < kErfSmall (rel. 8.9e-10;
// the leading 2/sqrt(pi) - 1 keeps the float rounding of 2/sqrt(pi) out of the result)
inline constexpr float kErfSmall = 0.921875f;
inline constexpr float kErfP[] = {1.283791661e-01f, -3.761262894e-01f, 1.128362566e-01f, -2.685572393e-02f,
                                  5.192358978e-03f, -8.048883756e-04f, 7.991280290e-05f};
// t e^{t^2} erfc(t) = H(u), u = 1/t: for t in [0.92, 2.5] a degree-8 polynomial
// in u (rel. 1.2e-8), for t in [2.5, 10.6] a degree-7 polynomial in u^2 (2.2e-9)
inline constexpr float kErfcA[] = {5.628212690e-01f, 1.833233051e-02f, -3.842043281e-01f, 2.874203622e-01f,
                                   9.482329339e-02f, -3.375260234e-01f, 2.769935727e-01f, -1.084343791e-01f,
                                   1.735748351e-02f};
inline constexpr float kErfcB[] = {5.641895533e-01f, -2.820882499e-01f, 4.226238430e-01f, -1.037308693e+00f,
                                   3.231636047e+00f, -9.792820930e+00f, 2.152596474e+01f, -2.311728859e+01f};
inline constexpr float kErfcSplit = 2.5f;

// ---- shared pieces -------------------------------------------------------------------------

/// Horner evaluation of c[0] + c[1] x + ... + c[N-1] x^(N-1).
template <class B, int N>
typename B::V horner(B& b, typename B::V x, const float (&c)[N]) {
  typename B::V p = b.load(b.cf(c[N - 1]));
  for (int i = N - 2; i >= 0; --i) p = b.madd_acc(p, x, b.cf(c[i]));  // p*x + c[i], in place
  return p;
}

template <class B>
typename B::V vabs(B& b, typename B::V x) {
  return b.vand(x, b.cf(std::bit_cast<float>(0x7fffffffu)));
}
template <class B>
typename B::V signbit(B& b, typename B::V x) {
  return b.vand(x, b.cf(-0.0f));
}
/// min(max(x, lo), hi) keeping NaN (x86 max/min return the second operand on NaN).
template <class B>
typename B::V clamp(B& b, typename B::V x, float lo, float hi) {
  return b.minx(b.cf(hi), b.maxx(b.cf(lo), x));
}

template <class B>
struct ExpParts {
  typename B::V p;  ///< e^r, in [0.7, 1.42]
  typename B::V q;  ///< e^r - 1
  typename B::V kf; ///< k as a float
  typename B::I k;  ///< e^x = p 2^k (empty unless want_k)
  typename B::I t;  ///< x log2e + kMagic as bits: k = t - bits(kMagic)
};

/// Cody-Waite reduction and the polynomial, after clamping x to [lo, hi]
/// (hi = 0 with x <= 0 known: only the lower clamp is emitted). p is left
/// empty unless want_p, k unless want_k (callers that fold the exponent
/// bias into the subtraction from t, one integer instruction fewer).
template <class B>
ExpParts<B> exp_parts(B& b, typename B::V x, float lo, float hi, bool want_p = true, bool x_nonpositive = false,
                      bool want_k = true) {
  x = x_nonpositive && hi == 0.0f ? b.maxx(b.cf(lo), x) : clamp(b, x, lo, hi);
  auto t = b.madd(x, b.cf(kLog2e), b.cf(kMagic));
  ExpParts<B> e;
  e.kf = b.sub(t, b.cf(kMagic));
  e.t = b.as_i(t);
  if (want_k) e.k = b.isub(b.as_i(t), b.as_i(b.cf(kMagic)));
  auto r = b.nmadd(e.kf, b.cf(kLn2Hi), x);
  r = b.nmadd(e.kf, b.cf(kLn2Lo), r);
  auto r2 = b.mul(r, r);
  e.q = b.madd(r2, horner(b, r, kExpP), r);
  if (want_p) e.p = b.add(e.q, b.cf(1.0f));
  return e;
}

/// t = x log2e + kMagic (neg: -x log2e + kMagic), rounded once: its bits
/// are bits(kMagic) + k with k = round(x log2e) for |x log2e| < 2^22.
template <class B>
typename B::V exp_t(B& b, typename B::V xc, bool neg) {
  // neg: -xc log2e + magic and -(kf ln2hi) - xc are exactly the values of
  // the unnegated form on -xc, rounded once each: the same bits
  return neg ? b.nmadd(xc, b.cf(kLog2e), b.cf(kMagic)) : b.madd(xc, b.cf(kLog2e), b.cf(kMagic));
}

/// e^r for exp's reduced argument r = +-xc - kf ln2 (kf = t - kMagic, t from
/// exp_t): 1 + (r + r^2 P(r)), in [0.707, 1.415]. xc_dies: xc's register may
/// take a result (a computed value of the caller that dies here).
template <class B>
typename B::V exp_poly(B& b, typename B::V xc, typename B::V kf, bool neg, bool xc_dies) {
  auto r = neg ? (xc_dies ? b.nmsub_in(kf, b.cf(kLn2Hi), xc) : b.nmsub(kf, b.cf(kLn2Hi), xc))
               : b.nmadd(kf, b.cf(kLn2Hi), xc);
  r = b.nmadd(kf, b.cf(kLn2Lo), r);
  auto r2 = b.mul(r, r);
  auto q = b.madd(r2, horner(b, r, kExpP), r);
  return b.add(q, b.cf(1.0f));
}

/// e^x (neg = false) or e^{-x} (neg = true: the negation folded into the
/// reduction, FMA targets only). x is clamped to [-104, 104]: below -104
/// the result is 0, above 88.73 it overflows to inf (2^k with k up to 150
/// is two finite factors, or one vscalefps). The code generator's AVX2 and
/// SSE2 forms branch around the clamp and the two-factor scaling when every
/// lane has k in [-125, 127] (vmath.cpp: exp_fast_path), with the same bits.
template <class B>
typename B::V exp_signed(B& b, typename B::V x, bool neg) {
  auto xc = b.clamp_sym(x, 104.0f);
  auto t = exp_t(b, xc, neg);
  auto kf = b.sub(t, b.cf(kMagic));
  return b.scale_t(exp_poly(b, xc, kf, neg, /*xc_dies=*/true), b.as_i(t), kf);
}

/// The most negative float32 x whose exp_signed(x) is not +0 (the scalar
/// model, FMA and SSE2 forms alike); every x below it, -inf included,
/// gives +0 (tests: every float32 below it, and the exhaustive sweep).
inline constexpr float kExpLastNonzero = -0x1.9fe368p+6f;  // -103.972076

/// exp_signed with the same bits, for vectors with lanes far below zero (an
/// attention mask's -3.4e38): the lanes whose result is +0 (x below
/// kExpLastNonzero; e^{-x}: x above its negation) are computed on x = 0
/// and cleared at the end (three instructions more). Computed on the
/// clamped x (-104) they underflow to 0 in the scaling multiplies, which
/// cost far more than the three instructions: AVX2 softmax rows of 128 with
/// 96 entries at -3.4e38 (bench_ops BM_kiln_softmax_128_rows, this
/// project's VM, AMD EPYC) 147-150 -> 81-86 ns per row, unmasked rows 57-61
/// ns either way. The code generator's AVX2 and SSE2 exp take it on their
/// slow path only; AVX-512's straight form (vscalefps) showed no such cost
/// (masked and unmasked rows 45-47 ns).
template <class B>
typename B::V exp_signed_zeroing(B& b, typename B::V x, bool neg) {
  auto m = neg ? b.gt(x, b.cf(-kExpLastNonzero)) : b.lt(x, b.cf(kExpLastNonzero));
  return b.zero_where(m, exp_signed(b, b.zero_where(m, x), neg));
}

template <class B>
typename B::V exp(B& b, typename B::V x) {
  return exp_signed(b, x, false);
}

template <class B>
typename B::V exp2(B& b, typename B::V x) {
  x = clamp(b, x, -151.0f, 129.0f);
  auto t = b.add(x, b.cf(kMagic));
  auto kf = b.sub(t, b.cf(kMagic));
  auto k = b.isub(b.as_i(t), b.as_i(b.cf(kMagic)));
  auto r = b.mul(b.sub(x, kf), b.cf(kLn2));  // x - kf is exact
  auto q = b.madd(b.mul(r, r), horner(b, r, kExpP), r);
  return b.scale(b.add(q, b.cf(1.0f)), k);
}

/// Small |x| (< 2^-24) where f(x) rounds to x: keeps -0 and subnormals exact.
template <class B>
typename B::M tiny(B& b, typename B::V x) {
  return b.lt(vabs(b, x), b.cf(0x1p-24f));
}

template <class B>
typename B::V expm1(B& b, typename B::V x) {
  auto e = exp_parts(b, x, -25.0f, 89.0f);
  // 2^k (1 + q) - 1 = q 2^k + (2^k - 1); 2^k - 1 is exact or nearly so for
  // k <= 20, above it the -1 is below half an ulp of the scaled term.
  auto two_k = b.as_f(b.ishl(b.iadd(e.k, b.ci(127)), 23));
  auto y1 = b.madd(e.q, two_k, b.sub(two_k, b.cf(1.0f)));
  auto y2 = b.sub(b.scale(e.p, e.k), b.cf(1.0f));
  auto y = b.sel(b.gt(e.kf, b.cf(20.0f)), y2, y1);
  return b.sel(tiny(b, x), x, y);
}

template <class B>
struct LogParts {
  typename B::V e;  ///< exponent (float)
  typename B::V f;  ///< m - 1
  typename B::V s;  ///< log(1+f) - f = -f^2/2 + f^3 P(f)
};

/// x = 2^e (1 + f), for finite x > 0.
template <class B>
LogParts<B> log_parts(B& b, typename B::V x) {
  auto sub = b.lt(x, b.cf(0x1p-126f));
  x = b.sel(sub, b.mul(x, b.cf(0x1p23f)), x);
  auto ix = b.isub(b.as_i(x), b.ci(0x3f3504f3));  // bits of sqrt(1/2)
  auto ei = b.isra(ix, 23);
  auto m = b.as_f(b.isub(b.as_i(x), b.iand(ix, b.ci(int32_t(0xff800000u)))));
  LogParts<B> L;
  L.e = b.sub(b.i2f(ei), b.sel(sub, b.cf(23.0f), b.cf(0.0f)));
  L.f = b.sub(m, b.cf(1.0f));
  auto f2 = b.mul(L.f, L.f);
  auto y = b.mul(b.mul(f2, L.f), horner(b, L.f, kLogP));
  L.s = b.nmadd(f2, b.cf(0.5f), y);
  return L;
}

/// Special values of log-like functions of u (u = x, or 1 + x for log1p):
/// u < 0 -> NaN, u == 0 -> -inf, u == inf -> inf, NaN -> NaN.
template <class B>
typename B::V log_specials(B& b, typename B::V u, typename B::V r, typename B::V x) {
  r = b.sel(b.eq(u, b.cf(0.0f)), b.cf(-std::numeric_limits<float>::infinity()), r);
  r = b.sel(b.eq(u, b.cf(std::numeric_limits<float>::infinity())), u, r);
  r = b.sel(b.lt(u, b.cf(0.0f)), b.cf(std::numeric_limits<float>::quiet_NaN()), r);
  return b.sel(b.unord(x, x), b.add(x, x), r);
}

template <class B>
typename B::V log(B& b, typename B::V x) {
  auto L = log_parts(b, x);
  auto s = b.madd(L.e, b.cf(kLn2Lo), L.s);
  auto r = b.madd(L.e, b.cf(kLn2Hi), b.add(L.f, s));
  return log_specials(b, x, r, x);
}

template <class B>
typename B::V log2(B& b, typename B::V x) {
  auto L = log_parts(b, x);
  auto u = b.madd(L.s, b.cf(kLog2e), L.e);
  u = b.madd(L.f, b.cf(kLog2eLo), u);
  auto r = b.madd(L.f, b.cf(kLog2e), u);
  return log_specials(b, x, r, x);
}

template <class B>
typename B::V log1p(B& b, typename B::V x) {
  auto u = b.add(x, b.cf(1.0f));
  auto c = b.div(b.sub(x, b.sub(u, b.cf(1.0f))), u);
  auto L = log_parts(b, u);
  auto s = b.add(b.madd(L.e, b.cf(kLn2Lo), L.s), c);
  auto r = b.madd(L.e, b.cf(kLn2Hi), b.add(L.f, s));
  r = log_specials(b, u, r, x);
  return b.sel(tiny(b, x), x, r);
}

/// tanh(x/2) = x (1 + p1 s + p2 s^2) / (2 + q1 s + q2 s^2 + q3 s^3), s = x^2:
/// kiln's own fit (a linearized Lawson iteration in double, on |x| <= 10,
/// weighting t's relative error by 1/cosh(x), the factor that damps it in
/// tanh x = 2t / (1 + t^2); the coefficients rounded to float). With these
/// float coefficients tanh x = 2t / (1 + t^2) is within 1.13e-8 (0.19
/// 2^-24) relative of tanh on [0, kTanhClamp] in exact arithmetic.
inline constexpr float kTanhP[] = {2.974225953e-02f, 1.135656930e-04f};  // p1, p2
inline constexpr float kTanhQ[] = {2.0f, 2.261511087e-01f, 2.406475367e-03f, 2.428685548e-06f};
inline constexpr float kTanhQ1[] = {kTanhQ[1], kTanhQ[2], kTanhQ[3]};  // q1, q2, q3
/// |x| is clamped to it: tanh rounds to 1 from 9.0109 on, and the
/// sequence below gives exactly 1 there (FMA and SSE2 forms alike; a
/// clamp of 10 gives 1 - 2^-24).
inline constexpr float kTanhClamp = 9.25f;

template <class B>
typename B::V tanh(B& b, typename B::V x) {
  // tanh x = 2t / (1 + t^2) with t = tanh(x/2) = T / Q, T = a P(s) and Q(s)
  // from kTanhP/kTanhQ, a = x clamped to +-kTanhClamp, s = a^2. Formed as
  // T W with W = 2Q / (Q^2 + T^2): one division, no exp. Rounding errors of
  // T and Q (and t's approximation error) reach the result damped by
  // 1/cosh(x), so near 1 only the last four roundings count; at small |x|
  // T is formed as a + (a s)(p1 + p2 s) (one rounding at T's scale; tiny
  // |x| and +-0 give T = a exactly and then Q = 2, W = 1: tanh = x), and W,
  // below 1 there, rounds to half an ulp of 2^-24 relative or less.
  // Exhaustively (all 2^32 inputs, FMA targets) within 3.75 ulp of tanh;
  // the result is capped at +-1 (its last roundings can round it up to
  // 1 + 2^-23 from about x = 8.8 on). Odd: every step is odd or even in x.
  // Not monotonic (the expm1 form happened to be, on [0, 10]): 7.2M of the
  // 1.1e9 steps between neighbouring floats in [0, 10] go down by an ulp
  // (8.6M without FMA), from |x| = 7e-4 on.
  // No FMA (SSE2): Q = 2 + e, e = s (q1 + q2 s + q3 s^2), and Q^2 + T^2 =
  // 4 + (e (e + 4) + T^2), so that no rounded Q^2 (an error of weight ~1
  // at small |x|) enters the denominator.
  auto a = b.clamp_sym(x, kTanhClamp);
  auto s = b.mul(a, a);
  auto T = b.madd_in(b.mul(a, s), horner(b, s, kTanhP), a);
  typename B::V q, d;
  if (b.fused()) {
    q = horner(b, s, kTanhQ);
    d = b.madd_in(q, q, b.mul(T, T));
  } else {
    auto e = b.mul(horner(b, s, kTanhQ1), s);
    q = b.add(e, b.cf(2.0f));
    d = b.add(b.add(b.mul(e, b.add(e, b.cf(4.0f))), b.mul(T, T)), b.cf(4.0f));
  }
  auto y = b.mul(T, b.div(b.add(q, q), d));
  return b.clamp_sym(y, 1.0f);
}

/// num / (1 + e^{-|x|}) scaled: returns the quotient and the exponent to
/// apply (0 for x >= 0, k for x < 0 where num carries p of e^{x} = p 2^k).
template <class B>
struct SigmoidParts {
  typename B::V num;  ///< 1 (x >= 0) or p (x < 0)
  typename B::V den;  ///< 1 + e^{-|x|}
  typename B::I k;    ///< 0 or k
};
template <class B>
SigmoidParts<B> sigmoid_parts(B& b, typename B::V x) {
  auto e = exp_parts(b, b.vor(x, b.cf(-0.0f)), -120.0f, 0.0f, true, /*x_nonpositive=*/true);  // -|x|
  auto ex = b.scale(e.p, e.k);
  auto pos = b.ge(x, b.cf(0.0f));
  SigmoidParts<B> s;
  s.den = b.add(ex, b.cf(1.0f));
  s.num = b.sel(pos, b.cf(1.0f), e.p);
  s.k = b.as_i(b.sel(pos, b.cf(0.0f), b.as_f(e.k)));
  return s;
}

template <class B>
typename B::V sigmoid(B& b, typename B::V x) {
  auto s = sigmoid_parts(b, x);
  return b.scale(b.div(s.num, s.den), s.k);
}

template <class B>
typename B::V silu(B& b, typename B::V x) {
  auto s = sigmoid_parts(b, x);
  auto xc = b.maxx(b.cf(-120.0f), x);  // silu(x < -120) = -0; keeps -inf finite
  return b.scale(b.div(b.mul(xc, s.num), s.den), s.k);
}

/// x sigmoid(z), z = 2 sqrt(2/pi) (x + 0.044715 x^3) (the tanh form of gelu).
template <class B>
typename B::V gelu_tanh(B& b, typename B::V x) {
  auto xc = b.maxx(b.cf(-120.0f), x);
  auto z = b.mul(xc, b.madd(b.mul(xc, xc), b.cf(0.0713548162726008f), b.cf(1.5957691216057308f)));
  auto s = sigmoid_parts(b, z);
  return b.scale(b.div(b.mul(xc, s.num), s.den), s.k);
}

/// Quadrant reduction for sin/cos/tan of ax = |x| >= 0.
template <class B>
void reduce_pio2(B& b, typename B::V ax, typename B::V& r, typename B::I& q) {
  auto t = b.madd(ax, b.cf(kTwoOverPi), b.cf(kMagic));
  auto qf = b.sub(t, b.cf(kMagic));
  q = b.isub(b.as_i(t), b.as_i(b.cf(kMagic)));
  if (b.fused()) {
    r = b.nmadd(qf, b.cf(kPio2F1), ax);
    r = b.nmadd(qf, b.cf(kPio2F2), r);
    r = b.nmadd(qf, b.cf(kPio2F3), r);
  } else {
    r = b.reduce_double(ax, qf);  // ax - qf pi/2 in double (no FMA)
  }
}

/// sin (fn 0), cos (1) or tan (2) of |x| >= kTrigMaxArg, where the float
/// reduction is not exact: the C library in double, per lane, out of line.
inline float trig_slow(float x, int fn) {
  const double d = x;
  return float(fn == 0 ? std::sin(d) : fn == 1 ? std::cos(d) : std::tan(d));
}

template <class B>
typename B::V sin_poly(B& b, typename B::V r, typename B::V z) {
  return b.madd(b.mul(z, r), horner(b, z, kSinP), r);
}
template <class B>
typename B::V cos_poly(B& b, typename B::V z) {
  return b.madd(b.mul(z, z), horner(b, z, kCosP), b.nmadd(z, b.cf(0.5f), b.cf(1.0f)));
}

/// sin (cos_shift = 0) or cos (cos_shift = 1) of x.
template <class B>
typename B::V sincos(B& b, typename B::V x, int cos_shift) {
  auto ax = vabs(b, x);
  typename B::V r;
  typename B::I q;
  reduce_pio2(b, ax, r, q);
  if (cos_shift) q = b.iadd(q, b.ci(1));
  auto z = b.mul(r, r);
  auto s = sin_poly(b, r, z), c = cos_poly(b, z);
  auto odd = b.ieq(b.iand(q, b.ci(1)), b.ci(1));
  auto y = b.sel(odd, c, s);
  auto sign = b.as_f(b.ishl(q, 30));  // bit 1 of q -> sign bit
  if (!cos_shift) sign = b.vxor(sign, x);
  return b.large_arg(x, b.vxor(y, signbit(b, sign)), cos_shift);
}

template <class B>
typename B::V sin(B& b, typename B::V x) { return sincos(b, x, 0); }
template <class B>
typename B::V cos(B& b, typename B::V x) { return sincos(b, x, 1); }

template <class B>
typename B::V tan(B& b, typename B::V x) {
  auto ax = vabs(b, x);
  typename B::V r;
  typename B::I q;
  reduce_pio2(b, ax, r, q);
  auto z = b.mul(r, r);
  auto t = b.madd(b.mul(z, r), horner(b, z, kTanP), r);
  auto odd = b.ieq(b.iand(q, b.ci(1)), b.ci(1));
  t = b.sel(odd, b.div(b.cf(-1.0f), t), t);
  return b.large_arg(x, b.vxor(t, signbit(b, x)), 2);
}

template <class B>
typename B::V atanh(B& b, typename B::V x) {
  auto ax = vabs(b, x);
  auto y = log1p(b, b.div(b.add(ax, ax), b.sub(b.cf(1.0f), ax)));
  return b.vxor(b.mul(y, b.cf(0.5f)), signbit(b, x));
}

/// erfc(t) for t >= kErfSmall as p 2^k (e^{-t^2} in the exp reduction's
/// parts, so that gelu can scale once at the end).
template <class B>
struct ErfcParts {
  typename B::V m;  ///< mantissa part
  typename B::I k;  ///< erfc(t) = m 2^k
};
/// v*v = hi + lo exactly: FMA, or Dekker's product (split at 2^12 + 1).
template <class B>
void square_parts(B& b, typename B::V v, typename B::V& hi, typename B::V& lo) {
  hi = b.mul(v, v);
  if (b.fused()) {
    lo = b.msub(v, v, hi);
  } else {
    auto c = b.mul(v, b.cf(4097.0f));
    auto vh = b.sub(c, b.sub(c, v));
    auto vl = b.sub(v, vh);
    lo = b.add(b.add(b.sub(b.mul(vh, vh), hi), b.mul(b.add(vh, vh), vl)), b.mul(vl, vl));
  }
}

/// erfc(t) for t >= kErfSmall with t^2 = hi + lo given exactly (the caller
/// may know t^2 better than t: gelu's t^2 = x^2/2).
/// With `times_u` false, m leaves out the final factor 1/t (erfc(t) t = m 2^k).
template <class B>
ErfcParts<B> erfc_parts(B& b, typename B::V t, typename B::V hi, typename B::V lo, bool times_u = true) {
  t = b.minx(b.cf(10.5f), t);
  hi = b.minx(b.cf(110.25f), hi);
  auto e = exp_parts(b, b.vxor(hi, b.cf(-0.0f)), -120.0f, 0.0f, true, /*x_nonpositive=*/true);  // -t^2
  auto u = b.div(b.cf(1.0f), t);
  auto ha = horner(b, u, kErfcA), hb = horner(b, b.mul(u, u), kErfcB);
  auto h = b.sel(b.lt(t, b.cf(kErfcSplit)), ha, hb);
  if (times_u) h = b.mul(h, u);
  ErfcParts<B> r;
  r.m = b.mul(b.nmadd(e.p, lo, e.p), h);  // p (1 - lo) H(u)/t
  r.k = e.k;
  return r;
}

template <class B>
typename B::V erf(B& b, typename B::V x) {
  auto ax = vabs(b, x);
  auto z = b.mul(ax, ax);
  auto small = b.madd(ax, horner(b, z, kErfP), ax);
  auto t = clamp(b, ax, kErfSmall, 10.5f);
  typename B::V hi, lo;
  square_parts(b, t, hi, lo);
  auto ec = erfc_parts(b, t, hi, lo);
  auto large = b.sub(b.cf(1.0f), b.scale(ec.m, ec.k));
  auto r = b.sel(b.lt(ax, b.cf(kErfSmall)), small, large);
  r = b.sel(b.unord(x, x), b.add(x, x), r);
  return b.vor(r, signbit(b, x));
}

/// -1/sqrt2 = kRsqrt2Hi + kRsqrt2Lo (float parts).
inline constexpr float kRsqrt2Hi = float(-0.70710678118654752440);
inline constexpr float kRsqrt2Lo = float(-0.70710678118654752440 - double(kRsqrt2Hi));
/// x Phi(x) = x erfc(-x/sqrt2) / 2: for |x| < kErfSmall sqrt2 as
/// x (1 + erf(x/sqrt2)) / 2 with erf's polynomial; below, from erfc (no
/// cancellation); above, as x + gelu(-x) (gelu(x) - gelu(-x) = x), so that
/// one erfc serves both tails (the sum rounds once: |gelu(-x)| <= 0.11 x
/// there, its error is scaled down by as much).
template <class B>
typename B::V gelu(B& b, typename B::V x) {
  auto xc = b.maxx(b.cf(-20.0f), x);  // gelu(x < -15) = -0
  auto t = b.mul(xc, b.cf(0.70710678118654752f));
  auto lower = b.le(t, b.cf(-kErfSmall));
  auto at = vabs(b, t);
  auto mid = b.lt(at, b.cf(kErfSmall));
  // |t| < kErfSmall: erf(t) = t + t P(t^2) (erf's small branch, sign put back)
  auto erf_t = b.vor(b.madd(at, horner(b, b.mul(at, at), kErfP), at), signbit(b, t));
  auto up = b.mul(b.mul(xc, b.cf(0.5f)), b.add(erf_t, b.cf(1.0f)));
  typename B::V hi, lo;  // t^2 = x^2 / 2 exactly (t itself is rounded)
  square_parts(b, clamp(b, b.vor(xc, b.cf(-0.0f)), -15.0f, -1.0f), hi, lo);  // of -|x|
  // gelu(-|x|) = -|x| erfc(|t|) / 2 with erfc(|t|) = e^{-t^2} H(1/|t|) / |t|:
  // |x| / (2 |t|) = 1/sqrt2 exactly, so it is -e^{-t^2} H(1/|t|) / sqrt2,
  // the constant in two parts (hi + lo): neither the rounded t nor the
  // product by x adds its error (they took the tail to 5.5 ulp).
  auto ec = erfc_parts(b, b.maxx(b.cf(kErfSmall), at), b.mul(hi, b.cf(0.5f)), b.mul(lo, b.cf(0.5f)),
                       /*times_u=*/false);
  auto down = b.scale(b.madd(ec.m, b.cf(kRsqrt2Lo), b.mul(ec.m, b.cf(kRsqrt2Hi))), ec.k);
  return b.sel(lower, down, b.sel(mid, up, b.add(xc, down)));
}

}  // namespace kiln::codegen::vm
