#include "rewriter.h"

#include <bit>
#include <functional>
#include <numeric>

namespace kiln::detail {

Rewriter::Rewriter(Graph& g) : g_(g), subst_(g.num_values()), removed_(g.num_nodes(), 0) {
  std::iota(subst_.begin(), subst_.end(), 0);
}

void Rewriter::read_inputs(size_t i) {
  for (int32_t& v : g_.mutable_nodes()[i].inputs) v = subst_[static_cast<size_t>(v)];
}

void Rewriter::replace(size_t i, int32_t value) {
  Node& n = g_.mutable_nodes()[i];
  // Substitutes are themselves final (they were read through subst_ when
  // their node was visited), so one lookup per use suffices.
  subst_[static_cast<size_t>(n.outputs.at(0))] = subst_[static_cast<size_t>(value)];
  removed_[i] = 1;
  any_removed_ = changed_ = true;
}

bool Rewriter::commit() {
  if (!any_removed_) return changed_;
  std::vector<int32_t> outs = g_.output_ids();
  for (int32_t& v : outs) v = subst_[static_cast<size_t>(v)];
  g_.remove_nodes(removed_, std::move(outs));
  return true;
}

size_t hash_attrs(const Attrs& a) {
  size_t h = std::hash<int64_t>()(a.axis);
  for (int64_t v : a.ints) h = hash_mix(h, std::hash<int64_t>()(v));
  h = hash_mix(h, std::hash<uint64_t>()(std::bit_cast<uint64_t>(a.scalar)));
  h = hash_mix(h, static_cast<size_t>(a.flag) * 2 + static_cast<size_t>(a.dtype) * 4);
  return h;
}

bool same_attrs(const Attrs& a, const Attrs& b) {
  return a.ints == b.ints && a.axis == b.axis && std::bit_cast<uint64_t>(a.scalar) == std::bit_cast<uint64_t>(b.scalar) &&
         a.flag == b.flag && a.dtype == b.dtype;
}

}  // namespace kiln::detail
