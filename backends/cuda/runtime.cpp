// The CUDA backend's runtime: device checks, per-device streams, the
// caching allocator on cudaMalloc, host<->device copies through pinned
// staging buffers, and the device-memory hooks it registers into tensor/.
#include "runtime.h"

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../tensor/device_memory.h"
#include "../../tensor/error.h"
#include "../../tensor/kernel_registry.h"
#include "caching_allocator.h"
#include "cuda_backend.h"

namespace kiln::cuda {
namespace {

std::string dev_str(int dev) { return "cuda:" + std::to_string(dev); }

/// The device count, or the driver's reason why there is none.
struct Discovery {
  int count = 0;
  std::string error;  // non-empty when cudaGetDeviceCount failed
};
const Discovery& discovery() {
  static const Discovery d = [] {
    Discovery r;
    const cudaError_t e = cudaGetDeviceCount(&r.count);
    if (e != cudaSuccess) {
      r.count = 0;
      r.error = cudaGetErrorString(e);
      cudaGetLastError();  // clear the sticky "no device" error
    }
    return r;
  }();
  return d;
}

void check_index(int dev) {
  if (dev < 0)
    throw DeviceError(dev_str(dev) + ": bad CUDA device index " + std::to_string(dev) + " (expected 0 or more)");
  const Discovery& d = discovery();
  if (!d.error.empty())
    throw DeviceError(dev_str(dev) + ": no CUDA device (cudaGetDeviceCount: " + d.error + ")");
  if (dev < 0 || dev >= d.count)
    throw DeviceError(dev_str(dev) + ": no such CUDA device (" + std::to_string(d.count) + " visible)");
}

/// cudaMalloc and events for one device.
class CudaSource final : public DeviceMemorySource {
 public:
  explicit CudaSource(int dev) : dev_(dev) {}
  void* malloc(size_t n) noexcept override {
    void* p = nullptr;
    if (cudaSetDevice(dev_) != cudaSuccess || cudaMalloc(&p, n) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void free(void* p) noexcept override {
    cudaSetDevice(dev_);
    cudaFree(p);
  }
  void* record_event(void* s) override {
    cudaEvent_t e = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!pool_.empty()) {
        e = pool_.back();
        pool_.pop_back();
      }
    }
    if (!e) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), dev_, "cudaEventCreate");
    check(cudaEventRecord(e, static_cast<cudaStream_t>(s)), dev_, "cudaEventRecord");
    return e;
  }
  bool event_done(void* e) override {
    const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    check(r, dev_, "cudaEventQuery");
    return true;
  }
  void event_wait(void* e) override { check(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), dev_, "cudaEventSynchronize"); }
  void event_destroy(void* e) noexcept override {
    std::lock_guard<std::mutex> lk(mu_);
    pool_.push_back(static_cast<cudaEvent_t>(e));  // events are recycled: creating one costs microseconds
  }

 private:
  int dev_;
  std::mutex mu_;
  std::vector<cudaEvent_t> pool_;
};

/// Pinned host memory through which pageable host data is copied (the
/// driver would stage it anyway, one small block at a time): two chunks so
/// that the host copy of one overlaps the DMA of the other.
constexpr size_t kStagingChunk = size_t(8) << 20;

struct PerDevice {
  int dev;
  cudaStream_t stream = nullptr;
  cudaDeviceProp props{};
  CudaSource source;
  CachingAllocator allocator;
  std::mutex staging_mu;
  std::array<void*, 2> staging{};
  std::array<cudaEvent_t, 2> staging_done{};
  explicit PerDevice(int d) : dev(d), source(d), allocator(source, dev_str(d)) {
    check(cudaSetDevice(d), d, "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), d, "cudaStreamCreate");
    check(cudaGetDeviceProperties(&props, d), d, "cudaGetDeviceProperties");
  }
  void ensure_staging() {  // staging_mu held
    if (staging[0]) return;
    for (int i = 0; i < 2; ++i) {
      check(cudaHostAlloc(&staging[i], kStagingChunk, cudaHostAllocDefault), dev, "cudaHostAlloc (staging)");
      check(cudaEventCreateWithFlags(&staging_done[i], cudaEventDisableTiming), dev, "cudaEventCreate");
    }
  }
};

// Never destroyed: buffers may be freed during static destruction, after
// which the driver may be gone; leaking the cache then is harmless.
PerDevice& per_device(int dev) {
  static std::mutex mu;
  static auto* devices = new std::vector<std::unique_ptr<PerDevice>>(64);
  check_index(dev);
  if (dev >= int(devices->size())) throw DeviceError(dev_str(dev) + ": device index beyond kiln's 64");
  std::lock_guard<std::mutex> lk(mu);
  auto& p = (*devices)[size_t(dev)];
  if (!p) p = std::make_unique<PerDevice>(dev);
  return *p;
}

void host_to_device(PerDevice& d, void* dst, const void* src, size_t n) {
  std::lock_guard<std::mutex> lk(d.staging_mu);
  d.ensure_staging();
  for (size_t off = 0, k = 0; off < n; off += kStagingChunk, k ^= 1) {
    const size_t len = std::min(kStagingChunk, n - off);
    check(cudaEventSynchronize(d.staging_done[k]), d.dev, "cudaEventSynchronize (staging)");
    std::memcpy(d.staging[k], static_cast<const char*>(src) + off, len);
    check(cudaMemcpyAsync(static_cast<char*>(dst) + off, d.staging[k], len, cudaMemcpyHostToDevice, d.stream), d.dev,
          "cudaMemcpyAsync (host to device)");
    check(cudaEventRecord(d.staging_done[k], d.stream), d.dev, "cudaEventRecord");
  }
}

void device_to_host(PerDevice& d, void* dst, const void* src, size_t n) {
  std::lock_guard<std::mutex> lk(d.staging_mu);
  d.ensure_staging();
  auto enqueue = [&](size_t off, size_t k) {
    const size_t len = std::min(kStagingChunk, n - off);
    check(cudaMemcpyAsync(d.staging[k], static_cast<const char*>(src) + off, len, cudaMemcpyDeviceToHost, d.stream),
          d.dev, "cudaMemcpyAsync (device to host)");
    check(cudaEventRecord(d.staging_done[k], d.stream), d.dev, "cudaEventRecord");
  };
  enqueue(0, 0);
  for (size_t off = 0, k = 0; off < n; off += kStagingChunk, k ^= 1) {
    if (off + kStagingChunk < n) enqueue(off + kStagingChunk, k ^ 1);  // the next chunk's DMA overlaps this memcpy
    check(cudaEventSynchronize(d.staging_done[k]), d.dev, "cudaEventSynchronize (device to host)");
    std::memcpy(static_cast<char*>(dst) + off, d.staging[k], std::min(kStagingChunk, n - off));
  }
}

void copy_hook(void* dst, Device to, const void* src, Device from, size_t n) {
  if (from.is_cpu()) {
    use_device(to.index);
    host_to_device(per_device(to.index), dst, src, n);
  } else if (to.is_cpu()) {
    use_device(from.index);
    device_to_host(per_device(from.index), dst, src, n);
  } else if (from.index == to.index) {
    use_device(to.index);
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream(to.index)), to.index,
          "cudaMemcpyAsync (device to device)");
  } else {
    // Between devices: the copy waits for the source's stream and finishes
    // before returning, so that neither allocator reuses a block in flight.
    check(cudaStreamSynchronize(stream(from.index)), from.index, "cudaStreamSynchronize");
    use_device(to.index);
    check(cudaMemcpyPeerAsync(dst, to.index, src, from.index, n, stream(to.index)), to.index, "cudaMemcpyPeerAsync");
    check(cudaStreamSynchronize(stream(to.index)), to.index, "cudaStreamSynchronize");
  }
}

[[maybe_unused]] const bool registered = [] {
  detail::DeviceMemoryHooks h;
  h.check_device = [](int dev) { check_index(dev); };
  h.allocate = [](int dev, size_t n) {
    PerDevice& d = per_device(dev);
    return d.allocator.allocate(n, d.stream);
  };
  h.free = [](int dev, void* p, size_t) noexcept {
    // The buffer's last use was queued on kiln's stream of its device.
    try {
      PerDevice& d = per_device(dev);
      d.allocator.free(p, d.stream);
    } catch (...) {
    }
  };
  h.copy = copy_hook;
  h.zero = [](int dev, void* p, size_t n) {
    use_device(dev);
    check(cudaMemsetAsync(p, 0, n, stream(dev)), dev, "cudaMemsetAsync");
  };
  detail::register_device_memory(DeviceType::cuda, h);
  // The front end's domain checks (integer division by zero, index ranges)
  // read the integer operand on the host: they wait for the device.
  DeviceUtilities u;
  u.any_zero = [](const Tensor& t) {
    for (int64_t v : t.to_vector<int64_t>())
      if (v == 0) return true;
    return false;
  };
  u.any_negative = [](const Tensor& t) {
    for (int64_t v : t.to_vector<int64_t>())
      if (v < 0) return true;
    return false;
  };
  u.first_index_outside = [](const Tensor& t, int64_t lo, int64_t hi) -> std::optional<int64_t> {
    for (int64_t v : t.to_vector<int64_t>())
      if (v < lo || v >= hi) return v;
    return std::nullopt;
  };
  u.blas_name = [] { return "cublaslt"; };
  detail::register_device_utilities(DeviceType::cuda, u);
  return true;
}();

}  // namespace

void check(cudaError_t e, int dev, const char* what) {
  if (e == cudaSuccess) [[likely]] return;
  cudaGetLastError();
  throw DeviceError(dev_str(dev) + ": " + what + ": " + cudaGetErrorString(e));
}

void use_device(int dev) {
  check_index(dev);
  // Asked each time (tens of nanoseconds): the allocator and library calls
  // may have changed the thread's device since.
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == dev) [[likely]] return;
  check(cudaSetDevice(dev), dev, "cudaSetDevice");
}

cudaStream_t stream(int dev) { return per_device(dev).stream; }
const cudaDeviceProp& properties(int dev) { return per_device(dev).props; }
CachingAllocator& device_allocator(int dev) { return per_device(dev).allocator; }

bool is_built() { return true; }
int device_count() { return discovery().count; }
std::string device_name(int index) {
  if (index < 0 || index >= device_count())
    throw DeviceError("cuda: device index " + std::to_string(index) + " out of range (" +
                      std::to_string(device_count()) + " devices visible" +
                      (discovery().error.empty() ? "" : "; cudaGetDeviceCount: " + discovery().error) + ")");
  return properties(index).name;
}

DeviceMemoryStats memory_stats(int index) { return per_device(index).allocator.stats(); }
void reset_peak_memory(int index) { per_device(index).allocator.reset_peak(); }
void empty_cache(int index) { per_device(index).allocator.empty_cache(); }
void set_memory_limit(int index, size_t bytes) { per_device(index).allocator.set_limit(bytes); }
void synchronize(int index) {
  use_device(index);
  check(cudaStreamSynchronize(stream(index)), index, "cudaStreamSynchronize");
}

}  // namespace kiln::cuda
