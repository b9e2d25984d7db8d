// kiln (internal): a Scalar converted to an element type by the rules on
// Scalar (tensor/scalar.h). Not part of <kiln/kiln.h>.
#pragma once
#include <type_traits>

#include "dispatch.h"
#include "scalar.h"

namespace kiln::detail {

/// `s` as a T (T one of the element types visit_dtype yields). Throws
/// ValueError naming `who` when it cannot be stored (check_scalar_fits).
template <class T>
T scalar_as(const Scalar& s, const char* who) {
  check_scalar_fits(s, dtype_v<T>, who);
  if (s.is_floating()) return convert<T>(s.value);
  if constexpr (std::is_same_v<T, bool>) {
    return s.int_value != 0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(s.int_value);  // in range: checked above
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // one correctly rounded conversion (not through double for float)
    return s.above_int64 ? static_cast<T>(static_cast<uint64_t>(s.int_value)) : static_cast<T>(s.int_value);
  } else {  // float16 / bfloat16: through float, as cast from int64 does
    return convert<T>(s.above_int64 ? static_cast<float>(static_cast<uint64_t>(s.int_value))
                                    : static_cast<float>(s.int_value));
  }
}

}  // namespace kiln::detail
