// kiln (internal): helpers shared by the elementwise front ends
// (ops_unary.cpp, ops_binary.cpp, ops_ternary.cpp). Not part of <kiln/kiln.h>.
#pragma once
#include "scalar.h"
#include "tensor.h"

namespace kiln::detail {

/// x itself when it has dtype d, else a contiguous copy converted to d with
/// cast semantics. Used inside eager kernels (not recorded in graphs).
Tensor converted(const Tensor& x, DType d);

/// A 0-d tensor of dtype d holding `s` stored by Scalar's rules (exact for
/// integers); throws ValueError naming `who` when it cannot be (scalar.h).
Tensor make_scalar(const Scalar& s, DType d, const char* who);

}  // namespace kiln::detail
