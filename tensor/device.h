// kiln: where a tensor's memory lives.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { cpu, cuda };

/// A device: `Device::cpu()` (CPU device 0), `Device::cpu(i)` (CPU device i
/// of this process: see tensor/cpu_devices.h, KILN_CPU_DEVICES) or
/// `Device::cuda(n)` (the CUDA backend, when built). Constructing one checks
/// nothing; memory on a CPU device past num_cpu_devices() or on a CUDA device
/// that does not answer raises DeviceError when it is allocated.
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu(int i = 0) { return {DeviceType::cpu, i}; }
  static constexpr Device cuda(int n = 0) { return {DeviceType::cuda, n}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  /// "cpu" (CPU device 0), "cpu:N" (CPU device N > 0, see distributed/) or "cuda:N".
  std::string str() const;
  /// Parses "cpu", "cpu:N" (N > 0), "cuda" or "cuda:N"; throws DeviceError otherwise.
  static Device parse(const std::string& s);
  friend bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};
std::ostream& operator<<(std::ostream& os, Device d);

}  // namespace kiln
