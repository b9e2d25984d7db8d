// kiln (internal): the fixed-order block combination shared by the CUDA
// reduction and row kernels (reduce.cu, rows.cu). Thread t's value is
// combined with thread t + w for w = blockDim.x / 2, ..., 1 (blockDim.x a
// power of two), so the order depends on blockDim.x alone, which the host
// derives from the extents (launch_plan.h), never from the device.
#pragma once
#include <cuda_runtime.h>

namespace kiln::cuda {

/// Combines every thread's `v` with `combine` (left operand: the lower
/// thread) and returns the result in every thread. `smem` holds blockDim.x
/// values of T. Every thread of the block must call it.
template <class T, class Combine>
__device__ __forceinline__ T block_combine(T v, T* smem, Combine combine) {
  const unsigned t = threadIdx.x;
  smem[t] = v;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w >= 1; w /= 2) {
    if (t < w) smem[t] = combine(smem[t], smem[t + w]);
    __syncthreads();
  }
  const T r = smem[0];
  __syncthreads();  // smem may be reused by the caller's next call
  return r;
}

/// Shared memory of the block viewed as T (sized by the launch).
template <class T> __device__ __forceinline__ T* shared_as() {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  return reinterpret_cast<T*>(kiln_smem);
}

}  // namespace kiln::cuda
