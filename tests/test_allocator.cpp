// The CPU allocator: statistics, the cache of large blocks, its bound, one pool per CPU device.
#include "../tensor/cpu_devices.h"
#include "../tensor/cpu_memory_pools.h"
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

  TEST_CASE("allocator: the block freed last is reused first") {
    // The most recently freed block of a size is the likeliest in cache: a
    // call's output allocated, freed and allocated again must not cycle
    // through every cached block of its size (it did, oldest first, and a
    // compiled layer_norm over 4 MiB took 2x as long once a few such blocks
    // were cached).
    const size_t saved = buffer_cache_limit();
    set_buffer_cache_limit(size_t{64} << 20);
    empty_cache();
    const size_t n = 1 << 20;
    void *pa = nullptr, *pb = nullptr, *pc = nullptr;
    {
      Buffer a = Buffer::allocate(n), b = Buffer::allocate(n), c = Buffer::allocate(n);
      pa = a.data();
      pb = b.data();
      pc = c.data();
      // freed here in reverse order of declaration: c, b, then a (last)
    }
    for (int round = 0; round < 3; ++round) {
      Buffer x = Buffer::allocate(n);
      CHECK(x.data() == pa);
    }
    {
      Buffer x = Buffer::allocate(n), y = Buffer::allocate(n), z = Buffer::allocate(n);
      CHECK(x.data() == pa);
      CHECK(y.data() == pb);
      CHECK(z.data() == pc);
    }
    empty_cache();
    set_buffer_cache_limit(saved);
  }

  TEST_CASE("allocator: each CPU device allocates from its own pool with its own statistics") {
    REQUIRE(num_cpu_devices() >= 7);  // tests/main.cpp sets 8
    const Device d1{DeviceType::cpu, 5}, d2{DeviceType::cpu, 6};
    const size_t saved = buffer_cache_limit();
    set_buffer_cache_limit(size_t{64} << 20);
    empty_cache(d1);
    empty_cache(d2);
    const MemoryStats a1 = memory_stats(d1), a2 = memory_stats(d2), a0 = memory_stats(Device::cpu()),
                      at = memory_stats();
    CHECK(a1.bytes_cached == 0);
    const size_t n = size_t{1} << 20;
    void* first = nullptr;
    {
      Buffer b = Buffer::allocate(n, d1);
      first = b.data();
      CHECK(memory_stats(d1).bytes_in_use == a1.bytes_in_use + n);
      CHECK(memory_stats(d1).allocations == a1.allocations + 1);
      CHECK(memory_stats(d1).peak_bytes_in_use >= a1.bytes_in_use + n);
      CHECK(memory_stats(d2).bytes_in_use == a2.bytes_in_use);
      CHECK(memory_stats(Device::cpu()).allocations == a0.allocations);
      CHECK(memory_stats().bytes_in_use == at.bytes_in_use + n);  // the sum over devices
    }
    CHECK(memory_stats(d1).bytes_cached >= n);  // kept in d1's pool only
    CHECK(memory_stats(d2).bytes_cached == 0);
    {
      Buffer c = Buffer::allocate(n, d2);  // d2 does not take d1's block
      CHECK(c.data() != first);
      CHECK(memory_stats(d2).cache_hits == a2.cache_hits);
      Buffer e = Buffer::allocate(n, d1);  // d1 gets its block back
      CHECK(e.data() == first);
      CHECK(memory_stats(d1).cache_hits == a1.cache_hits + 1);
    }
    CHECK(memory_stats().allocations == at.allocations + 3);
    empty_cache(d1);
    CHECK(memory_stats(d1).bytes_cached == 0);
    CHECK(memory_stats(d2).bytes_cached >= n);  // untouched
    // Tensors on a device allocate there.
    const uint64_t before = memory_stats(d2).allocations;
    { const Tensor t = Tensor::empty({4, 4}, DType::float32, d2); }
    CHECK(memory_stats(d2).allocations == before + 1);
    reset_peak_memory(d2);
    CHECK(memory_stats(d2).peak_bytes_in_use == memory_stats(d2).bytes_in_use);
    CHECK_THROWS_AS(memory_stats(Device{DeviceType::cpu, num_cpu_devices()}), DeviceError);
    CHECK_THROWS_AS(memory_stats(Device::cuda(0)), DeviceError);
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
