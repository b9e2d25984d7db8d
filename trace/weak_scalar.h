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
//   the number is cast to that dtype first, as eager stores a scalar operand.
//   An integer number cast to a narrower integer dtype (int8 x + s, or an
//   unsigned one) is range-checked per call, as eager refuses `x + 300`
//   rather than wrap: the compiled call checks a number input before it runs
//   (StagedGraph::number_checks; ValueError "jit: add: the number 300
//   (argument 1) is out of range for int8"), a number whose value the trace
//   knows (passed to a jit function called inside another trace) is checked
//   while tracing. A value computed from numbers (`x + (s * 2)`) is not
//   checked by a compiled call: its value exists only inside the compiled
//   code, which wraps it as cast() does (the aliasing guard's eager run,
//   which has the value, checks it);
// - an elementwise op of weak values only (with C++ scalars too: `s * 2.0`,
//   `exp(s)`, `s + true`), and a view of one, is weak again; a C++ scalar of
//   a higher kind makes the number weak of that kind, exactly (`s * 2.5`
//   with an integer s is a weak float64, `b + 2` with a bool b a weak int64),
//   as numpy's Python int * Python float is a Python float. (A Scalar keeps
//   no width: `s * 2.5f` is computed in double, as `s * 2.5`, where the C++
//   expression `3 * 2.5f` written in is a float product; they differ only
//   where the float product rounds);
// - passed to a subgraph call (as_subgraph, a module call), it is weak in
//   the body too (its exact value is the body's argument, marked weak; the
//   body's key records it, so a call with a 0-d tensor gets another body);
//   passed to a CompiledCallable called in the trace, it becomes a 0-d
//   tensor of the parameter's dtype from its exact value, as a number passed
//   to that callable at the top level (ValueError where its kind would change
//   the dtype); a jit function called in the trace is inlined, so the number
//   stays weak there;
// - anything else that reads it (a reduction, a result of the traced
//   function) reads it as the default dtype of its kind: float32, int64 or
//   bool (as `full({}, 0.5)` is float32), as jit did before.
// jit's aliasing guard runs a call eagerly under the same rules
// (WeakEagerScope), so its eager answer is the compiled one's.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "../tensor/op_table.h"
#include "../tensor/tensor.h"

namespace kiln {
class Graph;
}

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
/// While alive, a weak value is read as it is (float64, int64, bool), not as
/// its kind's default dtype: a subgraph call's operands.
class WeakRawScope {
 public:
  WeakRawScope();
  ~WeakRawScope();
  WeakRawScope(const WeakRawScope&) = delete;
  WeakRawScope& operator=(const WeakRawScope&) = delete;

 private:
  bool old_;
};
/// The range checks recorded while tracing `g` (see the file comment), as
/// (graph input value id, dtype, op); the records end with the graph context.
std::vector<std::tuple<int32_t, DType, OpId>> weak_number_checks(const Graph* g);
/// The weak value `w` (a number) stored as a tensor of dtype `d`, exactly
/// (from its float64 / int64 / bool value), for `op`: an integer number cast
/// to a narrower integer dtype is range-checked (see the file comment). The
/// result is an ordinary tensor.
Tensor weak_cast(const Tensor& w, DType d, OpId op);
/// Whether the integer `number` (a 0-d int64 tensor) fits the integer dtype
/// `d`; true for any other tensor.
bool weak_number_fits(const Tensor& number, DType d);
/// Throws ValueError "jit: <op>: the number <v> (argument <arg>) is out of
/// range for <dtype> ..." when the integer `number` (a 0-d int64 tensor, or
/// a bool) cannot be stored into `d`.
void check_weak_number(const Tensor& number, DType d, OpId op, const std::string& arg);
/// jit's eager run of a call (the aliasing guard): while alive, `numbers`
/// (the call's runtime numbers) are weak in eager ops on this thread, which
/// then follow the rules above (elementwise ops cast them as eager stores a
/// scalar operand, other reads see the kind's default dtype).
class WeakEagerScope {
 public:
  explicit WeakEagerScope(std::span<const Tensor> numbers);
  ~WeakEagerScope();
  WeakEagerScope(const WeakEagerScope&) = delete;
  WeakEagerScope& operator=(const WeakEagerScope&) = delete;
  /// Gives each weak result in `outs` its kind's default dtype (as a compiled
  /// call returns a number).
  void finish(std::vector<Tensor>& outs);

 private:
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace kiln::detail
