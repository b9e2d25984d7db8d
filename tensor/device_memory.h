// kiln (internal): the device-memory hook. Buffer::allocate and the copies
// between devices (Tensor::to(Device)) reach a device's memory only through
// the hooks its backend registers here at library-load time, as kernels are
// registered in kernel_registry.h: tensor/ names no backend. The CPU needs no
// hook (tensor/allocator.h). Not part of <kiln/kiln.h>.
#pragma once
#include <cstddef>

#include "device.h"

namespace kiln::detail {

/// What a backend offers for the memory of its devices. Every function
/// throws DeviceError naming the device (and the driver's error text) when
/// the device cannot do it; none is called for the CPU.
struct DeviceMemoryHooks {
  /// `nbytes` (> 0) bytes on device `index`, 256-byte aligned, usable in
  /// the order of the device's kiln stream. Throws DeviceError (also when
  /// out of memory, with the allocator's statistics).
  void* (*allocate)(int index, size_t nbytes) = nullptr;
  /// Returns a block from allocate (same `nbytes`) once the work queued on
  /// the device's stream so far no longer needs it. Never throws.
  void (*free)(int index, void* p, size_t nbytes) noexcept = nullptr;
  /// Copies `nbytes` contiguous bytes from `src` on `from` to `dst` on `to`
  /// (at least one of them a device of this backend). Returns once `dst`
  /// may be read by the host (to = cpu) or by later work on to's stream.
  void (*copy)(void* dst, Device to, const void* src, Device from, size_t nbytes) = nullptr;
  /// Sets `nbytes` bytes at `dst` on device `index` to zero (stream-ordered).
  void (*zero)(int index, void* dst, size_t nbytes) = nullptr;
  /// Why this build cannot use devices of this type (empty when it can);
  /// called before anything else so that a missing driver or device is
  /// reported once, with the driver's words.
  void (*check_device)(int index) = nullptr;
};

/// Registers the memory hooks of devices of type `type` (a backend's static
/// initialiser); a later registration replaces the earlier one.
void register_device_memory(DeviceType type, const DeviceMemoryHooks& hooks);

/// The hooks of `dev`'s type. Throws NotBuiltError naming `who` and the
/// device when no backend registered them (kiln built without CUDA), after
/// which the hook's own check_device(dev.index) has run (DeviceError when
/// the device is absent).
const DeviceMemoryHooks& device_memory(Device dev, const char* who);

/// True when hooks are registered for `type` (the backend is built).
bool has_device_memory(DeviceType type) noexcept;

}  // namespace kiln::detail
