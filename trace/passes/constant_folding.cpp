// Constant folding. Results come from the eager kernels themselves
// (detail::eager_execute), not from a float64 reference: a folded constant
// then holds exactly the bits eager execution of the same node would
// produce, so folding never changes a result (a float64 reference rounded
// to the result dtype can differ in the last bit from the float32 kernels).
#include <cstdint>
#include <optional>

#include "../realization_context.h"
#include "passes.h"
#include "rewriter.h"

namespace kiln {
namespace {

// True when `r` is contiguous (with the strides clone() gives), starts its
// storage, fills all of it, is the only handle on it, and its bytes overlap
// no argument's storage (a kernel could return a wrapped view of an input):
// then a clone would be an equal, private copy and can be skipped.
bool owns_private_storage(const Tensor& r, const std::vector<Tensor>& args) {
  if (!r.is_contiguous() || r.offset() != 0 || r.strides() != contiguous_strides(r.shape())) return false;
  const Buffer& b = r.buffer();
  if (b.use_count() != 1 || r.impl_ptr().use_count() != 1) return false;
  const size_t nb = static_cast<size_t>(r.numel()) * r.itemsize();
  if (b.nbytes() != nb) return false;
  if (nb == 0) return false;  // nothing to share, but no data pointer to compare either
  const auto lo = reinterpret_cast<std::uintptr_t>(b.data()), hi = lo + nb;
  for (const Tensor& a : args) {
    const Buffer& ab = a.buffer();
    const auto alo = reinterpret_cast<std::uintptr_t>(ab.data()), ahi = alo + ab.nbytes();
    if (ab == b || (alo < hi && lo < ahi)) return false;
  }
  return true;
}

}  // namespace

bool detail::run_constant_folding(Graph& g, int64_t max_elements) {
  Rewriter rw(g);
  std::vector<Node>& nodes = rw.nodes();
  // Kernels that call other ops internally must run them eagerly, not record
  // them into a graph context that happens to be current.
  std::optional<EagerRealizationContext> eager;
  std::optional<RealizationScope> scope;
  std::vector<Tensor> args;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    if (n.kind != NodeKind::op) continue;
    // The operands first: their producers are nodes just read (in cache),
    // while the result's shape is one more heap block per node.
    bool all_constant = true;
    for (int32_t v : n.inputs) {
      const Node& p = rw.producer(v);
      all_constant = all_constant && p.kind == NodeKind::constant && p.data.device().is_cpu();
    }
    if (!all_constant) continue;
    const TensorType& out = g.type(n.outputs[0]);
    if (!out.device.is_cpu() || checked_numel(out.shape) > max_elements) continue;
    args.clear();
    for (int32_t v : n.inputs) args.push_back(rw.producer(v).data);
    if (!eager) {
      eager.emplace();
      scope.emplace(*eager);
    }
    Tensor r;
    try {
      r = detail::eager_execute(n.op, args, n.attrs);
    } catch (const Error&) {
      continue;  // e.g. integer division by zero: left for run time to report
    }
    if (r.dtype() != out.dtype || r.shape() != out.shape) continue;  // defensive: never change a type
    // A private contiguous copy: eager views share the input constant's
    // storage. A fresh result that nothing else references is kept as is.
    n.kind = NodeKind::constant;
    n.data = owns_private_storage(r, args) ? std::move(r) : r.clone();
    n.inputs.clear();
    n.attrs = Attrs{};
    n.op = OpId{};
    rw.touched();
  }
  return rw.commit();
}

void constant_folding(Graph& g, int64_t max_elements) { detail::run_constant_folding(g, max_elements); }

}  // namespace kiln
