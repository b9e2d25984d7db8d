#include "plan.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "../backends/cpu/jit/row_kernels.h"
#include "../backends/cpu/parallel_ranges.h"
#include "../backends/cpu/reduce_kernels.h"

namespace kiln::codegen {

// ---- inlining ---------------------------------------------------------------------------

namespace {
void inline_into(const Graph& src, Graph& dst, const std::vector<GraphValue>& args, const std::string& prefix,
                 std::vector<GraphValue>& results) {
  std::vector<GraphValue> map(src.num_values());
  for (size_t i = 0; i < src.input_ids().size(); ++i) map[src.input_ids()[i]] = args.at(i);
  for (const Node& n : src.nodes()) {
    switch (n.kind) {
      case NodeKind::input: break;
      case NodeKind::constant: map[n.outputs[0]] = dst.add_constant(n.data, false); break;
      case NodeKind::weight:
        map[n.outputs[0]] = dst.add_weight(n.placeholder ? prefix + n.name : n.name, src.type(n.outputs[0]));
        break;
      case NodeKind::op: {
        std::vector<GraphValue> in;
        for (int32_t v : n.inputs) in.push_back(map[v]);
        map[n.outputs[0]] = dst.add_op(n.op, in, n.attrs);
        break;
      }
      case NodeKind::call: {
        const Graph* body = src.subgraph(n.name);
        if (!body) throw ValueError("inline_calls: unknown subgraph @" + n.name);
        std::vector<GraphValue> in, out;
        for (int32_t v : n.inputs) in.push_back(map[v]);
        inline_into(*body, dst, in, prefix + n.prefix, out);
        for (size_t k = 0; k < n.outputs.size(); ++k) map[n.outputs[k]] = out.at(k);
        break;
      }
    }
  }
  for (int32_t v : src.output_ids()) results.push_back(map[v]);
}
}  // namespace

std::unique_ptr<Graph> inline_calls(const Graph& root) {
  std::vector<TensorType> in_types;
  for (int32_t v : root.input_ids()) in_types.push_back(root.type(v));
  auto g = std::make_unique<Graph>(root.name(), in_types);
  std::vector<GraphValue> results;
  inline_into(root, *g, g->inputs(), "", results);
  g->output_values(results);
  return g;
}

// ---- fusion ---------------------------------------------------------------------------------

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

struct Group {
  Shape shape;
  std::vector<int32_t> nodes;
};

// Byte strides of a contiguous operand of `s` broadcast to `shape`.
std::vector<int64_t> static_strides(const Shape& s, DType d, const Shape& shape) {
  Strides cs = contiguous_strides(s);
  std::vector<int64_t> r(shape.size(), 0);
  const size_t lead = shape.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i)
    r[lead + i] = s[i] == 1 && shape[lead + i] != 1 ? 0 : cs[i] * static_cast<int64_t>(size_of(d));
  return r;
}

// Returns false when the group cannot be generated (the caller falls back to op steps).
// Groups that differ only in their constants (read from a table) share one
// kernel of `kernels`.
bool build_fused_step(const Graph& g, const Group& grp, const std::vector<int>& uses_outside,
                      const std::vector<char>& is_output, const KernelOptions& opt, CpuTarget target, PlanStep& step,
                      KernelSource& kernels) {
  std::unordered_map<int32_t, int32_t> reg;  // value id -> register
  std::vector<int32_t> in_vals, out_vals;
  std::vector<char> in_group(g.num_values(), 0);
  for (int32_t ni : grp.nodes) in_group[g.node(ni).outputs[0]] = 1;
  for (int32_t ni : grp.nodes) {
    int32_t v = g.node(ni).outputs[0];
    if (uses_outside[v] > 0 || is_output[v]) out_vals.push_back(v);
  }
  ElementwiseProgram p;
  p.strict = opt.strict;
  p.num_outputs = static_cast<int>(out_vals.size());
  for (int32_t v : out_vals) p.operand_dtypes.push_back(g.type(v).dtype);
  auto operand_of = [&](int32_t v) -> int32_t {
    auto it = reg.find(v);
    if (it != reg.end()) return it->second;
    const Node& prod = g.node(g.producer(v));
    Instr ins;
    ins.dtype = g.type(v).dtype;
    const TensorType& t = g.type(v);
    // A one-element constant is read from the step's constant table (its
    // exact bits), so the code does not depend on its value.
    if (prod.kind == NodeKind::constant && t.shape.empty()) {
      ins.kind = Instr::Kind::imm;
      ins.imm = prod.data.item<double>();  // for dumps
      ins.arg = p.table_slots++;
      uint64_t bits = 0;
      std::memcpy(&bits, prod.data.data_ptr(), size_of(t.dtype));
      step.imm_table.push_back(bits);
    } else {
      ins.kind = Instr::Kind::load;
      ins.arg = static_cast<int32_t>(p.operand_dtypes.size());
      p.operand_dtypes.push_back(t.dtype);
      in_vals.push_back(v);
    }
    p.code.push_back(ins);
    return reg[v] = static_cast<int32_t>(p.code.size() - 1);
  };
  for (int32_t ni : grp.nodes) {
    const Node& n = g.node(ni);
    Instr ins;
    ins.kind = Instr::Kind::op;
    ins.op = n.op;
    ins.attrs = n.attrs;
    ins.dtype = g.type(n.outputs[0]).dtype;
    int32_t r[3] = {-1, -1, -1};
    for (size_t k = 0; k < n.inputs.size() && k < 3; ++k) r[k] = operand_of(n.inputs[k]);
    ins.a = r[0];
    ins.b = r[1];
    ins.c = r[2];
    p.code.push_back(ins);
    reg[n.outputs[0]] = static_cast<int32_t>(p.code.size() - 1);
  }
  for (size_t k = 0; k < out_vals.size(); ++k) {
    Instr st;
    st.kind = Instr::Kind::store;
    st.arg = static_cast<int32_t>(k);
    st.a = reg.at(out_vals[k]);
    st.dtype = g.type(out_vals[k]).dtype;
    p.code.push_back(st);
  }
  const size_t nops = p.operand_dtypes.size();
  if (nops + (p.table_slots > 0) > static_cast<size_t>(kMaxFusedOperands)) return false;
  // Static loop structure: every operand is contiguous, broadcast to the group's shape.
  std::array<std::vector<int64_t>, kMaxFusedOperands> st;
  std::vector<int32_t> operands = out_vals;
  operands.insert(operands.end(), in_vals.begin(), in_vals.end());
  for (size_t k = 0; k < kMaxFusedOperands; ++k)
    st[k] = k < nops ? static_strides(g.type(operands[k]).shape, g.type(operands[k]).dtype, grp.shape)
                     : std::vector<int64_t>(grp.shape.size(), 0);
  step.loop = cpu::make_loop_from_strides<kMaxFusedOperands>(grp.shape, st);
  // A one-element group's loop has a single run of one element with all
  // strides 0: the stride is then irrelevant, so mark no operand broadcast
  // (the generator refuses broadcast outputs).
  const bool one_element = step.loop.numel == 1;
  for (size_t k = 0; k < nops; ++k) p.operand_broadcast.push_back(!one_element && step.loop.stride[k].back() == 0);
  if (!can_generate(p, target)) return false;
  step.kind = PlanStep::Kind::fused;
  std::string text = p.str();
  step.kernel = kernels.get(p, text);
  step.operands = operands;
  step.num_outputs = p.num_outputs;
  for (int32_t v : out_vals) step.out_layouts.push_back(g.type(v).layout());
  step.group_nodes = grp.nodes;
  step.program = std::move(text);
  return true;
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

PlanStep op_step(const Node& n) {
  PlanStep s;
  s.kind = PlanStep::Kind::op;
  s.op = n.op;
  s.attrs = n.attrs;
  s.inputs = n.inputs;
  s.output = n.outputs[0];
  return s;
}

// A row step's handle on cached kernel k: the cached kernel is never freed
// (aliasing, not owning); a dump gets the same code with its disassembly.
std::shared_ptr<const RowKernel> step_row_kernel(const RowKernel* k, const KernelOptions& opt) {
  if (opt.dump) return std::shared_ptr<const RowKernel>(generate_row_kernel(k->key(), true));
  return std::shared_ptr<const RowKernel>(std::shared_ptr<const RowKernel>(), k);
}

// A RowNorm node on float32 (x, weight, bias) along the last axis becomes a
// row step running the cached generated kernel eager runs too (bitwise equal
// results). Returns false when the node keeps an op step.
bool build_row_step(const Graph& g, const Node& n, const KernelOptions& opt, PlanStep& s) {
  const std::optional<RowOp> rop = row_op_of(n.op);
  if (!rop || g.type(n.outputs[0]).dtype != DType::float32) return false;
  for (int32_t v : n.inputs)
    if (g.type(v).dtype != DType::float32) return false;
  const Shape& shape = g.type(n.inputs[0]).shape;
  const int64_t nd = static_cast<int64_t>(shape.size());
  const bool norm = *rop == RowOp::layer_norm || *rop == RowOp::rms_norm;
  if (nd == 0 || (!norm && (n.attrs.axis < 0 ? n.attrs.axis + nd : n.attrs.axis) != nd - 1)) return false;
  const bool w = norm && n.attrs.ints.size() == 2 && n.attrs.ints[0], b = norm && n.attrs.ints.size() == 2 && n.attrs.ints[1];
  const RowKernel* k = cached_row_kernel(*rop, w, b, DType::float32);
  if (!k) return false;
  s = op_step(n);
  s.kind = PlanStep::Kind::row;
  s.row_kernel = step_row_kernel(k, opt);
  s.row_n = shape.back();
  s.rows = s.row_n == 0 ? 0 : g.type(n.inputs[0]).layout().numel() / s.row_n;
  s.out_layouts = {g.type(n.outputs[0]).layout()};
  return true;
}

// A 2-d float32/float64 matmul node as one bound BLAS call: each operand is
// a value (contiguous at run time: bind() makes it so) or a transposing
// permute of one, folded into the call's transpose flag. Returns false when
// the node keeps its op step (batched, other dtypes, empty, odd layouts).
bool build_gemm_step(const Graph& g, const Node& n, const KernelOptions& opt, PlanStep& s) {
  if (n.op != OpId::Matmul) return false;
  const TensorType& out = g.type(n.outputs[0]);
  if ((out.dtype != DType::float32 && out.dtype != DType::float64) || out.shape.size() != 2 ||
      out.layout().numel() == 0)
    return false;
  int32_t base[2];
  int64_t rs[2], cs[2];
  for (int j = 0; j < 2; ++j) {
    int32_t v = n.inputs[j];
    const TensorType& t = g.type(v);
    if (t.dtype != out.dtype || t.shape.size() != 2) return false;
    const Node& p = g.node(g.producer(v));
    const bool transposed = p.kind == NodeKind::op && p.op == OpId::Permute && p.attrs.ints.size() == 2 &&
                            p.attrs.ints[0] == 1 && p.attrs.ints[1] == 0;
    if (transposed) v = p.inputs[0];
    base[j] = v;
    // element strides of the operand as the matmul sees it
    const int64_t ld = g.type(v).shape[1];
    rs[j] = transposed ? 1 : ld;
    cs[j] = transposed ? ld : 1;
  }
  const int64_t m = out.shape[0], nn = out.shape[1], k = g.type(n.inputs[0]).shape[1];
  const std::optional<cpu::GemmCall> call =
      cpu::plan_gemm(out.dtype == DType::float64, m, nn, k, rs[0], cs[0], rs[1], cs[1]);
  if (!call) return false;
  s = op_step(n);
  s.kind = PlanStep::Kind::gemm;
  s.inputs = {base[0], base[1]};
  s.gemm = *call;
  s.gemm.pack_b = !opt.strict && cpu::gemm_pack_b_pays(s.gemm);  // bits of the BLAS's other kernel
  return true;
}

// sum(x, {0}) of a 2-d float32/float64 x with 2..kColumnSumMaxRows rows and
// at least 2 columns (reduce() runs those as one sequential block per column).
bool build_column_sum_step(const Graph& g, const Node& n, PlanStep& s) {
  if (n.op != OpId::Sum || n.attrs.ints.size() != 1) return false;
  const TensorType& x = g.type(n.inputs[0]);
  if ((x.dtype != DType::float32 && x.dtype != DType::float64) || x.shape.size() != 2 ||
      !(g.type(n.outputs[0]).dtype == x.dtype) || (n.attrs.ints[0] != 0 && n.attrs.ints[0] != -2))
    return false;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows < 2 || rows > cpu::kColumnSumMaxRows || cols < 2) return false;
  s = op_step(n);
  s.kind = PlanStep::Kind::column_sum;
  s.rows = rows;
  s.row_n = cols;
  s.out_layouts = {g.type(n.outputs[0]).layout()};
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
void sink_into_readers(const Graph& g, std::vector<Group>& groups, const Items& items, std::vector<int32_t>& group_of,
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

// Row step rs takes over fused step f, which computes its x (f's operand
// 0): rs becomes a fused_row step.
void absorb_group(PlanStep f, PlanStep& rs) {
  rs.kind = PlanStep::Kind::fused_row;
  rs.operands = std::move(f.operands);
  rs.num_outputs = f.num_outputs;
  rs.kernel = std::move(f.kernel);
  rs.group_nodes = std::move(f.group_nodes);
  rs.imm_table = std::move(f.imm_table);
  rs.program = std::move(f.program);
  rs.loop = f.loop;
}

}  // namespace

ExecutionPlan::ExecutionPlan(std::shared_ptr<const Graph> graph, const KernelOptions& opt, const CodeImages* images)
    : graph_(std::move(graph)) {
  const Graph& g = *graph_;
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::call) throw ValueError("ExecutionPlan: inline calls first (graph '" + g.name() + "')");
    else if (n.kind == NodeKind::weight) {
      weight_slots_.emplace_back(n.name, g.type(n.outputs[0]));
      weight_values_.push_back(n.outputs[0]);
    }
  std::vector<char> is_output(g.num_values(), 0);
  for (int32_t v : g.output_ids()) is_output[v] = 1;
  std::vector<int> total_uses(g.num_values(), 0);
  std::vector<char> feeds_elementwise(g.num_values(), 0);
  for (const Node& n : g.nodes())
    for (int32_t v : n.inputs) {
      ++total_uses[v];
      feeds_elementwise[v] |= is_elementwise(n, opt.strict);
    }
  // Matmuls bound to BLAS calls, and adds of a bias row run inside them.
  std::vector<PlanStep> gemm_of(g.num_nodes());
  std::vector<char> is_gemm(g.num_nodes(), 0);
  std::vector<int32_t> in_gemm(g.num_nodes(), -1);  // add node run inside a gemm step -> the product value
  if (opt.fuse) {
    for (size_t i = 0; i < g.num_nodes(); ++i)
      if (g.node(i).kind == NodeKind::op) is_gemm[i] = build_gemm_step(g, g.node(i), opt, gemm_of[i]);
    for (size_t i = 0; i < g.num_nodes(); ++i) {
      const Node& n = g.node(i);
      const auto [product, b] = gemm_bias_of(g, n, is_gemm, total_uses, is_output, feeds_elementwise);
      if (product < 0) continue;
      in_gemm[i] = product;
      PlanStep& st = gemm_of[g.producer(product)];
      st.output = n.outputs[0];
      st.inputs.push_back(b);
      st.gemm.bias = true;
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
        !cpu::can_reduce_produced(r.op))
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
  std::vector<Group> groups;
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
      groups.push_back({shape, {}});
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
  for (bool split = true; split;) {
    split = false;
    count_uses();
    for (size_t k = 0; k < items.size() && !split; ++k) {
      const int gi = items[k].group;
      if (gi < 0 || groups[gi].nodes.size() < 2 || operand_count(gi) <= kMaxFusedOperands) continue;
      std::vector<int32_t>& nodes = groups[gi].nodes;
      Group tail{groups[gi].shape, std::vector<int32_t>(nodes.begin() + nodes.size() / 2, nodes.end())};
      nodes.resize(nodes.size() / 2);
      groups.push_back(std::move(tail));
      group_reduces.push_back(0);
      for (int32_t ni : groups.back().nodes) group_of[g.node(ni).outputs[0]] = static_cast<int>(groups.size() - 1);
      items.insert(items.begin() + static_cast<std::ptrdiff_t>(k) + 1, Item{static_cast<int>(groups.size() - 1), -1});
      split = true;
    }
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
      if (gemm_of[it.node].inputs[j] != n.inputs[j]) ++folded_uses[n.inputs[j]];
  }
  // softmax and log_softmax of one input (a loss and its gradient) run as
  // one row step: partner[node] is the other node, for both of the pair.
  std::vector<int32_t> partner(g.num_nodes(), -1);
  if (opt.fuse) {
    std::map<std::pair<int32_t, int64_t>, std::array<int32_t, 2>> by_input;  // (x, axis) -> softmax, log_softmax
    for (const Item& it : items) {
      if (it.group >= 0 || it.node < 0) continue;
      const Node& n = g.node(it.node);
      PlanStep probe;
      if ((n.op != OpId::Softmax && n.op != OpId::LogSoftmax) || !build_row_step(g, n, opt, probe)) continue;
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
  // step is then stashed, not emitted): absorb_into[group] = the row node.
  std::vector<int32_t> absorb_into(groups.size(), -1);
  if (opt.fuse)
    for (const Item& it : items) {
      if (it.group >= 0 || it.node < 0 || is_gemm[it.node] || partner[it.node] >= 0) continue;
      const Node& n = g.node(it.node);
      PlanStep probe;
      if (!row_op_of(n.op) || !build_row_step(g, n, opt, probe)) continue;
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
  std::vector<PlanStep> stashed(groups.size());  // an absorbed group's built step
  std::vector<char> emitted(g.num_nodes(), 0);
  const CpuTarget target = detect_cpu_target();
  code_key_ = codegen_feature_key(target, opt.strict);
  KernelSource kernels(target, opt, images);
  for (const Item& it : items) {
    if (it.group < 0 && it.node < 0) continue;
    if (it.group < 0) {
      const Node& n = g.node(it.node);
      if (is_gemm[it.node]) {
        steps_.push_back(std::move(gemm_of[it.node]));
        continue;
      }
      const int32_t out = n.outputs[0];
      if (folded_uses[out] > 0 && folded_uses[out] == total_uses[out] && !is_output[out]) continue;
      if (emitted[it.node]) continue;  // ran with its partner
      PlanStep rs;
      if (partner[it.node] >= 0) {
        // the pair's step, where the first of the two runs (x exists there)
        const Node& sm = n.op == OpId::Softmax ? n : g.node(partner[it.node]);
        const Node& lsm = n.op == OpId::Softmax ? g.node(partner[it.node]) : n;
        build_row_step(g, sm, opt, rs);
        const RowKernel* k = cached_row_kernel(RowOp::softmax_and_log_softmax, false, false, DType::float32);
        if (k) {
          rs.row_kernel = step_row_kernel(k, opt);
          rs.output2 = lsm.outputs[0];
          emitted[partner[it.node]] = 1;
          steps_.push_back(std::move(rs));
          continue;
        }
      }
      if (opt.fuse && build_row_step(g, n, opt, rs)) {
        const int gi = group_of[n.inputs[0]];
        if (gi >= 0 && absorb_into[gi] == it.node) absorb_group(std::move(stashed[gi]), rs);
        steps_.push_back(std::move(rs));
      } else if (opt.fuse && build_column_sum_step(g, n, rs)) {
        steps_.push_back(std::move(rs));
      } else {
        steps_.push_back(op_step(n));
      }
      continue;
    }
    const Group& grp = groups[it.group];
    if (grp.nodes.empty()) continue;  // every node moved into a later group
    PlanStep s;
    const int32_t rn = reduce_of_group[it.group];
    if (build_fused_step(g, grp, uses_outside, is_output, opt, target, s, kernels)) {
      if (absorb_into[it.group] >= 0) {
        const Node& r = g.node(absorb_into[it.group]);
        // the row op's weight and bias take operand slots after the table
        const size_t slots = s.operands.size() + !s.imm_table.empty() + r.inputs.size() - 1;
        if (rn < 0 && s.num_outputs == 1 && slots <= static_cast<size_t>(kMaxFusedOperands)) {
          stashed[it.group] = std::move(s);
          continue;  // runs inside the row op's step
        }
        absorb_into[it.group] = -1;
      }
      if (rn >= 0) {
        const Node& r = g.node(rn);
        const int32_t v = r.inputs[0];
        const int64_t nred = trailing_extent(g.type(v).shape, r.attrs), numel = g.type(v).layout().numel();
        s.reduce_operand = static_cast<int>(std::find(s.operands.begin(), s.operands.begin() + s.num_outputs, v) - s.operands.begin());
        s.reduce_op = r.op;
        s.reduce_output = r.outputs[0];
        s.reduce_nred = nred;
        s.reduce_nout = nred == 0 ? g.type(r.outputs[0]).layout().numel() : numel / nred;
      }
      steps_.push_back(std::move(s));
    } else {
      absorb_into[it.group] = -1;
      for (int32_t ni : grp.nodes) steps_.push_back(op_step(g.node(ni)));
      if (rn >= 0) steps_.push_back(op_step(g.node(rn)));
    }
  }
  plan_memory(is_output);
}

// Liveness of every value a step writes, then arena offsets for the
// intermediates: a value lives from the step that writes it to the last step
// that reads it or any view of it (a view aliases its base's memory); graph
// outputs live past the end. Offsets come from a greedy first fit over the
// values live at the same time, so the arena is the peak of live
// intermediates (rounded to 64 bytes each), not their sum.
void ExecutionPlan::plan_memory(const std::vector<char>& is_output) {
  const Graph& g = *graph_;
  const int S = static_cast<int>(steps_.size());
  const size_t nv = g.num_values();
  std::vector<int32_t> root(nv);
  for (size_t v = 0; v < nv; ++v) root[v] = static_cast<int32_t>(v);
  std::vector<int> def(nv, -1), last_read(nv, -1), live_until(nv, -1);
  std::vector<char> planned(nv, 0);
  for (int k = 0; k < S; ++k) {
    const PlanStep& s = steps_[k];
    for (int32_t v : step_reads(s)) {
      last_read[v] = k;
      live_until[root[v]] = std::max(live_until[root[v]], k);
    }
    for (int32_t v : step_writes(s)) {
      def[v] = k;
      live_until[v] = std::max(live_until[v], k);
      if (s.kind == PlanStep::Kind::op && op_info(s.op).category == OpCategory::View)
        root[v] = root[s.inputs[0]];
      else
        planned[v] = !is_output[v] && g.type(v).layout().numel() > 0;
    }
  }
  for (int32_t v : g.output_ids()) live_until[root[v]] = S;
  // Views keep their base alive: extend each base to its views' last reads.
  for (size_t v = 0; v < nv; ++v)
    if (root[v] != static_cast<int32_t>(v)) live_until[root[v]] = std::max(live_until[root[v]], std::max(last_read[v], def[v]));

  release_after_.assign(static_cast<size_t>(S), {});
  for (size_t v = 0; v < nv; ++v)
    if (def[v] >= 0 && !is_output[v]) release_after_[std::max(def[v], last_read[v])].push_back(static_cast<int32_t>(v));

  arena_offset_.assign(nv, -1);
  struct Live {
    int64_t offset, size;
    int until;
  };
  std::vector<Live> live;
  int64_t top = 0;
  for (int k = 0; k < S; ++k) {
    // Blocks whose values died before this step are free again.
    std::erase_if(live, [k](const Live& l) { return l.until < k; });
    for (int32_t v : step_writes(steps_[k])) {
      if (!planned[v]) continue;
      const TensorType& t = g.type(v);
      const int64_t size = (t.layout().numel() * static_cast<int64_t>(size_of(t.dtype)) + 63) / 64 * 64;
      std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.offset < b.offset; });
      int64_t off = 0;
      for (const Live& l : live) {
        if (l.offset - off >= size) break;
        off = std::max(off, l.offset + l.size);
      }
      arena_offset_[v] = off;
      live.push_back({off, size, live_until[v]});
      top = std::max(top, off + size);
    }
  }
  arena_bytes_ = static_cast<size_t>(top);
}

std::vector<int32_t> step_reads(const PlanStep& s) {
  if (s.kind == PlanStep::Kind::fused_row) {  // the group's inputs and the row op's, but not x
    std::vector<int32_t> r(s.operands.begin() + s.num_outputs, s.operands.end());
    r.insert(r.end(), s.inputs.begin() + 1, s.inputs.end());
    return r;
  }
  if (s.kind != PlanStep::Kind::fused) return s.inputs;
  return std::vector<int32_t>(s.operands.begin() + s.num_outputs, s.operands.end());
}

std::vector<int32_t> step_writes(const PlanStep& s) {
  if (s.kind != PlanStep::Kind::fused) {
    if (s.output2 >= 0) return {s.output, s.output2};
    return {s.output};
  }
  std::vector<int32_t> w;
  for (int j = 0; j < s.num_outputs; ++j)
    if (j != s.reduce_operand) w.push_back(s.operands[j]);
  if (s.reduce_operand >= 0) w.push_back(s.reduce_output);
  return w;
}

namespace {
// Runs a fused kernel on flat elements [first, first + n) of its loop, with
// output operand `red` written contiguously to dst instead.
void run_range(const PlanStep& s, int red, const std::array<char*, kMaxFusedOperands>& base, int64_t first, int64_t n,
               char* dst) {
  const cpu::StridedLoop<kMaxFusedOperands>& L = s.loop;
  const int nd = static_cast<int>(L.shape.size());
  const int64_t inner_n = L.shape[nd - 1];
  const int64_t isz = static_cast<int64_t>(size_of(s.out_layouts[red].dtype));
  std::array<int64_t, kMaxFusedOperands> st{};
  for (int k = 0; k < kMaxFusedOperands; ++k) st[k] = L.stride[k][nd - 1];
  st[red] = isz;
  const InnerLoopFn fn = s.kernel->fn();
  for (int64_t done = 0; done < n;) {
    const int64_t idx = first + done, c = idx % inner_n, len = std::min(inner_n - c, n - done);
    std::array<char*, kMaxFusedOperands> p = base;
    int64_t rem = idx / inner_n;
    for (int d = nd - 2; d >= 0; --d) {
      const int64_t i = rem % L.shape[d];
      rem /= L.shape[d];
      for (int k = 0; k < kMaxFusedOperands; ++k) p[k] += i * L.stride[k][d];
    }
    for (int k = 0; k < kMaxFusedOperands; ++k) p[k] += c * st[k];
    p[red] = dst + done * isz;
    fn(p.data(), st.data(), len);
    done += len;
  }
}
// Floats of a fused_row step's scratch per thread: a block of rows this
// size stays in L1 between the group's kernel and the row kernel.
constexpr int64_t kFusedRowScratch = 4096;

void run_fused_row(const PlanStep& s, const std::array<char*, kMaxFusedOperands>& base) {
  const int64_t rows = s.rows, n = s.row_n;
  if (rows <= 0 || n <= 0) return;
  const RowKernelKey& key = s.row_kernel->key();
  size_t next = s.operands.size() + !s.imm_table.empty();
  const float* weight = key.has_weight ? reinterpret_cast<const float*>(base[next++]) : nullptr;
  const float* bias = key.has_bias ? reinterpret_cast<const float*>(base[next]) : nullptr;
  float* const y = reinterpret_cast<float*>(base[0]);
  const int64_t block = std::max<int64_t>(1, kFusedRowScratch / n);
  const RowKernelFn f = s.row_kernel->fn();
  // Whole rows per thread (as RowKernel::run): each row's bits are the
  // row kernel's whatever the split.
  cpu::parallel_ranges(rows, rows * n, [&](int64_t r0, int64_t r1) {
    thread_local std::vector<float> scratch;  // grows once per thread, then reused
    if (scratch.size() < static_cast<size_t>(block * n)) scratch.resize(static_cast<size_t>(block * n));
    for (int64_t r = r0; r < r1; r += block) {
      const int64_t cnt = std::min(block, r1 - r);
      run_range(s, 0, base, r * n, cnt * n, reinterpret_cast<char*>(scratch.data()));
      RowArgs a;
      a.x = scratch.data();
      a.y = y + r * n;
      a.weight = weight;
      a.bias = bias;
      a.rows = cnt;
      a.n = n;
      a.eps = static_cast<float>(s.attrs.scalar);
      f(&a);
    }
  });
}
}  // namespace

void ExecutionPlan::execute(const BoundStep& b) {
  const PlanStep& s = *b.step;
  if (s.kind == PlanStep::Kind::gemm) {
    cpu::gemm(s.gemm, b.base[1], b.base[2], b.base[0], b.base[3]);
    return;
  }
  if (s.kind == PlanStep::Kind::column_sum) {
    cpu::column_sum(s.out_layouts[0].dtype == DType::float64, b.base[1], s.rows, s.row_n, b.base[0]);
    return;
  }
  if (s.kind == PlanStep::Kind::fused_row) {
    run_fused_row(s, b.base);
    return;
  }
  if (s.kind == PlanStep::Kind::row) {
    const RowKernelKey& key = s.row_kernel->key();
    auto in = [&](int j) { return reinterpret_cast<const float*>(b.base[j]); };
    RowArgs a;
    a.x = in(1);
    a.y = reinterpret_cast<float*>(b.base[0]);
    if (s.output2 >= 0) a.y2 = reinterpret_cast<float*>(b.base[kMaxFusedOperands - 1]);
    a.weight = key.has_weight ? in(2) : nullptr;
    a.bias = key.has_bias ? in(key.has_weight ? 3 : 2) : nullptr;
    a.rows = s.rows;
    a.n = s.row_n;
    a.eps = static_cast<float>(s.attrs.scalar);
    s.row_kernel->run(a);
    return;
  }
  if (s.reduce_operand >= 0) {
    cpu::reduce_produced(s.reduce_op, s.out_layouts[s.reduce_operand].dtype, s.reduce_nout, s.reduce_nred,
                         [&](int64_t first, int64_t n, void* dst) {
                           run_range(s, s.reduce_operand, b.base, first, n, static_cast<char*>(dst));
                         },
                         b.out);
    return;
  }
  const InnerLoopFn fn = s.kernel->fn();
  cpu::run_loop_at<kMaxFusedOperands>(s.loop, b.base, [fn](char** p, const int64_t* st, int64_t n) { fn(p, st, n); });
}

// A call's arena: one a finished call gave back, else a new one. Given back
// when the call ends, unless something else (a result viewing an
// intermediate) still holds it: the next call would overwrite that result.
struct ExecutionPlan::ArenaLease {
  const ExecutionPlan& plan;
  Buffer arena;
  explicit ArenaLease(const ExecutionPlan& p) : plan(p) {
    if (!p.arena_bytes_) return;
    {
      std::lock_guard<std::mutex> lock(p.arena_mu_);
      if (!p.free_arenas_.empty()) {
        arena = std::move(p.free_arenas_.back());
        p.free_arenas_.pop_back();
      }
    }
    if (!arena) arena = Buffer::allocate(p.arena_bytes_);
  }
  ~ArenaLease() {
    if (!arena || arena.use_count() != 1) return;
    std::lock_guard<std::mutex> lock(plan.arena_mu_);
    plan.free_arenas_.push_back(std::move(arena));
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
};

void ExecutionPlan::run(std::span<const Tensor> inputs, std::span<const Tensor> weights,
                        std::vector<Tensor>& outputs) const {
  const Graph& g = *graph_;
  // Declared first, so it is given back after every view of it below is gone.
  const ArenaLease lease(*this);
  // One scratch buffer per call (calls may run concurrently) for every
  // intermediate (the lease above); graph outputs get their own memory.
  const Buffer& arena = lease.arena;
  // The value table and the binding's vectors are reused by the next call on
  // this thread (no allocation per call); a call made while one runs on this
  // thread (an eager kernel calling compiled code) gets its own.
  thread_local Bound reused;
  thread_local bool in_use = false;
  Bound local;
  Bound& bound = in_use ? local : reused;
  struct Release {
    bool* flag;
    Bound& b;
    ~Release() {
      b.clear();
      if (flag) *flag = false;
    }
  } release{in_use ? nullptr : &in_use, bound};
  in_use = true;
  std::vector<Tensor>& vals = bound.vals;
  vals.resize(g.num_values());  // empty handles (clear() dropped the last call's)
  const auto& in_ids = g.input_ids();
  for (size_t i = 0; i < in_ids.size(); ++i) vals[in_ids[i]] = inputs[i];
  for (size_t i = 0; i < weight_values_.size(); ++i) vals[weight_values_[i]] = weights[i];
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::constant) vals[n.outputs[0]] = n.data;
  // A defined outputs[k] is where output k is computed (in-place write-back,
  // jit/write_in_place.h); a step run one by one may still put it elsewhere.
  for (size_t k = 0; k < outputs.size() && k < g.output_ids().size(); ++k)
    if (outputs[k].defined() && !vals[g.output_ids()[k]].defined()) vals[g.output_ids()[k]] = outputs[k];
  if (bind_all(bound, vals, arena)) {
    run_bound(bound);
  } else {
    run_stepwise(vals, arena);
  }
  outputs.resize(g.output_ids().size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    int32_t v = g.output_ids()[k];
    const Node& prod = g.node(g.producer(v));
    // Never hand out the plan's own constant storage.
    outputs[k] = prod.kind == NodeKind::constant ? vals[v].clone() : vals[v];
  }
}

// Binds and runs one step at a time (a step's input is then a computed
// value that bind() may copy to make contiguous); values outside the arena
// are dropped after their last use.
void ExecutionPlan::run_stepwise(std::vector<Tensor>& vals, const Buffer& arena) const {
  auto destination = [&](int32_t v) { return this->destination(v, arena); };
  std::vector<Tensor> args;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const PlanStep& s = steps_[k];
    if (s.kind == PlanStep::Kind::op) {
      args.clear();
      for (int32_t v : s.inputs) args.push_back(vals[v]);
      if (arena_offset_[s.output] >= 0) {
        const Tensor dst = destination(s.output);
        detail::ScopedOutput into(dst);
        Tensor r = detail::eager_execute(s.op, args, s.attrs);
        // A result elsewhere in the arena (an alias the plan did not expect)
        // would be overwritten later: keep a private copy.
        vals[s.output] = r.buffer() == arena && r.data_ptr() != dst.data_ptr() ? r.clone() : std::move(r);
      } else {
        vals[s.output] = detail::eager_execute(s.op, args, s.attrs);
      }
    } else {
      execute(bind(k, vals, destination));
    }
    for (int32_t v : release_after_[k]) vals[v] = Tensor();  // memory outside the arena goes back early
  }
}

size_t ExecutionPlan::code_bytes() const {
  size_t n = 0;
  for (const auto& s : steps_)
    n += (s.kernel ? s.kernel->code_size() : 0) + (s.row_kernel ? s.row_kernel->code_size() : 0);
  return n;
}

std::string ExecutionPlan::describe(bool with_disassembly) const {
  std::ostringstream os;
  int k = 0;
  for (const auto& s : steps_) {
    os << "step " << k++ << ": ";
    if (s.kind == PlanStep::Kind::op) {
      os << op_name(s.op) << " (eager kernel)\n";
      continue;
    }
    if (s.kind == PlanStep::Kind::gemm) {
      const cpu::GemmCall& c = s.gemm;
      os << "matmul: " << (c.f64 ? "d" : "s") << "gemm " << (c.ta ? "T" : "N") << (c.tb ? "T" : "N") << " m=" << c.m
         << " n=" << c.n << " k=" << c.k << (c.bias ? " + bias row" : "") << (c.pack_b ? ", B packed" : "") << " ("
         << cpu::gemm_backend() << ")\n";
      continue;
    }
    if (s.kind == PlanStep::Kind::column_sum) {
      os << "sum over axis 0: column sums of " << s.rows << " rows of " << s.row_n << "\n";
      continue;
    }
    if (s.kind == PlanStep::Kind::fused_row) {
      os << "fused group of " << s.group_nodes.size() << " ops [";
      for (size_t i = 0; i < s.group_nodes.size(); ++i)
        os << (i ? " " : "") << op_name(graph_->node(s.group_nodes[i]).op);
      os << "] into " << op_name(s.op) << ": " << s.row_kernel->str() << ", " << s.rows << " rows of " << s.row_n
         << " (x never stored), " << s.kernel->code_size() + s.row_kernel->code_size() << " bytes of code\n"
         << s.program << "\n";
      if (with_disassembly) os << s.kernel->disassembly() << "\n" << s.row_kernel->disassembly() << "\n";
      continue;
    }
    if (s.kind == PlanStep::Kind::row) {
      os << (s.output2 >= 0 ? "softmax + log_softmax of one input" : std::string(op_name(s.op))) << ": "
         << s.row_kernel->str() << ", " << s.rows << " rows of " << s.row_n << ", "
         << s.row_kernel->code_size() << " bytes of code\n";
      if (with_disassembly) os << s.row_kernel->disassembly() << "\n";
      continue;
    }
    os << "fused group of " << s.group_nodes.size() << " ops [";
    for (size_t i = 0; i < s.group_nodes.size(); ++i)
      os << (i ? " " : "") << op_name(graph_->node(s.group_nodes[i]).op);
    os << "]";
    if (s.reduce_operand >= 0) os << " + " << op_name(s.reduce_op) << " over the last " << s.reduce_nred << " of each of " << s.reduce_nout << " rows";
    os << ", " << s.kernel->code_size() << " bytes of code\n" << s.program << "\n";
    if (with_disassembly) os << s.kernel->disassembly() << "\n";
  }
  os << "arena: " << arena_bytes_ << " bytes of scratch per call\n";
  return os.str();
}

}  // namespace kiln::codegen
