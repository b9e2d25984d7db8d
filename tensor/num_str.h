// kiln (internal): numbers in error messages. Not part of <kiln/kiln.h>.
#pragma once
#include <cstdio>
#include <string>

#include "dtype.h"

namespace kiln::detail {

/// `v` with every digit needed to read it back ("%.17g"); std::to_string
/// would print six decimals (1e-300 -> "0.000000").
inline std::string num_str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// `v` (a value of floating dtype `dt`) with the fewest significant digits
/// that read back as the same `dt` value, as std::to_chars writes a double:
/// 0.1 in float32 is "0.1", not "0.10000000149011612"; "nan", "inf", "-inf".
/// (Defined in print.cpp, beside the printer's digit generation.)
std::string shortest_str(double v, DType dt);

}  // namespace kiln::detail
