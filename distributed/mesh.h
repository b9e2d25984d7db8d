// kiln: DeviceMesh, an n-dimensional grid of devices with named axes (MAX's
// DeviceMesh(devices, mesh_shape, axis_names), JAX's Mesh).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../tensor/cpu_devices.h"  // set_num_cpu_devices, cpu_device: a mesh of CPU devices needs them
#include "../tensor/device.h"
#include "../tensor/shape.h"

namespace kiln::distributed {

/// `devices` laid out row-major over `shape`, one name per axis. CPU devices
/// of one process are `Device::cpu(i)` (cpu_devices(n) lists n);
/// under mpiexec, mesh device k belongs to process k (see sharded_tensor.h).
class DeviceMesh {
 public:
  /// Throws ValueError when: devices is empty; the product of `shape` is not
  /// devices.size(); an extent is < 1; axis_names.size() != shape.size(); a
  /// name is empty or repeated; a device appears twice.
  DeviceMesh(std::vector<Device> devices, Shape shape, std::vector<std::string> axis_names);
  /// A 1-d mesh named `axis_name` over `devices`.
  explicit DeviceMesh(std::vector<Device> devices, std::string axis_name = "x");
  /// The mesh of one device (the trivial case of every layout).
  static DeviceMesh single(Device d);

  const std::vector<Device>& devices() const { return devices_; }
  const Shape& shape() const { return shape_; }
  const std::vector<std::string>& axis_names() const { return names_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  /// Number of devices.
  int64_t size() const { return static_cast<int64_t>(devices_.size()); }
  /// The index of the axis called `name`; throws ValueError naming the mesh's axes.
  int64_t axis_index(const std::string& name) const;
  /// Coordinates of device number `flat` (row-major); IndexError when out of range.
  std::vector<int64_t> coords(int64_t flat) const;
  /// "DeviceMesh([cpu:0, cpu:1], shape=[2], axes=[x])".
  std::string str() const;
  friend bool operator==(const DeviceMesh&, const DeviceMesh&) = default;

 private:
  std::vector<Device> devices_;
  Shape shape_;
  std::vector<std::string> names_;
};

/// `n` distinct CPU devices: Device::cpu(0) ... Device::cpu(n - 1).
std::vector<Device> cpu_devices(int n);
/// "cpu:0", "cpu:1", "cuda:0": the index always shown (Device::str() prints CPU device 0 as "cpu").
std::string device_name(Device d);

}  // namespace kiln::distributed
