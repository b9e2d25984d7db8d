// kiln: Scalar's exact checks and text (see scalar.h).
#include "scalar.h"

#include <cmath>
#include <limits>
#include <string>

#include "error.h"
#include "num_str.h"

namespace kiln {

namespace {

// hi_above: uint64's range extends past INT64_MAX to UINT64_MAX.
struct IntRange {
  int64_t lo, hi;
  bool hi_above = false;
};

IntRange int_range(DType d) {
  switch (d) {
    case DType::int8: return {-128, 127};
    case DType::uint8: return {0, 255};
    case DType::int16: return {INT16_MIN, INT16_MAX};
    case DType::uint16: return {0, UINT16_MAX};
    case DType::int32: return {INT32_MIN, INT32_MAX};
    case DType::uint32: return {0, UINT32_MAX};
    case DType::uint64: return {0, INT64_MAX, true};
    default: return {INT64_MIN, INT64_MAX};
  }
}

}  // namespace

std::string Scalar::str() const {
  switch (kind) {
    case ScalarKind::boolean: return int_value ? "true" : "false";
    case ScalarKind::integer:
      return above_int64 ? std::to_string(static_cast<uint64_t>(int_value)) : std::to_string(int_value);
    default: return detail::num_str(value);
  }
}

void check_scalar_fits(const Scalar& s, DType d, const char* who) {
  if (!is_integral(d) || s.kind == ScalarKind::boolean) return;
  const IntRange r = int_range(d);
  if (s.kind == ScalarKind::integer) {
    if (s.above_int64 ? r.hi_above : s.int_value >= r.lo && s.int_value <= r.hi) return;
    // int64 and uint64 have no wider integer dtype (int64 holds no value
    // above 2^63-1, uint64 none below 0): the way out is float64 or another scalar.
    const bool widest = d == DType::int64 || d == DType::uint64;
    throw ValueError(std::string(who) + ": the integer scalar " + s.str() + " is out of range for " +
                     std::string(name(d)) + " (a tensor's integer dtype wins over a scalar, as in numpy 2, which raises here); " +
                     (widest ? "there is no wider integer dtype than " + std::string(name(d)) +
                                   ": compute in float64 (x.to(DType::float64), exact for integers up to 2^53 in "
                                   "magnitude) or use a scalar inside " + std::string(name(d)) + "'s range"
                             : std::string("cast the tensor to a wider dtype first, e.g. x.to(DType::int64)")));
  }
  // A float stored into an integer dtype truncates toward zero; a value with
  // no truncation in range has no integer (numpy 2: ValueError for NaN,
  // OverflowError for inf and out of range). Compared in double: every bound
  // below is exact in double (-2^63, 2^63 for int64).
  const double t = std::trunc(s.value);
  const double lo = static_cast<double>(r.lo);
  const double hi_excl = r.hi_above ? 18446744073709551616.0
                         : r.hi == INT64_MAX ? 9223372036854775808.0
                                             : static_cast<double>(r.hi) + 1.0;
  if (t >= lo && t < hi_excl) return;
  throw ValueError(std::string(who) + ": cannot convert the float scalar " + s.str() + " to " + std::string(name(d)) +
                   (std::isnan(s.value)   ? " (NaN has no integer value)"
                    : std::isinf(s.value) ? " (infinity has no integer value)"
                                          : " (its integer part is out of range)") +
                   "; as in numpy 2, only cast() of a tensor converts such values (see cast)");
}

}  // namespace kiln
