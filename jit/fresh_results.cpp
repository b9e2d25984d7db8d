#include "fresh_results.h"

#include <algorithm>

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
  for (size_t k = 0; k < outs.size(); ++k) {
    size_t first = 0;
    while (outs[first] != outs[k]) ++first;  // stops at k at the latest
    r.group[k] = static_cast<int32_t>(first);
  }
  r.kind.assign(nres, ResultKinds::kNewResult);
  for (size_t i = 0; i < nres; ++i) {
    for (size_t k = nres; k < outs.size(); ++k)
      if (outs[k] == outs[i]) {
        r.kind[i] = static_cast<int32_t>(k - nres);
        break;
      }
    if (r.kind[i] >= 0) continue;
    const NodeKind rk = root_kind(g, outs[i]);
    if (rk == NodeKind::input || rk == NodeKind::weight) r.kind[i] = ResultKinds::kViewResult;
  }
  return r;
}

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
  auto shares_outside_group = [&](size_t k, size_t limit, auto&& counts) {
    for (size_t j = 0; j < limit; ++j)
      if (j != k && outs[j] == outs[k] && kinds.group[j] != kinds.group[k] && counts(j)) return true;
    return false;
  };
  // Written values: apart from the view results and the earlier writes they
  // were not before (a new-result result sharing one is copied below).
  for (size_t k = nres; k < nout; ++k) {
    const bool clash = shares_outside_group(k, nout, [&](size_t j) {
      return j < nres ? kinds.kind[j] == ResultKinds::kViewResult : j < k;
    });
    if (clash) outs[k] = copy_of(outs[k]);
  }
  // Results that are a written value: that value (a copy above included).
  for (size_t i = 0; i < nres; ++i)
    if (kinds.kind[i] >= 0 && nres + static_cast<size_t>(kinds.kind[i]) < nout)
      outs[i] = outs[nres + static_cast<size_t>(kinds.kind[i])];
  // New results, one group at a time: a copy when the value is an input's,
  // a weight's (or a view of one), a view of a constant (a constant output
  // itself is cloned by every run), or another output's it was not before.
  for (size_t i = 0; i < nres; ++i) {
    if (kinds.kind[i] != ResultKinds::kNewResult || kinds.group[i] != static_cast<int32_t>(i)) continue;
    const int32_t v = outs[i];
    if (g.node(static_cast<size_t>(g.producer(v))).kind == NodeKind::constant) continue;  // cloned by every run
    const NodeKind rk = root_kind(g, v);
    const bool stored = rk == NodeKind::input || rk == NodeKind::weight || rk == NodeKind::constant;
    if (!stored && !shares_outside_group(i, nout, [](size_t) { return true; })) continue;
    const int32_t c = copy_of(v);
    for (size_t j = i; j < nres; ++j)
      if (kinds.group[j] == static_cast<int32_t>(i)) outs[j] = c;
  }
  return copies;
}

std::vector<int32_t> written_results(const Graph& g, size_t nwrites) {
  const auto& outs = g.output_ids();
  const size_t nres = outs.size() - std::min(outs.size(), nwrites);
  std::vector<int32_t> w(nres, -1);
  for (size_t i = 0; i < nres; ++i)
    for (size_t k = nres; k < outs.size(); ++k)
      if (outs[k] == outs[i]) {
        w[i] = static_cast<int32_t>(k - nres);
        break;
      }
  return w;
}

}  // namespace kiln::detail
