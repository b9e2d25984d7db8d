#include "fresh_results.h"

#include <algorithm>
#include <unordered_map>

#include "../tensor/ops.h"

namespace kiln::detail {

namespace {
// The value a view chain starts from: v itself unless a view op made it.
int32_t view_root(const Graph& g, int32_t v) {
  for (;;) {
    const Node& n = g.node(static_cast<size_t>(g.producer(v)));
    if (n.kind != NodeKind::op || op_info(n.op).category != OpCategory::View || n.inputs.empty()) return v;
    v = n.inputs[0];
  }
}
NodeKind root_kind(const Graph& g, int32_t v) {
  return g.node(static_cast<size_t>(g.producer(view_root(g, v)))).kind;
}
}  // namespace

ResultKinds classify_results(const Graph& g, size_t nwrites) {
  const auto& outs = g.output_ids();
  const size_t nres = outs.size() - std::min(outs.size(), nwrites);
  ResultKinds r;
  r.group.resize(outs.size());
  // value -> its first output, and its first written value (hashed: a linear
  // search per output made n results classify in O(n^2))
  std::unordered_map<int32_t, int32_t> first, first_write;
  for (size_t k = 0; k < outs.size(); ++k) {
    r.group[k] = first.try_emplace(outs[k], static_cast<int32_t>(k)).first->second;
    if (k >= nres) first_write.try_emplace(outs[k], static_cast<int32_t>(k - nres));
  }
  r.kind.assign(nres, ResultKinds::kNewResult);
  for (size_t i = 0; i < nres; ++i) {
    if (auto w = first_write.find(outs[i]); w != first_write.end()) {
      r.kind[i] = w->second;
      continue;
    }
    const NodeKind rk = root_kind(g, outs[i]);
    if (rk == NodeKind::input || rk == NodeKind::weight) r.kind[i] = ResultKinds::kViewResult;
  }
  return r;
}

namespace {
// Up to two distinct groups seen with one value: enough to tell whether a
// group other than a given one was seen.
struct TwoGroups {
  int32_t a = -1, b = -1;
  void add(int32_t gr) {
    if (a < 0) a = gr;
    else if (gr != a && b < 0) b = gr;
  }
  bool other_than(int32_t gr) const { return (a >= 0 && a != gr) || (b >= 0 && b != gr); }
};
}  // namespace

size_t separate_results(Graph& g, size_t nwrites, const ResultKinds& kinds) {
  const size_t nout = g.output_ids().size();
  if (kinds.group.size() != nout) return 0;  // not this graph's classification
  const size_t nres = nout - std::min(nout, nwrites);
  if (kinds.kind.size() != nres) return 0;
  size_t copies = 0;
  auto copy_of = [&](int32_t v) {
    Attrs a;
    a.dtype = g.type(v).dtype;
    const GraphValue in{&g, v};
    ++copies;
    return g.add_op(OpId::Cast, std::span<const GraphValue>(&in, 1), a).id;
  };
  std::vector<int32_t>& outs = g.mutable_outputs();
  // Written values: apart from the view results and the earlier writes they
  // were not before (a new-result result sharing one is copied below). A
  // copy is a fresh value no other output holds, so only the earlier writes
  // left as they were can clash. (Hashed by value: one scan of the outputs
  // per output made n results compile in O(n^2).)
  {
    std::unordered_map<int32_t, TwoGroups> view_groups, write_groups;
    for (size_t j = 0; j < nres; ++j)
      if (kinds.kind[j] == ResultKinds::kViewResult) view_groups[outs[j]].add(kinds.group[j]);
    for (size_t k = nres; k < nout; ++k) {
      const int32_t v = outs[k], gr = kinds.group[k];
      const auto vi = view_groups.find(v);
      const auto wi = write_groups.find(v);
      const bool clash = (vi != view_groups.end() && vi->second.other_than(gr)) ||
                         (wi != write_groups.end() && wi->second.other_than(gr));
      if (clash) outs[k] = copy_of(v);
      else write_groups[v].add(gr);
    }
  }
  // Results that are a written value: that value (a copy above included).
  for (size_t i = 0; i < nres; ++i)
    if (kinds.kind[i] >= 0 && nres + static_cast<size_t>(kinds.kind[i]) < nout)
      outs[i] = outs[nres + static_cast<size_t>(kinds.kind[i])];
  // New results, one group at a time: a copy when the value is an input's,
  // a weight's (or a view of one), a view of a constant (a constant output
  // itself is cloned by every run), or another output's it was not before.
  // Per value, how many outputs of each group hold it now; a copied group's
  // results leave their value's count (the copy is theirs alone).
  std::unordered_map<int32_t, std::unordered_map<int32_t, int32_t>> holders;
  std::vector<std::vector<int32_t>> members(nres);  // group -> its results
  for (size_t j = 0; j < nout; ++j) {
    ++holders[outs[j]][kinds.group[j]];
    if (j < nres && kinds.group[j] >= 0 && static_cast<size_t>(kinds.group[j]) < nres)
      members[static_cast<size_t>(kinds.group[j])].push_back(static_cast<int32_t>(j));
  }
  auto held_by_other_group = [&](int32_t v, int32_t gr) {
    const auto& by_group = holders[v];
    for (const auto& [other, count] : by_group)
      if (other != gr) return true;  // counts are positive (emptied groups are erased)
    return false;
  };
  for (size_t i = 0; i < nres; ++i) {
    if (kinds.kind[i] != ResultKinds::kNewResult || kinds.group[i] != static_cast<int32_t>(i)) continue;
    const int32_t v = outs[i];
    if (g.node(static_cast<size_t>(g.producer(v))).kind == NodeKind::constant) continue;  // cloned by every run
    const NodeKind rk = root_kind(g, v);
    const bool stored = rk == NodeKind::input || rk == NodeKind::weight || rk == NodeKind::constant;
    if (!stored && !held_by_other_group(v, static_cast<int32_t>(i))) continue;
    const int32_t c = copy_of(v);
    for (int32_t j : members[i]) {
      auto& by_group = holders[outs[static_cast<size_t>(j)]];
      if (auto h = by_group.find(static_cast<int32_t>(i)); h != by_group.end() && --h->second == 0)
        by_group.erase(h);  // only groups still holding the value stay: each query looks at two at most
      outs[static_cast<size_t>(j)] = c;
    }
  }
  return copies;
}

std::vector<int32_t> written_results(const Graph& g, size_t nwrites) {
  const auto& outs = g.output_ids();
  const size_t nres = outs.size() - std::min(outs.size(), nwrites);
  std::unordered_map<int32_t, int32_t> first_write;
  for (size_t k = nres; k < outs.size(); ++k) first_write.try_emplace(outs[k], static_cast<int32_t>(k - nres));
  std::vector<int32_t> w(nres, -1);
  if (first_write.empty()) return w;
  for (size_t i = 0; i < nres; ++i)
    if (auto f = first_write.find(outs[i]); f != first_write.end()) w[i] = f->second;
  return w;
}

}  // namespace kiln::detail
