// kiln: the CPU memory allocator behind Buffer::allocate, its cache of large
// blocks, and memory statistics.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln {

/// Memory statistics of CPU buffers that kiln allocated (wrapped external
/// memory is not counted). Byte counts are the sizes requested.
struct MemoryStats {
  size_t bytes_in_use = 0;       ///< live Buffer memory now
  size_t peak_bytes_in_use = 0;  ///< largest bytes_in_use since start or reset_peak_memory()
  size_t bytes_cached = 0;       ///< freed large blocks kept for reuse (capacity bytes)
  uint64_t allocations = 0;      ///< Buffer::allocate calls on the CPU
  uint64_t cache_hits = 0;       ///< large allocations served from the cache
};

/// A snapshot of the counters above.
MemoryStats memory_stats();
/// Sets peak_bytes_in_use to the current bytes_in_use.
void reset_peak_memory();
/// Returns every cached block to the system.
void empty_cache();
/// Bound on the cache of freed large blocks, in bytes; 0 disables caching
/// (and empties the cache). Default 1 GiB, or the environment variable
/// KILN_BUFFER_CACHE_BYTES read at first use; 0 under AddressSanitizer so
/// that a use after free is still caught.
///
/// Why a cache: a freed block of several MiB goes back to the kernel, and the
/// next allocation of that size pays a page fault per 4 KiB page on first
/// touch, which costs more than the op itself (a 64 MiB output: ~16k faults,
/// ~20 ms, against ~4 ms to stream it). Reusing the block, as PyTorch's CUDA
/// caching allocator and MLX's buffer cache do, makes repeated ops run at
/// memory bandwidth. Blocks of 4 MiB and more are 2 MiB aligned and advised
/// as transparent huge pages, so even a first touch faults 512x less often.
void set_buffer_cache_limit(size_t bytes);
size_t buffer_cache_limit();

namespace detail {
/// Allocates `nbytes` (> 0) 64-byte aligned CPU bytes; nullptr when out of memory.
void* cpu_allocate(size_t nbytes);
/// Frees a block from cpu_allocate of the same `nbytes`.
void cpu_free(void* p, size_t nbytes) noexcept;
}  // namespace detail

}  // namespace kiln
