// kiln (internal): elementwise combination of reduction operands, shared by
// the in-process communicator and MPI's user-defined reduction ops. Not part
// of the public headers.
#pragma once
#include <cmath>
#include <cstring>
#include <type_traits>

#include "../tensor/dispatch.h"
#include "placement.h"

namespace kiln::distributed::detail {

/// acc[i] = op(acc[i], x[i]) for i < n, in T (see ReduceOp: bool sum/max is
/// or, min is and; integer sums wrap; float max/min propagate NaN).
template <class T>
void combine(ReduceOp op, T* acc, const T* x, size_t n) {
  using C = kiln::detail::compute_t<T>;
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      acc[i] = op == ReduceOp::min ? (acc[i] && x[i]) : (acc[i] || x[i]);
    } else {
      const C a = static_cast<C>(acc[i]), b = static_cast<C>(x[i]);
      C r;
      if (op == ReduceOp::sum) {
        if constexpr (std::is_integral_v<C>) {
          using U = std::make_unsigned_t<C>;
          r = static_cast<C>(static_cast<U>(a) + static_cast<U>(b));  // wraps, no UB
        } else {
          r = a + b;
        }
      } else {
        // A NaN b fails both comparisons, so NaN wins from either side.
        bool take_a;
        if constexpr (std::is_floating_point_v<C>) take_a = std::isnan(a) || (op == ReduceOp::max ? a >= b : a <= b);
        else take_a = op == ReduceOp::max ? a >= b : a <= b;
        r = take_a ? a : b;
      }
      acc[i] = T(r);
    }
  }
}

inline void combine(DType d, ReduceOp op, void* acc, const void* x, size_t n) {
  kiln::detail::visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    combine<T>(op, static_cast<T*>(acc), static_cast<const T*>(x), n);
  });
}

}  // namespace kiln::distributed::detail
