// kiln: a C++ number used as an operand (weak in type promotion).
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "dtype.h"

namespace kiln {

/// A C++ arithmetic value with its kind. Scalars are weak: `x * 2.0` keeps a
/// float32 tensor float32, `i + 1` keeps an int32 tensor int32; a float
/// scalar with an integer or bool tensor gives float32 (see promote_with_scalar).
///
/// Integer (and bool) scalars are kept exactly over the whole int64 and
/// uint64 range: `ids == 9007199254740993` (2^53 + 1) compares with that
/// integer, not with the nearest double, and `x + INT64_MAX` adds INT64_MAX.
///
/// Storing a scalar into a tensor of dtype d (full, masked_fill, the operand
/// of an op) follows numpy 2's rules for Python scalars:
/// - an integer scalar outside d's range is a ValueError (no wrapping);
/// - a float scalar stored into an integer dtype is truncated toward zero;
///   NaN, +-inf or a value whose truncation is outside d's range is a
///   ValueError (numpy: "cannot convert float NaN to integer" / OverflowError);
/// - into a float dtype, integers round to nearest (even), floats convert as
///   by cast; into bool, any nonzero (and NaN) is true.
/// (Casting a tensor, cast(), never raises: see cast in ops.h for its rule.)
struct Scalar {
  /// The value as a double: exact for floats and for integers up to 2^53,
  /// the nearest double beyond (use int_value for the exact integer).
  double value = 0.0;
  ScalarKind kind = ScalarKind::floating;
  /// Integer and boolean kinds: the exact value. A uint64 above INT64_MAX
  /// holds its bits here with `above_int64` set.
  int64_t int_value = 0;
  bool above_int64 = false;

  Scalar() = default;
  template <class T>
    requires std::is_arithmetic_v<T>
  Scalar(T v)  // NOLINT(google-explicit-constructor): implicit by design
      : value(static_cast<double>(v)),
        kind(std::is_same_v<T, bool> ? ScalarKind::boolean
             : std::is_integral_v<T> ? ScalarKind::integer
                                     : ScalarKind::floating) {
    if constexpr (std::is_integral_v<T>) {
      int_value = static_cast<int64_t>(v);
      if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8) above_int64 = v > static_cast<T>(INT64_MAX);
    }
  }

  bool is_floating() const { return kind == ScalarKind::floating; }
  /// The exact decimal text ("9007199254740993", "18446744073709551615", "0.5").
  std::string str() const;
};

/// Throws ValueError, naming `who`, when scalar `s` cannot be stored into
/// dtype `d` by the rules above: an integer scalar outside an integer dtype's
/// range (numpy 2 raises OverflowError for `uint8_array + 256` instead of
/// wrapping; kiln raises for every op, comparisons included, rather than
/// compare a wrapped value), or a NaN, infinite or out-of-range float scalar
/// for an integer dtype. No-op for float/bool dtypes.
void check_scalar_fits(const Scalar& s, DType d, const char* who);

}  // namespace kiln
