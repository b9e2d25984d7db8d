// kiln: eager ops on DistributedTensors, by sharding rule (MAX's per-op
// rules, the Megatron tensor-parallel layout): the op runs on every shard
// where the placements allow, and otherwise the operands are redistributed
// first. Every implicit redistribution is printed to stderr when
// KILN_JIT_DUMP is set ("sharding: add: operand 1 Replicated -> Sharded(1)
// (local slice)"). Rules are for 1-d meshes; on larger meshes the operands
// are gathered to Replicated (correct, not economical).
#pragma once
#include <functional>

#include "sharded_tensor.h"

namespace kiln::distributed {

/// A unary elementwise op (relu, exp, ...) on every shard: Sharded and
/// Replicated placements are kept. A Partial input is all-reduced first
/// (the op need not be linear).
DistributedTensor map_shards(const DistributedTensor& x, const std::function<Tensor(const Tensor&)>& f,
                             const char* op_name = "map");

/// A binary elementwise op with numpy broadcasting. Matching placements are
/// kept; Replicated against Sharded slices the Replicated operand locally
/// (or lets it broadcast when its axis has extent 1 or is missing); two
/// different Sharded axes move operand 1 to operand 0's; Partial(sum) with
/// Partial(sum) stays Partial only when `additive` (add, sub), and any other
/// Partial is all-reduced first. Both operands must be on one mesh
/// (ValueError otherwise).
DistributedTensor elementwise(const DistributedTensor& a, const DistributedTensor& b,
                              const std::function<Tensor(const Tensor&, const Tensor&)>& f, bool additive,
                              const char* op_name);
DistributedTensor add(const DistributedTensor& a, const DistributedTensor& b);
DistributedTensor sub(const DistributedTensor& a, const DistributedTensor& b);
DistributedTensor mul(const DistributedTensor& a, const DistributedTensor& b);
DistributedTensor relu(const DistributedTensor& x);

/// a [..., m, k] @ b [k, n] (b of rank 2) on a 1-d mesh:
/// - a Replicated, b Sharded(1) (column-parallel): Sharded(last) result;
/// - a Sharded(last) (k), b Sharded(0) (row-parallel): Partial(sum) result;
///   a Replicated (or b Replicated) against the other's k shards is sliced
///   locally to match;
/// - a Sharded on a batch or m axis, b Replicated: Sharded on that axis;
/// - Partial(sum) with Replicated: Partial(sum) (matmul is linear);
/// - otherwise both are gathered to Replicated first.
/// Throws what kiln::matmul throws for shapes that do not multiply.
DistributedTensor matmul(const DistributedTensor& a, const DistributedTensor& b);

/// sum / max / min over `axes` (empty: all axes), as kiln::sum/max/min, on a
/// 1-d mesh: reducing the Sharded axis gives Partial(sum|max|min) (no
/// communication; max/min gather first when a shard is empty); reducing
/// other axes keeps the Sharded placement (renumbered when !keepdim); a
/// Partial input stays Partial when the reductions agree (sum of sums, max
/// of maxes), otherwise it is reduced first.
DistributedTensor sum(const DistributedTensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
DistributedTensor max(const DistributedTensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
DistributedTensor min(const DistributedTensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);

/// softmax along `axis`: local on every shard when `axis` is not the Sharded
/// one; a Sharded `axis` or a Partial input is gathered first.
DistributedTensor softmax(const DistributedTensor& x, int64_t axis = -1);

/// An op with no sharding rule: every input is gathered to Replicated and
/// `f` runs on each device's copies; the result is Replicated. Correct for
/// any `f`, at the cost of the gathers.
DistributedTensor replicated_op(const std::vector<DistributedTensor>& in,
                                const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                const char* op_name = "op");

}  // namespace kiln::distributed
