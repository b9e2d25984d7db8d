#include "plan.h"

#include <map>
#include <sstream>
#include <unordered_map>

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
bool build_fused_step(const Graph& g, const Group& grp, const std::vector<int>& uses_outside,
                      const std::vector<char>& is_output, const KernelOptions& opt, CpuTarget target, PlanStep& step) {
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
    // A one-element constant becomes an immediate when its value survives a double.
    if (prod.kind == NodeKind::constant && t.shape.empty() && t.dtype != DType::int64) {
      ins.kind = Instr::Kind::imm;
      ins.imm = prod.data.item<double>();
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
  if (nops > static_cast<size_t>(kMaxFusedOperands)) return false;
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
  step.kernel = generate_elementwise(p, target, opt.dump);
  step.operands = operands;
  step.num_outputs = p.num_outputs;
  for (int32_t v : out_vals) step.out_layouts.push_back(g.type(v).layout());
  step.group_nodes = grp.nodes;
  step.program = p.str();
  return true;
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
}  // namespace

ExecutionPlan::ExecutionPlan(std::shared_ptr<const Graph> graph, const KernelOptions& opt) : graph_(std::move(graph)) {
  const Graph& g = *graph_;
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::call) throw ValueError("ExecutionPlan: inline calls first (graph '" + g.name() + "')");
    else if (n.kind == NodeKind::weight) {
      weight_slots_.emplace_back(n.name, g.type(n.outputs[0]));
      weight_values_.push_back(n.outputs[0]);
    }
  std::vector<char> is_output(g.num_values(), 0);
  for (int32_t v : g.output_ids()) is_output[v] = 1;

  // Greedy grouping in topological order: an elementwise node joins the most
  // recent group when it has the group's shape and reads one of its values.
  std::vector<Group> groups;
  std::vector<int> step_group;  // per scheduled item: group index or -1 (op node index in op_nodes)
  std::vector<int32_t> item_node;
  std::vector<int32_t> group_of(g.num_values(), -1);
  const bool fuse = opt.fuse;
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.kind != NodeKind::op) continue;
    const Shape& shape = g.type(n.outputs[0]).shape;
    if (fuse && is_elementwise(n, opt.strict)) {
      int last = step_group.empty() ? -1 : step_group.back();
      bool join = false;
      if (last >= 0 && groups[last].shape == shape && groups[last].nodes.size() < 64)
        for (int32_t v : n.inputs) join = join || group_of[v] == last;
      if (!join) {
        groups.push_back({shape, {}});
        step_group.push_back(static_cast<int>(groups.size() - 1));
        item_node.push_back(-1);
        last = static_cast<int>(groups.size() - 1);
      }
      groups[last].nodes.push_back(static_cast<int32_t>(i));
      group_of[n.outputs[0]] = last;
    } else {
      step_group.push_back(-1);
      item_node.push_back(static_cast<int32_t>(i));
    }
  }
  // Uses of each value outside its own group.
  std::vector<int> uses_outside(g.num_values(), 0);
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    int32_t own = n.kind == NodeKind::op && !n.outputs.empty() ? group_of[n.outputs[0]] : -1;
    for (int32_t v : n.inputs)
      if (group_of[v] >= 0 && group_of[v] != own) ++uses_outside[v];
  }
  const CpuTarget target = detect_cpu_target();
  for (size_t k = 0; k < step_group.size(); ++k) {
    if (step_group[k] < 0) {
      steps_.push_back(op_step(g.node(item_node[k])));
      continue;
    }
    const Group& grp = groups[step_group[k]];
    PlanStep s;
    if (build_fused_step(g, grp, uses_outside, is_output, opt, target, s)) {
      steps_.push_back(std::move(s));
    } else {
      for (int32_t ni : grp.nodes) steps_.push_back(op_step(g.node(ni)));
    }
  }
}

void ExecutionPlan::run(std::span<const Tensor> inputs, std::span<const Tensor> weights,
                        std::vector<Tensor>& outputs) const {
  const Graph& g = *graph_;
  std::vector<Tensor> vals(g.num_values());
  const auto& in_ids = g.input_ids();
  for (size_t i = 0; i < in_ids.size(); ++i) vals[in_ids[i]] = inputs[i];
  for (size_t i = 0; i < weight_values_.size(); ++i) vals[weight_values_[i]] = weights[i];
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::constant) vals[n.outputs[0]] = n.data;
  std::vector<Tensor> args;
  for (const PlanStep& s : steps_) {
    if (s.kind == PlanStep::Kind::op) {
      args.clear();
      for (int32_t v : s.inputs) args.push_back(vals[v]);
      vals[s.output] = detail::eager_execute(s.op, args, s.attrs);
      continue;
    }
    std::array<char*, kMaxFusedOperands> base{};
    for (int k = 0; k < s.num_outputs; ++k) {
      const TensorLayout& l = s.out_layouts[k];
      vals[s.operands[k]] = Tensor::empty(l.shape, l.dtype, l.device);
      base[k] = static_cast<char*>(vals[s.operands[k]].data_ptr());
    }
    for (size_t k = s.num_outputs; k < s.operands.size(); ++k) {
      Tensor& t = vals[s.operands[k]];
      if (!t.is_contiguous()) t = t.contiguous();  // eager views (e.g. transpose) feeding generated code
      base[k] = static_cast<char*>(t.data_ptr());
    }
    InnerLoopFn fn = s.kernel->fn();
    cpu::run_loop_at<kMaxFusedOperands>(s.loop, base, [fn](char** p, const int64_t* st, int64_t n) { fn(p, st, n); });
  }
  outputs.resize(g.output_ids().size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    int32_t v = g.output_ids()[k];
    const Node& prod = g.node(g.producer(v));
    // Never hand out the plan's own constant storage.
    outputs[k] = prod.kind == NodeKind::constant ? vals[v].clone() : vals[v];
  }
}

size_t ExecutionPlan::code_bytes() const {
  size_t n = 0;
  for (const auto& s : steps_)
    if (s.kernel) n += s.kernel->code_size();
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
    os << "fused group of " << s.group_nodes.size() << " ops [";
    for (size_t i = 0; i < s.group_nodes.size(); ++i)
      os << (i ? " " : "") << op_name(graph_->node(s.group_nodes[i]).op);
    os << "], " << s.kernel->code_size() << " bytes of code\n" << s.program << "\n";
    if (with_disassembly) os << s.kernel->disassembly() << "\n";
  }
  return os.str();
}

}  // namespace kiln::codegen
