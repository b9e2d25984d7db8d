#include "mesh.h"

#include <set>
#include <sstream>

#include "../tensor/error.h"

namespace kiln::distributed {

namespace {
std::string join_names(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "]";
}
}  // namespace

std::string device_name(Device d) { return (d.is_cpu() ? "cpu:" : "cuda:") + std::to_string(d.index); }

std::vector<Device> cpu_devices(int n) {
  if (n < 1) throw ValueError("cpu_devices: expected n >= 1, got " + std::to_string(n));
  std::vector<Device> v;
  for (int i = 0; i < n; ++i) v.push_back(Device{DeviceType::cpu, i});
  return v;
}

DeviceMesh::DeviceMesh(std::vector<Device> devices, Shape shape, std::vector<std::string> axis_names)
    : devices_(std::move(devices)), shape_(std::move(shape)), names_(std::move(axis_names)) {
  const std::string me = "DeviceMesh: ";
  if (devices_.empty()) throw ValueError(me + "expected at least one device, got none");
  if (shape_.size() != names_.size())
    throw ValueError(me + "expected one axis name per mesh axis (" + std::to_string(shape_.size()) + "), got " +
                     std::to_string(names_.size()) + " names " + join_names(names_));
  int64_t prod = 1;
  for (int64_t e : shape_) {
    if (e < 1) throw ValueError(me + "mesh extents must be >= 1, got shape " + shape_str(shape_));
    prod *= e;
  }
  if (prod != static_cast<int64_t>(devices_.size()))
    throw ValueError(me + "shape " + shape_str(shape_) + " holds " + std::to_string(prod) + " devices, got " +
                     std::to_string(devices_.size()));
  std::set<std::string> seen;
  for (const auto& n : names_) {
    if (n.empty()) throw ValueError(me + "an axis name is empty in " + join_names(names_));
    if (!seen.insert(n).second) throw ValueError(me + "axis name '" + n + "' repeated in " + join_names(names_));
  }
  std::set<std::pair<int, int>> seen_dev;
  for (Device d : devices_)
    if (!seen_dev.insert({int(d.type), d.index}).second)
      throw ValueError(me + "device " + device_name(d) + " appears twice");
}

DeviceMesh::DeviceMesh(std::vector<Device> devices, std::string axis_name)
    : DeviceMesh(devices, Shape{int64_t(devices.size())}, std::vector<std::string>{std::move(axis_name)}) {}

DeviceMesh DeviceMesh::single(Device d) { return DeviceMesh({d}, Shape{1}, {"x"}); }

int64_t DeviceMesh::axis_index(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return static_cast<int64_t>(i);
  throw ValueError("DeviceMesh: no mesh axis named '" + name + "'; the mesh's axes are " + join_names(names_));
}

std::vector<int64_t> DeviceMesh::coords(int64_t flat) const {
  if (flat < 0 || flat >= size())
    throw IndexError("DeviceMesh::coords: device number " + std::to_string(flat) + " is outside [0, " +
                     std::to_string(size()) + ")");
  std::vector<int64_t> c(shape_.size());
  for (size_t a = shape_.size(); a-- > 0;) {
    c[a] = flat % shape_[a];
    flat /= shape_[a];
  }
  return c;
}

std::string DeviceMesh::str() const {
  std::ostringstream os;
  os << "DeviceMesh([";
  for (size_t i = 0; i < devices_.size(); ++i) os << (i ? ", " : "") << device_name(devices_[i]);
  os << "], shape=" << shape_str(shape_) << ", axes=" << join_names(names_) << ")";
  return os.str();
}

}  // namespace kiln::distributed
