// kiln: reference-counted device memory (64-byte aligned when kiln allocates it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "device.h"

namespace kiln {

namespace detail { struct Storage; }

/// A block of device memory shared by every tensor view over it. Copying a
/// Buffer shares the memory (reference count); the memory is freed when the
/// last Buffer goes (wrapped memory never is). Memory from allocate is
/// 64-byte aligned; wrapped memory is where its owner put it. No kernel
/// relies on 64-byte alignment (a view starts at any element anyway: the
/// eager kernels and the JIT load and store unaligned, and use streaming
/// stores only after checking the address), but element access does: a
/// Tensor over a Buffer needs its data address to be a multiple of its
/// dtype's size (the Tensor constructor throws ValueError otherwise). A
/// default Buffer is empty.
class Buffer {
 public:
  Buffer() = default;
  /// Allocates `nbytes` (uninitialised) on `device`: CPU memory from
  /// tensor/allocator.h, device memory from its backend's caching allocator
  /// (kiln::cuda::memory_stats). Throws NotBuiltError for a device whose
  /// backend is not built, DeviceError for an absent device or when device
  /// memory runs out, ValueError when CPU memory runs out.
  static Buffer allocate(size_t nbytes, Device device = Device::cpu());
  /// Wraps `nbytes` at `data` on `device`, memory owned elsewhere: kiln
  /// never frees it (nor hands it to a pool). `keep_alive` is held as long as
  /// the Buffer; it may be null (the caller then keeps the memory alive as
  /// long as any tensor over it). Any address is accepted (a tensor over it
  /// needs its dtype's alignment, see above). Throws ValueError for a null
  /// `data` with `nbytes` > 0 (null with 0 bytes is an empty wrap).
  static Buffer wrap(void* data, size_t nbytes, Device device, std::shared_ptr<void> keep_alive);

  void* data() const;
  size_t nbytes() const;
  Device device() const;
  explicit operator bool() const { return static_cast<bool>(storage_); }
  /// How many in-place writes (copy_, fill_, the `_` ops, `out=`, compiled
  /// write-backs into a mutable source) this memory has had; 0 for an empty
  /// Buffer. Readers that cache something derived from the contents (a
  /// compiled callable's bound weights, a lazy scope's recorded sources)
  /// compare it to see a write. Writes through data_ptr() are not counted.
  uint64_t version() const;
  /// Counts one in-place write (called by the writers named above).
  void bump_version() const;
  long use_count() const { return storage_.use_count(); }
  friend bool operator==(const Buffer& a, const Buffer& b) { return a.storage_ == b.storage_; }

 private:
  std::shared_ptr<detail::Storage> storage_;
};

}  // namespace kiln
