// The device-memory hook registry and the Tensor methods that move data
// between devices (see device_memory.h).
#include "device_memory.h"

#include <cstring>
#include <string>

#include "cpu_devices.h"
#include "error.h"
#include "tensor.h"

namespace kiln {
namespace detail {
namespace {

constexpr int kNumDeviceTypes = 2;  // DeviceType::cpu, DeviceType::cuda

// Constant-initialised: ready before any backend's dynamic initialiser.
DeviceMemoryHooks g_hooks[kNumDeviceTypes];
bool g_registered[kNumDeviceTypes];

}  // namespace

void register_device_memory(DeviceType type, const DeviceMemoryHooks& hooks) {
  g_hooks[static_cast<size_t>(type)] = hooks;
  g_registered[static_cast<size_t>(type)] = true;
}

bool has_device_memory(DeviceType type) noexcept { return g_registered[static_cast<size_t>(type)]; }

const DeviceMemoryHooks& device_memory(Device dev, const char* who) {
  if (dev.index < 0)
    throw DeviceError(std::string(who) + ": " + dev.str() + ": bad device index " + std::to_string(dev.index) +
                      " (expected 0 or more)");
  if (!g_registered[static_cast<size_t>(dev.type)])
    throw NotBuiltError(std::string(who) + ": tensors on " + dev.str() +
                        " need the CUDA backend, and this kiln was built without it (configure with "
                        "-DKILN_WITH_CUDA=ON on a machine with the CUDA toolkit)");
  const DeviceMemoryHooks& h = g_hooks[static_cast<size_t>(dev.type)];
  if (h.check_device) h.check_device(dev.index);
  return h;
}

}  // namespace detail

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  if (dev.is_cpu() && device().is_cpu()) {
    // Between CPU devices of this process (Device::cpu(i)): one address
    // space, so a plain copy into memory of the target device's pool.
    check_cpu_device(dev, "Tensor::to");
    const Tensor src = contiguous();
    Tensor out = Tensor::empty(shape(), dtype(), dev);
    const size_t nbytes = static_cast<size_t>(numel()) * itemsize();
    if (nbytes > 0) std::memcpy(out.data_ptr(), src.data_ptr(), nbytes);
    return out;
  }
  // The hooks of the non-CPU side move the bytes (both sides' for a copy
  // between two devices of one type: the backend handles peers).
  const Device backend = dev.is_cpu() ? device() : dev;
  const detail::DeviceMemoryHooks& h = detail::device_memory(backend, "Tensor::to");
  if (!device().is_cpu()) detail::device_memory(device(), "Tensor::to");  // the source device exists
  const Tensor src = contiguous();  // on its own device
  Tensor out = Tensor::empty(shape(), dtype(), dev);
  const size_t nbytes = static_cast<size_t>(numel()) * itemsize();
  if (nbytes > 0) h.copy(out.data_ptr(), dev, src.data_ptr(), src.device(), nbytes);
  return out;
}

Tensor Tensor::cpu() const { return to(Device::cpu()); }
Tensor Tensor::cuda(int index) const { return to(Device::cuda(index)); }

}  // namespace kiln
