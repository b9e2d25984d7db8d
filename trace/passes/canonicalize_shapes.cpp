// Shape canonicalisation: rewrites attributes to one normal form per
// meaning, so that CSE sees `sum(x, axes=[-1])` and `sum(x, axes=[1])` as the
// same node. Every rewrite is re-checked with infer_layout: a node whose
// normalised attributes would give another type is left as it was.
#include <algorithm>
#include <utility>

#include "passes.h"
#include "rewriter.h"

namespace kiln {
namespace {

// Maps an axis in [-nd, nd) to [0, nd); false when out of range (then the
// node is left alone; verify() would have refused it anyway).
bool norm_axis(int64_t& a, int64_t nd) {
  if (a < -nd || a >= nd) return false;
  if (a < 0) a += nd;
  return true;
}

bool norm_axes(std::vector<int64_t>& axes, int64_t nd, bool as_set) {
  for (int64_t& a : axes)
    if (!norm_axis(a, nd)) return false;
  if (as_set) {
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  }
  return true;
}

// The canonical attributes of op node `n`; false when they cannot be formed.
bool canonical_attrs(const Graph& g, const Node& n, Attrs& a) {
  const Shape& s = g.type(n.inputs.at(0)).shape;
  const int64_t nd = static_cast<int64_t>(s.size());
  switch (op_info(n.op).category) {
    case OpCategory::Reduce: return norm_axes(a.ints, nd, /*as_set=*/true);
    case OpCategory::Scan: return norm_axis(a.axis, nd);
    case OpCategory::RowNorm:
      // layer_norm/rms_norm work on the last axis and read no axis attribute
      return n.op == OpId::LayerNorm || n.op == OpId::RmsNorm || norm_axis(a.axis, nd);
    case OpCategory::View:
      switch (n.op) {
        case OpId::Reshape: a.ints = g.type(n.outputs[0]).shape; return true;
        case OpId::Permute: return norm_axes(a.ints, nd, /*as_set=*/false);
        case OpId::Squeeze:
        case OpId::Flip: return norm_axes(a.ints, nd, /*as_set=*/true);
        case OpId::Slice: return norm_axis(a.axis, nd);
        case OpId::Select:
          return norm_axis(a.axis, nd) && a.ints.size() == 1 && norm_axis(a.ints[0], s[static_cast<size_t>(a.axis)]);
        case OpId::Unsqueeze: return norm_axis(a.axis, nd + 1);
        default: return true;
      }
    case OpCategory::Data:
      if (n.op == OpId::Concat || n.op == OpId::Gather || n.op == OpId::IndexSelect || n.op == OpId::TopK)
        return norm_axis(a.axis, nd);
      if (n.op == OpId::Cross) return norm_axis(a.axis, static_cast<int64_t>(g.type(n.outputs[0]).shape.size()));
      return true;  // one_hot's axis is the class count, tril/triu/diag's the diagonal offset
    default: return true;
  }
}

}  // namespace

bool detail::run_canonicalize_shapes(Graph& g) {
  bool changed = false;
  std::vector<TensorLayout> in;
  Attrs a;  // scratch: copy-assigning reuses its axis list, so no allocation per node
  for (Node& n : g.mutable_nodes()) {
    if (n.kind != NodeKind::op || n.inputs.empty()) continue;
    a = n.attrs;
    if (!canonical_attrs(g, n, a) || same_attrs(a, n.attrs)) continue;
    in.clear();
    for (int32_t v : n.inputs) in.push_back(g.type(v).layout());
    try {
      if (!(TensorType(infer_layout(n.op, in, a)) == g.type(n.outputs[0]))) continue;
    } catch (const Error&) {
      continue;
    }
    std::swap(n.attrs, a);
    changed = true;
  }
  return changed;
}

void canonicalize_shapes(Graph& g) { detail::run_canonicalize_shapes(g); }

}  // namespace kiln
