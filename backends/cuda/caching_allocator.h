// kiln (internal): the CUDA backend's caching, stream-ordered device-memory
// allocator, as PyTorch's CUDACachingAllocator and MLX's buffer cache work.
// Plain C++ without CUDA headers: the driver is reached through a
// DeviceMemorySource, which tests replace with a stub (no GPU needed).
//
// - Size classes: requests are rounded up (512 bytes below 1 MiB, then four
//   classes per power of two, at most 25% waste) and a freed block is cached
//   under its class for the next request of that class.
// - Stream order: a freed block is tagged with the stream that last used it
//   and an event recorded on that stream at free time. The same stream may
//   reuse it at once (its later work runs after the earlier work); another
//   stream only once the event has completed.
// - A cap on the bytes held from the driver (in use + cached): a request
//   that would exceed it first releases cached blocks, then fails with
//   DeviceError; so does a driver allocation that fails after the cache was
//   released.
// - Holds (CUDA Graph capture): between begin_hold and end_hold every block
//   allocated belongs to the hold and is never reused until release_hold,
//   even once its tensor is freed (a replayed graph keeps writing the
//   addresses it recorded); a block allocated before and freed during the
//   hold is set aside without an event (no event may be recorded on a
//   capturing stream) and cached at end_hold.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_backend.h"

namespace kiln::cuda {

/// What the allocator asks of the driver for one device. Streams and events
/// are opaque handles (cudaStream_t / cudaEvent_t in the CUDA build).
class DeviceMemorySource {
 public:
  virtual ~DeviceMemorySource() = default;
  /// `nbytes` of device memory, or nullptr when the device is out of memory.
  virtual void* malloc(size_t nbytes) noexcept = 0;
  virtual void free(void* p) noexcept = 0;
  /// A new event recorded on `stream` (completes when the work queued on it
  /// so far has run).
  virtual void* record_event(void* stream) = 0;
  /// True once the event has completed (never blocks).
  virtual bool event_done(void* event) = 0;
  /// Blocks the host until the event has completed.
  virtual void event_wait(void* event) = 0;
  virtual void event_destroy(void* event) noexcept = 0;
};

class CachingAllocator {
 public:
  /// `device` names the device in error messages ("cuda:0").
  CachingAllocator(DeviceMemorySource& source, std::string device, size_t limit = SIZE_MAX);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// `nbytes` (> 0) for use on `stream`: a cached block of its size class
  /// when one may be used on that stream, else new driver memory. Throws
  /// DeviceError when the cap or the device's memory is exhausted.
  void* allocate(size_t nbytes, void* stream);
  /// Returns `p` (from allocate) to the cache; work on `stream` may still be
  /// using it. Unknown pointers are ignored. Never throws.
  void free(void* p, void* stream) noexcept;

  DeviceMemoryStats stats() const;
  void reset_peak();
  /// Waits for the cached blocks' events and returns them to the driver.
  void empty_cache();
  /// Cap on bytes_reserved; cached blocks above it are released now.
  void set_limit(size_t bytes);
  size_t limit() const;

  /// The size class (bytes actually reserved) of a request of `nbytes`.
  static size_t size_class(size_t nbytes);

  /// Starts a hold and returns its id (> 0). One hold is open at a time:
  /// ValueError while another is open. Blocks allocated from now on (from
  /// any thread) belong to it.
  uint64_t begin_hold();
  /// Closes hold `id` (no-op when it is not open): later allocations are
  /// ordinary again; blocks freed during it that predate it are cached now
  /// (their events recorded on the streams that freed them).
  void end_hold(uint64_t id);
  /// Ends hold `id` for good (closing it first if open): its blocks whose
  /// tensors were freed go back to the cache as freed on `stream`; the others
  /// become ordinary live blocks. Unknown ids are ignored. Never throws.
  void release_hold(uint64_t id, void* stream) noexcept;
  /// Blocks belonging to hold `id` (0 when unknown): tests.
  size_t held_blocks(uint64_t id) const;

 private:
  struct Cached {
    void* ptr;
    void* stream;  // the stream that last used the block
    void* event;   // recorded on `stream` when the block was freed
  };
  struct Live {
    size_t cls;
    size_t nbytes;
    uint64_t hold = 0;   // the hold it belongs to (0: none)
    bool freed = false;  // held and freed by its owner: waits for release_hold
  };
  struct Deferred {
    void* ptr;
    size_t cls;
    void* stream;
  };
  struct Hold {
    bool open = true;
    std::vector<void*> blocks;
    std::vector<Deferred> deferred;  // pre-hold blocks freed while it was open
  };
  void cache_block(void* p, size_t cls, void* stream);  // mu_ held
  // mu_ held by the callers of these.
  void release(std::multimap<size_t, Cached>::iterator it);
  void release_until(size_t reserved_target);
  [[noreturn]] void out_of_memory(size_t nbytes, size_t cls, const char* why) const;

  DeviceMemorySource& source_;
  std::string device_;
  mutable std::mutex mu_;
  std::multimap<size_t, Cached> cached_;  // size class -> block
  std::unordered_map<void*, Live> live_;
  std::map<uint64_t, Hold> holds_;
  uint64_t open_hold_ = 0, next_hold_ = 1;
  DeviceMemoryStats s_;
};

/// Device `dev`'s caching allocator (the CUDA build's runtime.cpp; CUDA
/// Graph capture holds its blocks). Throws DeviceError without the device.
CachingAllocator& device_allocator(int dev);

}  // namespace kiln::cuda
