// kiln (internal): Buffer::allocate's errors (out of memory, a CPU device
// that does not exist) told in the name of the operation that asked for the
// memory, since Buffer::allocate cannot know it. Not part of <kiln/kiln.h>.
#pragma once
#include <string_view>

#include "tensor.h"

namespace kiln::detail {

/// Call inside a catch block: rethrows the exception in flight; when
/// Buffer::allocate raised it ("Buffer::allocate: <why>"), as the same type
/// with "<who>: <why>" instead ("zeros: out of memory allocating ...").
[[noreturn]] void rethrow_allocation_error_as(std::string_view who);

/// A new contiguous tensor for `op` (Tensor::empty), whose shape and
/// allocation errors name `op` (Tensor::empty would say "empty" or
/// "Buffer::allocate"). Defined in creation.cpp.
Tensor empty_for(const Shape& shape, DType dtype, Device device, const char* op);

}  // namespace kiln::detail
