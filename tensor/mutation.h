// kiln: writing into tensors: compound assignment operators, `out=`
// overloads and the memory-overlap test. The in-place members themselves
// (copy_, fill_, zero_, assign, clamp_, masked_fill_, index_put_ and the `_`
// variant of every unary and binary row: add_, exp_, ...) are on Tensor
// (tensor/tensor.h).
//
// The rules (numpy's and PyTorch's):
// - The destination's dtype and shape never change. The value written must
//   broadcast to the destination's shape (else ShapeError) and cast to its
//   dtype under the Casting rule (default same_kind: bool -> integer -> float
//   and narrowing within a kind are allowed, float into an integer or bool
//   destination is a DTypeError unless Casting::unsafe is asked for).
// - An operand that overlaps the destination in memory is read as it was
//   before the write (the result is computed into a temporary first), so
//   `x.slice(1:).copy_(x.slice(:-1))` and `matmul(a, b, Out(a))` give what
//   they would without the overlap.
// - A destination whose elements share memory with each other (a broadcast
//   view, stride 0) cannot be written: ValueError.
// - Eagerly, a write lands in the destination's memory at once (a view writes
//   through to its base) and bumps Buffer::version(). A lazy scope's recorded
//   ops read their sources as they were when recorded (the scope keeps the old
//   contents of a source that is written afterwards).
// - Traced (graph and lazy contexts), a write into an unrealized tensor is
//   functionalised: the op is recorded and the tensor's handle (every copy of
//   it) stands for the new value. A write into a realized tensor while tracing
//   makes it a mutable source of the graph (GraphRealizationContext::
//   add_mutable_source): the compiled function reads its current contents on
//   every call and writes the final value back when the call ends. A write
//   through a view of a traced tensor is recorded as one scatter into the
//   view's base, and the base and every live view taken of it then stand for
//   the new value (trace/realization_context.h), as eagerly they share the
//   memory written. A broadcast view is a ValueError, as eagerly; a view of
//   a realized tensor already read as a constant, or reading a view no live
//   tensor holds any more after its base was written, raises
//   RealizationError (the traced value would differ from the eager one).
#pragma once
#include "elementwise_rows.h"
#include "ops.h"
#include "tensor.h"

namespace kiln {

/// True when a and b are realized and some element of one lies in the byte
/// range spanned by the other in the same buffer (numpy.may_share_memory:
/// conservative, interleaved views that never touch the same byte can still
/// answer true). Unrealized or undefined tensors share nothing.
bool may_share_memory(const Tensor& a, const Tensor& b);

/// The destination of an `out=` overload: `add(a, b, Out(y))` writes a + b
/// into y (same rules as an in-place write) and returns y.
struct Out {
  Tensor tensor;
  Casting casting = Casting::same_kind;
  explicit Out(Tensor t, Casting c = Casting::same_kind) : tensor(std::move(t)), casting(c) {}
};

// ---- compound assignment: a op= b is a.op_(b) ------------------------------------
const Tensor& operator+=(const Tensor& a, const Tensor& b);
const Tensor& operator-=(const Tensor& a, const Tensor& b);
const Tensor& operator*=(const Tensor& a, const Tensor& b);
const Tensor& operator/=(const Tensor& a, const Tensor& b);
const Tensor& operator+=(const Tensor& a, Scalar b);
const Tensor& operator-=(const Tensor& a, Scalar b);
const Tensor& operator*=(const Tensor& a, Scalar b);
const Tensor& operator/=(const Tensor& a, Scalar b);

// ---- out= overloads: one per unary and binary row (generated from ops.def) ----------
// `exp(x, Out(y))`, `add(a, b, Out(y))`, `add(a, 2.0, Out(y))`; the result is
// computed straight into y when y is a contiguous tensor of the result's
// dtype and shape that overlaps no operand, else into a temporary copied in.
#define KILN_OUT_UNARY(id, name) Tensor name(const Tensor& x, const Out& out);
#define KILN_OUT_BINARY(id, name)                                \
  Tensor name(const Tensor& a, const Tensor& b, const Out& out); \
  Tensor name(const Tensor& a, Scalar b, const Out& out);
#define KILN_OP(id, name, arity, cat, rule) KILN_FOR_ELEMENTWISE_ROW(KILN_OUT_UNARY, KILN_OUT_BINARY, id, name, cat, rule)
#include "ops.def"
#undef KILN_OP
#undef KILN_OUT_UNARY
#undef KILN_OUT_BINARY
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Out& out);
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi, const Out& out);
/// matmul(a, b) into out (ShapeError unless out's shape is the product's);
/// `matmul(a, b, Out(a))` reads a before overwriting it.
Tensor matmul(const Tensor& a, const Tensor& b, const Out& out);

}  // namespace kiln
