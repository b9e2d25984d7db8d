// The CUDA caching allocator's bookkeeping against a stub driver (no GPU):
// size classes, stream-ordered reuse through events, the cap, empty_cache,
// statistics. Also the device-memory hook's errors without a CUDA build.
#include <set>

#include "../backends/cuda/caching_allocator.h"
#include "test_util.h"

namespace {
using namespace kiln;
using kiln::cuda::CachingAllocator;

/// A fake device: "memory" from the heap, capacity-limited; events are
/// counters that complete when the test says the stream has advanced.
struct StubSource : cuda::DeviceMemorySource {
  size_t capacity = size_t(64) << 20;
  size_t used = 0;
  std::map<void*, size_t> blocks;
  struct Event {
    void* stream;
    bool done = false;
  };
  std::set<Event*> events;
  int waits = 0;
  int recorded = 0;  // events recorded so far

  void* malloc(size_t n) noexcept override {
    if (used + n > capacity) return nullptr;
    void* p = std::malloc(n);
    blocks[p] = n;
    used += n;
    return p;
  }
  void free(void* p) noexcept override {
    used -= blocks.at(p);
    blocks.erase(p);
    std::free(p);
  }
  void* record_event(void* stream) override {
    auto* e = new Event{stream};
    events.insert(e);
    ++recorded;
    return e;
  }
  bool event_done(void* e) override { return static_cast<Event*>(e)->done; }
  void event_wait(void* e) override {
    ++waits;
    static_cast<Event*>(e)->done = true;
  }
  void event_destroy(void* e) noexcept override {
    events.erase(static_cast<Event*>(e));
    delete static_cast<Event*>(e);
  }
  /// The stream has run everything queued so far.
  void advance(void* stream) {
    for (Event* e : events)
      if (e->stream == stream) e->done = true;
  }
  ~StubSource() override {
    for (Event* e : events) delete e;
    for (auto& [p, n] : blocks) std::free(p);
  }
};

void* const s1 = reinterpret_cast<void*>(0x1);
void* const s2 = reinterpret_cast<void*>(0x2);
}  // namespace

TEST_SUITE("cuda_allocator") {
  TEST_CASE("size classes: 512-byte steps below 1 MiB, four per power of two above") {
    CHECK(CachingAllocator::size_class(1) == 512);
    CHECK(CachingAllocator::size_class(512) == 512);
    CHECK(CachingAllocator::size_class(513) == 1024);
    CHECK(CachingAllocator::size_class(1 << 20) == (1 << 20));
    CHECK(CachingAllocator::size_class((1 << 20) + 1) == (1 << 20) + (1 << 18));
    CHECK(CachingAllocator::size_class(3 << 20) == (3 << 20));
    CHECK(CachingAllocator::size_class((3 << 20) + 1) == (7 << 19));
    // every class covers its request with at most 25% waste above 1 MiB
    for (size_t n = 1; n < (size_t(1) << 34); n = n * 3 + 7) {
      const size_t c = CachingAllocator::size_class(n);
      CAPTURE(n);
      CHECK(c >= n);
      if (n > (1 << 20)) CHECK(double(c) <= 1.25 * double(n));
      else CHECK(c - n < 512);
    }
  }

  TEST_CASE("holds (CUDA Graph capture): blocks allocated during a hold are never reused until release_hold") {
    StubSource src;
    CachingAllocator a(src, "cuda:0");
    void* before = a.allocate(1000, s1);  // a pre-hold block, live across the hold
    void* spare = a.allocate(1000, s1);
    a.free(spare, s1);                    // cached before the hold: the capture may take it
    const int events0 = src.recorded;
    const uint64_t h = a.begin_hold();
    CHECK(h > 0);
    CHECK_THROWS_WITH_AS(a.begin_hold(), doctest::Contains("cuda:0: a memory hold (CUDA Graph capture) is already open"),
                         ValueError);
    void* x = a.allocate(1000, s1);
    CHECK(x == spare);                    // the cache serves a hold too; the block now belongs to it
    void* y = a.allocate(1000, s1);       // new driver memory
    CHECK(y != before);
    a.free(y, s1);                        // a temporary of the recorded run: freed, but held
    void* z = a.allocate(1000, s1);
    CHECK(z != y);                        // never handed out again while held
    a.free(before, s1);                   // a pre-hold block freed during the capture: set aside
    void* w = a.allocate(1000, s1);
    CHECK(w != before);
    CHECK(src.recorded == events0);       // no event recorded on the capturing stream
    CHECK(a.held_blocks(h) == 4);         // x, y, z, w
    a.end_hold(h);
    CHECK(src.recorded == events0 + 1);   // `before` cached now, with its event
    void* u = a.allocate(1000, s1);
    CHECK(u == before);                   // pre-hold blocks are ordinary again
    CHECK(u != y);                        // y stays held after end_hold: the graph still writes it
    a.free(x, s1);                        // the capture's output freed by its owner: still held
    void* v = a.allocate(1000, s1);
    CHECK(v != x);
    CHECK(v != y);
    CHECK(a.stats().bytes_cached == 0);
    a.release_hold(h, s2);                // the graph is gone: x and y cached (freed on s2), z and w ordinary
    CHECK(a.held_blocks(h) == 0);
    CHECK(a.stats().bytes_cached == 2 * 1024);
    std::set<void*> got = {a.allocate(1000, s2), a.allocate(1000, s2)};
    CHECK(got == std::set<void*>{x, y});
    a.free(z, s1);                        // an ordinary block now: cached at once
    CHECK(a.allocate(1000, s1) == z);
    a.release_hold(h, s1);                // unknown (already released): ignored
    a.end_hold(12345);
    const uint64_t h2 = a.begin_hold();   // a new hold may start
    CHECK(h2 != h);
    a.release_hold(h2, s1);               // closes it too
    CHECK(a.begin_hold() > h2);
  }

  TEST_CASE("a freed block is reused by the same stream at once") {
    StubSource src;
    CachingAllocator a(src, "cuda:0");
    void* p = a.allocate(1000, s1);
    a.free(p, s1);
    auto st = a.stats();
    CHECK(st.bytes_in_use == 0);
    CHECK(st.bytes_cached == 1024);
    CHECK(st.bytes_reserved == 1024);
    void* q = a.allocate(900, s1);  // same class, same stream: no event needed
    CHECK(q == p);
    st = a.stats();
    CHECK(st.cache_hits == 1);
    CHECK(st.device_mallocs == 1);
    CHECK(st.bytes_in_use == 900);
    CHECK(st.bytes_cached == 0);
    a.free(q, s1);
  }

  TEST_CASE("the block of a class freed last is reused first") {
    StubSource src;
    CachingAllocator a(src, "cuda:0");
    void* p = a.allocate(4096, s1);
    void* q = a.allocate(4096, s1);
    void* r = a.allocate(4096, s1);
    a.free(r, s1);
    a.free(q, s1);
    a.free(p, s1);  // freed last
    for (int round = 0; round < 3; ++round) {
      void* x = a.allocate(4096, s1);
      CHECK(x == p);
      a.free(x, s1);
    }
    void* x = a.allocate(4096, s1);
    void* y = a.allocate(4096, s1);
    void* z = a.allocate(4096, s1);
    CHECK(x == p);
    CHECK(y == q);
    CHECK(z == r);
    CHECK(a.stats().device_mallocs == 3);
    // another stream skips a block whose event is pending for one that is done
    a.free(x, s1);
    src.advance(s1);
    a.free(y, s1);  // s1 may still be using y
    void* w = a.allocate(4096, s2);
    CHECK(w == x);
    a.free(w, s2);
    a.free(z, s2);
  }

  TEST_CASE("another stream reuses a block only after the freeing stream passed its event") {
    StubSource src;
    CachingAllocator a(src, "cuda:0");
    void* p = a.allocate(4096, s1);
    a.free(p, s1);
    void* q = a.allocate(4096, s2);  // s1 may still be using p
    CHECK(q != p);
    CHECK(a.stats().device_mallocs == 2);
    a.free(q, s2);
    src.advance(s1);
    void* r = a.allocate(4096, s2);  // either block is free for s2 now; s2's own first
    CHECK((r == p || r == q));
    void* t = a.allocate(4096, s2);
    CHECK((t == p || t == q));
    CHECK(t != r);
    CHECK(a.stats().device_mallocs == 2);
    CHECK(a.stats().cache_hits == 2);
    a.free(r, s2);
    a.free(t, s2);
  }

  TEST_CASE("different size classes do not share blocks") {
    StubSource src;
    CachingAllocator a(src, "cuda:0");
    void* p = a.allocate(512, s1);
    a.free(p, s1);
    void* q = a.allocate(2048, s1);
    CHECK(q != p);
    CHECK(a.stats().bytes_reserved == 512 + 2048);
    a.free(q, s1);
  }

  TEST_CASE("statistics: in use counts requested bytes, the peak, reset_peak") {
    StubSource src;
    CachingAllocator a(src, "cuda:0");
    void* p = a.allocate(100, s1);
    void* q = a.allocate(3 << 20, s1);
    auto st = a.stats();
    CHECK(st.bytes_in_use == 100 + (3 << 20));
    CHECK(st.peak_bytes_in_use == st.bytes_in_use);
    CHECK(st.allocations == 2);
    a.free(q, s1);
    CHECK(a.stats().peak_bytes_in_use == 100 + (3 << 20));
    a.reset_peak();
    CHECK(a.stats().peak_bytes_in_use == 100);
    a.free(p, s1);
    a.free(p, s1);  // a second free of the same pointer is ignored
    CHECK(a.stats().bytes_in_use == 0);
  }

  TEST_CASE("empty_cache waits for pending events and returns every cached block") {
    StubSource src;
    CachingAllocator a(src, "cuda:0");
    void* p = a.allocate(1 << 20, s1);
    void* q = a.allocate(1 << 10, s2);
    void* live = a.allocate(1 << 12, s1);
    a.free(p, s1);
    a.free(q, s2);
    CHECK(src.blocks.size() == 3);
    a.empty_cache();
    CHECK(src.waits == 2);  // neither stream had passed its event
    CHECK(src.blocks.size() == 1);
    CHECK(src.events.empty());
    auto st = a.stats();
    CHECK(st.bytes_cached == 0);
    CHECK(st.bytes_reserved == 4096);
    CHECK(st.device_frees == 2);
    a.free(live, s1);
  }

  TEST_CASE("the cap: cached blocks are released first, then DeviceError names the device and the numbers") {
    StubSource src;
    CachingAllocator a(src, "cuda:3", 8192);
    void* p = a.allocate(4096, s1);
    a.free(p, s1);
    void* q = a.allocate(8192, s1);  // over the cap only with the cached 4096: released
    CHECK(a.stats().bytes_reserved == 8192);
    CHECK(a.stats().bytes_cached == 0);
    CHECK_THROWS_WITH_AS(a.allocate(512, s1), doctest::Contains("cuda:3: out of memory allocating 512 bytes"),
                         DeviceError);
    CHECK_THROWS_WITH_AS(a.allocate(1 << 20, s1), doctest::Contains("exceeds the cap"), DeviceError);
    a.free(q, s1);
    a.set_limit(0);  // lowering the cap releases the cache
    CHECK(a.stats().bytes_reserved == 0);
    CHECK(src.blocks.empty());
  }

  TEST_CASE("driver out of memory: the cache is released and the request retried, then DeviceError") {
    StubSource src;
    src.capacity = 3 << 20;
    CachingAllocator a(src, "cuda:0");
    void* p = a.allocate(2 << 20, s1);
    a.free(p, s2);  // cached, freed by another stream
    void* q = a.allocate(3 << 20, s1);  // needs the cached block's memory
    CHECK(q != nullptr);
    CHECK(src.blocks.size() == 1);
    CHECK_THROWS_WITH_AS(a.allocate(1, s1), doctest::Contains("the device has no more memory"), DeviceError);
    CHECK(a.stats().bytes_in_use == (3 << 20));  // a failed request leaves the books unchanged
    a.free(q, s1);
  }
}

TEST_SUITE("cuda") {
  TEST_CASE("a CUDA tensor without the CUDA build is NotBuiltError; without a device, DeviceError") {
    if (!cuda::is_built()) {
      CHECK_THROWS_WITH_AS(zeros({2}, DType::float32, Device::cuda(0)), doctest::Contains("built without"),
                           NotBuiltError);
      CHECK_THROWS_AS(Tensor::from_vector(std::vector<float>{1, 2}).cuda(), NotBuiltError);
      CHECK_THROWS_AS(cuda::memory_stats(0), NotBuiltError);
      CHECK_THROWS_AS(cuda::empty_cache(0), NotBuiltError);
    } else if (cuda::device_count() == 0) {
      CHECK_THROWS_WITH_AS(zeros({2}, DType::float32, Device::cuda(0)),
                           doctest::Contains("cuda:0: no CUDA device (cudaGetDeviceCount: "), DeviceError);
      CHECK_THROWS_WITH_AS(Tensor::from_vector(std::vector<float>{1}).cuda(), doctest::Contains("cuda:0"),
                           DeviceError);
      CHECK_THROWS_AS(cuda::memory_stats(0), DeviceError);
    } else {
      MESSAGE("a CUDA device answers: the no-device errors are not reachable here");
    }
  }
}
