#include "kernel_registry.h"

#include <string>

namespace kiln::detail {

namespace {

constexpr int kNumDeviceTypes = 2;  // DeviceType::cpu, DeviceType::cuda

struct Entry {
  Kernel kernel;
  DTypeMask dtypes;
};

// Plain aggregates with constant (zero) initialisation: they are ready before
// any backend's dynamic initialiser registers into them, whatever the order
// of initialisation across translation units.
Entry g_kernels[kNumDeviceTypes][kNumOps];
DeviceUtilities g_utilities[kNumDeviceTypes];
bool g_has_utilities[kNumDeviceTypes];

size_t dev_index(DeviceType d) { return static_cast<size_t>(d); }

/// The device's own word for why it cannot run kernels, if its backend is
/// missing from this build; empty when it is present.
std::string backend_missing(Device dev) {
  if (g_has_utilities[dev_index(dev.type)]) return {};
  return dev.type == DeviceType::cuda ? " (this kiln was built without the CUDA backend)" : " (no backend registered)";
}

}  // namespace

void register_kernel(OpId op, DeviceType dev, Kernel k, DTypeMask dtypes) {
  g_kernels[dev_index(dev)][static_cast<size_t>(op)] = Entry{k, dtypes};
}

void register_device_utilities(DeviceType dev, const DeviceUtilities& u) {
  g_utilities[dev_index(dev)] = u;
  g_has_utilities[dev_index(dev)] = true;
}

bool has_kernel(OpId op, DeviceType dev, DType dtype) noexcept {
  const Entry& e = g_kernels[dev_index(dev)][static_cast<size_t>(op)];
  return e.kernel != nullptr && (e.dtypes & dtype_bit(dtype)) != 0;
}

// The error paths below live in cold, never-inlined functions: inlined, the
// message building made every eager op's lookup and device check save six
// registers and reserve a stack frame (bench_ops' 1-element add).
namespace {

[[noreturn, gnu::cold, gnu::noinline]] void throw_no_kernel(OpId op, Device dev, DType dtype) {
  throw DeviceError(op_prefix(op) + "no kernel for " + dev.str() + " of dtype " + std::string(name(dtype)) +
                    backend_missing(dev));
}

[[noreturn, gnu::cold, gnu::noinline]] void throw_no_utilities(Device dev, const char* who) {
  throw DeviceError(std::string(who) + ": no kernels for " + dev.str() + backend_missing(dev));
}

bool is_cpu_scalar(const Tensor& t) { return t.device().is_cpu() && t.ndim() == 0; }

/// The inputs' devices differ: fine when the odd ones out are CPU scalars,
/// otherwise a DeviceError naming the first two that clash.
[[gnu::cold, gnu::noinline]] void check_mixed_devices(OpId op, std::span<const Tensor> in) {
  size_t ref = 0;
  while (ref < in.size() && is_cpu_scalar(in[ref])) ++ref;
  if (ref == in.size()) return;
  // Device d as the C++ that names it, for the hint: Device::cpu(), Device::cpu(1), Device::cuda(0).
  const auto code = [](Device d) {
    return std::string(d.is_cpu() ? "Device::cpu(" : "Device::cuda(") +
           (d.is_cpu() && d.index == 0 ? "" : std::to_string(d.index)) + ")";
  };
  for (size_t j = 0; j < in.size(); ++j) {
    const Device a = in[j].device(), b = in[ref].device();
    if (is_cpu_scalar(in[j]) || a == b) continue;
    // CPU devices past 0 are mostly mesh devices: say where such a tensor came from.
    const bool mesh_cpu = a.is_cpu() && b.is_cpu() && (a.index > 0 || b.index > 0);
    throw DeviceError(op_prefix(op) + "input " + std::to_string(j) + " is on " + a.str() + " but input " +
                      std::to_string(ref) + " is on " + b.str() +
                      " (eager ops never copy between devices: move one with .to(" + code(a) + ") or .to(" + code(b) +
                      ")" +
                      (mesh_cpu ? "; a DistributedTensor's shards and full_tensor() are on its mesh devices, "
                                  "cpu:<rank> under mpiexec"
                                : "") +
                      ")");
  }
}

}  // namespace

Kernel kernel_for(OpId op, Device dev, DType dtype) {
  const Entry& e = g_kernels[dev_index(dev.type)][static_cast<size_t>(op)];
  if (e.kernel != nullptr && (e.dtypes & dtype_bit(dtype)) != 0) [[likely]]
    return e.kernel;
  throw_no_kernel(op, dev, dtype);
}

const DeviceUtilities& device_utilities(Device dev, const char* who) {
  if (!g_has_utilities[dev_index(dev.type)]) [[unlikely]] throw_no_utilities(dev, who);
  return g_utilities[dev_index(dev.type)];
}

void check_same_device(OpId op, std::span<const Tensor> in) {
  if (in.empty()) return;
  const Device d0 = in[0].device();
  for (size_t i = 1; i < in.size(); ++i)
    if (!(in[i].device() == d0)) [[unlikely]] return check_mixed_devices(op, in);
}

Device common_device(OpId op, std::span<const Tensor> in) {
  if (in.empty()) return Device::cpu();
  const Device d0 = in[0].device();
  for (size_t i = 1; i < in.size(); ++i)
    if (!(in[i].device() == d0)) [[unlikely]] {
      check_mixed_devices(op, in);
      return operands_device(in);
    }
  return d0;
}

void copy_into(const Tensor& src, const Tensor& dst) {
  if (!(src.device() == dst.device()))
    throw DeviceError("copy: source is on " + src.device().str() + " but the destination is on " + dst.device().str());
  Attrs a;
  a.dtype = dst.dtype();
  const Tensor in[1] = {src};
  run_kernel(OpId::Cast, src.dtype(), std::span<const Tensor>(in, 1), dst, a);
}

}  // namespace kiln::detail
