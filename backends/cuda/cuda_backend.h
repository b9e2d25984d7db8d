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

namespace kiln {
class Tensor;
}

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

/// Whether float32 matmuls on CUDA may use TF32 tensor cores
/// (CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to 10 mantissa bits,
/// float32 accumulation; docs/cuda_numerics.md gives the tolerance). Off by
/// default: float32 products are IEEE float32. Process-wide, read at each
/// matmul call; float64/float16/bfloat16 are unaffected. NotBuiltError
/// when not built.
void set_allow_tf32(bool on);
bool allow_tf32();

/// What cuBLASLt applies to a matmul's result inside the same call.
/// GELU is the tanh approximation (kiln::gelu_tanh), cuBLASLt's only form.
enum class Epilogue { none, bias, gelu, bias_gelu };

/// a @ b, then `e`: + bias (broadcast over rows), GELU, or both (bias
/// first), as one cuBLASLt call (a fused linear layer for compiled plans).
/// a: [batch..., M, K]; b: [K, N] (shared by every batch) or [batch..., K,
/// N]; bias: [N] (any dtype, converted to a's) for bias/bias_gelu, an
/// undefined Tensor otherwise; a and b share one floating dtype and one
/// CUDA device. Returns a new [batch..., M, N] tensor of that dtype.
/// Where cuBLASLt has no algorithm with the epilogue (float64 GELU), the
/// plain product is followed by kiln's add/gelu_tanh kernels.
/// Throws DeviceError (not CUDA, mixed devices), DTypeError (dtypes),
/// ShapeError (extents), ValueError (bias given or missing for `e`),
/// NotBuiltError when not built.
Tensor matmul_epilogue(const Tensor& a, const Tensor& b, const Tensor& bias, Epilogue e);
}  // namespace kiln::cuda
