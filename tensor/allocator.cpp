// kiln: CPU allocator: one pool per CPU device, each with a size-class cache
// of large blocks and its own counters (see allocator.h, cpu_memory_pools.h).
#include "cpu_memory_pools.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_devices.h"
#include "env_number.h"
#include "error.h"

namespace kiln {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Blocks from this size on are cached. Past 128 KiB malloc would map the
// block; below, freeing a block of some KiB at the top of the heap can trim
// it, and the next allocation page-faults it back in (a compiled training
// step's 32 KiB outputs, freed by the caller and allocated again each call:
// page faults and malloc_consolidate were 10% of the step's time). Smaller
// blocks stay with malloc (its per-thread cache serves them).
constexpr size_t kLargeBlock = size_t{4} << 10;
constexpr size_t kHugeBlock = size_t{4} << 20;     // from here on: 2 MiB aligned, THP advised
constexpr size_t kHugePage = size_t{2} << 20;

// Size classes of large blocks: 4 per power of two (waste at most 25%), so a
// slightly different size still hits the cache.
size_t size_class(size_t n) {
  size_t p = 1;
  while (p * 2 <= n) p *= 2;
  const size_t step = p / 4;
  size_t c = (n + step - 1) / step * step;
  return c < kHugeBlock ? c : (c + kHugePage - 1) / kHugePage * kHugePage;
}

struct Cache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;  // capacity -> block
  size_t cached = 0;
  size_t limit = 0;
  std::atomic<size_t> in_use{0}, peak{0};
  std::atomic<uint64_t> allocations{0}, hits{0};

  explicit Cache(size_t limit_bytes) : limit(limit_bytes) {}
  void trim_to(size_t target) {  // mu held; frees the largest blocks first
    while (cached > target && !free_blocks.empty()) {
      auto it = std::prev(free_blocks.end());
      cached -= it->first;
      std::free(it->second);
      free_blocks.erase(it);
    }
  }
};

size_t initial_limit() {
  // A malformed value ("1G", "1e9", "-5") is a ValueError, as for
  // KILN_CPU_DEVICES, not silently the default (or, for "-5", 2^64 - 5).
  return detail::env_whole_number("KILN_BUFFER_CACHE_BYTES", kSanitized ? 0 : size_t{1} << 30, 0, SIZE_MAX,
                                  "a number of bytes (digits only: 1073741824 for 1 GiB)");
}

// CPU device 0's pool. Never destroyed: buffers may be freed during static
// destruction.
Cache& cache() {
  static Cache* c = new Cache(initial_limit());
  return *c;
}

// The pools of CPU devices 1 ...: made at first use, never destroyed.
constexpr int kMaxPools = 1024;  // set_num_cpu_devices' bound
std::atomic<Cache*> g_pools[kMaxPools];

Cache& pool(int device) {
  if (device == 0) return cache();
  Cache* p = g_pools[device].load(std::memory_order_acquire);
  if (p) [[likely]] return *p;
  size_t limit = 0;
  {
    Cache& c0 = cache();
    std::lock_guard<std::mutex> lk(c0.mu);
    limit = c0.limit;  // set_buffer_cache_limit's bound holds for every pool
  }
  Cache* made = new Cache(limit);
  if (g_pools[device].compare_exchange_strong(p, made, std::memory_order_acq_rel)) return *made;
  delete made;  // another thread made it first
  return *p;
}

// Device 0's pool, then every other pool made so far.
template <class F>
void for_each_pool(F f) {
  f(cache());
  for (int i = 1; i < kMaxPools; ++i)
    if (Cache* p = g_pools[i].load(std::memory_order_acquire)) f(*p);
}

Cache& checked_pool(Device d, const char* who) {
  if (!d.is_cpu())
    throw DeviceError(std::string(who) + ": " + d.str() + " is not a CPU device; its memory statistics are its backend's");
  if (d.index != 0) check_cpu_device(d, who);
  return pool(d.index);
}

void note_alloc(Cache& c, size_t n) {
  c.allocations.fetch_add(1, std::memory_order_relaxed);
  size_t now = c.in_use.fetch_add(n, std::memory_order_relaxed) + n;
  size_t p = c.peak.load(std::memory_order_relaxed);
  while (now > p && !c.peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}

void* system_allocate(size_t cap) {
  if (cap < kHugeBlock) return std::aligned_alloc(64, cap);
  void* p = std::aligned_alloc(kHugePage, cap);
#ifdef MADV_HUGEPAGE
  if (p) ::madvise(p, cap, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
  return p;
}

void* allocate_in(Cache& c, size_t nbytes) {
  note_alloc(c, nbytes);
  void* p = nullptr;
  if (nbytes < kLargeBlock) {
    p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
  } else {
    const size_t cap = size_class(nbytes);
    {
      std::lock_guard<std::mutex> lk(c.mu);
      // The block freed last (the end of the size's equal range: emplace
      // appends there): it is the likeliest still in cache. find() handed
      // out the oldest instead, so a call's output cycled through every
      // cached block of its size: a compiled layer_norm over 1024 x 1024
      // float32 rows took 300-380 us instead of 145 (AMD EPYC, 1 thread)
      // once earlier ops had left a few 4 MiB blocks in the cache.
      auto it = c.free_blocks.upper_bound(cap);
      if (it != c.free_blocks.begin() && (--it)->first == cap) {
        p = it->second;
        c.cached -= cap;
        c.free_blocks.erase(it);
        c.hits.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (!p) p = system_allocate(cap);
    if (!p) {  // memory may be held by the cache: give it back and retry once
      empty_cache();
      p = system_allocate(cap);
    }
  }
  if (!p) c.in_use.fetch_sub(nbytes, std::memory_order_relaxed);
  return p;
}

void free_in(Cache& c, void* p, size_t nbytes) noexcept {
  if (!p) return;
  c.in_use.fetch_sub(nbytes, std::memory_order_relaxed);
  if (nbytes >= kLargeBlock) {
    const size_t cap = size_class(nbytes);
    std::lock_guard<std::mutex> lk(c.mu);
    if (cap <= c.limit) {
      c.trim_to(c.limit - cap);
      c.free_blocks.emplace(cap, p);
      c.cached += cap;
      return;
    }
  }
  std::free(p);
}
}  // namespace

namespace detail {
void* cpu_allocate(size_t nbytes) { return allocate_in(cache(), nbytes); }
void cpu_free(void* p, size_t nbytes) noexcept { free_in(cache(), p, nbytes); }
void* cpu_allocate_on(int device, size_t nbytes) { return allocate_in(pool(device), nbytes); }
void cpu_free_on(int device, void* p, size_t nbytes) noexcept { free_in(pool(device), p, nbytes); }
}  // namespace detail

namespace {
void add_stats(MemoryStats& s, Cache& c) {
  s.bytes_in_use += c.in_use.load();
  s.peak_bytes_in_use += c.peak.load();
  s.allocations += c.allocations.load();
  s.cache_hits += c.hits.load();
  std::lock_guard<std::mutex> lk(c.mu);
  s.bytes_cached += c.cached;
}
void reset_peak(Cache& c) { c.peak.store(c.in_use.load()); }
void empty(Cache& c) {
  std::lock_guard<std::mutex> lk(c.mu);
  c.trim_to(0);
}
}  // namespace

MemoryStats memory_stats() {
  MemoryStats s;
  for_each_pool([&](Cache& c) { add_stats(s, c); });
  return s;
}

MemoryStats memory_stats(Device d) {
  MemoryStats s;
  add_stats(s, checked_pool(d, "memory_stats"));
  return s;
}

void reset_peak_memory() { for_each_pool(reset_peak); }
void reset_peak_memory(Device d) { reset_peak(checked_pool(d, "reset_peak_memory")); }

namespace {
// empty_cache's hooks (detail::add_empty_cache_hook). Never destroyed, as
// the pools: buffers may be freed during static destruction.
std::mutex& hooks_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<void (*)()>& empty_cache_hooks() {
  static auto* hooks = new std::vector<void (*)()>;
  return *hooks;
}
void run_empty_cache_hooks() {
  std::vector<void (*)()> hooks;
  {
    std::lock_guard<std::mutex> lk(hooks_mu());
    hooks = empty_cache_hooks();
  }
  for (void (*release)() : hooks) release();
}
}  // namespace

void detail::add_empty_cache_hook(void (*release)()) {
  std::lock_guard<std::mutex> lk(hooks_mu());
  empty_cache_hooks().push_back(release);
}

void empty_cache() {
  run_empty_cache_hooks();
  for_each_pool(empty);
}
void empty_cache(Device d) {
  Cache& c = checked_pool(d, "empty_cache");
  run_empty_cache_hooks();
  empty(c);
}

void set_buffer_cache_limit(size_t bytes) {
  for_each_pool([&](Cache& c) {
    std::lock_guard<std::mutex> lk(c.mu);
    c.limit = bytes;
    c.trim_to(bytes);
  });
}

size_t buffer_cache_limit() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lk(c.mu);
  return c.limit;
}

}  // namespace kiln
