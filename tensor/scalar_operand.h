// kiln (internal): the 0-d tensor a C++ scalar operand became, while the op
// that combines it with a tensor is applied (`x * 2.0`: tensor/ops_binary.cpp).
// A context recording a graph treats it as weak, like the C++ number it
// stands for, when it meets a jit runtime number (trace/weak_scalar.h).
#pragma once
#include "dtype.h"

namespace kiln::detail {

struct TensorImpl;

struct ScalarOperand {
  const TensorImpl* impl = nullptr;  ///< the scalar's 0-d tensor; null outside such an op
  ScalarKind kind = ScalarKind::floating;
};
/// Set by the scalar overloads of the binary ops around their apply().
inline thread_local ScalarOperand t_scalar_operand;

}  // namespace kiln::detail
