#include "dtype.h"

#include <ostream>
#include <string>

#include "error.h"

namespace kiln {

namespace {
// A DType made from an arbitrary integer (a cast, a corrupted file) is not
// an index into the tables below: raise instead of reading past them.
// The message is built out of line (cold): inlined, its strings made every
// size_of() call save and restore registers and reserve a stack frame
// (17 instructions instead of 4; eager ops call it several times each).
[[noreturn, gnu::cold, gnu::noinline]] void throw_invalid_code(int c, const char* who) {
  throw DTypeError(std::string(who) + ": invalid dtype code " + std::to_string(c) + " (expected 0 <= code < " +
                   std::to_string(kNumDTypes) + ")");
}
int checked_code(DType d, const char* who) {
  const int c = static_cast<int>(d);
  if (c < 0 || c >= kNumDTypes) [[unlikely]] throw_invalid_code(c, who);
  return c;
}
}  // namespace

size_t size_of(DType d) {
  static constexpr size_t kSize[kNumDTypes] = {1, 1, 1, 4, 8, 2, 2, 4, 8, 2, 2, 4, 8};
  return kSize[checked_code(d, "size_of")];
}

std::string_view name(DType d) {
  static constexpr std::string_view kName[kNumDTypes] = {
      "bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64",
      "int16", "uint16", "uint32", "uint64"};
  return kName[checked_code(d, "dtype name")];
}

DType dtype_from_name(std::string_view s) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name(DType(i)) == s) return DType(i);
  throw DTypeError("dtype: unknown dtype name '" + std::string(s) + "'");
}

std::ostream& operator<<(std::ostream& os, DType d) { return os << name(d); }

namespace {
// Bits of integer range a float type represents exactly (numpy's safe-cast rule).
int exact_int_bits(DType f) {
  switch (f) {
    case DType::float16: case DType::bfloat16: return 8;
    case DType::float32: return 16;
    default: return 64;
  }
}
// Width in bits of an integer dtype (the enum order is not one: codes are stable).
int int_bits(DType i) { return static_cast<int>(size_of(i)) * 8; }
DType signed_of_bits(int bits) {
  switch (bits) {
    case 8: return DType::int8;
    case 16: return DType::int16;
    case 32: return DType::int32;
    default: return DType::int64;
  }
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::bool_) return b;
  if (b == DType::bool_) return a;
  if (is_floating(a) && is_floating(b)) {
    if ((a == DType::float16 && b == DType::bfloat16) || (a == DType::bfloat16 && b == DType::float16))
      return DType::float32;
    return a > b ? a : b;  // float16, bfloat16 < float32 < float64 in code order
  }
  if (is_integral(a) && is_integral(b)) {
    if (is_unsigned(a) == is_unsigned(b)) return int_bits(a) >= int_bits(b) ? a : b;
    const DType s = is_unsigned(a) ? b : a, u = is_unsigned(a) ? a : b;
    if (int_bits(s) > int_bits(u)) return s;
    if (int_bits(u) == 64) return DType::float64;  // numpy: no integer holds both
    return signed_of_bits(2 * int_bits(u));
  }
  DType f = is_floating(a) ? a : b, i = is_floating(a) ? b : a;
  if (int_bits(i) <= exact_int_bits(f)) return f;
  // numpy: the smallest wider float holding the integer (int16 + float16 -> float32).
  return int_bits(i) <= 16 ? DType::float32 : DType::float64;
}

DType promote_with_scalar(DType t, ScalarKind k) {
  switch (k) {
    case ScalarKind::floating: return is_floating(t) ? t : DType::float32;
    case ScalarKind::integer: return t == DType::bool_ ? DType::int64 : t;
    default: return t;
  }
}

}  // namespace kiln
