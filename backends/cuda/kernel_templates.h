// kiln: the CUDA kernel templates. One `KILN_HD` (__host__ __device__)
// functor per elementwise row of the op table (Unary, Binary and Ternary
// rows of tensor/ops.def), named after the row's Id (kiln::hd::Add for
// OpId::Add). The same text is compiled three ways:
//   - by nvcc into the precompiled eager kernels (elementwise.cu),
//   - by NVRTC into generated kernels (tests/test_cuda_nvrtc.cpp compiles
//     every row to PTX and an sm_90 cubin; the fused compiled plans will),
//   - by the host compiler in tests/test_cuda_functors.cpp, which checks
//     every row against the float64 reference (tensor/ref_ops.h).
// So the header includes nothing under NVRTC (it brings its own traits and
// math overloads) and only <cmath>/<cstdint> elsewhere.
//
// A functor is called on the compute type of the operands: float for
// float16/bfloat16 (the kernels load and store the 16-bit formats and
// compute in float), otherwise the storage type (bool, uint8, int8, int32,
// int64, float, double). It returns that type or bool. Semantics are
// numpy's, as the CPU's (backends/cpu/elementwise_functors.h): integers wrap,
// floor_divide/remainder follow Python, maximum/minimum/relu/clamp propagate
// NaN, integer division by zero and negative integer powers give 0 (the
// front end raises ValueError before a kernel runs).
//
// Accuracy: the CUDA math library's float and double functions without
// fast-math (expf, logf, sinf, ... within 1-4 ulp; CUDA C Programming Guide,
// "Mathematical Functions"); sigmoid, silu, gelu and gelu_tanh evaluate
// float inputs in double, as the CPU's scalar forms do. The tolerances per
// op between CUDA and the CPU are in docs/cuda_numerics.md.
#pragma once

#if defined(__CUDACC__)
#define KILN_HD __host__ __device__ __forceinline__
#else
#define KILN_HD inline
#endif

#if !defined(__CUDACC_RTC__)
#include <cmath>
#include <cstdint>
#else
// NVRTC: no standard headers; the fixed-width types kiln's dtypes use.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#endif

namespace kiln::hd {

// ---- traits of the compute types (std's are not available under NVRTC) ----
template <class T> struct traits;
template <> struct traits<bool> { static constexpr bool is_int = false, is_float = false, is_signed = false; using U = bool; };
template <> struct traits<uint8_t> { static constexpr bool is_int = true, is_float = false, is_signed = false; using U = uint8_t; };
template <> struct traits<int8_t> { static constexpr bool is_int = true, is_float = false, is_signed = true; using U = uint8_t; };
template <> struct traits<int32_t> { static constexpr bool is_int = true, is_float = false, is_signed = true; using U = uint32_t; };
template <> struct traits<int64_t> { static constexpr bool is_int = true, is_float = false, is_signed = true; using U = uint64_t; };
template <> struct traits<float> { static constexpr bool is_int = false, is_float = true, is_signed = true; using U = float; };
template <> struct traits<double> { static constexpr bool is_int = false, is_float = true, is_signed = true; using U = double; };
template <class T> inline constexpr bool is_int_v = traits<T>::is_int;
template <class T> inline constexpr bool is_float_v = traits<T>::is_float;
template <class T> using unsigned_t = typename traits<T>::U;
template <class A, class B> struct same { static constexpr bool value = false; };
template <class A> struct same<A, A> { static constexpr bool value = true; };
template <class T> inline constexpr bool is_bool_v = same<T, bool>::value;
/// double for float (the activations evaluate float in double), else T.
template <class T> struct wide { using type = T; };
template <> struct wide<float> { using type = double; };
template <class T> using wide_t = typename wide<T>::type;

// ---- math: one name per function, float and double overloads ----------------
namespace m {
#define KILN_HD_MATH1(name, fname)                      \
  KILN_HD float name(float x) { return ::fname(x); }   \
  KILN_HD double name(double x) { return ::name(x); }
KILN_HD_MATH1(exp, expf)
KILN_HD_MATH1(exp2, exp2f)
KILN_HD_MATH1(log, logf)
KILN_HD_MATH1(log2, log2f)
KILN_HD_MATH1(log1p, log1pf)
KILN_HD_MATH1(expm1, expm1f)
KILN_HD_MATH1(sqrt, sqrtf)
KILN_HD_MATH1(sin, sinf)
KILN_HD_MATH1(cos, cosf)
KILN_HD_MATH1(tan, tanf)
KILN_HD_MATH1(tanh, tanhf)
KILN_HD_MATH1(atanh, atanhf)
KILN_HD_MATH1(erf, erff)
KILN_HD_MATH1(erfc, erfcf)
KILN_HD_MATH1(floor, floorf)
KILN_HD_MATH1(ceil, ceilf)
KILN_HD_MATH1(trunc, truncf)
KILN_HD_MATH1(rint, rintf)  // half to even in the default rounding mode
KILN_HD_MATH1(fabs, fabsf)
#undef KILN_HD_MATH1
#define KILN_HD_MATH2(name, fname)                                 \
  KILN_HD float name(float a, float b) { return ::fname(a, b); }  \
  KILN_HD double name(double a, double b) { return ::name(a, b); }
KILN_HD_MATH2(fmod, fmodf)
KILN_HD_MATH2(pow, powf)
KILN_HD_MATH2(atan2, atan2f)
KILN_HD_MATH2(copysign, copysignf)
#undef KILN_HD_MATH2
/// +infinity (IEEE division; no builtin is common to g++, nvcc and NVRTC).
template <class T> KILN_HD T inf() { return T(1) / T(0); }
}  // namespace m

// ---- wrapping integer arithmetic ---------------------------------------------
template <class T> KILN_HD T wrap_add(T a, T b) {
  if constexpr (is_int_v<T>) return T(unsigned_t<T>(unsigned_t<T>(a) + unsigned_t<T>(b)));
  else return a + b;
}
template <class T> KILN_HD T wrap_sub(T a, T b) {
  if constexpr (is_int_v<T>) return T(unsigned_t<T>(unsigned_t<T>(a) - unsigned_t<T>(b)));
  else return a - b;
}
template <class T> KILN_HD T wrap_mul(T a, T b) {
  if constexpr (is_bool_v<T>) {
    return a && b;  // bool * bool: and (as T(a * b), without an int in a bool context)
  } else if constexpr (is_int_v<T>) {
    // 8-bit operands multiply in unsigned int (int would overflow).
    using U = unsigned_t<T>;
    if constexpr (sizeof(U) < sizeof(unsigned)) return T(U(unsigned(U(a)) * unsigned(U(b))));
    else return T(U(U(a) * U(b)));
  } else {
    return a * b;
  }
}
template <class T> KILN_HD T wrap_neg(T x) {
  if constexpr (is_int_v<T>) return wrap_sub(T(0), x);
  else return -x;
}
/// sigmoid taking exp only of a non-positive argument (no overflow, tiny
/// results keep their relative accuracy).
template <class T> KILN_HD T stable_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + m::exp(-x));
  const T e = m::exp(x);
  return e / (T(1) + e);
}

// ---- unary ------------------------------------------------------------------
struct Neg { template <class T> KILN_HD T operator()(T x) const { return wrap_neg(x); } };
struct Abs {
  template <class T> KILN_HD T operator()(T x) const {
    if constexpr (is_float_v<T>) return m::fabs(x);
    else if constexpr (traits<T>::is_signed) return x < T(0) ? wrap_neg(x) : x;
    else return x;
  }
};
struct Sign {
  template <class T> KILN_HD T operator()(T x) const {
    if constexpr (is_float_v<T>) return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == T(0) ? T(0) : x;
    else if constexpr (traits<T>::is_signed) return T((x > T(0)) - (x < T(0)));
    else return T(x != T(0));
  }
};
#define KILN_HD_FLOAT_UNARY(Name, fn) \
  struct Name { template <class T> KILN_HD T operator()(T x) const { return m::fn(x); } };
KILN_HD_FLOAT_UNARY(Exp, exp)
KILN_HD_FLOAT_UNARY(Exp2, exp2)
KILN_HD_FLOAT_UNARY(Log, log)
KILN_HD_FLOAT_UNARY(Log2, log2)
KILN_HD_FLOAT_UNARY(Log1p, log1p)
KILN_HD_FLOAT_UNARY(Expm1, expm1)
KILN_HD_FLOAT_UNARY(Sqrt, sqrt)
KILN_HD_FLOAT_UNARY(Sin, sin)
KILN_HD_FLOAT_UNARY(Cos, cos)
KILN_HD_FLOAT_UNARY(Tan, tan)
KILN_HD_FLOAT_UNARY(Tanh, tanh)
KILN_HD_FLOAT_UNARY(Atanh, atanh)
KILN_HD_FLOAT_UNARY(Erf, erf)
#undef KILN_HD_FLOAT_UNARY
struct Rsqrt { template <class T> KILN_HD T operator()(T x) const { return T(1) / m::sqrt(x); } };
struct Square { template <class T> KILN_HD T operator()(T x) const { return wrap_mul(x, x); } };
struct Reciprocal { template <class T> KILN_HD T operator()(T x) const { return T(1) / x; } };
struct Sigmoid { template <class T> KILN_HD T operator()(T x) const { return T(stable_sigmoid(wide_t<T>(x))); } };
/// max(x, 0) keeping NaN and -0.
struct Relu {
  template <class T> KILN_HD T operator()(T x) const {
    if constexpr (traits<T>::is_signed) return x < T(0) ? T(0) : x;
    else return x;
  }
};
/// 0.5 x erfc(-x / sqrt 2) (no cancellation for negative x); gelu(-inf) = -0.
struct Gelu {
  template <class T> KILN_HD T operator()(T x) const {
    using W = wide_t<T>;
    if (x == -m::inf<T>()) return T(-0.0);
    return T(W(0.5) * W(x) * m::erfc(-W(x) * W(0.70710678118654752440)));
  }
};
/// x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): the tanh form without
/// its cancellation for negative x.
struct GeluTanh {
  template <class T> KILN_HD T operator()(T x) const {
    using W = wide_t<T>;
    if (x == -m::inf<T>()) return T(-0.0);
    const W w = x;
    const W u = W(0.79788456080286535588) * (w + W(0.044715) * w * w * w);
    return T(w * stable_sigmoid(W(2) * u));
  }
};
struct Silu {
  template <class T> KILN_HD T operator()(T x) const {
    if (x == -m::inf<T>()) return T(-0.0);
    const wide_t<T> w = x;
    return T(w * stable_sigmoid(w));
  }
};
#define KILN_HD_ROUNDING(Name, fn)                    \
  struct Name {                                       \
    template <class T> KILN_HD T operator()(T x) const { \
      if constexpr (is_float_v<T>) return m::fn(x);   \
      else return x;                                  \
    }                                                 \
  };
KILN_HD_ROUNDING(Floor, floor)
KILN_HD_ROUNDING(Ceil, ceil)
KILN_HD_ROUNDING(Round, rint)
KILN_HD_ROUNDING(Trunc, trunc)
#undef KILN_HD_ROUNDING
struct LogicalNot { template <class T> KILN_HD bool operator()(T x) const { return x == T(0); } };
struct IsNan {
  template <class T> KILN_HD bool operator()(T x) const {
    if constexpr (is_float_v<T>) return x != x;
    else return false;
  }
};
struct IsInf {
  template <class T> KILN_HD bool operator()(T x) const {
    if constexpr (is_float_v<T>) return m::fabs(x) == m::inf<T>();
    else return false;
  }
};
struct IsFinite {
  template <class T> KILN_HD bool operator()(T x) const {
    if constexpr (is_float_v<T>) return m::fabs(x) < m::inf<T>();
    else return true;
  }
};
/// The conversion happens in the kernel's loads and stores.
struct Cast { template <class T> KILN_HD T operator()(T x) const { return x; } };

// ---- binary -----------------------------------------------------------------
struct Add {
  template <class T> KILN_HD T operator()(T a, T b) const {
    if constexpr (is_bool_v<T>) return a || b;  // numpy: bool + bool is or
    else return wrap_add(a, b);
  }
};
struct Sub { template <class T> KILN_HD T operator()(T a, T b) const { return wrap_sub(a, b); } };
struct Mul {
  template <class T> KILN_HD T operator()(T a, T b) const {
    if constexpr (is_bool_v<T>) return a && b;
    else return wrap_mul(a, b);
  }
};
struct Div { template <class T> KILN_HD T operator()(T a, T b) const { return a / b; } };
struct Pow {
  template <class T> KILN_HD T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      return m::pow(a, b);
    } else {
      if constexpr (traits<T>::is_signed)
        if (b < T(0)) return T(0);
      T r = T(1);
      for (unsigned_t<T> e = unsigned_t<T>(b); e; e = unsigned_t<T>(e >> 1)) {
        if (e & 1u) r = wrap_mul(r, a);
        a = wrap_mul(a, a);
      }
      return r;
    }
  }
};
struct Maximum { template <class T> KILN_HD T operator()(T a, T b) const { return (a >= b || a != a) ? a : b; } };
struct Minimum { template <class T> KILN_HD T operator()(T a, T b) const { return (a <= b || a != a) ? a : b; } };
/// Python a // b (CPython's float divmod); x // 0.0 = x / 0.0.
struct FloorDivide {
  template <class T> KILN_HD T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      if (b == T(0)) return a / b;
      const T mod = m::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
      if (div == T(0)) return m::copysign(T(0), a / b);
      const T fl = m::floor(div);
      return div - fl > T(0.5) ? fl + T(1) : fl;
    } else {
      if (b == T(0)) return T(0);
      if constexpr (traits<T>::is_signed)
        if (b == T(-1)) return wrap_neg(a);  // INT_MIN // -1 wraps
      T q = T(a / b);
      if constexpr (traits<T>::is_signed)
        if (T(a % b) != T(0) && ((a < T(0)) != (b < T(0)))) q = T(q - 1);
      return q;
    }
  }
};
/// Python a % b (the divisor's sign, also for zero results); x % 0.0 = NaN.
struct Remainder {
  template <class T> KILN_HD T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      if (b == T(0)) return m::fmod(a, b);
      const T mod = m::fmod(a, b);
      if (mod == T(0)) return m::copysign(T(0), b);
      return (b < T(0)) != (mod < T(0)) ? mod + b : mod;
    } else {
      if (b == T(0)) return T(0);
      if constexpr (traits<T>::is_signed) {
        if (b == T(-1)) return T(0);
        const T r = T(a % b);
        return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
      } else {
        return T(a % b);
      }
    }
  }
};
/// C fmod: the dividend's sign.
struct Fmod {
  template <class T> KILN_HD T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      return m::fmod(a, b);
    } else {
      if (b == T(0)) return T(0);
      if constexpr (traits<T>::is_signed)
        if (b == T(-1)) return T(0);
      return T(a % b);
    }
  }
};
struct Atan2 { template <class T> KILN_HD T operator()(T a, T b) const { return m::atan2(a, b); } };
struct Equal { template <class T> KILN_HD bool operator()(T a, T b) const { return a == b; } };
struct NotEqual { template <class T> KILN_HD bool operator()(T a, T b) const { return a != b; } };
struct Less { template <class T> KILN_HD bool operator()(T a, T b) const { return a < b; } };
struct LessEqual { template <class T> KILN_HD bool operator()(T a, T b) const { return a <= b; } };
struct Greater { template <class T> KILN_HD bool operator()(T a, T b) const { return a > b; } };
struct GreaterEqual { template <class T> KILN_HD bool operator()(T a, T b) const { return a >= b; } };
struct LogicalAnd { template <class T> KILN_HD bool operator()(T a, T b) const { return (a != T(0)) & (b != T(0)); } };
struct LogicalOr { template <class T> KILN_HD bool operator()(T a, T b) const { return (a != T(0)) | (b != T(0)); } };
struct LogicalXor { template <class T> KILN_HD bool operator()(T a, T b) const { return (a != T(0)) != (b != T(0)); } };

// ---- ternary ----------------------------------------------------------------
/// c ? a : b (the condition arrives as bool: nonzero and NaN are true).
struct Where { template <class T> KILN_HD T operator()(bool c, T a, T b) const { return c ? a : b; } };
/// minimum(maximum(x, lo), hi): NaN in any operand gives NaN.
struct Clamp { template <class T> KILN_HD T operator()(T x, T lo, T hi) const { return Minimum{}(Maximum{}(x, lo), hi); } };

// ---- numpy's casts between compute types --------------------------------------
/// x converted to To: floats to integers truncate, and NaN, infinities or
/// values outside To's range give To's minimum (uint8: the low 8 bits of
/// the value truncated to int64, 0 when that is not finite or in range);
/// integers wrap to To's width; anything to bool is x != 0 (NaN is true).
/// tensor/ref_ops.h ref_cast is the reference.
template <class To, class From> KILN_HD To cast_to(From x) {
  if constexpr (is_bool_v<To>) {
    return x != From(0);
  } else if constexpr (is_int_v<To> && is_float_v<From>) {
    if constexpr (same<To, uint8_t>::value) {
      if (!(m::fabs(double(x)) < 9.2e18)) return To(0);
      return To(uint8_t(uint64_t(int64_t(double(x)))));
    } else {
      const double lo = sizeof(To) == 1 ? -128.0 : sizeof(To) == 4 ? -2147483648.0 : -9223372036854775808.0;
      const double d = double(x);
      if (!(d > lo - 1.0 && d < -lo)) return To(lo);
      return To(d);
    }
  } else if constexpr (is_int_v<To>) {
    return To(unsigned_t<To>(x));  // wraps (bool and integers)
  } else {
    return To(x);
  }
}

}  // namespace kiln::hd
