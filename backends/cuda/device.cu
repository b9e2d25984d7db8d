// CUDA backend: device discovery. Kernels and cuBLAS come with the CUDA issue.
#include <cuda_runtime.h>

#include "../../tensor/error.h"
#include "cuda_backend.h"

namespace kiln::cuda {
bool is_built() { return true; }
int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}
std::string device_name(int index) {
  int n = device_count();
  if (index < 0 || index >= n)
    throw DeviceError("cuda: device index " + std::to_string(index) + " out of range (" + std::to_string(n) +
                      " devices visible)");
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) != cudaSuccess)
    throw DeviceError("cuda: cudaGetDeviceProperties failed for device " + std::to_string(index));
  return p.name;
}
}  // namespace kiln::cuda
