// kiln: a C++ number used as an operand (weak in type promotion).
#pragma once
#include <type_traits>

#include "dtype.h"

namespace kiln {

/// A C++ arithmetic value with its kind. Scalars are weak: `x * 2.0` keeps a
/// float32 tensor float32, `i + 1` keeps an int32 tensor int32; a float
/// scalar with an integer or bool tensor gives float32 (see promote_with_scalar).
struct Scalar {
  double value = 0.0;
  ScalarKind kind = ScalarKind::floating;
  Scalar() = default;
  template <class T>
    requires std::is_arithmetic_v<T>
  Scalar(T v)  // NOLINT(google-explicit-constructor): implicit by design
      : value(static_cast<double>(v)),
        kind(std::is_same_v<T, bool> ? ScalarKind::boolean
             : std::is_integral_v<T> ? ScalarKind::integer
                                     : ScalarKind::floating) {}
};

/// Throws ValueError, naming `who`, when an integer scalar does not fit
/// integer dtype `d` (numpy 2 raises OverflowError for `uint8_array + 256`
/// instead of wrapping; kiln raises for every op, comparisons included, rather
/// than compare a wrapped value). No-op for float/bool dtypes or scalars.
void check_scalar_fits(const Scalar& s, DType d, const char* who);

}  // namespace kiln
