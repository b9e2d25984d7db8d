// The caching, stream-ordered device allocator (see caching_allocator.h).
#include "caching_allocator.h"

#include <algorithm>
#include <iterator>

#include "../../tensor/error.h"

namespace kiln::cuda {

namespace {
constexpr size_t kSmall = size_t{1} << 20;  // below: 512-byte steps
constexpr size_t kSmallStep = 512;
}  // namespace

size_t CachingAllocator::size_class(size_t n) {
  if (n <= kSmall) return std::max(kSmallStep, (n + kSmallStep - 1) / kSmallStep * kSmallStep);
  size_t p = kSmall;
  while (p <= n / 2) p *= 2;  // p = the largest power of two <= n
  const size_t step = p / 4;
  return (n + step - 1) / step * step;
}

CachingAllocator::CachingAllocator(DeviceMemorySource& source, std::string device, size_t limit)
    : source_(source), device_(std::move(device)) {
  s_.limit = limit;
}

CachingAllocator::~CachingAllocator() {
  // Live blocks belong to buffers that may outlive the allocator (static
  // destruction); only the cache goes back.
  std::lock_guard<std::mutex> lk(mu_);
  while (!cached_.empty()) release(cached_.begin());
}

void CachingAllocator::release(std::multimap<size_t, Cached>::iterator it) {
  if (it->second.event) {
    source_.event_wait(it->second.event);  // no stream may still touch the block
    source_.event_destroy(it->second.event);
  }
  source_.free(it->second.ptr);
  s_.bytes_cached -= it->first;
  s_.bytes_reserved -= it->first;
  ++s_.device_frees;
  cached_.erase(it);
}

void CachingAllocator::release_until(size_t target) {
  // Largest first: the fewest driver calls to get under the target.
  while (s_.bytes_reserved > target && !cached_.empty()) release(std::prev(cached_.end()));
}

void CachingAllocator::out_of_memory(size_t nbytes, size_t cls, const char* why) const {
  throw DeviceError(device_ + ": out of memory allocating " + std::to_string(nbytes) + " bytes (size class " +
                    std::to_string(cls) + "): " + why + "; in use " + std::to_string(s_.bytes_in_use) +
                    " bytes, cached " + std::to_string(s_.bytes_cached) + ", limit " +
                    (s_.limit == SIZE_MAX ? std::string("none") : std::to_string(s_.limit)) +
                    " (free tensors, or raise the cap with kiln::cuda::set_memory_limit)");
}

void* CachingAllocator::allocate(size_t nbytes, void* stream) {
  const size_t cls = size_class(nbytes);
  std::lock_guard<std::mutex> lk(mu_);
  ++s_.allocations;
  void* p = nullptr;
  // A block of the class that this stream may use now: one it freed itself
  // (stream order), or one whose freeing stream has passed its event. The
  // newest first (emplace appends to the class's range): the block freed
  // last is the likeliest still in L2, and oldest-first made an output
  // freed and allocated each call cycle through every cached block.
  const auto [first, last] = cached_.equal_range(cls);
  for (auto rit = std::make_reverse_iterator(last); rit != std::make_reverse_iterator(first); ++rit) {
    const auto it = std::prev(rit.base());
    Cached& c = it->second;
    if (c.stream == stream || !c.event || source_.event_done(c.event)) {
      if (c.event) source_.event_destroy(c.event);
      p = c.ptr;
      s_.bytes_cached -= cls;
      cached_.erase(it);
      ++s_.cache_hits;
      break;
    }
  }
  if (!p) {
    if (cls > s_.limit) out_of_memory(nbytes, cls, "the request exceeds the cap");
    if (s_.bytes_reserved + cls > s_.limit) release_until(s_.limit - cls);
    if (s_.bytes_reserved + cls > s_.limit) out_of_memory(nbytes, cls, "the cap is reached by live tensors");
    p = source_.malloc(cls);
    if (!p) {  // the driver's memory may be held by the cache: give it back, retry once
      release_until(0);
      p = source_.malloc(cls);
    }
    if (!p) out_of_memory(nbytes, cls, "the device has no more memory");
    ++s_.device_mallocs;
    s_.bytes_reserved += cls;
  }
  live_.emplace(p, Live{cls, nbytes, open_hold_, false});
  if (open_hold_) holds_[open_hold_].blocks.push_back(p);
  s_.bytes_in_use += nbytes;
  s_.peak_bytes_in_use = std::max(s_.peak_bytes_in_use, s_.bytes_in_use);
  return p;
}

void CachingAllocator::free(void* p, void* stream) noexcept {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = live_.find(p);
  if (it == live_.end() || it->second.freed) return;
  Live& l = it->second;
  s_.bytes_in_use -= l.nbytes;
  if (l.hold) {  // a recorded graph may still write it: kept until release_hold
    l.freed = true;
    return;
  }
  const size_t cls = l.cls;
  live_.erase(it);
  if (open_hold_) {  // no event on a capturing stream: cached at end_hold
    holds_[open_hold_].deferred.push_back({p, cls, stream});
    return;
  }
  cache_block(p, cls, stream);
}

void CachingAllocator::cache_block(void* p, size_t cls, void* stream) {
  void* event = nullptr;
  try {
    event = source_.record_event(stream);
  } catch (...) {
    // Without an event no other stream may take the block; waiting for the
    // stream is impossible here too, so give the memory back to the driver
    // (cudaFree synchronises the device).
    source_.free(p);
    s_.bytes_reserved -= cls;
    ++s_.device_frees;
    return;
  }
  cached_.emplace(cls, Cached{p, stream, event});
  s_.bytes_cached += cls;
}

uint64_t CachingAllocator::begin_hold() {
  std::lock_guard<std::mutex> lk(mu_);
  if (open_hold_)
    throw ValueError(device_ + ": a memory hold (CUDA Graph capture) is already open; captures on one device run one "
                               "at a time");
  open_hold_ = next_hold_++;
  holds_[open_hold_];
  return open_hold_;
}

void CachingAllocator::end_hold(uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = holds_.find(id);
  if (it == holds_.end() || !it->second.open) return;
  it->second.open = false;
  if (open_hold_ == id) open_hold_ = 0;
  for (const Deferred& d : it->second.deferred) cache_block(d.ptr, d.cls, d.stream);
  it->second.deferred.clear();
}

void CachingAllocator::release_hold(uint64_t id, void* stream) noexcept {
  end_hold(id);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = holds_.find(id);
  if (it == holds_.end()) return;
  for (void* p : it->second.blocks) {
    auto l = live_.find(p);
    if (l == live_.end() || l->second.hold != id) continue;
    if (l->second.freed) {
      const size_t cls = l->second.cls;
      live_.erase(l);
      cache_block(p, cls, stream);
    } else {
      l->second.hold = 0;
    }
  }
  holds_.erase(it);
}

size_t CachingAllocator::held_blocks(uint64_t id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = holds_.find(id);
  return it == holds_.end() ? 0 : it->second.blocks.size();
}

DeviceMemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return s_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lk(mu_);
  s_.peak_bytes_in_use = s_.bytes_in_use;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lk(mu_);
  while (!cached_.empty()) release(cached_.begin());
}

void CachingAllocator::set_limit(size_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  s_.limit = bytes;
  release_until(bytes);
}

size_t CachingAllocator::limit() const {
  std::lock_guard<std::mutex> lk(mu_);
  return s_.limit;
}

}  // namespace kiln::cuda
