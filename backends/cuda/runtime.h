// kiln (internal): the CUDA backend's per-device state shared by its
// kernels: error checks that raise DeviceError with the driver's words, the
// current-device guard, kiln's stream per device. Host C++ (cuda_runtime.h).
#pragma once
#include <cuda_runtime.h>

namespace kiln::cuda {

/// Throws DeviceError "cuda:<dev>: <what>: <CUDA error text>" unless `e`
/// is cudaSuccess (and clears the error).
void check(cudaError_t e, int dev, const char* what);
/// Throws DeviceError unless device `dev` exists ("cuda:0: no CUDA device
/// (cudaGetDeviceCount: ...)"); then makes it current for this thread.
void use_device(int dev);
/// kiln's stream on device `dev` (created on first use, non-blocking).
cudaStream_t stream(int dev);
/// Properties of device `dev`, read once.
const cudaDeviceProp& properties(int dev);

}  // namespace kiln::cuda
