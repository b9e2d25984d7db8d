// kiln: one memory pool per CPU device (the allocator of tensor/allocator.h).
//
// Each CPU device (tensor/cpu_devices.h) allocates its buffers from a pool of
// its own: its own cache of freed large blocks and its own counters, so the
// devices of a mesh never hand each other blocks nor contend on one lock, and
// memory_stats(cpu device i) says what device i holds. A buffer goes back to
// the pool of its device, whichever thread frees it. The calls of
// allocator.h without a device cover every CPU device: memory_stats() sums
// the pools (peak_bytes_in_use as the sum of the per-device peaks: exact when
// one device allocates, an upper bound of the process peak otherwise),
// reset_peak_memory() and empty_cache() act on every pool, and
// set_buffer_cache_limit() bounds each pool's cache (new pools take the
// bound in force). CPU device 0's pool is the one a one-device program uses,
// on the same path as before pools existed.
#pragma once
#include <cstddef>

#include "allocator.h"
#include "device.h"

namespace kiln {

/// Statistics of CPU device `d`'s pool. DeviceError when `d` is not a CPU
/// device of this process (a CUDA device: kiln::cuda::memory_stats; a CPU
/// index past num_cpu_devices()).
MemoryStats memory_stats(Device d);
/// Sets device `d`'s peak_bytes_in_use to its bytes_in_use (errors as above).
void reset_peak_memory(Device d);
/// Returns device `d`'s cached blocks to the system (errors as above).
void empty_cache(Device d);

namespace detail {
/// cpu_allocate / cpu_free on CPU device `device`'s pool (cpu_allocate is
/// device 0's); `device` in [0, num_cpu_devices()), checked by the caller.
void* cpu_allocate_on(int device, size_t nbytes);
void cpu_free_on(int device, void* p, size_t nbytes) noexcept;
/// Adds `release` to what empty_cache() calls before it empties the pools:
/// memory another part of kiln keeps for reuse (a compiled plan's earlier
/// outputs and its scratch arena, jit/plan.cpp) is dropped, so that the
/// blocks it frees are returned too.
void add_empty_cache_hook(void (*release)());
}  // namespace detail

}  // namespace kiln
