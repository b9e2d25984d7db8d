// kiln: element types and numpy's type promotion.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "half.h"

namespace kiln {

/// Element type of a tensor. `bool_` is spelled with an underscore because
/// `bool` is a C++ keyword; it prints as "bool". The codes are stable (MEF
/// files store them): new dtypes are appended, so the order of the enum is
/// not an order of width or kind (use the predicates below).
enum class DType : uint8_t {
  bool_, uint8, int8, int32, int64, float16, bfloat16, float32, float64,
  int16, uint16, uint32, uint64
};
inline constexpr int kNumDTypes = 13;

/// Bytes per element. Throws DTypeError for a code outside the enum.
size_t size_of(DType d);
/// numpy's name: "float32", "bool", ... Throws DTypeError for a code outside
/// the enum (e.g. DType(200)); so does printing one with <<.
std::string_view name(DType d);
/// Parses a name as printed by name(); throws DTypeError on an unknown one.
DType dtype_from_name(std::string_view s);
inline bool is_floating(DType d) { return d >= DType::float16 && d <= DType::float64; }
/// The integer dtypes (bool is not one): int8/16/32/64, uint8/16/32/64.
inline bool is_integral(DType d) { return (d >= DType::uint8 && d <= DType::int64) || d >= DType::int16; }
/// uint8, uint16, uint32, uint64.
inline bool is_unsigned(DType d) { return d == DType::uint8 || d >= DType::uint16; }
/// True for the signed integer and the float dtypes (false for bool and unsigned).
inline bool is_signed(DType d) { return d != DType::bool_ && !is_unsigned(d); }
std::ostream& operator<<(std::ostream& os, DType d);

/// Promotion of two tensor dtypes, following numpy 2's table
/// (numpy.promote_types): within a kind the wider type; a signed with an
/// unsigned integer gives the smallest signed type holding both (uint8 +
/// int8 -> int16, uint32 + int32 -> int64) and uint64 with any signed
/// integer gives float64; an integer with a float gives the smallest float
/// at least as wide that holds the integer exactly (int16 + float16 ->
/// float32, int32 + float32 -> float64). bfloat16 follows float16's rules
/// (ml_dtypes), and float16 with bfloat16 gives float32.
DType promote_types(DType a, DType b);

/// The kind of a C++ scalar operand: scalars are "weak" (NEP 50, PyTorch):
/// they never widen a tensor within its kind.
enum class ScalarKind : uint8_t { boolean, integer, floating };
/// Result dtype of `tensor (dtype t) op scalar (kind k)`: a float scalar with
/// an integer or bool tensor gives float32 (the default float); an integer
/// scalar with a bool tensor gives int64; otherwise the tensor's dtype.
DType promote_with_scalar(DType t, ScalarKind k);

/// C++ type <-> DType mapping for the element types kiln stores.
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::bool_; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::int8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::int16; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::uint16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::int32; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::uint32; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::uint64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::int64; };
template <> struct dtype_of<float16_t> { static constexpr DType value = DType::float16; };
template <> struct dtype_of<bfloat16_t> { static constexpr DType value = DType::bfloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::float64; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace kiln
