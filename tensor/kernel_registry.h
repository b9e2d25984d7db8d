// kiln (internal): the kernel registry. Eager execution looks an op's kernel
// up here by (op-table row, device type); each backend (backends/cpu,
// backends/cuda, ...) registers its kernels at library-load time, so tensor/
// names no backend and a new device is a sibling folder. Not part of
// <kiln/kiln.h>.
#pragma once
#include <cstdint>
#include <optional>
#include <span>

#include "op_table.h"

namespace kiln {

/// The operands of one eager kernel call. The front end (tensor/ops_*.cpp)
/// has checked shapes, dtypes and axes, converted the inputs to the dtype the
/// row computes in and allocated `out` on the inputs' device; the kernel only
/// computes. All tensors are realized and live on one device.
struct KernelArgs {
  OpId op;
  std::span<const Tensor> in;
  const Tensor& out;
  const Attrs& attrs;
};

/// An eager kernel: writes op(in, attrs) into out.
using Kernel = void (*)(const KernelArgs&);

/// Per-device operations that are not op-table rows: the checks the front
/// end makes before a kernel runs (integer division by zero, index ranges).
struct DeviceUtilities {
  /// True when an element of the integer tensor is zero / negative.
  bool (*any_zero)(const Tensor&) = nullptr;
  bool (*any_negative)(const Tensor&) = nullptr;
  /// The first element of the integer tensor outside [lo, hi), if any.
  std::optional<int64_t> (*first_index_outside)(const Tensor&, int64_t lo, int64_t hi) = nullptr;
  /// Name of the GEMM library this device's matmul calls ("openblas", ...).
  const char* (*blas_name)() = nullptr;
};

/// A bit per DType code: the dtypes a kernel accepts.
using DTypeMask = uint32_t;
inline constexpr DTypeMask kAllDTypes = ~DTypeMask(0);
constexpr DTypeMask dtype_bit(DType d) { return DTypeMask(1) << static_cast<unsigned>(d); }

namespace detail {

/// Registers `k` for `op` on devices of type `dev`, for the compute dtypes in
/// `dtypes`. A later registration of the same (op, device type) replaces the
/// earlier one. Called from backends' static initialisers.
void register_kernel(OpId op, DeviceType dev, Kernel k, DTypeMask dtypes = kAllDTypes);
/// Registers the utilities of devices of type `dev`.
void register_device_utilities(DeviceType dev, const DeviceUtilities& u);

/// The kernel of `op` on `dev` for compute dtype `dtype`; throws DeviceError
/// ("exp: no kernel for cuda:0 of dtype int8") when none is registered.
Kernel kernel_for(OpId op, Device dev, DType dtype);
/// True when a kernel of `op` is registered for `dev` and `dtype`.
bool has_kernel(OpId op, DeviceType dev, DType dtype) noexcept;
/// The utilities of `dev`; throws DeviceError naming `who` when the device's
/// backend is not in this build.
const DeviceUtilities& device_utilities(Device dev, const char* who);

/// Throws DeviceError naming `op` and both devices unless every input lives on
/// one device (eager ops never move data implicitly). A 0-d CPU tensor (a
/// scalar operand: `x + 1` makes one) may join inputs on any device, as in
/// PyTorch: a device kernel reads its value on the host and passes it by
/// value, so `cuda_x * 2` copies nothing to the device.
void check_same_device(OpId op, std::span<const Tensor> in);

/// The device an op's result lives on: that of the first input that is not a
/// 0-d CPU tensor (input 0's when all are).
inline Device operands_device(std::span<const Tensor> in) {
  for (const Tensor& t : in)
    if (!t.device().is_cpu()) [[unlikely]] return t.device();
  return in.empty() ? Device::cpu() : in[0].device();
}

/// check_same_device and operands_device in one pass that reads each input's
/// device once (the eager hot path: a 1-element add is ~1k instructions).
Device common_device(OpId op, std::span<const Tensor> in);

/// Runs the kernel of `op` for device `dev` (that of `out`) and compute dtype `dtype`.
inline void run_kernel(OpId op, Device dev, DType dtype, std::span<const Tensor> in, const Tensor& out,
                       const Attrs& attrs) {
  kernel_for(op, dev, dtype)(KernelArgs{op, in, out, attrs});
}
/// Runs the kernel of `op` for the device of `out` and compute dtype `dtype`.
inline void run_kernel(OpId op, DType dtype, std::span<const Tensor> in, const Tensor& out, const Attrs& attrs) {
  run_kernel(op, out.device(), dtype, in, out, attrs);
}

/// Copies `src` into `dst` (same shape, same device), converting the dtype
/// with numpy's cast rules, across any strides: the Cast row's kernel.
void copy_into(const Tensor& src, const Tensor& dst);

}  // namespace detail
}  // namespace kiln
