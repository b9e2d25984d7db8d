// kiln (internal): weak runtime scalars of a trace.
//
// A C++ number passed to a jit function for a Tensor parameter becomes a 0-d
// runtime input that is weak in type promotion, as the number written in the
// function eagerly is (`x * 0.1`: tensor/scalar.h; numpy's Python scalars,
// JAX's weak types): it is float64 (a floating number), int64 (an integer)
// or bool, so the value is exact, and while traced
// - an elementwise op (Unary, Binary, Ternary rows) combining it with a
//   tensor that is not weak computes in the dtype eager would use for the
//   number (promote_with_scalar with the tensor's dtype: float32 x * s is
//   float32, float64 x * s float64 with the double value, int32 x * 3 int32);
//   the number is cast to that dtype first, as eager stores a scalar operand;
// - an elementwise op of weak values only (with C++ scalars too: `s * 2.0`,
//   `exp(s)`), and a view of one, is weak again;
// - anything else that reads it (a reduction, a call, a result of the
//   traced function) reads it as the default dtype of its kind: float32,
//   int64 or bool (as `full({}, 0.5)` is float32), as jit did before.
#pragma once
#include <optional>

#include "../tensor/tensor.h"

namespace kiln::detail {

/// Marks `t` weak in the innermost graph context: an unrealized value of it
/// (a jit runtime number's input), or a realized 0-d tensor (a runtime
/// number passed to a jit function called inside another trace, until
/// unmark_weak_scalar). Its kind follows its dtype.
void mark_weak_scalar(const Tensor& t);
/// Ends the mark of a realized tensor (mark_weak_scalar).
void unmark_weak_scalar(const Tensor& t);
/// A weak value's kind by its dtype (bool, an integer, a floating dtype).
ScalarKind weak_kind_of(DType d);
/// A weak value's dtype where it is read as a tensor of its own: float32 for
/// a floating number (the default float dtype, as full({}, 0.5)), int64, bool.
DType weak_default_dtype(ScalarKind k);
/// The kind of `t` when it is weak in the current context, else nullopt.
std::optional<ScalarKind> weak_scalar_kind(const Tensor& t);

}  // namespace kiln::detail
