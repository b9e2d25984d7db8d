// kiln: the CUDA backend's entry points. Tensors live on a CUDA device when
// created with Device::cuda(i) or moved there with Tensor::to / cuda(i);
// eager ops on them run kiln's precompiled kernels and cuBLASLt on a
// per-device stream. Without the CUDA build every function below except
// is_built and device_count throws NotBuiltError; without a GPU or driver,
// DeviceError with the driver's words ("cuda:0: no CUDA device
// (cudaGetDeviceCount: ...)").
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::cuda {
/// True when this build of kiln includes the CUDA backend.
bool is_built();
/// Number of CUDA devices visible (0 when none or not built; never throws).
int device_count();
/// The device's name; throws DeviceError for a bad index, NotBuiltError when not built.
std::string device_name(int index);

/// Device memory of one device as kiln's caching allocator sees it (bytes).
struct DeviceMemoryStats {
  size_t bytes_in_use = 0;       ///< requested bytes of live buffers
  size_t peak_bytes_in_use = 0;  ///< largest bytes_in_use since start or reset_peak_memory
  size_t bytes_reserved = 0;     ///< held from the driver: live blocks' and cached blocks' size classes
  size_t bytes_cached = 0;       ///< freed blocks kept for reuse (part of bytes_reserved)
  size_t limit = SIZE_MAX;       ///< cap on bytes_reserved (set_memory_limit)
  uint64_t allocations = 0;      ///< allocate calls
  uint64_t cache_hits = 0;       ///< allocations served from the cache
  uint64_t device_mallocs = 0;   ///< cudaMalloc calls
  uint64_t device_frees = 0;     ///< cudaFree calls
};

/// Statistics of device `index`'s allocator. Throws DeviceError for an
/// absent device, NotBuiltError when not built.
DeviceMemoryStats memory_stats(int index);
/// Sets peak_bytes_in_use to the current bytes_in_use.
void reset_peak_memory(int index);
/// Returns the cached blocks of device `index` to the driver (after the
/// work that last used them has finished).
void empty_cache(int index);
/// Caps the device memory kiln holds on device `index` (live + cached, in
/// bytes); SIZE_MAX (the default) means the device's memory. An allocation
/// beyond it releases cached blocks, then raises DeviceError.
void set_memory_limit(int index, size_t bytes);
/// Waits until the work queued on device `index`'s kiln stream has run.
void synchronize(int index);
}  // namespace kiln::cuda
