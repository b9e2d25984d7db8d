// kiln (internal): numbers in error messages. Not part of <kiln/kiln.h>.
#pragma once
#include <cstdio>
#include <string>

namespace kiln::detail {

/// `v` with every digit needed to read it back ("%.17g"); std::to_string
/// would print six decimals (1e-300 -> "0.000000").
inline std::string num_str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace kiln::detail
