#include "buffer.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <ostream>
#include <sstream>
#include <string>

#include <sys/sysinfo.h>

#include "allocation_error.h"
#include "cpu_memory_pools.h"
#include "cpu_devices.h"
#include "device_memory.h"
#include "error.h"

namespace kiln {

namespace detail {
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  size_t capacity = 0;  // bytes asked of the allocator (owned memory only)
  Device device;
  std::shared_ptr<void> keep_alive;  // wrapped memory's external owner (may be null, or own nothing)
  bool owned = false;                // allocated by Buffer::allocate: freed here; wrapped memory never is
  std::atomic<uint64_t> version{0};  // in-place writes (Buffer::version)
  void (*device_free)(int, void*, size_t) noexcept = nullptr;  // device memory: its backend's free
  ~Storage() {
    // Wrapped memory (Buffer::wrap) belongs to its caller: never freed nor handed
    // to kiln's pools, whatever keep_alive holds (null, or a shared_ptr owning nothing).
    if (!owned) return;
    if (device_free) device_free(device.index, data, capacity);
    else if (device.index == 0) [[likely]] detail::cpu_free(data, capacity);
    else detail::cpu_free_on(device.index, data, capacity);  // back to its device's pool
  }
};

// Memory plus swap, in bytes: no single CPU allocation beyond it can succeed
// (Linux's default overcommit heuristic refuses it too), so such a request is
// refused before malloc, the same way on every allocator (ASan's included).
size_t cpu_memory_bound() {
  static const size_t bound = [] {
    struct sysinfo si {};
    if (sysinfo(&si) != 0) return SIZE_MAX;
    const unsigned __int128 b = (unsigned __int128)(si.totalram + si.totalswap) * si.mem_unit;
    return b > SIZE_MAX ? SIZE_MAX : size_t(b);
  }();
  return bound;
}
}  // namespace detail

namespace detail {
void rethrow_allocation_error_as(std::string_view who) {
  static constexpr std::string_view kMine = "Buffer::allocate: ";
  const auto renamed = [&](const Error& e) {
    const std::string_view m = e.what();
    return m.substr(0, kMine.size()) == kMine ? std::string(who) + ": " + std::string(m.substr(kMine.size()))
                                              : std::string();
  };
  try {
    throw;
  } catch (const ValueError& e) {
    if (std::string m = renamed(e); !m.empty()) throw ValueError(m);
    throw;
  } catch (const DeviceError& e) {
    if (std::string m = renamed(e); !m.empty()) throw DeviceError(m);
    throw;
  }
}
}  // namespace detail

Buffer Buffer::allocate(size_t nbytes, Device device) {
  auto s = std::make_shared<detail::Storage>();
  // Never 0 bytes: an empty tensor still gets a valid pointer. The padded
  // size is what Storage frees.
  const size_t padded = nbytes == 0 ? 64 : nbytes;
  if (device.is_cpu()) [[likely]] {
    if (nbytes > detail::cpu_memory_bound()) [[unlikely]]
      throw ValueError("Buffer::allocate: out of memory allocating " + std::to_string(nbytes) +
                       " bytes (more than this machine's " + std::to_string(detail::cpu_memory_bound()) +
                       " bytes of memory and swap)");
    if (device.index == 0) [[likely]] {
      s->data = detail::cpu_allocate(padded);
    } else {
      check_cpu_device(device, "Buffer::allocate");
      s->data = detail::cpu_allocate_on(device.index, padded);  // the device's own pool
    }
    if (!s->data)
      throw ValueError("Buffer::allocate: out of memory allocating " + std::to_string(nbytes) + " bytes");
  } else {
    const detail::DeviceMemoryHooks& h = detail::device_memory(device, "Buffer::allocate");
    s->data = h.allocate(device.index, padded);  // throws DeviceError
    s->device_free = h.free;
  }
  s->nbytes = nbytes;
  s->capacity = padded;
  s->owned = true;
  s->device = device;
  Buffer b;
  b.storage_ = std::move(s);
  return b;
}

Buffer Buffer::wrap(void* data, size_t nbytes, Device device, std::shared_ptr<void> keep_alive) {
  // A null pointer holds no bytes (as from_data refuses one to copy from):
  // a tensor over it would read or write address 0.
  if (!data && nbytes)
    throw ValueError("Buffer::wrap: data is a null pointer but nbytes is " + std::to_string(nbytes) +
                     " (wrap memory that exists, or pass nbytes 0)");
  auto s = std::make_shared<detail::Storage>();
  s->data = data;
  s->nbytes = nbytes;
  s->device = device;
  s->keep_alive = std::move(keep_alive);  // may be null: the caller keeps the memory alive
  Buffer b;
  b.storage_ = std::move(s);
  return b;
}

void* Buffer::data() const { return storage_ ? storage_->data : nullptr; }
size_t Buffer::nbytes() const { return storage_ ? storage_->nbytes : 0; }
uint64_t Buffer::version() const { return storage_ ? storage_->version.load(std::memory_order_acquire) : 0; }
void Buffer::bump_version() const {
  if (storage_) storage_->version.fetch_add(1, std::memory_order_acq_rel);
}
Device Buffer::device() const { return storage_ ? storage_->device : Device::cpu(); }

std::string Device::str() const {
  if (type == DeviceType::cpu) return index == 0 ? std::string("cpu") : "cpu:" + std::to_string(index);
  return "cuda:" + std::to_string(index);
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  const size_t colon = s.rfind(':');
  const std::string kind = colon == std::string::npos ? s : s.substr(0, colon);
  if ((kind == "cuda" || kind == "cpu") && colon != std::string::npos && s.size() > colon + 1 &&
      s.size() < colon + 5) {
    int n = 0;
    for (size_t i = colon + 1; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9')
        throw DeviceError("Device::parse: expected 'cpu', 'cpu:N' or 'cuda:N', got '" + s + "'");
      n = n * 10 + (s[i] - '0');
    }
    if (kind == "cuda") return cuda(n);
    if (n > 0) return Device{DeviceType::cpu, n};  // CPU device 0 is spelled "cpu" (one spelling per device)
  }
  throw DeviceError("Device::parse: expected 'cpu', 'cpu:N' or 'cuda:N', got '" + s + "'");
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

}  // namespace kiln
