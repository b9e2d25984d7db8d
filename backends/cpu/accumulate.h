// kiln (internal): accumulator and result types shared by the reduction,
// scan, normalisation and integer-matmul kernels (ARCHITECTURE.md policies:
// integer/bool sums accumulate in 64 bits, 16-bit floats in float32).
#pragma once
#include <cstdint>
#include <type_traits>

#include "../../tensor/dispatch.h"

namespace kiln::cpu {

template <class T> inline constexpr bool kIsFloat = std::is_floating_point_v<detail::compute_t<T>>;

/// Accumulator of sums/products of T: uint64 for integer/bool (wraps like
/// numpy's int64 without signed-overflow UB), float for 16-bit floats, T else.
template <class T> using sum_acc_t = std::conditional_t<kIsFloat<T>, detail::compute_t<T>, uint64_t>;
/// Stored result of sums/products/cumsum of T (the Accum dtype rule): uint64
/// for unsigned integers, int64 for signed integers and bool (numpy).
template <class T>
using sum_out_t = std::conditional_t<kIsFloat<T>, T,
                                     std::conditional_t<std::is_unsigned_v<T> && !std::is_same_v<T, bool>, uint64_t, int64_t>>;
/// Compute type of "Float"-rule ops (mean, var, logsumexp, softmax, norms):
/// double for float64 and integer/bool inputs, float for the other floats.
template <class T> using float_acc_t = std::conditional_t<kIsFloat<T> && !std::is_same_v<T, double>, float, double>;
/// Stored result of "Float"-rule ops on T: float32 for integer/bool inputs.
template <class T> using float_out_t = std::conditional_t<kIsFloat<T>, T, float>;

/// v as an accumulator value (integers sign-extended into uint64).
template <class Acc, class T>
inline Acc acc_load(T v) {
  if constexpr (std::is_same_v<Acc, uint64_t>) return static_cast<uint64_t>(static_cast<int64_t>(v));
  else return detail::convert<Acc>(v);
}

/// x != x for floating x (NaN), false for other types (no self-comparison
/// warning for integers).
template <class T>
inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

}  // namespace kiln::cpu
