// kiln (internal): one scalar functor per elementwise row of the op table
// (Unary, Binary and Ternary categories of tensor/ops.def). The eager CPU
// kernels apply them in their loops (vectorised by the compiler), and the
// JIT's fallback can call the same code. Header-only and free of Eigen.
//
// A functor is called on the compute type C of the operands: float for
// float16/bfloat16 (see compute_t), otherwise the storage type. It returns C
// or bool. Functors are total: for integer division by zero and integer pow
// with a negative exponent they return 0; the eager front end raises
// ValueError before running them (tensor/ops_binary.cpp).
//
// Semantics (numpy's, see ARCHITECTURE.md "Policies"):
// - integer add/sub/mul/neg/abs/square/pow wrap modulo 2^bits (abs(INT_MIN)
//   is INT_MIN); INT_MIN // -1 wraps to INT_MIN;
// - floor_divide/remainder follow Python (remainder takes the divisor's sign,
//   also for zero results); fmod follows C;
// - maximum, minimum, relu and clamp propagate NaN; sign(NaN) = NaN;
// - logical ops treat any nonzero (and NaN) as true.
//
// Accuracy of these scalar functors: the C library's (glibc: within 1-2 ulp
// for float and double). The eager contiguous fast paths of a few float ops
// use Eigen's vectorised functions instead; their documented accuracy is in
// tensor/ref_ops.h.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../../tensor/op_table.h"

namespace kiln::cpu {

namespace fn {

template <class T> inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T> inline constexpr bool is_float_v = std::is_floating_point_v<T>;

// Two's-complement wrapping arithmetic for integers (computed in the unsigned
// type, where overflow is defined); plain arithmetic otherwise.
template <class T> inline T wrap_add(T a, T b) {
  if constexpr (is_int_v<T>) return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
  else return a + b;
}
template <class T> inline T wrap_sub(T a, T b) {
  if constexpr (is_int_v<T>) return T(std::make_unsigned_t<T>(a) - std::make_unsigned_t<T>(b));
  else return a - b;
}
template <class T> inline T wrap_mul(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = std::make_unsigned_t<T>;
    // uint8 * uint8 would promote to int and could overflow it for wider
    // types; multiply in an unsigned type at least as wide as unsigned int.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return T(U(W(U(a)) * W(U(b))));
  } else {
    return a * b;
  }
}
/// -x; for floats a sign flip (so -(+0) = -0, as IEEE and numpy give), for
/// integers two's-complement wrap (-INT_MIN = INT_MIN).
template <class T> inline T wrap_neg(T x) {
  if constexpr (is_int_v<T>) return wrap_sub(T(0), x);
  else return -x;
}

/// double for float: the activations below evaluate float inputs in double,
/// so that intermediate results that are subnormal in float (exp(-90)) or
/// amplified rounding (gelu_tanh's cubic) do not cost accuracy. These scalar
/// forms only run for the inputs the vectorised eager path leaves to them
/// (and in the JIT's fallback), so the cost does not matter.
template <class T> using wide_t = std::conditional_t<std::is_same_v<T, float>, double, T>;

/// sigmoid without overflow: exp is only taken of a non-positive argument,
/// so tiny results keep their relative accuracy.
template <class T> inline T stable_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

// ---- unary ------------------------------------------------------------------
struct Neg { template <class T> T operator()(T x) const { return wrap_neg(x); } };
struct Abs {
  template <class T> T operator()(T x) const {
    if constexpr (is_float_v<T>) return std::fabs(x);
    else if constexpr (std::is_signed_v<T>) return x < T(0) ? wrap_neg(x) : x;
    else return x;
  }
};
/// -1, 0 or 1; NaN for NaN; +0 for -0 (numpy).
struct Sign {
  template <class T> T operator()(T x) const {
    if constexpr (is_float_v<T>) return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == T(0) ? T(0) : x;
    else if constexpr (std::is_unsigned_v<T>) return T(x != T(0));
    else return T((x > T(0)) - (x < T(0)));
  }
};
struct Exp { template <class T> T operator()(T x) const { return std::exp(x); } };
struct Exp2 { template <class T> T operator()(T x) const { return std::exp2(x); } };
struct Log { template <class T> T operator()(T x) const { return std::log(x); } };
struct Log2 { template <class T> T operator()(T x) const { return std::log2(x); } };
struct Log1p { template <class T> T operator()(T x) const { return std::log1p(x); } };
struct Expm1 { template <class T> T operator()(T x) const { return std::expm1(x); } };
struct Sqrt { template <class T> T operator()(T x) const { return std::sqrt(x); } };
struct Rsqrt { template <class T> T operator()(T x) const { return T(1) / std::sqrt(x); } };
struct Square { template <class T> T operator()(T x) const { return wrap_mul(x, x); } };
struct Reciprocal { template <class T> T operator()(T x) const { return T(1) / x; } };
struct Sin { template <class T> T operator()(T x) const { return std::sin(x); } };
struct Cos { template <class T> T operator()(T x) const { return std::cos(x); } };
struct Tan { template <class T> T operator()(T x) const { return std::tan(x); } };
struct Tanh { template <class T> T operator()(T x) const { return std::tanh(x); } };
struct Atanh { template <class T> T operator()(T x) const { return std::atanh(x); } };
struct Sigmoid { template <class T> T operator()(T x) const { return T(stable_sigmoid(wide_t<T>(x))); } };
/// max(x, 0) keeping NaN (and -0).
struct Relu {
  template <class T> T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x;
    else return x < T(0) ? T(0) : x;
  }
};
/// x * Phi(x) = 0.5 x erfc(-x / sqrt 2): the erfc form keeps relative
/// accuracy for negative x, where 1 + erf cancels. gelu(-inf) = -0 (the limit).
struct Gelu {
  template <class T> T operator()(T x) const {
    using W = wide_t<T>;
    if (x == -std::numeric_limits<T>::infinity()) return T(-0.0);
    return T(W(0.5) * W(x) * std::erfc(-W(x) * W(0.70710678118654752440)));
  }
};
/// 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), evaluated as the
/// identical x * sigmoid(2u), which does not cancel for negative x. The
/// function's condition number grows like |2u| for negative x, so float
/// evaluates u (and the rest) in double to keep its relative accuracy.
struct GeluTanh {
  template <class T> T operator()(T x) const {
    using W = wide_t<T>;
    if (x == -std::numeric_limits<T>::infinity()) return T(-0.0);
    const W w = x;
    const W u = W(0.79788456080286535588) * (w + W(0.044715) * w * w * w);
    return T(w * stable_sigmoid(W(2) * u));
  }
};
/// x * sigmoid(x); silu(-inf) = -0 (the limit).
struct Silu {
  template <class T> T operator()(T x) const {
    if (x == -std::numeric_limits<T>::infinity()) return T(-0.0);
    const wide_t<T> w = x;
    return T(w * stable_sigmoid(w));
  }
};
struct Erf { template <class T> T operator()(T x) const { return std::erf(x); } };
struct Floor {
  template <class T> T operator()(T x) const {
    if constexpr (is_float_v<T>) return std::floor(x);
    else return x;
  }
};
struct Ceil {
  template <class T> T operator()(T x) const {
    if constexpr (is_float_v<T>) return std::ceil(x);
    else return x;
  }
};
/// Half to even (IEEE roundTiesToEven, the default rounding mode).
struct Round {
  template <class T> T operator()(T x) const {
    if constexpr (is_float_v<T>) return std::nearbyint(x);
    else return x;
  }
};
struct Trunc {
  template <class T> T operator()(T x) const {
    if constexpr (is_float_v<T>) return std::trunc(x);
    else return x;
  }
};
struct LogicalNot { template <class T> bool operator()(T x) const { return x == T(0); } };
struct IsNan {
  template <class T> bool operator()(T x) const {
    if constexpr (is_float_v<T>) return x != x;
    else return false;
  }
};
struct IsInf {
  template <class T> bool operator()(T x) const {
    if constexpr (is_float_v<T>) return std::fabs(x) == std::numeric_limits<T>::infinity();
    else return false;
  }
};
struct IsFinite {
  template <class T> bool operator()(T x) const {
    if constexpr (is_float_v<T>) return std::fabs(x) < std::numeric_limits<T>::infinity();
    else return true;
  }
};
/// The dtype conversion happens in the loop's loads and stores.
struct Cast { template <class T> T operator()(T x) const { return x; } };

// ---- binary -----------------------------------------------------------------
/// bool + bool is logical or (numpy).
struct Add {
  static constexpr bool accepts_bool = true;
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a || b;
    else return wrap_add(a, b);
  }
};
struct Sub { template <class T> T operator()(T a, T b) const { return wrap_sub(a, b); } };
/// bool * bool is logical and (numpy).
struct Mul {
  static constexpr bool accepts_bool = true;
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else return wrap_mul(a, b);
  }
};
/// True division (operands are converted to a float type first).
struct Div { template <class T> T operator()(T a, T b) const { return a / b; } };
/// Integers: exact by squaring, wrapping; a negative exponent gives 0 (the
/// front end raises first). pow(0, 0) = 1.
struct Pow {
  template <class T> T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      return std::pow(a, b);
    } else {
      if constexpr (std::is_signed_v<T>)
        if (b < T(0)) return T(0);
      T r = T(1);
      for (auto e = std::make_unsigned_t<T>(b); e; e >>= 1) {
        if (e & 1u) r = wrap_mul(r, a);
        a = wrap_mul(a, a);
      }
      return r;
    }
  }
};
/// NaN-propagating (numpy.maximum): a NaN in either operand gives NaN.
struct Maximum {
  static constexpr bool accepts_bool = true;
  template <class T> T operator()(T a, T b) const { return (a >= b || a != a) ? a : b; }
};
struct Minimum {
  static constexpr bool accepts_bool = true;
  template <class T> T operator()(T a, T b) const { return (a <= b || a != a) ? a : b; }
};
/// Python a // b. Floats follow CPython/numpy's divmod (quotient from the
/// exact fmod, snapped to an integer); x // 0.0 is x / 0.0 (inf or NaN).
struct FloorDivide {
  template <class T> T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      if (b == T(0)) return a / b;
      T mod = std::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
      if (div == T(0)) return std::copysign(T(0), a / b);
      T fl = std::floor(div);
      return div - fl > T(0.5) ? fl + T(1) : fl;
    } else {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return wrap_neg(a);  // INT_MIN // -1 wraps
      T q = T(a / b);
      if constexpr (std::is_signed_v<T>)
        if (T(a % b) != T(0) && ((a < T(0)) != (b < T(0)))) q = T(q - 1);
      return q;
    }
  }
};
/// Python a % b: the sign of the divisor, also for zero results
/// (numpy: remainder(3.0, -3.0) = -0.0); x % 0.0 is NaN.
struct Remainder {
  template <class T> T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      if (b == T(0)) return std::fmod(a, b);
      T mod = std::fmod(a, b);
      if (mod == T(0)) return std::copysign(T(0), b);
      return (b < T(0)) != (mod < T(0)) ? mod + b : mod;
    } else {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return T(0);
        T r = T(a % b);
        return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
      } else {
        return T(a % b);
      }
    }
  }
};
/// C fmod: the sign of the dividend.
struct Fmod {
  template <class T> T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      return std::fmod(a, b);
    } else {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return T(0);
      return T(a % b);
    }
  }
};
struct Atan2 { template <class T> T operator()(T a, T b) const { return std::atan2(a, b); } };
struct Equal { template <class T> bool operator()(T a, T b) const { return a == b; } };
struct NotEqual { template <class T> bool operator()(T a, T b) const { return a != b; } };
struct Less { template <class T> bool operator()(T a, T b) const { return a < b; } };
struct LessEqual { template <class T> bool operator()(T a, T b) const { return a <= b; } };
struct Greater { template <class T> bool operator()(T a, T b) const { return a > b; } };
struct GreaterEqual { template <class T> bool operator()(T a, T b) const { return a >= b; } };
struct LogicalAnd { template <class T> bool operator()(T a, T b) const { return (a != T(0)) & (b != T(0)); } };
struct LogicalOr { template <class T> bool operator()(T a, T b) const { return (a != T(0)) | (b != T(0)); } };
struct LogicalXor { template <class T> bool operator()(T a, T b) const { return (a != T(0)) != (b != T(0)); } };

// ---- ternary ----------------------------------------------------------------
/// cond ? a : b (cond is converted to bool first: nonzero and NaN are true).
struct Where {
  static constexpr bool accepts_bool = true;
  template <class T> T operator()(bool c, T a, T b) const { return c ? a : b; }
};
/// minimum(maximum(x, lo), hi): NaN in any operand gives NaN.
struct Clamp {
  template <class T> T operator()(T x, T lo, T hi) const { return Minimum{}(Maximum{}(x, lo), hi); }
};

}  // namespace fn

/// The functor of an elementwise row: Functor<OpId::Add>::type is fn::Add.
/// Rows of other categories map to void.
template <OpId> struct Functor { using type = void; };
#define KILN_FUNCTOR_ROW(id) \
  template <> struct Functor<OpId::id> { using type = fn::id; };
#define KILN_FUNCTOR_Unary(id) KILN_FUNCTOR_ROW(id)
#define KILN_FUNCTOR_Binary(id) KILN_FUNCTOR_ROW(id)
#define KILN_FUNCTOR_Ternary(id) KILN_FUNCTOR_ROW(id)
#define KILN_FUNCTOR_Reduce(id)
#define KILN_FUNCTOR_Scan(id)
#define KILN_FUNCTOR_RowNorm(id)
#define KILN_FUNCTOR_Matmul(id)
#define KILN_FUNCTOR_View(id)
#define KILN_FUNCTOR_Data(id)
#define KILN_FUNCTOR_Linalg(id)
#define KILN_OP(id, name, arity, cat, rule) KILN_FUNCTOR_##cat(id)
#include "../../tensor/ops.def"
#undef KILN_OP
#undef KILN_FUNCTOR_ROW
#undef KILN_FUNCTOR_Unary
#undef KILN_FUNCTOR_Binary
#undef KILN_FUNCTOR_Ternary
#undef KILN_FUNCTOR_Reduce
#undef KILN_FUNCTOR_Scan
#undef KILN_FUNCTOR_RowNorm
#undef KILN_FUNCTOR_Matmul
#undef KILN_FUNCTOR_View
#undef KILN_FUNCTOR_Data
#undef KILN_FUNCTOR_Linalg

/// A row known at compile time, with its dtype rule.
template <OpId Op, DTypeRule Rule>
struct OpTag {
  static constexpr OpId op = Op;
  static constexpr DTypeRule rule = Rule;
  using functor = typename Functor<Op>::type;
};

/// Calls v(OpTag<op, rule>{}) for the runtime `op` when its row is of
/// category Cat; returns false (without calling) for any other row.
template <OpCategory Cat, class V>
bool visit_op(OpId op, V&& v) {
  switch (op) {
#define KILN_OP(id, name, arity, cat, rule)                  \
  case OpId::id:                                             \
    if constexpr (OpCategory::cat == Cat) {                  \
      v(OpTag<OpId::id, DTypeRule::rule>{});                 \
      return true;                                           \
    } else {                                                 \
      return false;                                          \
    }
#include "../../tensor/ops.def"
#undef KILN_OP
  }
  return false;
}

/// Whether storage type S is accepted by row (F, Rule): mirrors
/// result_dtype's refusals so that kernels are only instantiated for
/// dtypes that can reach them.
template <class F, DTypeRule Rule, class S>
constexpr bool accepts_dtype() {
  constexpr bool is_bool = std::is_same_v<S, bool>;
  constexpr bool is_fp = !std::is_integral_v<S>;  // float, double, float16, bfloat16
  switch (Rule) {
    case DTypeRule::Float:
    case DTypeRule::TrueDiv: return is_fp;
    case DTypeRule::Same: return !is_bool;
    case DTypeRule::Promote:
      if constexpr (requires { F::accepts_bool; }) return true;
      else return !is_bool;
    default: return true;
  }
}

}  // namespace kiln::cpu
