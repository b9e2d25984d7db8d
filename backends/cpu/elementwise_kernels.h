// kiln (internal): the CPU kernels of the elementwise rows (Unary, Binary,
// Ternary). The front end (tensor/ops_unary.cpp, ops_binary.cpp,
// ops_ternary.cpp) checks dtypes and shapes, converts operands to the
// row's compute dtype, allocates the output and then calls these. Operands
// may have any strides and broadcast to `out`'s shape; `out` is realized.
#pragma once
#include "../../tensor/op_table.h"

namespace kiln::cpu {

/// out = op(x). x has the compute dtype (see eager_unary); out has x's
/// dtype, or bool for the ToBool rows. Not for Cast (use copy_into).
void unary_kernel(OpId op, const Tensor& x, const Tensor& out);

/// out = op(a, b). a and b share the compute dtype; out has that dtype, or
/// bool for comparisons and logical rows.
void binary_kernel(OpId op, const Tensor& a, const Tensor& b, const Tensor& out);

/// out = op(x0, x1, x2): where(cond (bool), a, b) or clamp(x, lo, hi); the
/// value operands and out share one dtype.
void ternary_kernel(OpId op, const Tensor& x0, const Tensor& x1, const Tensor& x2, const Tensor& out);

/// What any_element looks for.
enum class ElementTest { zero, negative };
/// True when some element of the integer tensor t is zero / negative (used to
/// raise ValueError for integer division by zero and negative powers before
/// running a kernel).
bool any_element(const Tensor& t, ElementTest test);

}  // namespace kiln::cpu
