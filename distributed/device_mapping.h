// kiln: DeviceMapping (mesh + one placement per mesh axis) and the
// distributed layout of a tensor: its global dtype and shape plus a mapping,
// and the shape of every shard.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "../tensor/tensor.h"
#include "mesh.h"
#include "placement.h"

namespace kiln::distributed {

/// How a tensor lies on a mesh: placements[a] is the placement along mesh
/// axis a. The trivial mapping (one device, Replicated) is what every
/// single-device TensorLayout means.
class DeviceMapping {
 public:
  /// Throws ValueError when placements.size() != mesh.ndim().
  DeviceMapping(DeviceMesh mesh, std::vector<Placement> placements);
  /// Named form (JAX-style): `by_axis` maps mesh axis names to placements,
  /// axes not named are Replicated. Throws ValueError naming an axis that the
  /// mesh does not have (and the axes it has).
  static DeviceMapping named(DeviceMesh mesh, const std::map<std::string, Placement>& by_axis);
  /// Replicated over `mesh`.
  static DeviceMapping replicated(DeviceMesh mesh);
  /// One device.
  static DeviceMapping single(Device d);

  const DeviceMesh& mesh() const { return mesh_; }
  const std::vector<Placement>& placements() const { return placements_; }
  bool is_single_device() const { return mesh_.size() == 1; }
  bool has_partial() const;
  /// "DeviceMapping(<mesh>, [Sharded(0), Replicated])".
  std::string str() const;
  friend bool operator==(const DeviceMapping&, const DeviceMapping&) = default;

 private:
  DeviceMesh mesh_;
  std::vector<Placement> placements_;
};

/// numpy.array_split's rule: `n` elements in `parts` pieces, the first
/// n % parts pieces one element longer: 10 in 3 -> 4, 3, 3; 2 in 4 -> 1, 1,
/// 0, 0. Returns (offset, extent) of piece `i`.
struct Span1 { int64_t offset, extent; };
Span1 split_span(int64_t n, int64_t parts, int64_t i);

/// A tensor's distributed layout: the global dtype and shape and its mapping.
/// Converts from a single-device TensorLayout (the trivial mapping).
///
/// Design note: kiln::TensorLayout (tensor/tensor.h) stays the one-device
/// layout, and its `device` is the trivial mapping; a DistributedLayout is
/// the general case. Once compiled callables take sharded arguments, the
/// mapping moves into TensorLayout as an optional member (null = its device)
/// so the jit cache key includes it; until then no existing code or cache
/// key changes.
struct DistributedLayout {
  DType dtype = DType::float32;
  Shape shape;  ///< global shape
  DeviceMapping mapping = DeviceMapping::single(Device::cpu());

  /// Throws IndexError when a Sharded axis is outside [-rank, rank), and
  /// ValueError when one tensor axis is sharded by two mesh axes (not
  /// supported yet). Negative Sharded axes are stored normalised.
  DistributedLayout(DType dtype, Shape shape, DeviceMapping mapping);
  DistributedLayout(const TensorLayout& l);  // NOLINT: implicit, the trivial mapping
  /// Number of shards (mesh devices).
  int64_t num_shards() const { return mapping.mesh().size(); }
  /// Offset of shard `i` (mesh device i, row-major) in the global tensor, per axis.
  Shape shard_offset(int64_t i) const;
  /// Shape of shard `i` (Partial and Replicated axes keep the global extent).
  Shape shard_shape(int64_t i) const;
  /// One contiguous TensorLayout per shard, on that shard's device.
  std::vector<TensorLayout> local_layouts() const;
  std::string str() const;
  friend bool operator==(const DistributedLayout&, const DistributedLayout&) = default;
};

}  // namespace kiln::distributed
