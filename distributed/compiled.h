// kiln: compiled multi-device programs: distributed::compile(fn)(layouts...)
// over sharded layouts, and distributed::jit(fn), whose cache key includes
// every argument's mapping.
//
// Design (SPMD, as MAX and JAX's shard_map compile a sharded program).
// `fn` is written over DistributedTensors with the eager sharding rules
// (sharding_rules.h). compile() traces it once per local device d (every
// mesh device in one process; this process's device under mpiexec): the
// arguments are that device's shards as graph inputs, the rules run as they
// do eagerly, and each redistribution they make does not run but becomes a
// *collective node* of the device program: its source value (d's shard of
// the old layout) is recorded, and its result is a new value of the graph
// (d's shard of the new layout). The device program is then cut at its
// collective nodes into segments: segment s holds the ops that read the
// results of collectives up to s (and nothing later); each segment is an
// ordinary graph compiled by the CPU JIT (fusion, memory plan, generated
// code; jit/plan.h), with the values later segments read as extra results.
// The plan of a device is therefore the list
//     segment 0, collective 0, segment 1, ..., collective K-1, segment K
// and a call runs the plans of all local devices at once, one thread per
// device, the collectives meeting through the Communicator of the mesh
// (in-process in one process, MPI under mpiexec; detail::step, the same
// code as the eager redistributions, so compiled and eager move the same
// bytes). Every device program makes the same collectives in the same
// order (they come from the same rules on the same global layouts);
// compile() checks it. Reductions of a collective combine ranks in rank
// order, so with KernelOptions::strict (bitwise eager per segment) a
// compiled program equals the eager distributed one bit for bit.
//
// Not supported (yet): in-place writes to arguments inside `fn`, results
// that are not DistributedTensors, and arguments on different meshes
// (ValueError). On meshes of several axes a collective gathers the whole
// tensor and cuts (correct, not economical; the eager path changes one mesh
// axis at a time).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../jit/compiled_callable.h"
#include "communicator.h"
#include "sharded_tensor.h"

namespace kiln::distributed {

/// The registry name of shard `i` of distributed weight `name`: `name` for
/// shard 0, `name.shard.<i>` for the others (one registry entry per shard).
std::string shard_weight_name(const std::string& name, int64_t i);
/// Registry entries for the shards of `t` this process holds, named by
/// shard_weight_name: merge them into DistributedCompileOptions::weights.
std::map<std::string, Tensor> shard_weights(const std::string& name, const DistributedTensor& t);
/// Inside a function traced by distributed::compile: the distributed weight
/// `name` laid out as `layout` (each device's shard is the graph weight
/// shard_weight_name(name, device), bound from the registry when the
/// callable is built). ValueError when called outside such a trace or when
/// `layout` is not on the mesh being traced.
DistributedTensor weight(const std::string& name, const DistributedLayout& layout);

struct DistributedCompileOptions {
  /// Weights registry: one entry per shard of a distributed weight (see
  /// shard_weight_name); plain names for weights read by nn modules.
  std::map<std::string, Tensor> weights;
  std::string name = "main";
  /// null = the process-wide default session (KernelOptions::strict for
  /// bitwise-eager segments).
  std::shared_ptr<InferenceSession> session;
};

/// A compiled multi-device program (see the design note above).
class DistributedCallable {
 public:
  using Fn = std::function<std::vector<DistributedTensor>(const std::vector<DistributedTensor>&)>;
  /// Traces `fn` on arguments laid out as `layouts` (all on one mesh) and
  /// compiles every local device's program. Throws ValueError when the
  /// layouts are on different meshes, a weight shard is missing from the
  /// registry (naming the entry), fn returns something that is not on the
  /// mesh, or the device programs disagree on their collectives; errors of
  /// the layouts themselves (a Sharded axis beyond the rank: IndexError) as
  /// DistributedLayout throws them.
  DistributedCallable(const Fn& fn, std::vector<DistributedLayout> layouts, DistributedCompileOptions options = {});

  /// Runs every local device's plan, all at once. Arguments must have the
  /// compiled layouts (ValueError naming the argument otherwise). A rank that
  /// does not join a collective ends the call in CollectiveError after
  /// collective_timeout() seconds. Collective under mpiexec.
  std::vector<DistributedTensor> call(const std::vector<DistributedTensor>& args) const;
  template <class... A>
  std::vector<DistributedTensor> operator()(const A&... args) const {
    return call(std::vector<DistributedTensor>{args...});
  }
  /// Unchecked raw call: one contiguous buffer per local shard of each
  /// argument (argument 0's shards in local_devices() order, then argument
  /// 1's, ...), then one signal buffer per local device (signal_buffers(),
  /// or buffers like them). Returns one buffer per local shard of each
  /// result, in the same order. ValueError for a wrong buffer count.
  std::vector<Buffer> execute_raw(const std::vector<Buffer>& buffers) const;

  /// Signal buffers: one per local device (empty on a one-device mesh),
  /// allocated once per set of devices and shared by every callable on
  /// them. Each device's plan records its progress there (uint64 words:
  /// [0] calls started, [1] calls finished, [2] collectives completed in the
  /// current or last call), which a failed call reads to say how far each
  /// device got.
  const std::vector<Buffer>& signal_buffers() const { return signal_; }

  /// Capture/replay across devices: capture runs the call once with every
  /// device's segments captured (engine::Model::capture) and the
  /// collectives' results in buffers kept with the capture; replay(key,
  /// args) reruns it on the same argument buffers (ValueError otherwise)
  /// and rewrites the captured results, which capture returns. A segment
  /// that reads only weights and constants runs once at capture; replay keeps
  /// its results (rewrite such weights in place and they are stale).
  std::vector<DistributedTensor> capture(uint64_t key, const std::vector<DistributedTensor>& args) const;
  std::vector<DistributedTensor> replay(uint64_t key, const std::vector<DistributedTensor>& args) const;

  /// Writes `prefix`.plan (a text manifest: the mesh, every argument's and
  /// result's mapping, the collectives with their source and target layouts,
  /// the device plan file of every mesh device; format in plan_file.h), and
  /// per local device `prefix`.d<device>.plan (how its segments and
  /// collectives pass values) and one MEF file per segment that computes,
  /// `prefix`.d<device>.s<segment>.mef (jit/mef.h). Under mpiexec every
  /// process writes the same .plan and its own device's files. Returns the
  /// paths written, the .plan first. Read back with distributed::read.
  std::vector<std::string> export_mef(const std::string& prefix) const;

  /// Reads a program written by export_mef(prefix) (distributed::read is the
  /// same): `prefix`.plan, then for each mesh device this process holds its
  /// device plan and segment MEF files (under mpiexec each process reads its
  /// own device's), binding `weights` (one entry per shard, shard_weights();
  /// another registry than the exported one rebinds them). The callable has
  /// the exported mesh, mappings and collectives and computes the same bits.
  /// Every problem is a kiln::Error naming the file: ValueError
  /// "distributed::read: '<file>': line <n>: ..." for a missing, truncated,
  /// corrupted (checksum) or inconsistent plan (value ids, counts, a segment
  /// whose MEF signature does not match the values it reads and writes), and
  /// engine::read's errors for a bad MEF file; a missing weight as from_mef.
  static DistributedCallable from_mef(const std::string& prefix, std::map<std::string, Tensor> weights = {},
                                      std::shared_ptr<InferenceSession> session = nullptr);

  const std::vector<DistributedLayout>& in_layouts() const { return in_; }
  const std::vector<DistributedLayout>& out_layouts() const { return out_; }
  const DeviceMesh& mesh() const { return in_.front().mapping.mesh(); }
  /// Mesh devices whose programs this process runs, ascending.
  const std::vector<int64_t>& local_devices() const { return local_; }
  /// Collectives per device program, and compiled segments of device `d`'s.
  int64_t num_collectives() const { return static_cast<int64_t>(collectives_.size()); }
  int64_t num_segments(int64_t local_index) const;
  /// The collectives in order, as "all-reduce Partial(sum) -> Replicated ..." lines.
  std::string describe() const;

 private:
  struct Segment;
  struct DeviceProgram;
  struct FromPlan {};
  DistributedCallable(FromPlan, const std::string& prefix, const std::map<std::string, Tensor>& weights,
                      const std::shared_ptr<InferenceSession>& session);
  struct Collective {
    DistributedLayout from, to;
  };
  struct Captured;
  /// How a call runs: plainly, capturing into `cap` under `key`, or replaying `cap`.
  struct RunMode {
    enum Kind : uint8_t { run, capture, replay } kind = run;
    uint64_t key = 0;
    Captured* cap = nullptr;
  };
  // Runs local device k's plan on its argument shards; returns its result shards.
  std::vector<Tensor> run_device(size_t k, Communicator& comm, const std::vector<Tensor>& shards,
                                 const Buffer& signal, const RunMode& m) const;
  // Every local device's plan at once (one thread each); per device its results.
  std::vector<std::vector<Tensor>> run_all(const std::vector<std::vector<Tensor>>& shards,
                                           const std::vector<Buffer>& signals, const RunMode& m) const;
  std::vector<DistributedTensor> wrap_results(std::vector<std::vector<Tensor>> per_device) const;
  std::vector<std::vector<Tensor>> shards_of(const std::vector<DistributedTensor>& args) const;

  std::vector<DistributedLayout> in_, out_;
  std::vector<int64_t> local_;
  std::vector<Collective> collectives_;
  std::vector<std::shared_ptr<DeviceProgram>> programs_;  // per local device
  std::vector<Buffer> signal_;
  std::string name_;
  mutable std::mutex cap_mu_;
  mutable std::map<uint64_t, std::shared_ptr<Captured>> captures_;
};

namespace detail {
template <class R>
std::vector<DistributedTensor> as_results(R r) {
  if constexpr (std::is_same_v<R, DistributedTensor>) return {std::move(r)};
  else return std::vector<DistributedTensor>(std::move(r));
}
template <class F, size_t... I>
DistributedCallable::Fn wrap_fn(F fn, std::index_sequence<I...>) {
  return [fn](const std::vector<DistributedTensor>& a) {
    (void)a;
    return as_results(fn(a[I]...));
  };
}
}  // namespace detail

/// distributed::compile(fn, options)(layouts...): fn takes one
/// DistributedTensor per layout and returns a DistributedTensor or a
/// std::vector of them.
template <class F>
class DistributedCompiler {
 public:
  DistributedCompiler(F fn, DistributedCompileOptions o) : fn_(std::move(fn)), opts_(std::move(o)) {}
  template <class... L>
  DistributedCallable operator()(const L&... layouts) const {
    return DistributedCallable(detail::wrap_fn(fn_, std::index_sequence_for<L...>{}),
                               std::vector<DistributedLayout>{DistributedLayout(layouts)...}, opts_);
  }

 private:
  F fn_;
  DistributedCompileOptions opts_;
};

template <class F>
DistributedCompiler<F> compile(F fn, DistributedCompileOptions options = {}) {
  return DistributedCompiler<F>(std::move(fn), std::move(options));
}

/// Reads a program exported by DistributedCallable::export_mef(prefix):
/// DistributedCallable::from_mef (errors there).
inline DistributedCallable read(const std::string& prefix, std::map<std::string, Tensor> weights = {},
                                std::shared_ptr<InferenceSession> session = nullptr) {
  return DistributedCallable::from_mef(prefix, std::move(weights), std::move(session));
}

/// The key of distributed::jit's cache: every argument's dtype, global shape
/// and mapping (mesh devices, shape, axis names and placements).
std::string jit_key(const std::vector<DistributedLayout>& layouts);

/// distributed::jit(fn): compiles on the first call for each key (jit_key
/// of the arguments' layouts) and runs. Copies share one cache.
template <class F>
class DistributedJit {
 public:
  DistributedJit(F fn, DistributedCompileOptions o)
      : fn_(std::move(fn)), opts_(std::move(o)), cache_(std::make_shared<Cache>()) {}
  template <class... A>
  std::vector<DistributedTensor> operator()(const A&... args) const {
    const std::vector<DistributedLayout> ls{args.layout()...};
    const std::string key = jit_key(ls);
    std::shared_ptr<const DistributedCallable> c;
    {
      std::lock_guard<std::mutex> lk(cache_->mu);
      auto it = cache_->map.find(key);
      if (it != cache_->map.end()) c = it->second;
    }
    if (!c) {
      auto made = std::make_shared<const DistributedCallable>(
          detail::wrap_fn(fn_, std::index_sequence_for<A...>{}), ls, opts_);
      std::lock_guard<std::mutex> lk(cache_->mu);
      c = cache_->map.emplace(key, made).first->second;
      ++cache_->compiles;
    }
    return c->call(std::vector<DistributedTensor>{args...});
  }
  /// Number of compiles so far (one per distinct key).
  int64_t compiles() const {
    std::lock_guard<std::mutex> lk(cache_->mu);
    return cache_->compiles;
  }

 private:
  struct Cache {
    std::mutex mu;
    std::map<std::string, std::shared_ptr<const DistributedCallable>> map;
    int64_t compiles = 0;
  };
  F fn_;
  DistributedCompileOptions opts_;
  std::shared_ptr<Cache> cache_;
};

template <class F>
DistributedJit<F> jit(F fn, DistributedCompileOptions options = {}) {
  return DistributedJit<F>(std::move(fn), std::move(options));
}

}  // namespace kiln::distributed
