// kiln (internal): the CPU iteration engine (after PyTorch's TensorIterator).
// Operands are broadcast to one output shape, axes are coalesced, and a
// kernel's inner loop is called on runs of `n` elements with byte strides.
// Large loops split over threads along the flattened outer index; each
// element is computed by exactly one thread, so results do not depend on the
// thread count.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "../../tensor/tensor.h"
#include "strided_loop_types.h"

namespace kiln::cpu {

/// Elements below which a loop stays on one thread.
inline constexpr int64_t kParallelGrain = 1 << 15;

/// Byte strides of `t` broadcast to `shape` (0 on broadcast axes). The tensor
/// must broadcast to `shape` (checked by the op's shape rule before).
std::vector<int64_t> broadcast_byte_strides(const Tensor& t, const Shape& shape);

/// Builds a loop over `shape`; operand 0 is usually the output.
template <int N>
StridedLoop<N> make_loop(const Shape& shape, const std::array<const Tensor*, N>& ops) {
  std::array<std::vector<int64_t>, N> st;
  for (int k = 0; k < N; ++k) st[k] = broadcast_byte_strides(*ops[k], shape);
  StridedLoop<N> L = make_loop_from_strides<N>(shape, st);
  for (int k = 0; k < N; ++k) L.base[k] = static_cast<char*>(ops[k]->data_ptr());
  return L;
}

/// Runs `inner(ptrs, strides, n)` over the loop, where ptrs[k] points at
/// operand k's first element of a run of n elements along the innermost axis
/// and strides[k] is its byte stride there. Splits over OpenMP threads when
/// the loop has at least kParallelGrain elements.
template <int N, class Inner>
void run_loop(const StridedLoop<N>& L, Inner&& inner);
/// run_loop with the operand base pointers given separately (a loop whose
/// structure was built once, run on new data).
template <int N, class Inner>
void run_loop_at(const StridedLoop<N>& L, const std::array<char*, N>& base, Inner&& inner);

}  // namespace kiln::cpu

#include "strided_loop_impl.h"
