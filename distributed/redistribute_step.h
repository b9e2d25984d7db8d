// kiln (internal): what the eager redistributions (sharded_tensor.cpp) and
// compiled multi-device callables (compiled.cpp) share: the groups of
// communicators per mesh, one rank's step of a redistribution on raw
// buffers, and the per-thread state of tracing one device's part of a
// compiled program. Not part of the public headers.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "../trace/realization_context.h"
#include "communicator.h"
#include "device_mapping.h"

namespace kiln::distributed::detail {

/// The shards of a mesh this process holds and one communicator per held
/// shard, whose rank is the shard's mesh device number.
struct MeshGroup {
  std::vector<int64_t> local;
  std::vector<Device> devices;  ///< per local shard: its mesh device
  std::vector<std::shared_ptr<Communicator>> comms;
  /// Per mesh axis of an n-d mesh: for each local shard, the communicator of
  /// the devices that differ from it only along that axis (rank = its
  /// coordinate there). Made on first use by split().
  std::mutex mu;
  std::map<int64_t, std::vector<std::shared_ptr<Communicator>>> axis_comms;
};

/// The group of `mesh` in this process: under MPI this process's device
/// with the world communicator; in one process every device with an
/// in-process group made once per device list; while a device's part of a
/// compiled program is traced, that device alone (no communicator).
std::shared_ptr<MeshGroup> group_for(const DeviceMesh& mesh);
/// Forgets the in-process group of `mesh` if it is still `g` (after a
/// collective on it failed: the next use makes a fresh group).
void drop_group(const DeviceMesh& mesh, const std::shared_ptr<MeshGroup>& g);
/// Runs fn(k) for each local shard k, at once when there are several (their
/// collectives meet each other): on the CPU devices' worker threads
/// (run_on_cpu_devices), else one fresh thread per shard. Rethrows the
/// lowest rank's error, preferring one that is not a CollectiveError (the cause).
void for_each_local(const MeshGroup& g, const std::function<void(size_t)>& fn);
/// Rank r's part of redistributing its shard x (layout `from`, contiguous)
/// into y (its shard of `to`, contiguous), over communicator `c` of all the
/// mesh's devices (rank = mesh device number). 1-d meshes take the direct
/// collective (all-reduce, reduce-scatter, all-to-all, all-gather); other
/// cases gather the whole tensor and cut.
void step(Communicator& c, int64_t r, const DistributedLayout& from, const void* x, const DistributedLayout& to,
          void* y);

/// One collective of a traced device program: graph value `dst` (a graph
/// input added by the trace) is this device's shard of `to`, redistributed
/// from value `src` (its shard of `from`).
struct TracedCollective {
  int32_t src = -1, dst = -1;
  DistributedLayout from, to;
};

/// Per-thread state while one device's part of a compiled program is traced.
struct ShardTrace {
  int64_t device = 0;  ///< mesh device number traced
  const DeviceMesh* mesh = nullptr;  ///< the mesh traced over
  GraphRealizationContext* ctx = nullptr;
  std::vector<TracedCollective> collectives;  ///< in program order
};
/// The trace under way on this thread, or null.
ShardTrace* current_shard_trace();
/// Makes `t` the current trace for the scope (not nestable: ValueError).
class ShardTraceScope {
 public:
  explicit ShardTraceScope(ShardTrace& t);
  ~ShardTraceScope();
  ShardTraceScope(const ShardTraceScope&) = delete;
  ShardTraceScope& operator=(const ShardTraceScope&) = delete;
};

}  // namespace kiln::distributed::detail
