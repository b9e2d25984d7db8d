#include "sharding_rules.h"

#include <cstdlib>
#include <iostream>

#include "../tensor/ops.h"

namespace kiln::distributed {

namespace {

bool dump_on() {
  static const bool on = [] {
    const char* d = std::getenv("KILN_JIT_DUMP");
    return d && *d && std::string(d) != "0";
  }();
  return on;
}

const char* how(const Placement& from, const Placement& to) {
  if (to.is_replicated()) return from.is_partial() ? "all-reduce" : "all-gather";
  if (to.is_sharded()) return from.is_replicated() ? "local slice" : from.is_partial() ? "reduce-scatter" : "all-to-all";
  return "local";
}

// Redistributes operand `which` of op `op` on a 1-d mesh, saying so.
DistributedTensor move(const DistributedTensor& t, const Placement& to, const char* op, int which) {
  const Placement from = t.mapping().placements()[0];
  if (from == to) return t;
  if (dump_on())
    std::cerr << "sharding: " << op << ": operand " << which << " " << from.str() << " -> " << to.str() << " ("
              << how(from, to) << ")\n";
  return t.redistribute({to});
}

DistributedTensor gather_all(const DistributedTensor& t, const char* op, int which) {
  const DeviceMapping r = DeviceMapping::replicated(t.mesh());
  if (t.mapping() == r) return t;
  if (dump_on()) std::cerr << "sharding: " << op << ": operand " << which << " " << t.mapping().str() << " -> Replicated\n";
  return t.redistribute(r);
}

void check_same_mesh(const DistributedTensor& a, const DistributedTensor& b, const char* op) {
  if (!a.defined() || !b.defined()) throw ValueError(std::string(op) + ": undefined DistributedTensor");
  if (!(a.mesh() == b.mesh()))
    throw ValueError(std::string(op) + ": operands are on different meshes: " + a.mesh().str() + " and " +
                     b.mesh().str());
}

}  // namespace

DistributedTensor map_shards(const DistributedTensor& x, const std::function<Tensor(const Tensor&)>& f,
                             const char* op_name) {
  if (!x.defined()) throw ValueError(std::string(op_name) + ": undefined DistributedTensor");
  DistributedTensor in = x;
  if (x.mapping().has_partial() || x.mesh().ndim() != 1) in = gather_all(x, op_name, 0);
  std::vector<Tensor> out;
  for (int64_t i : in.local_shards()) out.push_back(f(in.shard(i)));
  const Tensor& o = out.front();
  // Elementwise: the global shape is the input's.
  if (o.shape() != in.local_shape(in.local_shards().front()))
    throw ShapeError(std::string(op_name) + ": map_shards needs a shape-preserving op");
  const DistributedLayout l(o.dtype(), in.shape(), in.mapping());  // before `out` moves
  return DistributedTensor::from_shards(l, std::move(out));
}

DistributedTensor elementwise(const DistributedTensor& a0, const DistributedTensor& b0,
                              const std::function<Tensor(const Tensor&, const Tensor&)>& f, bool additive,
                              const char* op) {
  check_same_mesh(a0, b0, op);
  const Shape out = broadcast_shapes(a0.shape(), b0.shape(), op);  // throws for shapes that do not broadcast
  // f on every local pair of shards; the result has the global shape `out`
  // and placement p.
  auto run = [&](const DistributedTensor& a, const DistributedTensor& b, const Placement& p) {
    std::vector<Tensor> res;
    for (int64_t i : a.local_shards()) res.push_back(f(a.shard(i), b.shard(i)));
    const DistributedLayout l(res.front().dtype(), out, DeviceMapping(a.mesh(), {p}));  // before res moves
    return DistributedTensor::from_shards(l, std::move(res));
  };
  if (a0.mesh().ndim() != 1 || a0.num_shards() == 1) {
    DistributedTensor a = gather_all(a0, op, 0), b = gather_all(b0, op, 1);
    return run(a, b, Replicated());
  }
  DistributedTensor a = a0, b = b0;
  Placement pa = a.mapping().placements()[0], pb = b.mapping().placements()[0];
  if (pa.is_partial() || pb.is_partial()) {
    if (additive && pa == Partial(ReduceOp::sum) && pb == pa) return run(a, b, pa);
    if (pa.is_partial()) a = move(a, Replicated(), op, 0), pa = Replicated();
    if (pb.is_partial()) b = move(b, Replicated(), op, 1), pb = Replicated();
  }
  const int64_t ra = int64_t(a.shape().size()), rb = int64_t(b.shape().size()), r = std::max(ra, rb);
  // A sharded operand's axis in the output's numbering; a sharded axis that
  // broadcasts (extent 1 against more) cannot stay sharded.
  auto out_axis = [&](const Placement& p, int64_t rank, const Shape& s) -> int64_t {
    const int64_t ax = p.axis + (r - rank);
    return s[p.axis] == out[ax] ? ax : -1;
  };
  if (pa.is_sharded() && out_axis(pa, ra, a.shape()) < 0) a = move(a, Replicated(), op, 0), pa = Replicated();
  if (pb.is_sharded() && out_axis(pb, rb, b.shape()) < 0) b = move(b, Replicated(), op, 1), pb = Replicated();
  if (pa.is_replicated() && pb.is_replicated()) return run(a, b, Replicated());
  // Make operand 1 follow operand 0 when both are sharded differently.
  if (pa.is_sharded() && pb.is_sharded() && out_axis(pa, ra, a.shape()) != out_axis(pb, rb, b.shape())) {
    const int64_t want = out_axis(pa, ra, a.shape()) - (r - rb);
    if (want >= 0 && b.shape()[want] == out[out_axis(pa, ra, a.shape())]) b = move(b, Sharded(want), op, 1), pb = Sharded(want);
    else b = move(b, Replicated(), op, 1), pb = Replicated();
  }
  const bool a_sh = pa.is_sharded();
  const int64_t ax = a_sh ? out_axis(pa, ra, a.shape()) : out_axis(pb, rb, b.shape());
  // The Replicated operand (if any) is sliced along the same output axis,
  // unless it broadcasts there.
  DistributedTensor& rep = a_sh ? b : a;
  Placement& prep = a_sh ? pb : pa;
  if (prep.is_replicated()) {
    const int64_t rr = int64_t(rep.shape().size()), local = ax - (r - rr);
    if (local >= 0 && rep.shape()[local] == out[ax]) rep = move(rep, Sharded(local), op, a_sh ? 1 : 0);
  }
  return run(a, b, Sharded(ax));
}

DistributedTensor add(const DistributedTensor& a, const DistributedTensor& b) {
  return elementwise(a, b, [](const Tensor& x, const Tensor& y) { return kiln::add(x, y); }, true, "add");
}
DistributedTensor sub(const DistributedTensor& a, const DistributedTensor& b) {
  return elementwise(a, b, [](const Tensor& x, const Tensor& y) { return kiln::sub(x, y); }, true, "sub");
}
DistributedTensor mul(const DistributedTensor& a, const DistributedTensor& b) {
  return elementwise(a, b, [](const Tensor& x, const Tensor& y) { return kiln::mul(x, y); }, false, "mul");
}
DistributedTensor relu(const DistributedTensor& x) {
  return map_shards(x, [](const Tensor& t) { return kiln::relu(t); }, "relu");
}

DistributedTensor matmul(const DistributedTensor& a0, const DistributedTensor& b0) {
  const char* op = "matmul";
  check_same_mesh(a0, b0, op);
  const int64_t ra = int64_t(a0.shape().size());
  if (b0.shape().size() != 2 || ra < 2)
    throw ShapeError("matmul (distributed): expected a [..., m, k] and b [k, n], got " + shape_str(a0.shape()) +
                     " and " + shape_str(b0.shape()));
  if (a0.shape()[ra - 1] != b0.shape()[0])
    throw ShapeError("matmul (distributed): a " + shape_str(a0.shape()) + " and b " + shape_str(b0.shape()) +
                     " do not multiply (k " + std::to_string(a0.shape()[ra - 1]) + " vs " +
                     std::to_string(b0.shape()[0]) + ")");
  Shape out = a0.shape();
  out.back() = b0.shape()[1];
  auto run = [&](const DistributedTensor& a, const DistributedTensor& b, const Placement& p) {
    std::vector<Tensor> res;
    for (int64_t i : a.local_shards()) res.push_back(kiln::matmul(a.shard(i), b.shard(i)));
    const DistributedLayout l(res.front().dtype(), out, DeviceMapping(a.mesh(), {p}));  // before res moves
    return DistributedTensor::from_shards(l, std::move(res));
  };
  if (a0.mesh().ndim() != 1 || a0.num_shards() == 1) return run(gather_all(a0, op, 0), gather_all(b0, op, 1), Replicated());
  DistributedTensor a = a0, b = b0;
  const Placement pa = a.mapping().placements()[0], pb = b.mapping().placements()[0];
  const Placement k_a = Sharded(ra - 1), k_b = Sharded(0), n_b = Sharded(1);
  const Placement sum = Partial(ReduceOp::sum);
  if (pa.is_replicated() && pb == n_b) return run(a, b, Sharded(ra - 1));         // column-parallel
  if (pa == k_a && pb == k_b) return run(a, b, sum);                              // row-parallel
  if (pa == k_a && pb.is_replicated()) return run(a, move(b, k_b, op, 1), sum);
  if (pa.is_replicated() && pb == k_b) return run(move(a, k_a, op, 0), b, sum);
  if (pa.is_sharded() && pa.axis < ra - 1 && pb.is_replicated()) return run(a, b, pa);  // batch / rows
  if ((pa == sum && pb.is_replicated()) || (pa.is_replicated() && pb == sum)) return run(a, b, sum);
  if (pa.is_replicated() && pb.is_replicated()) return run(a, b, Replicated());
  return run(gather_all(a, op, 0), gather_all(b, op, 1), Replicated());
}

}  // namespace kiln::distributed
