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

/// The mapping of a rule's result: placement p on a 1-d mesh. On a mesh of
/// several axes the rules gather their operands first, so p is Replicated
/// and holds on every axis.
DeviceMapping mapping_of(const DeviceMesh& mesh, const Placement& p) {
  if (mesh.ndim() == 1) return DeviceMapping(mesh, {p});
  return DeviceMapping(mesh, std::vector<Placement>(static_cast<size_t>(mesh.ndim()), p));
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
    const DistributedLayout l(res.front().dtype(), out, mapping_of(a.mesh(), p));  // before res moves
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
    const DistributedLayout l(res.front().dtype(), out, mapping_of(a.mesh(), p));  // before res moves
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

namespace {

// Runs f on every local shard of x; the result has global shape `g` and placement p.
DistributedTensor each(const DistributedTensor& x, const Shape& g, const Placement& p,
                       const std::function<Tensor(const Tensor&)>& f) {
  std::vector<Tensor> res;
  for (int64_t i : x.local_shards()) res.push_back(f(x.shard(i)));
  const DistributedLayout l(res.front().dtype(), g, mapping_of(x.mesh(), p));  // before res moves
  return DistributedTensor::from_shards(l, std::move(res));
}

DistributedTensor reduce(const DistributedTensor& x0, const std::vector<int64_t>& axes0, bool keepdim, ReduceOp kind,
                         const char* op) {
  if (!x0.defined()) throw ValueError(std::string(op) + ": undefined DistributedTensor");
  const int64_t rank = int64_t(x0.shape().size());
  std::vector<bool> reduced(rank, axes0.empty());
  for (int64_t a : axes0) reduced[normalize_axis(a, rank, op)] = true;
  Shape g;
  for (int64_t a = 0; a < rank; ++a)
    if (!reduced[a]) g.push_back(x0.shape()[a]);
    else if (keepdim) g.push_back(1);
  auto f = [&](const Tensor& t) {
    return kind == ReduceOp::sum ? kiln::sum(t, axes0, keepdim)
         : kind == ReduceOp::max ? kiln::max(t, axes0, keepdim) : kiln::min(t, axes0, keepdim);
  };
  DistributedTensor x = x0;
  if (x.mesh().ndim() != 1) x = gather_all(x, op, 0);
  Placement p = x.mapping().placements()[0];
  if (p.is_partial() && p.op != kind) x = move(x, Replicated(), op, 0), p = Replicated();
  if (p.is_partial()) return each(x, g, p, f);  // a sum of partial sums, a max of partial maxes
  if (p.is_replicated()) return each(x, g, p, f);
  if (reduced[p.axis]) {
    bool empty_shard = false;
    for (int64_t i = 0; i < x.num_shards(); ++i) empty_shard |= x.local_shape(i)[p.axis] == 0;
    if (empty_shard && kind != ReduceOp::sum) {  // max/min of nothing is an error, not an identity
      x = move(x, Replicated(), op, 0);
      return each(x, g, Replicated(), f);
    }
    return each(x, g, Partial(kind), f);
  }
  int64_t out_axis = p.axis;
  if (!keepdim)
    for (int64_t a = 0; a < p.axis; ++a) out_axis -= reduced[a] ? 1 : 0;
  return each(x, g, Sharded(out_axis), f);
}

}  // namespace

DistributedTensor sum(const DistributedTensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce(x, axes, keepdim, ReduceOp::sum, "sum");
}
DistributedTensor max(const DistributedTensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce(x, axes, keepdim, ReduceOp::max, "max");
}
DistributedTensor min(const DistributedTensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce(x, axes, keepdim, ReduceOp::min, "min");
}

DistributedTensor softmax(const DistributedTensor& x0, int64_t axis) {
  const char* op = "softmax";
  if (!x0.defined()) throw ValueError("softmax: undefined DistributedTensor");
  const int64_t ax = normalize_axis(axis, int64_t(x0.shape().size()), op);
  DistributedTensor x = x0;
  if (x.mesh().ndim() != 1) x = gather_all(x, op, 0);
  const Placement p = x.mapping().placements()[0];
  if (p.is_partial() || (p.is_sharded() && p.axis == ax)) x = move(x, Replicated(), op, 0);
  return each(x, x.shape(), x.mapping().placements()[0], [&](const Tensor& t) { return kiln::softmax(t, ax); });
}

DistributedTensor replicated_op(const std::vector<DistributedTensor>& in,
                                const std::function<Tensor(const std::vector<Tensor>&)>& f, const char* op) {
  if (in.empty()) throw ValueError(std::string(op) + ": replicated_op needs at least one input");
  std::vector<DistributedTensor> r;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i > 0) check_same_mesh(in[0], in[i], op);
    r.push_back(gather_all(in[i], op, int(i)));
  }
  std::vector<Tensor> res;
  for (int64_t d : r[0].local_shards()) {
    std::vector<Tensor> args;
    for (const auto& t : r) args.push_back(t.shard(d));
    res.push_back(f(args));
  }
  const DistributedLayout l(res.front().dtype(), res.front().shape(), DeviceMapping::replicated(r[0].mesh()));
  return DistributedTensor::from_shards(l, std::move(res));
}

}  // namespace kiln::distributed
