// kiln (internal): calling a template on the C++ type of a runtime DType,
// and converting between element types. Not part of <kiln/kiln.h>.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "dtype.h"

namespace kiln::detail {

template <class T> struct TypeTag { using type = T; };

/// Calls f(TypeTag<T>{}) for the C++ type T stored by `d`.
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::bool_: return f(TypeTag<bool>{});
    case DType::uint8: return f(TypeTag<uint8_t>{});
    case DType::int8: return f(TypeTag<int8_t>{});
    case DType::int32: return f(TypeTag<int32_t>{});
    case DType::int64: return f(TypeTag<int64_t>{});
    case DType::int16: return f(TypeTag<int16_t>{});
    case DType::uint16: return f(TypeTag<uint16_t>{});
    case DType::uint32: return f(TypeTag<uint32_t>{});
    case DType::uint64: return f(TypeTag<uint64_t>{});
    case DType::float16: return f(TypeTag<float16_t>{});
    case DType::bfloat16: return f(TypeTag<bfloat16_t>{});
    case DType::float32: return f(TypeTag<float>{});
    default: return f(TypeTag<double>{});
  }
}

/// The type arithmetic on T is done in: float for the 16-bit floats.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<float16_t> { using type = float; };
template <> struct compute_type<bfloat16_t> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

/// Value conversion with numpy's cast semantics where defined: float to int
/// truncates toward zero; NaN, inf and out-of-range floats (undefined in C++)
/// become the signed integer minimum (x86 behaviour, as numpy gives there),
/// for uint8/uint16/uint32 the low bits of the int64 truncation (0 without
/// one), for uint64 the truncation modulo 2^64 when it lies in (-2^63, 2^64)
/// and 2^63 otherwise (x86's "integer indefinite" bits); any nonzero (and
/// NaN) becomes true. Integer to integer wraps (two's complement). The code
/// generator (backends/cpu/jit/convert.cpp) implements the same rule for the
/// dtypes it compiles; the public statement is on cast (ops.h).
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, float16_t> || std::is_same_v<From, bfloat16_t>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, float16_t> || std::is_same_v<To, bfloat16_t>) {
    return To(convert<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // Range check in double so that e.g. 2^31 for int32 is caught exactly.
    double d = static_cast<double>(v);
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max()) + 1.0;
    if (!(d >= lo && d < hi)) {
      if constexpr (std::is_signed_v<To>) return std::numeric_limits<To>::min();
      else if constexpr (sizeof(To) == 8) return d > -9223372036854775808.0 && d < 0 ? static_cast<To>(static_cast<int64_t>(d)) : To(1) << 63;
      // narrower unsigned: wrap like numpy through int64 where finite and in range
      else if (d > -9223372036854775808.0 && d < 9223372036854775808.0) return static_cast<To>(static_cast<int64_t>(d));
      else return To(0);
    }
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace kiln::detail
