// kiln tests: bitwise equality of two tensors (same dtype and shape, equal
// bytes in row-major order), for eager == compiled == replayed checks.
#pragma once
#include <cstring>

#include <kiln/kiln.h>

namespace kt {
inline bool same_bits(const kiln::Tensor& a, const kiln::Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  kiln::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<size_t>(ca.numel()) * ca.itemsize()) == 0;
}
}  // namespace kt
