// The CPU allocator: statistics, the cache of large blocks, its bound.
#include "test_util.h"

namespace {
using namespace kiln;
}

TEST_SUITE("core") {
  TEST_CASE("allocator: memory statistics count live buffers and the peak") {
    reset_peak_memory();
    const MemoryStats before = memory_stats();
    {
      Buffer a = Buffer::allocate(1000);
      Buffer b = Buffer::allocate(3 << 20);
      const MemoryStats s = memory_stats();
      CHECK(s.bytes_in_use == before.bytes_in_use + 1000 + (3 << 20));
      CHECK(s.allocations == before.allocations + 2);
      CHECK(s.peak_bytes_in_use >= s.bytes_in_use);
      // Memory is 64-byte aligned, large blocks included.
      CHECK(reinterpret_cast<uintptr_t>(a.data()) % 64 == 0);
      CHECK(reinterpret_cast<uintptr_t>(b.data()) % 64 == 0);
    }
    const MemoryStats after = memory_stats();
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.peak_bytes_in_use >= before.bytes_in_use + 1000 + (3 << 20));
    reset_peak_memory();
    CHECK(memory_stats().peak_bytes_in_use == memory_stats().bytes_in_use);
  }

  TEST_CASE("allocator: a freed large block is reused; the cache is bounded") {
    const size_t saved = buffer_cache_limit();
    set_buffer_cache_limit(size_t{64} << 20);
    empty_cache();
    const size_t n = 5 << 20;
    void* first = nullptr;
    {
      Buffer b = Buffer::allocate(n);
      first = b.data();
      std::memset(b.data(), 1, n);
    }
    CHECK(memory_stats().bytes_cached >= n);
    const uint64_t hits = memory_stats().cache_hits;
    {
      // A slightly smaller request falls in the same size class.
      Buffer b = Buffer::allocate(n - 4096);
      CHECK(b.data() == first);
      CHECK(memory_stats().cache_hits == hits + 1);
    }
    // A block larger than the bound is not kept, and the bound trims the cache.
    { Buffer big = Buffer::allocate(size_t{80} << 20); }
    CHECK(memory_stats().bytes_cached <= (size_t{64} << 20));
    set_buffer_cache_limit(0);
    CHECK(memory_stats().bytes_cached == 0);
    { Buffer b = Buffer::allocate(n); }
    CHECK(memory_stats().bytes_cached == 0);
    set_buffer_cache_limit(saved);
  }

  TEST_CASE("allocator: small and empty buffers") {
    Buffer e = Buffer::allocate(0);
    CHECK(e.data() != nullptr);
    CHECK(e.nbytes() == 0);
    Tensor t = zeros({0, 3});
    CHECK(t.numel() == 0);
  }
}
