// Fusion grouping (device-neutral): see fusion.h. What a backend can run
// comes in through FusionRules; nothing here generates code or binds memory.
#include "fusion.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

namespace kiln::codegen {

namespace {
// Ops whose generated code is bitwise what the eager kernel gives (IEEE
// correctly rounded or exact operations). In strict mode only these fuse;
// transcendental ops then run their eager kernels.
bool bitwise_exact(OpId op) {
  switch (op) {
    case OpId::Add: case OpId::Sub: case OpId::Mul: case OpId::Div: case OpId::Neg: case OpId::Abs:
    case OpId::Maximum: case OpId::Minimum: case OpId::Equal: case OpId::NotEqual: case OpId::Less:
    case OpId::LessEqual: case OpId::Greater: case OpId::GreaterEqual: case OpId::LogicalAnd:
    case OpId::LogicalOr: case OpId::LogicalXor: case OpId::LogicalNot: case OpId::Where: case OpId::Clamp:
    case OpId::Cast: case OpId::Relu: case OpId::Square: case OpId::Sqrt: case OpId::Reciprocal:
    case OpId::Floor: case OpId::Ceil: case OpId::Trunc: case OpId::Round: case OpId::IsNan: case OpId::IsInf:
    case OpId::IsFinite:
      return true;
    default:
      return false;
  }
}

bool is_elementwise(const Node& n, bool strict) {
  if (n.kind != NodeKind::op) return false;
  auto c = op_info(n.op).category;
  if (c != OpCategory::Unary && c != OpCategory::Binary && c != OpCategory::Ternary) return false;
  return !strict || bitwise_exact(n.op);
}



// Elements per output of a reduction of `shape` over attrs.ints (empty: all
// axes) when the reduced axes are trailing ones, else -1.
int64_t trailing_extent(const Shape& shape, const Attrs& attrs) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<char> red(shape.size(), attrs.ints.empty());
  for (int64_t a : attrs.ints) red[static_cast<size_t>(a < 0 ? a + nd : a)] = 1;
  int64_t n = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (d > 0 && red[d - 1] > red[d]) return -1;  // a kept axis after a reduced one
    if (red[d]) n *= shape[d];
  }
  return n;
}

// A 2-d float32/float64 matmul node whose operands are each a value or a
// transposing permute of one (folded into the call's transpose flag): its
// operands as one GEMM call. Returns false when the node is no such matmul
// (batched, other dtypes, empty); the backend may refuse others
// (FusionRules::gemm).
bool match_gemm(const Graph& g, const Node& n, GemmOperands& ops) {
  if (n.op != OpId::Matmul) return false;
  const TensorType& out = g.type(n.outputs[0]);
  if ((out.dtype != DType::float32 && out.dtype != DType::float64) || out.shape.size() != 2 ||
      out.layout().numel() == 0)
    return false;
  for (int j = 0; j < 2; ++j) {
    int32_t v = n.inputs[j];
    const TensorType& t = g.type(v);
    if (t.dtype != out.dtype || t.shape.size() != 2) return false;
    const Node& p = g.node(g.producer(v));
    const bool transposed = p.kind == NodeKind::op && p.op == OpId::Permute && p.attrs.ints.size() == 2 &&
                            p.attrs.ints[0] == 1 && p.attrs.ints[1] == 0;
    if (transposed) v = p.inputs[0];
    ops.base[j] = v;
    ops.transposed[j] = transposed;
  }
  return true;
}


// add(matmul(a, b), bias) with a bias row [n] or [1, n] (or the operands
// swapped) where the product has no other use and the sum feeds no
// elementwise op (that add would be a loop of its own over short rows): the
// add runs in the gemm step, right after the call (GemmCall::bias; the same
// IEEE adds, so bitwise eager's). Returns {the product value, the bias
// value}, or {-1, -1}.
std::pair<int32_t, int32_t> gemm_bias_of(const Graph& g, const Node& add, const std::vector<char>& is_gemm,
                                         const std::vector<int>& total_uses,
                                         const std::vector<char>& is_output,
                                         const std::vector<char>& feeds_elementwise) {
  if (add.kind != NodeKind::op || add.op != OpId::Add || feeds_elementwise[add.outputs[0]]) return {-1, -1};
  const TensorType& out = g.type(add.outputs[0]);
  for (int j = 0; j < 2; ++j) {
    const int32_t p = add.inputs[j], b = add.inputs[1 - j];
    const int32_t mm = g.producer(p);
    if (!is_gemm[mm] || total_uses[p] != 1 || is_output[p] || !(g.type(p) == out)) continue;
    // the bias must exist when the GEMM runs: computed before the matmul node
    const Node& bp = g.node(g.producer(b));
    if (bp.kind == NodeKind::op && g.producer(b) > mm) continue;
    const Shape& bs = g.type(b).shape;
    const int64_t n = out.shape[1];
    if (g.type(b).dtype == out.dtype && ((bs.size() == 1 && bs[0] == n) || (bs.size() == 2 && bs[0] == 1 && bs[1] == n)))
      return {p, b};
  }
  return {-1, -1};
}

// A node of group G whose value is read only by nodes of one later group H
// of the same shape moves into H: computed where it is used instead of
// stored by G's loop and loaded again by H's (a momentum scaled in an early
// loop that only the update reads, say). G's nodes are visited last to
// first, so a chain that only H reads moves whole. A moved node's inputs
// exist when H runs: they existed when G ran, and H runs later.
template <class Items>
void sink_into_readers(const Graph& g, std::vector<FusionGroup>& groups, const Items& items, std::vector<int32_t>& group_of,
                       std::vector<int>& item_of, const std::vector<char>& is_output,
                       const std::vector<char>& feeds_reduce) {
  std::vector<int> item_of_group(groups.size(), -1);
  for (size_t k = 0; k < items.size(); ++k)
    if (items[k].group >= 0) item_of_group[items[k].group] = static_cast<int>(k);
  std::vector<std::vector<int32_t>> readers(g.num_values());
  for (size_t i = 0; i < g.num_nodes(); ++i)
    for (int32_t v : g.node(i).inputs) readers[v].push_back(static_cast<int32_t>(i));
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    std::vector<int32_t>& nodes = groups[gi].nodes;
    for (size_t j = nodes.size(); j-- > 0;) {
      const int32_t v = g.node(nodes[j]).outputs[0];
      if (is_output[v] || feeds_reduce[v] || readers[v].empty()) continue;
      int h = -1;
      for (int32_t r : readers[v]) {
        const Node& rn = g.node(r);
        const int rg = rn.kind == NodeKind::op && !rn.outputs.empty() ? group_of[rn.outputs[0]] : -1;
        if (rg < 0 || rg == static_cast<int>(gi) || (h >= 0 && rg != h)) {
          h = -1;
          break;
        }
        h = rg;
      }
      if (h < 0 || item_of_group[h] <= item_of_group[gi] || !(groups[h].shape == groups[gi].shape) ||
          groups[h].nodes.size() >= 64)
        continue;
      groups[h].nodes.insert(groups[h].nodes.begin(), nodes[j]);  // before its readers
      group_of[v] = h;
      item_of[v] = item_of_group[h];
      nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(j));
    }
  }
}
}  // namespace


FusionPlan plan_fusion(const Graph& g, const KernelOptions& opt, const FusionRules& rules) {
  FusionPlan plan;
  std::vector<char>& is_output = plan.is_output;
  is_output.assign(g.num_values(), 0);
  for (int32_t v : g.output_ids()) is_output[v] = 1;
  std::vector<int> total_uses(g.num_values(), 0);
  std::vector<char> feeds_elementwise(g.num_values(), 0);
  for (const Node& n : g.nodes())
    for (int32_t v : n.inputs) {
      ++total_uses[v];
      feeds_elementwise[v] |= is_elementwise(n, opt.strict);
    }
  // Matmuls run as GEMM calls, and adds of a bias row run inside them.
  std::vector<GemmOperands> gemm_of(g.num_nodes());
  std::vector<int32_t> gemm_bias(g.num_nodes(), -1), gemm_output(g.num_nodes(), -1);
  std::vector<char> is_gemm(g.num_nodes(), 0);
  std::vector<int32_t> in_gemm(g.num_nodes(), -1);  // add node run inside a gemm step -> the product value
  if (opt.fuse) {
    for (size_t i = 0; i < g.num_nodes(); ++i)
      if (g.node(i).kind == NodeKind::op)
        is_gemm[i] = match_gemm(g, g.node(i), gemm_of[i]) && rules.gemm(g, g.node(i), gemm_of[i]);
    for (size_t i = 0; i < g.num_nodes(); ++i) {
      const Node& n = g.node(i);
      const auto [product, b] = gemm_bias_of(g, n, is_gemm, total_uses, is_output, feeds_elementwise);
      if (product < 0) continue;
      in_gemm[i] = product;
      gemm_output[g.producer(product)] = n.outputs[0];
      gemm_bias[g.producer(product)] = b;
    }
  }

  // Grouping in topological order. Items are the steps to be, in execution
  // order: a fused group or one op node. An elementwise node joins the latest
  // group of its shape among the last kLookback items that comes no earlier
  // than the item computing its last input (so its inputs exist when the group
  // runs); otherwise it opens a new group. Independent elementwise ops of one
  // shape therefore share a loop too, so each operand is read once.
  constexpr int kLookback = 16;
  // A reduction that can run inside the group computing its input.
  auto reduce_fusable = [&](const Node& r) {
    if (!opt.fuse || r.kind != NodeKind::op || op_info(r.op).category != OpCategory::Reduce ||
        !rules.reduce_in_group(r.op))
      return false;
    const int32_t v = r.inputs[0];
    const Node& p = g.node(g.producer(v));
    if (is_output[v] || total_uses[v] != 1 || !is_elementwise(p, opt.strict) || in_gemm[g.producer(v)] >= 0) return false;
    return trailing_extent(g.type(v).shape, r.attrs) >= 0;
  };
  // Values read only by such a reduction: one per group (each group runs one reduction).
  std::vector<char> feeds_reduce(g.num_values(), 0);
  for (const Node& n : g.nodes())
    if (reduce_fusable(n)) feeds_reduce[n.inputs[0]] = 1;
  std::vector<char> group_reduces;
  struct Item {
    int group = -1;     // index into groups, or -1
    int32_t node = -1;  // op node when group < 0
  };
  std::vector<FusionGroup>& groups = plan.groups;
  std::vector<Item> items;
  std::vector<int32_t> group_of(g.num_values(), -1);
  std::vector<int> item_of(g.num_values(), -1);  // -1: input, weight or constant
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.kind != NodeKind::op) continue;
    const int32_t out = n.outputs[0];
    if (in_gemm[i] >= 0) {  // computed by its matmul's step
      item_of[out] = item_of[in_gemm[i]];
      continue;
    }
    if (!(opt.fuse && is_elementwise(n, opt.strict))) {
      items.push_back({-1, static_cast<int32_t>(i)});
      item_of[out] = static_cast<int>(items.size() - 1);
      continue;
    }
    const Shape& shape = g.type(out).shape;
    int lo = 0;
    for (int32_t v : n.inputs) lo = std::max(lo, item_of[v]);
    int target = -1;
    for (int k = static_cast<int>(items.size()) - 1; k >= lo && k >= static_cast<int>(items.size()) - kLookback; --k) {
      const int gi = items[k].group;
      if (gi >= 0 && groups[gi].shape == shape && groups[gi].nodes.size() < 64 &&
          !(feeds_reduce[out] && group_reduces[gi])) {
        target = k;
        break;
      }
    }
    if (target < 0) {
      group_reduces.push_back(0);
      groups.push_back({shape, {}, {}, -1, 0, 0, -1});
      items.push_back({static_cast<int>(groups.size() - 1), -1});
      target = static_cast<int>(items.size() - 1);
    }
    groups[items[target].group].nodes.push_back(static_cast<int32_t>(i));
    group_of[out] = items[target].group;
    group_reduces[items[target].group] |= feeds_reduce[out];
    item_of[out] = target;
  }
  sink_into_readers(g, groups, items, group_of, item_of, is_output, feeds_reduce);
  // Uses of each value outside its own group.
  std::vector<int> uses_outside(g.num_values(), 0);
  auto count_uses = [&] {
    std::fill(uses_outside.begin(), uses_outside.end(), 0);
    for (size_t i = 0; i < g.num_nodes(); ++i) {
      const Node& n = g.node(i);
      int32_t own = n.kind == NodeKind::op && !n.outputs.empty() ? group_of[n.outputs[0]] : -1;
      for (int32_t v : n.inputs)
        if (group_of[v] >= 0 && group_of[v] != own) ++uses_outside[v];
    }
  };
  // A group with more operands than a kernel takes is split in two (its
  // nodes are in topological order, so the first half can run first).
  auto operand_count = [&](int gi) {
    std::unordered_map<int32_t, char> ins;
    int outs = 0, table = 0;
    for (int32_t ni : groups[gi].nodes) {
      const Node& n = g.node(ni);
      if (uses_outside[n.outputs[0]] > 0 || is_output[n.outputs[0]]) ++outs;
      for (int32_t v : n.inputs) {
        const Node& p = g.node(g.producer(v));
        const bool imm = p.kind == NodeKind::constant && g.type(v).shape.empty();
        if (imm) table = 1;
        else if (group_of[v] != gi) ins[v] = 1;
      }
    }
    return outs + static_cast<int>(ins.size()) + table;
  };
  // One pass: a split changes only the split group's counts (the tail's reads
  // of head values become uses outside the head; every other group's inputs
  // and outputs stay what they were), so the uses are updated in place and
  // the head is checked again before its tail. (Recounting every use and
  // rescanning from the first item after each split made a graph of n
  // results compile in O(n^2).)
  count_uses();
  for (size_t k = 0; k < items.size();) {
    const int gi = items[k].group;
    if (gi < 0 || groups[gi].nodes.size() < 2 || operand_count(gi) <= rules.max_operands) {
      ++k;
      continue;
    }
    std::vector<int32_t>& nodes = groups[gi].nodes;
    FusionGroup tail{groups[gi].shape, std::vector<int32_t>(nodes.begin() + nodes.size() / 2, nodes.end()), {}, -1, 0, 0, -1};
    nodes.resize(nodes.size() / 2);
    groups.push_back(std::move(tail));
    group_reduces.push_back(0);
    const int ti = static_cast<int>(groups.size() - 1);
    for (int32_t ni : groups[ti].nodes) group_of[g.node(ni).outputs[0]] = ti;
    for (int32_t ni : groups[ti].nodes)
      for (int32_t v : g.node(ni).inputs)
        if (group_of[v] == gi) ++uses_outside[v];
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(k) + 1, Item{ti, -1});
  }
  // A reduction whose input is a group's value that nothing else reads, over
  // trailing axes, runs inside that group's step (the value is never stored).
  std::vector<int32_t> reduce_of_group(groups.size(), -1);
  for (Item& it : items) {
    if (it.group >= 0 || it.node < 0 || !reduce_fusable(g.node(it.node))) continue;
    const int gi = group_of[g.node(it.node).inputs[0]];
    if (gi < 0 || reduce_of_group[gi] >= 0) continue;
    reduce_of_group[gi] = it.node;
    it.node = -1;  // runs inside the group's step
  }
  // A permute whose every use is folded into a gemm step is not run at all.
  std::vector<int> folded_uses(g.num_values(), 0);
  for (const Item& it : items) {
    if (it.group >= 0 || it.node < 0 || !is_gemm[it.node]) continue;
    const Node& n = g.node(it.node);
    for (int j = 0; j < 2; ++j)
      if (gemm_of[it.node].base[j] != n.inputs[j]) ++folded_uses[n.inputs[j]];
  }
  // softmax and log_softmax of one input (a loss and its gradient) run as
  // one row step: partner[node] is the other node, for both of the pair.
  std::vector<int32_t> partner(g.num_nodes(), -1);
  if (opt.fuse) {
    std::map<std::pair<int32_t, int64_t>, std::array<int32_t, 2>> by_input;  // (x, axis) -> softmax, log_softmax
    for (const Item& it : items) {
      if (it.group >= 0 || it.node < 0) continue;
      const Node& n = g.node(it.node);
      if ((n.op != OpId::Softmax && n.op != OpId::LogSoftmax) || !rules.row(g, n)) continue;
      auto [pos, fresh] = by_input.try_emplace({n.inputs[0], n.attrs.axis}, std::array<int32_t, 2>{-1, -1});
      int32_t& slot = pos->second[n.op == OpId::Softmax ? 0 : 1];
      if (slot < 0) slot = it.node;
    }
    for (const auto& [key, pair] : by_input)
      if (pair[0] >= 0 && pair[1] >= 0) {
        partner[pair[0]] = pair[1];
        partner[pair[1]] = pair[0];
      }
  }
  // A row op whose x is the one value a fused group lets out, read by
  // nothing else, runs with that group as one fused_row step (the group's
  // step is then stashed, not emitted): absorb_into[group] = the row node
  // (FusionGroup::absorbed_by; the lowering may still decline).
  std::vector<int32_t> absorb_into(groups.size(), -1);
  if (opt.fuse)
    for (const Item& it : items) {
      if (it.group >= 0 || it.node < 0 || is_gemm[it.node] || partner[it.node] >= 0) continue;
      const Node& n = g.node(it.node);
      if (!rules.row(g, n)) continue;
      const int32_t x = n.inputs[0];
      const int gi = group_of[x];
      if (gi < 0 || is_output[x] || total_uses[x] != 1 || uses_outside[x] != 1 || reduce_of_group[gi] >= 0) continue;
      bool only_output = true;
      for (int32_t ni : groups[gi].nodes) {
        const int32_t v = g.node(ni).outputs[0];
        only_output &= v == x || (uses_outside[v] == 0 && !is_output[v]);
      }
      if (only_output) absorb_into[gi] = it.node;
    }
  // The items as the lowering sees them: each group with the values it
  // lets out and the reduction it runs, each node with what it runs as. A
  // reduction run inside a group, a permute folded into every gemm reading
  // it and a group whose nodes all moved into later groups have no item.
  // (uses_outside is kept current through the splits: the grouping is final.)
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    FusionGroup& grp = groups[gi];
    for (int32_t ni : grp.nodes) {
      const int32_t v = g.node(ni).outputs[0];
      if (uses_outside[v] > 0 || is_output[v]) grp.outputs.push_back(v);
    }
    grp.absorbed_by = absorb_into[gi];
    const int32_t rn = reduce_of_group[gi];
    if (rn < 0) continue;
    const Node& r = g.node(rn);
    const int32_t v = r.inputs[0];
    const int64_t nred = trailing_extent(g.type(v).shape, r.attrs), numel = g.type(v).layout().numel();
    grp.reduce_node = rn;
    grp.reduce_nred = nred;
    grp.reduce_nout = nred == 0 ? g.type(r.outputs[0]).layout().numel() : numel / nred;
  }
  for (const Item& it : items) {
    if (it.group < 0 && it.node < 0) continue;
    FusionItem fi;
    if (it.group >= 0) {
      if (groups[it.group].nodes.empty()) continue;  // every node moved into a later group
      fi.kind = FusionItem::Kind::group;
      fi.group = it.group;
      plan.items.push_back(fi);
      continue;
    }
    const Node& n = g.node(it.node);
    fi.node = it.node;
    if (is_gemm[it.node]) {
      fi.kind = FusionItem::Kind::gemm;
      fi.gemm_operands = gemm_of[it.node];
      fi.gemm_bias = gemm_bias[it.node];
      fi.gemm_output = gemm_bias[it.node] >= 0 ? gemm_output[it.node] : n.outputs[0];
      plan.items.push_back(fi);
      continue;
    }
    const int32_t out = n.outputs[0];
    if (folded_uses[out] > 0 && folded_uses[out] == total_uses[out] && !is_output[out]) continue;
    if (opt.fuse && rules.row(g, n)) {
      fi.kind = FusionItem::Kind::row;
      fi.partner = partner[it.node];
      const int gi = group_of[n.inputs[0]];
      if (gi >= 0 && absorb_into[gi] == it.node) fi.group = gi;
    } else if (opt.fuse && rules.column_sum(g, n)) {
      fi.kind = FusionItem::Kind::column_sum;
    }
    plan.items.push_back(fi);
  }
  return plan;
}

}  // namespace kiln::codegen
