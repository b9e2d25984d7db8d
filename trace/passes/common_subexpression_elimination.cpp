// Common-subexpression elimination: one walk in topological order with a
// hash set per node kind. Inputs are rewritten to their merged values
// before a node is hashed, so chains of duplicates merge in the same walk.
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_set>

#include "passes.h"
#include "rewriter.h"

namespace kiln {
namespace {

size_t constant_bytes(const Tensor& t) { return static_cast<size_t>(t.numel()) * t.itemsize(); }

size_t hash_node(const Node& n) {
  size_t h = static_cast<size_t>(n.kind);
  if (n.kind == NodeKind::op) {
    h = detail::hash_mix(h, static_cast<size_t>(n.op));
    for (int32_t v : n.inputs) h = detail::hash_mix(h, std::hash<int32_t>()(v));
    return detail::hash_mix(h, detail::hash_attrs(n.attrs));
  }
  // constant: dtype, shape and the bytes (linear in the constant's size)
  const Tensor& d = n.data;
  h = detail::hash_mix(h, static_cast<size_t>(d.dtype()));
  for (int64_t e : d.shape()) h = detail::hash_mix(h, std::hash<int64_t>()(e));
  const size_t nb = constant_bytes(d);
  std::string_view bytes = nb ? std::string_view(static_cast<const char*>(d.data_ptr()), nb) : std::string_view();
  return detail::hash_mix(h, std::hash<std::string_view>()(bytes));
}

bool same_node(const Node& a, const Node& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == NodeKind::op) return a.op == b.op && a.inputs == b.inputs && detail::same_attrs(a.attrs, b.attrs);
  const Tensor &x = a.data, &y = b.data;
  if (x.dtype() != y.dtype() || x.shape() != y.shape() || !(x.device() == y.device())) return false;
  const size_t nb = constant_bytes(x);
  return nb == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), nb) == 0;
}

}  // namespace

bool detail::run_common_subexpression_elimination(Graph& g) {
  Rewriter rw(g);
  std::vector<Node>& nodes = rw.nodes();
  // The set holds node indices; hashes are computed once per node.
  std::vector<size_t> hashes(nodes.size(), 0);
  auto hash = [&](size_t i) { return hashes[i]; };
  auto eq = [&](size_t a, size_t b) { return same_node(nodes[a], nodes[b]); };
  std::unordered_set<size_t, decltype(hash), decltype(eq)> seen(nodes.size(), hash, eq);
  for (size_t i = 0; i < nodes.size(); ++i) {
    rw.read_inputs(i);
    const Node& n = nodes[i];
    if (n.kind != NodeKind::op && n.kind != NodeKind::constant) continue;
    if (n.kind == NodeKind::constant && !n.data.device().is_cpu()) continue;  // bytes not host-readable
    hashes[i] = hash_node(n);
    auto [it, inserted] = seen.insert(i);
    if (!inserted) rw.replace(i, nodes[*it].outputs[0]);
  }
  return rw.commit();
}

void common_subexpression_elimination(Graph& g) { detail::run_common_subexpression_elimination(g); }

}  // namespace kiln
