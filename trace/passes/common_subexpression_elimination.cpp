// Common-subexpression elimination: one walk in topological order with one
// hash set of the op and constant nodes seen so far. Inputs are rewritten to their merged values
// before a node is hashed, so chains of duplicates merge in the same walk.
#include <cstring>
#include <functional>
#include <string_view>

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

// An open-addressing set of node indices with their hashes stored inline:
// no allocation per node, and a probe touches a node only when the full
// hashes match (the node array of a big graph does not fit in cache).
class NodeSet {
 public:
  explicit NodeSet(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // The index of a node equal to node `i` (hash `h`) already in the set, or
  // -1 after inserting `i`.
  template <class Eq>
  int64_t find_or_insert(size_t h, size_t i, Eq&& eq) {
    // splitmix64's finaliser spreads the combined hash over the low bits
    uint64_t z = h;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    for (size_t k = z & mask_;; k = (k + 1) & mask_) {
      Slot& s = slots_[k];
      if (s.index < 0) {
        s = {h, static_cast<int64_t>(i)};
        return -1;
      }
      if (s.hash == h && eq(static_cast<size_t>(s.index))) return s.index;
    }
  }

 private:
  struct Slot {
    size_t hash = 0;
    int64_t index = -1;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace

bool detail::run_common_subexpression_elimination(Graph& g) {
  Rewriter rw(g);
  std::vector<Node>& nodes = rw.nodes();
  NodeSet seen(nodes.size());  // at most half full: every node is inserted at most once
  for (size_t i = 0; i < nodes.size(); ++i) {
    rw.read_inputs(i);
    const Node& n = nodes[i];
    if (n.kind != NodeKind::op && n.kind != NodeKind::constant) continue;
    if (n.kind == NodeKind::constant && !n.data.device().is_cpu()) continue;  // bytes not host-readable
    const int64_t j = seen.find_or_insert(hash_node(n), i, [&](size_t k) { return same_node(nodes[k], n); });
    if (j >= 0) rw.replace(i, nodes[static_cast<size_t>(j)].outputs[0]);
  }
  return rw.commit();
}

void common_subexpression_elimination(Graph& g) { detail::run_common_subexpression_elimination(g); }

}  // namespace kiln
