#include "sharded_tensor.h"

#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "../tensor/cpu_devices.h"
#include "box.h"
#include "in_process.h"
#include "init.h"
#include "redistribute_step.h"

namespace kiln::distributed {

namespace detail {

namespace {

using GroupKey = std::vector<std::pair<int, int>>;
std::mutex& group_cache_mu() {
  static std::mutex mu;
  return mu;
}
std::map<GroupKey, std::shared_ptr<MeshGroup>>& group_cache() {
  static std::map<GroupKey, std::shared_ptr<MeshGroup>> cache;
  return cache;
}
GroupKey group_key(const DeviceMesh& mesh) {
  GroupKey key;
  for (Device d : mesh.devices()) key.push_back({int(d.type), d.index});
  return key;
}

thread_local ShardTrace* t_trace = nullptr;

}  // namespace

ShardTrace* current_shard_trace() { return t_trace; }

ShardTraceScope::ShardTraceScope(ShardTrace& t) {
  if (t_trace) throw ValueError("distributed: a device program is already being traced on this thread");
  t_trace = &t;
}
ShardTraceScope::~ShardTraceScope() { t_trace = nullptr; }

void drop_group(const DeviceMesh& mesh, const std::shared_ptr<MeshGroup>& g) {
  std::lock_guard<std::mutex> lk(group_cache_mu());
  auto it = group_cache().find(group_key(mesh));
  if (it != group_cache().end() && it->second == g) group_cache().erase(it);
}

std::shared_ptr<MeshGroup> group_for(const DeviceMesh& mesh) {
  if (ShardTrace* tr = current_shard_trace()) {
    // Tracing one device's part of a compiled program: that device alone is local.
    auto g = std::make_shared<MeshGroup>();
    g->local = {tr->device};
    g->devices = {mesh.devices()[tr->device]};
    g->comms = {nullptr};
    return g;
  }
  auto w = world();
  if (w->size() > 1) {
    if (mesh.size() != w->size())
      throw NotBuiltError("distributed: a mesh of " + std::to_string(mesh.size()) + " devices on " +
                          std::to_string(w->size()) +
                          " processes; under MPI each process holds exactly one mesh device for now (mesh size = "
                          "number of processes)");
    static std::once_flag once;
    static std::shared_ptr<MeshGroup> g;
    std::call_once(once, [&] {
      g = std::make_shared<MeshGroup>();
      g->local = {w->rank()};
      g->devices = {mesh.devices()[w->rank()]};
      g->comms = {w};
    });
    return g;
  }
  // One process: one in-process group per device list, made once (and made
  // again after a collective on it failed: a timed-out group stays broken).
  std::lock_guard<std::mutex> lk(group_cache_mu());
  auto& g = group_cache()[group_key(mesh)];
  if (!g) {
    g = std::make_shared<MeshGroup>();
    g->comms = make_in_process_group(static_cast<int>(mesh.size()));
    for (int64_t i = 0; i < mesh.size(); ++i) g->local.push_back(i);
    g->devices = mesh.devices();
  }
  return g;
}

void for_each_local(const MeshGroup& g, const std::function<void(size_t)>& fn) {
  const size_t n = g.local.size();
  if (n == 1) return fn(0);
  std::vector<std::exception_ptr> errs(n);
  auto one = [&](size_t k) {
    try {
      fn(k);
    } catch (...) {
      errs[k] = std::current_exception();
    }
  };
  bool cpu = g.devices.size() == n;
  for (const Device& d : g.devices) cpu = cpu && d.is_cpu();
  if (cpu) {
    run_on_cpu_devices(g.devices, one);
  } else {
    std::vector<std::thread> th;
    th.reserve(n);
    for (size_t k = 0; k < n; ++k) th.emplace_back(one, k);
    for (auto& t : th) t.join();
  }
  // A rank that failed first makes the others fail with "group broken"; prefer
  // an error that is not a CollectiveError (the cause).
  std::exception_ptr first;
  for (auto& e : errs) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const CollectiveError&) {
      if (!first) first = e;
    } catch (...) {
      std::rethrow_exception(e);
    }
  }
  if (first) std::rethrow_exception(first);
}

namespace {

Box box_of(const DistributedLayout& l, int64_t i) { return {l.shard_offset(i), l.shard_shape(i)}; }
int64_t numel_of(const Shape& s) { return checked_numel(s); }

// The one reduction of a layout's Partial axes, if any (several Partial
// axes must agree).
std::optional<ReduceOp> partial_op(const DistributedLayout& l, const char* who) {
  std::optional<ReduceOp> op;
  for (const auto& p : l.mapping.placements()) {
    if (!p.is_partial()) continue;
    if (op && *op != p.op)
      throw NotBuiltError(std::string(who) + ": Partial placements with different reductions on two mesh axes (" +
                          l.mapping.str() + ") are not supported");
    op = p.op;
  }
  return op;
}

bool all_replicated(const DistributedLayout& l) {
  for (const auto& p : l.mapping.placements())
    if (!p.is_replicated()) return false;
  return true;
}

// y (shard r of `to`) from the whole tensor `full`.
void from_full(const DistributedLayout& to, int64_t r, const void* full, void* y) {
  const size_t isz = size_of(to.dtype);
  const Box b = box_of(to, r);
  const auto c = to.mapping.mesh().coords(r);
  const auto& ps = to.mapping.placements();
  for (size_t a = 0; a < ps.size(); ++a)
    if (ps[a].is_partial() && ps[a].op == ReduceOp::sum && c[a] != 0) {
      // The identity of sum: the value lives at coordinate 0 of the axis.
      std::memset(y, 0, numel_of(b.extent) * isz);
      return;
    }
  copy_box(full, to.shape, b.offset, y, b.extent, Shape(b.extent.size(), 0), b.extent, isz);
}

// full = the whole tensor, from every rank's shard x of `from`.
void gather_full(Communicator& c, const DistributedLayout& from, int64_t r, const void* x, void* full) {
  const size_t isz = size_of(from.dtype);
  const int64_t P = from.num_shards();
  int64_t slot = 0;
  for (int64_t i = 0; i < P; ++i) slot = std::max(slot, numel_of(from.shard_shape(i)));
  std::vector<std::byte> send(slot * isz), recv(slot * isz * P);
  std::memcpy(send.data(), x, numel_of(from.shard_shape(r)) * isz);
  c.all_gather(send.data(), recv.data(), slot, from.dtype);
  const auto op = partial_op(from, "redistribute");
  const auto& ps = from.mapping.placements();
  const Shape zero(from.shape.size(), 0);
  for (int64_t i = 0; i < P; ++i) {
    const auto ci = from.mapping.mesh().coords(i);
    bool dup = false, first = true;
    for (size_t a = 0; a < ps.size(); ++a) {
      if (ps[a].is_replicated() && ci[a] != 0) dup = true;  // a copy of coordinate 0's
      if (ps[a].is_partial() && ci[a] != 0) first = false;
    }
    if (dup) continue;
    const Box b = box_of(from, i);
    const std::byte* piece = recv.data() + i * slot * isz;
    // Devices differing only on Partial axes come in rank order, coordinate 0 first.
    if (first) copy_box(piece, b.extent, zero, full, from.shape, b.offset, b.extent, isz);
    else combine_box(piece, b.extent, zero, full, from.shape, b.offset, b.extent, from.dtype, *op);
  }
}

}  // namespace

void step(Communicator& c, int64_t r, const DistributedLayout& from, const void* x, const DistributedLayout& to,
          void* y) {
  const size_t isz = size_of(from.dtype);
  const int64_t P = from.num_shards();
  if (from.mapping.mesh().ndim() == 1) {
    const Placement pf = from.mapping.placements()[0], pt = to.mapping.placements()[0];
    if (pf.is_partial() && pt.is_replicated()) {
      c.all_reduce(x, y, numel_of(from.shape), from.dtype, pf.op);
      return;
    }
    if (pf.is_partial() && pt.is_sharded()) {
      int64_t slot = 0;
      for (int64_t j = 0; j < P; ++j) slot = std::max(slot, numel_of(to.shard_shape(j)));
      std::vector<std::byte> send(slot * isz * P), recv(slot * isz);
      const Shape zero(to.shape.size(), 0);
      for (int64_t j = 0; j < P; ++j) {
        const Box b = box_of(to, j);
        copy_box(x, from.shape, b.offset, send.data() + j * slot * isz, b.extent, zero, b.extent, isz);
      }
      c.reduce_scatter(send.data(), recv.data(), slot, from.dtype, pf.op);
      std::memcpy(y, recv.data(), numel_of(to.shard_shape(r)) * isz);
      return;
    }
    if (pf.is_sharded() && pt.is_sharded()) {
      // Rank i sends rank j the intersection of its shard with j's target shard.
      int64_t slot = 0;
      for (int64_t i = 0; i < P; ++i)
        for (int64_t j = 0; j < P; ++j) slot = std::max(slot, numel_of(intersect(box_of(from, i), box_of(to, j)).extent));
      std::vector<std::byte> send(slot * isz * P), recv(slot * isz * P);
      const Box mine = box_of(from, r), target = box_of(to, r);
      const Shape zero(to.shape.size(), 0);
      for (int64_t j = 0; j < P; ++j) {
        const Box p = intersect(mine, box_of(to, j));
        copy_box(x, mine.extent, minus(p.offset, mine.offset), send.data() + j * slot * isz, p.extent, zero, p.extent,
                 isz);
      }
      c.all_to_all(send.data(), recv.data(), slot, from.dtype);
      for (int64_t i = 0; i < P; ++i) {
        const Box p = intersect(box_of(from, i), target);
        copy_box(recv.data() + i * slot * isz, p.extent, zero, y, target.extent, minus(p.offset, target.offset),
                 p.extent, isz);
      }
      return;
    }
  }
  // General: the whole tensor, then this rank's part of the target.
  if (all_replicated(from)) return from_full(to, r, x, y);
  if (all_replicated(to)) return gather_full(c, from, r, x, y);
  std::vector<std::byte> full(numel_of(from.shape) * isz);
  gather_full(c, from, r, x, full.data());
  from_full(to, r, full.data(), y);
}

namespace {

// The layouts from `from` to `to` changing one mesh axis at a time: axes
// whose target is Replicated or Partial first (they free tensor axes), then
// the rest. Empty when an intermediate is not a valid layout (one tensor axis
// sharded by two mesh axes); the caller then gathers.
std::vector<std::pair<int64_t, DistributedLayout>> axis_path(const DistributedLayout& from,
                                                              const DistributedLayout& to) {
  std::vector<int64_t> order;
  const auto& pf = from.mapping.placements();
  const auto& pt = to.mapping.placements();
  for (int pass = 0; pass < 2; ++pass)
    for (size_t a = 0; a < pf.size(); ++a)
      if (!(pf[a] == pt[a]) && (pt[a].is_sharded() == (pass == 1))) order.push_back(int64_t(a));
  std::vector<std::pair<int64_t, DistributedLayout>> path;
  DistributedLayout cur = from;
  for (int64_t a : order) {
    auto ps = cur.mapping.placements();
    ps[a] = pt[a];
    try {
      cur = DistributedLayout(from.dtype, from.shape, DeviceMapping(from.mapping.mesh(), ps));
    } catch (const Error&) {
      return {};
    }
    path.emplace_back(a, cur);
  }
  return path;
}

// Device r's line along mesh axis a, as a 1-d layout: the block that r's
// line holds (placement a made Replicated) placed by placement a.
DistributedLayout line_layout(const DistributedLayout& l, int64_t a, int64_t r) {
  const DeviceMesh& mesh = l.mapping.mesh();
  auto ps = l.mapping.placements();
  const Placement pa = ps[a];
  ps[a] = Replicated();
  const Shape block = DistributedLayout(l.dtype, l.shape, DeviceMapping(mesh, ps)).shard_shape(r);
  auto c = mesh.coords(r);
  std::vector<Device> line;
  for (int64_t i = 0; i < mesh.shape()[a]; ++i) {
    c[a] = i;
    int64_t flat = 0;
    for (size_t d = 0; d < c.size(); ++d) flat = flat * mesh.shape()[d] + c[d];
    line.push_back(mesh.devices()[flat]);
  }
  return DistributedLayout(l.dtype, block, DeviceMapping(DeviceMesh(std::move(line), "line"), {pa}));
}

// The communicators along mesh axis a (made once per group, collectively).
const std::vector<std::shared_ptr<Communicator>>& axis_comms(MeshGroup& g, const DeviceMesh& mesh, int64_t a) {
  std::lock_guard<std::mutex> lk(g.mu);
  auto it = g.axis_comms.find(a);
  if (it != g.axis_comms.end()) return it->second;
  std::vector<std::shared_ptr<Communicator>> comms(g.local.size());
  for_each_local(g, [&](size_t k) {
    auto c = mesh.coords(g.local[k]);
    const int key = static_cast<int>(c[a]);
    c[a] = 0;
    int64_t color = 0;
    for (size_t d = 0; d < c.size(); ++d) color = color * mesh.shape()[d] + c[d];
    comms[k] = g.comms[k]->split(static_cast<int>(color), key);
  });
  return g.axis_comms[a] = std::move(comms);
}

}  // namespace
}  // namespace detail

using detail::MeshGroup;

DistributedTensor DistributedTensor::from_shards(const DistributedLayout& layout, std::vector<Tensor> shards) {
  detail::partial_op(layout, "DistributedTensor");
  DistributedTensor t;
  t.layout_ = layout;
  t.group_ = detail::group_for(layout.mapping.mesh());
  const auto& local = t.group_->local;
  if (shards.size() != local.size())
    throw ValueError("DistributedTensor::from_shards: expected " + std::to_string(local.size()) +
                     " shard(s) (the mesh devices this process holds), got " + std::to_string(shards.size()));
  t.shards_.resize(layout.num_shards());
  for (size_t k = 0; k < local.size(); ++k) {
    const int64_t i = local[k];
    const Tensor& s = shards[k];
    const std::string who = "DistributedTensor::from_shards: shard " + std::to_string(i);
    if (!s.defined()) throw ValueError(who + " is an undefined tensor");
    if (s.dtype() != layout.dtype)
      throw DTypeError(who + ": expected dtype " + std::string(name(layout.dtype)) + ", got " +
                       std::string(name(s.dtype())));
    if (s.shape() != layout.shard_shape(i))
      throw ShapeError(who + " of " + layout.str() + ": expected shape " + shape_str(layout.shard_shape(i)) +
                       ", got " + shape_str(s.shape()));
    const Device want = layout.mapping.mesh().devices()[i];
    if (!(s.device() == want))
      throw DeviceError(who + ": expected a tensor on " + device_name(want) + ", got one on " + device_name(s.device()));
    t.shards_[i] = shards[k];
  }
  return t;
}

const std::vector<int64_t>& DistributedTensor::local_shards() const {
  static const std::vector<int64_t> none;
  return group_ ? group_->local : none;
}

bool DistributedTensor::is_local(int64_t i) const {
  return i >= 0 && i < static_cast<int64_t>(shards_.size()) && shards_[i].defined();
}

int64_t DistributedTensor::check_index(int64_t i, const char* what) const {
  if (i < 0 || i >= num_shards())
    throw IndexError(std::string("DistributedTensor::") + what + ": shard " + std::to_string(i) + " is outside [0, " +
                     std::to_string(num_shards()) + ")");
  return i;
}

const Tensor& DistributedTensor::shard(int64_t i) const {
  check_index(i, "shard");
  if (!is_local(i))
    throw ValueError("DistributedTensor::shard: shard " + std::to_string(i) +
                     " is held by another process (this process holds mesh device(s) " +
                     std::to_string(local_shards().empty() ? -1 : local_shards()[0]) + ")");
  return shards_[i];
}

DistributedTensor DistributedTensor::redistribute(const DeviceMapping& to_mapping) const {
  if (!defined()) throw ValueError("DistributedTensor::redistribute: undefined tensor");
  if (!(to_mapping.mesh() == mesh()))
    throw ValueError("DistributedTensor::redistribute: the target mesh " + to_mapping.mesh().str() +
                     " is not the tensor's mesh " + mesh().str() + " (moving between meshes is not supported)");
  const DistributedLayout to(dtype(), shape(), to_mapping);  // validates Sharded axes
  detail::partial_op(to, "redistribute");
  if (to.mapping == mapping()) return *this;
  if (detail::ShardTrace* tr = detail::current_shard_trace()) {
    // Tracing a device's part of a compiled program: the collective becomes
    // a step of the plan (compiled.h); its result is a new graph input here.
    const int64_t d = tr->device;
    if (num_shards() == 1) return from_shards(to, {shard(d)});  // one device: every placement is the whole tensor
    const GraphValue src = tr->ctx->value_of(shard(d));
    const GraphValue dst =
        tr->ctx->graph().add_input(TensorType(dtype(), to.shard_shape(d), mesh().devices()[d]));
    tr->collectives.push_back({src.id, dst.id, layout_, to});
    return from_shards(to, {tr->ctx->create_unrealized({dst})});
  }
  const auto& local = group_->local;
  std::vector<Tensor> in(local.size()), out(local.size());
  std::vector<const void*> xs(local.size());
  std::vector<void*> ys(local.size());
  for (size_t k = 0; k < local.size(); ++k) {
    in[k] = shards_[local[k]].contiguous();
    xs[k] = in[k].data_ptr();
    out[k] = Tensor::empty(to.shard_shape(local[k]), dtype(), mesh().devices()[local[k]]);
    ys[k] = out[k].data_ptr();
  }
  try {
    // n-d meshes: one mesh axis at a time, over that axis's sub-groups.
    std::vector<std::pair<int64_t, DistributedLayout>> path;
    if (mesh().ndim() > 1) path = detail::axis_path(layout_, to);
    if (!path.empty()) {
      std::vector<const std::vector<std::shared_ptr<Communicator>>*> comms;
      for (const auto& [a, l] : path) comms.push_back(&detail::axis_comms(*group_, mesh(), a));
      detail::for_each_local(*group_, [&](size_t k) {
        const int64_t r = local[k];
        const auto c = mesh().coords(r);
        std::vector<std::byte> cur, next;
        const void* x = xs[k];
        const DistributedLayout* from = &layout_;
        for (size_t s = 0; s < path.size(); ++s) {
          const auto& [a, l] = path[s];
          void* y = ys[k];
          if (s + 1 < path.size()) {
            next.resize(checked_numel(l.shard_shape(r)) * size_of(dtype()));
            y = next.data();
          }
          detail::step(*(*comms[s])[k], c[a], detail::line_layout(*from, a, r), x, detail::line_layout(l, a, r), y);
          cur.swap(next);
          x = cur.data();
          from = &l;
        }
      });
    } else {
      detail::for_each_local(*group_, [&](size_t k) {
        detail::step(*group_->comms[k], local[k], layout_, xs[k], to, ys[k]);
      });
    }
  } catch (const CollectiveError&) {
    if (group_->local.size() > 1) detail::drop_group(mesh(), group_);  // the next call gets a fresh group
    throw;
  }
  return from_shards(to, std::move(out));
}

Tensor DistributedTensor::full_tensor() const {
  if (!defined()) throw ValueError("DistributedTensor::full_tensor: undefined tensor");
  const DistributedTensor r = redistribute(DeviceMapping::replicated(mesh()));
  return r.shard(r.local_shards()[0]);
}

DistributedTensor distribute(const Tensor& t, const DeviceMapping& mapping) {
  if (!t.defined()) throw ValueError("distribute: undefined tensor");
  const DistributedLayout l(t.dtype(), t.shape(), mapping);
  detail::partial_op(l, "distribute");
  const Tensor tc = t.contiguous();
  auto g = detail::group_for(mapping.mesh());
  std::vector<Tensor> shards;
  for (int64_t i : g->local) {
    Tensor y = Tensor::empty(l.shard_shape(i), t.dtype(), mapping.mesh().devices()[i]);
    detail::from_full(l, i, tc.data_ptr(), y.data_ptr());
    shards.push_back(y);
  }
  return DistributedTensor::from_shards(l, std::move(shards));
}

}  // namespace kiln::distributed
