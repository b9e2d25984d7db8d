#include "device_mapping.h"

#include "../tensor/error.h"

namespace kiln::distributed {

const char* name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    default: return "min";
  }
}

std::string Placement::str() const {
  switch (kind) {
    case Kind::replicated: return "Replicated";
    case Kind::sharded: return "Sharded(" + std::to_string(axis) + ")";
    default: return std::string("Partial(") + name(op) + ")";
  }
}

DeviceMapping::DeviceMapping(DeviceMesh mesh, std::vector<Placement> placements)
    : mesh_(std::move(mesh)), placements_(std::move(placements)) {
  if (static_cast<int64_t>(placements_.size()) != mesh_.ndim())
    throw ValueError("DeviceMapping: expected one placement per mesh axis (" + std::to_string(mesh_.ndim()) +
                     " for " + mesh_.str() + "), got " + std::to_string(placements_.size()));
}

DeviceMapping DeviceMapping::named(DeviceMesh mesh, const std::map<std::string, Placement>& by_axis) {
  std::vector<Placement> ps(mesh.ndim(), Replicated());
  for (const auto& [axis, p] : by_axis) ps[mesh.axis_index(axis)] = p;  // axis_index throws for an unknown name
  return DeviceMapping(std::move(mesh), std::move(ps));
}

DeviceMapping DeviceMapping::replicated(DeviceMesh mesh) {
  const auto n = mesh.ndim();
  return DeviceMapping(std::move(mesh), std::vector<Placement>(n, Replicated()));
}

DeviceMapping DeviceMapping::single(Device d) { return DeviceMapping(DeviceMesh::single(d), {Replicated()}); }

bool DeviceMapping::has_partial() const {
  for (const auto& p : placements_)
    if (p.is_partial()) return true;
  return false;
}

std::string DeviceMapping::str() const {
  std::string s = "DeviceMapping(" + mesh_.str() + ", [";
  for (size_t i = 0; i < placements_.size(); ++i) s += (i ? ", " : "") + placements_[i].str();
  return s + "])";
}

Span1 split_span(int64_t n, int64_t parts, int64_t i) {
  const int64_t q = n / parts, r = n % parts;
  return {i * q + std::min(i, r), q + (i < r ? 1 : 0)};
}

DistributedLayout::DistributedLayout(DType dtype_, Shape shape_, DeviceMapping mapping_)
    : dtype(dtype_), shape(std::move(shape_)), mapping(std::move(mapping_)) {
  checked_numel(shape, "DistributedLayout");
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<Placement> ps = mapping.placements();
  std::vector<int> sharded_by(rank, -1);
  for (size_t a = 0; a < ps.size(); ++a) {
    if (!ps[a].is_sharded()) continue;
    const int64_t ax = ps[a].axis;
    if (ax < -rank || ax >= rank)
      throw IndexError("DistributedLayout: mesh axis '" + mapping.mesh().axis_names()[a] + "' is " + ps[a].str() +
                       " but the tensor " + shape_str(shape) + " has rank " + std::to_string(rank) +
                       " (expected an axis in [" + std::to_string(-rank) + ", " + std::to_string(rank) + "))");
    ps[a].axis = ax < 0 ? ax + rank : ax;
    if (sharded_by[ps[a].axis] >= 0)
      throw ValueError("DistributedLayout: tensor axis " + std::to_string(ps[a].axis) + " is sharded by mesh axes '" +
                       mapping.mesh().axis_names()[sharded_by[ps[a].axis]] + "' and '" +
                       mapping.mesh().axis_names()[a] + "'; one mesh axis per tensor axis is supported");
    sharded_by[ps[a].axis] = static_cast<int>(a);
  }
  mapping = DeviceMapping(mapping.mesh(), std::move(ps));
}

DistributedLayout::DistributedLayout(const TensorLayout& l)
    : dtype(l.dtype), shape(l.shape), mapping(DeviceMapping::single(l.device)) {}

Shape DistributedLayout::shard_offset(int64_t i) const {
  const auto c = mapping.mesh().coords(i);
  Shape off(shape.size(), 0);
  const auto& ps = mapping.placements();
  for (size_t a = 0; a < ps.size(); ++a)
    if (ps[a].is_sharded()) off[ps[a].axis] = split_span(shape[ps[a].axis], mapping.mesh().shape()[a], c[a]).offset;
  return off;
}

Shape DistributedLayout::shard_shape(int64_t i) const {
  const auto c = mapping.mesh().coords(i);
  Shape s = shape;
  const auto& ps = mapping.placements();
  for (size_t a = 0; a < ps.size(); ++a)
    if (ps[a].is_sharded()) s[ps[a].axis] = split_span(shape[ps[a].axis], mapping.mesh().shape()[a], c[a]).extent;
  return s;
}

std::vector<TensorLayout> DistributedLayout::local_layouts() const {
  std::vector<TensorLayout> v;
  for (int64_t i = 0; i < num_shards(); ++i)
    v.emplace_back(dtype, shard_shape(i), mapping.mesh().devices()[i]);
  return v;
}

std::string DistributedLayout::str() const {
  return "DistributedLayout(" + std::string(kiln::name(dtype)) + ", " + shape_str(shape) + ", " + mapping.str() + ")";
}

}  // namespace kiln::distributed
