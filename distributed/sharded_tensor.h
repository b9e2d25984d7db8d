// kiln: DistributedTensor, a realized tensor held as one buffer per shard
// over a DeviceMesh, and the transitions between placements.
//
// Why a type of its own and not kiln::Tensor: Tensor's impl holds one
// storage, one device and one graph state, and every eager op, the tracer
// and the JIT read them directly; giving it N shards would touch all of
// them (and the CUDA work happening in tensor/ now). DistributedTensor
// holds ordinary Tensors, one per shard, so every eager op works on a shard
// as it is; when Tensor grows shards (the compiled side), this type becomes
// a thin view of it.
//
// Where the shards live. Single controller (one process): every mesh device
// is local and a shard is a Tensor on that device (Device{cpu, i} for CPU
// meshes); collectives run between one thread per device over an in-process
// group. Multi-controller (mpiexec -n P, distributed::init() picks MPI): the
// mesh has P devices and process r holds shard r only; the same calls run
// on every process, and collectives go through MPI.
#pragma once
#include <memory>
#include <vector>

#include "device_mapping.h"

namespace kiln::distributed {

namespace detail { struct MeshGroup; }

class DistributedTensor {
 public:
  DistributedTensor() = default;
  /// Wraps shards: `shards[k]` is the shard of mesh device local_shards()[k]
  /// (every mesh device in one process; this process's device under MPI).
  /// Throws ValueError for a wrong shard count, ShapeError / DTypeError /
  /// DeviceError for a shard whose shape (layout.shard_shape), dtype or
  /// device (the mesh's) does not match. Shards are taken as they are (no copy).
  static DistributedTensor from_shards(const DistributedLayout& layout, std::vector<Tensor> shards);

  bool defined() const { return group_ != nullptr; }
  const DistributedLayout& layout() const { return layout_; }
  const DeviceMapping& mapping() const { return layout_.mapping; }
  const DeviceMesh& mesh() const { return layout_.mapping.mesh(); }
  /// Global dtype and shape.
  DType dtype() const { return layout_.dtype; }
  const Shape& shape() const { return layout_.shape; }
  /// Number of shards (mesh devices), local or not.
  int64_t num_shards() const { return layout_.num_shards(); }
  /// Mesh device numbers whose shards this process holds, ascending.
  const std::vector<int64_t>& local_shards() const;
  bool is_local(int64_t i) const;
  /// Shard of mesh device i. IndexError when i is outside [0, num_shards());
  /// ValueError when another process holds it.
  const Tensor& shard(int64_t i) const;
  /// Shape of shard i (for any i, local or not).
  Shape local_shape(int64_t i) const { return layout_.shard_shape(check_index(i, "local_shape")); }

  /// This tensor with placements `to` on the same mesh (ValueError for a
  /// different mesh; IndexError for a Sharded axis beyond the rank). On a
  /// 1-d mesh: Sharded -> Replicated all-gathers, Partial -> Replicated
  /// all-reduces, Partial -> Sharded reduce-scatters, Replicated -> Sharded
  /// slices locally, Sharded(a) -> Sharded(b) exchanges pieces all-to-all,
  /// Replicated -> Partial(sum) keeps the value on device 0 and zeros
  /// elsewhere; other pairs go through Replicated. On meshes of more
  /// dimensions the mesh axes change one at a time (targets Replicated or
  /// Partial first), each by the 1-d rules over the sub-groups along that
  /// axis (Communicator::split, made once per mesh); when no such order
  /// exists (Sharded(0), Sharded(1) -> Sharded(1), Sharded(0)) every shard is
  /// all-gathered and the target cut locally. Collective: under MPI every
  /// process must call it. Results are exact copies (reductions in rank order).
  DistributedTensor redistribute(const DeviceMapping& to) const;
  DistributedTensor redistribute(const std::vector<Placement>& to) const {
    return redistribute(DeviceMapping(mesh(), to));
  }
  /// The whole tensor (every process gets it), on the device of this
  /// process's first shard. Collective like redistribute. That is the mesh's
  /// device, not necessarily the one the program's other tensors are on:
  /// under `mpiexec -n P` process r's is cpu:r, so on ranks >= 1 mixing the
  /// result with an ordinary (cpu) tensor is a DeviceError; `.cpu()` (or
  /// `.to(device)`) moves it first.
  Tensor full_tensor() const;

 private:
  int64_t check_index(int64_t i, const char* what) const;
  DistributedLayout layout_{TensorLayout()};
  std::vector<Tensor> shards_;  // one per mesh device; undefined where not local
  std::shared_ptr<detail::MeshGroup> group_;
};

/// Splits (or replicates) `t` over `mapping`'s mesh: every process passes the
/// same whole tensor and keeps its own shards. Partial(sum) puts t on mesh
/// device 0 (per Partial mesh axis coordinate 0) and zeros elsewhere;
/// Partial(max/min) puts t everywhere. No communication.
DistributedTensor distribute(const Tensor& t, const DeviceMapping& mapping);

}  // namespace kiln::distributed
