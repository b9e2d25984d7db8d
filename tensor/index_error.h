// kiln (internal): the one wording of an index outside an axis, so that an
// out-of-range index reads the same whether it is found eagerly (indexing,
// index_put_, gather, index_select) or when a compiled function runs. Not
// part of <kiln/kiln.h>.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "error.h"

namespace kiln::detail {

/// IndexError "<who>: index <i> is out of range for axis <axis> with extent
/// <n> (expected -<n> <= index < <n>)".
[[noreturn]] inline void throw_index_out_of_range(std::string_view who, int64_t i, int64_t axis, int64_t n) {
  const auto s = [](int64_t v) { return std::to_string(v); };
  throw IndexError(std::string(who) + ": index " + s(i) + " is out of range for axis " + s(axis) + " with extent " + s(n) +
                   " (expected " + s(-n) + " <= index < " + s(n) + ")");
}

}  // namespace kiln::detail
