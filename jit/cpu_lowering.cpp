// The CPU lowering of a fusion plan, and the code running its steps: see
// cpu_lowering.h.
#include "cpu_lowering.h"
#include "plan_small_gemm.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "../backends/cpu/jit/row_kernels.h"
#include "../backends/cpu/jit/small_gemm.h"
#include "../backends/cpu/parallel_ranges.h"
#include "../backends/cpu/reduce_kernels.h"

namespace kiln::codegen {

namespace {
// Byte strides of a contiguous operand of `s` broadcast to `shape`.
std::vector<int64_t> static_strides(const Shape& s, DType d, const Shape& shape) {
  Strides cs = contiguous_strides(s);
  std::vector<int64_t> r(shape.size(), 0);
  const size_t lead = shape.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i)
    r[lead + i] = s[i] == 1 && shape[lead + i] != 1 ? 0 : cs[i] * static_cast<int64_t>(size_of(d));
  return r;
}

// A fused step running group `grp` as one generated kernel. Returns false
// when the group cannot be generated (the caller falls back to op steps).
// The step's kernel is set by lower_cpu once the steps are final (a group
// that becomes a GEMM's epilogue needs none); groups that differ only in
// their constants (read from a table) share one.
bool build_fused_step(const Graph& g, const FusionGroup& grp, const KernelOptions& opt, CpuTarget target,
                      PlanStep& step) {
  std::unordered_map<int32_t, int32_t> reg;  // value id -> register
  std::vector<int32_t> in_vals;
  const std::vector<int32_t>& out_vals = grp.outputs;
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
  // the kernel comes once the steps are final (lower_cpu): a group that
  // becomes a GEMM's epilogue needs none
  step.operands = operands;
  step.num_outputs = p.num_outputs;
  for (int32_t v : out_vals) step.out_layouts.push_back(g.type(v).layout());
  step.group_nodes = grp.nodes;
  step.program = std::make_shared<const std::string>(std::move(text));
  step.elementwise = std::make_shared<const ElementwiseProgram>(std::move(p));
  return true;
}

PlanStep op_step(const Graph& g, const Node& n) {
  PlanStep s;
  s.kind = PlanStep::Kind::op;
  s.node = static_cast<int32_t>(&n - g.nodes().data());
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
  s = op_step(g, n);
  s.kind = PlanStep::Kind::row;
  s.row_kernel = step_row_kernel(k, opt);
  s.row_n = shape.back();
  s.rows = s.row_n == 0 ? 0 : g.type(n.inputs[0]).layout().numel() / s.row_n;
  s.out_layouts = {g.type(n.outputs[0]).layout()};
  return true;
}

// A 2-d float32/float64 matmul node as one bound BLAS call: each operand is
// a value (contiguous, as the graph types it) or a transposing permute of
// one, folded into the call's transpose flag (match_gemm in fusion.cpp
// found them). A value that is a strided view at run time (an argument
// passed transposed or sliced) does not run this call: the step then makes
// eager's call for the view (ExecutionPlan::run_stepwise, cpu::gemm_strided). Returns false when the node keeps its op step
// (layouts the BLAS call cannot take). `s` must be a fresh PlanStep.
bool build_gemm_step(const Graph& g, const Node& n, const GemmOperands& ops, const KernelOptions& opt, PlanStep& s,
                     GemmCallMemo* memo = nullptr) {
  const TensorType& out = g.type(n.outputs[0]);
  int64_t rs[2], cs[2];
  for (int j = 0; j < 2; ++j) {
    const bool transposed = ops.transposed[j];
    // element strides of the operand as the matmul sees it
    const int64_t ld = g.type(ops.base[j]).shape[1];
    rs[j] = transposed ? 1 : ld;
    cs[j] = transposed ? ld : 1;
  }
  const int64_t m = out.shape[0], nn = out.shape[1], k = g.type(n.inputs[0]).shape[1];
  const bool f64 = out.dtype == DType::float64;
  std::optional<cpu::GemmCall> planned;
  const std::optional<cpu::GemmCall>* call = &planned;
  if (memo && memo->valid && memo->f64 == f64 && memo->m == m && memo->n == nn && memo->k == k &&
      memo->rs[0] == rs[0] && memo->cs[0] == cs[0] && memo->rs[1] == rs[1] && memo->cs[1] == cs[1]) {
    call = &memo->call;
  } else {
    planned = cpu::plan_gemm(f64, m, nn, k, rs[0], cs[0], rs[1], cs[1]);
    if (memo) {
      *memo = GemmCallMemo{true, f64, m, nn, k, {rs[0], rs[1]}, {cs[0], cs[1]}, planned};
      call = &memo->call;
    }
  }
  if (!*call) return false;
  // op_step's fields set in place (s is a fresh step: no PlanStep temporary,
  // no copy of the node's inputs; a MEF read restores 250 of these per ms)
  s.kind = PlanStep::Kind::gemm;
  s.node = static_cast<int32_t>(&n - g.nodes().data());
  s.op = n.op;
  s.attrs = n.attrs;
  s.output = n.outputs[0];
  s.inputs = {ops.base[0], ops.base[1]};
  for (int j = 0; j < 2; ++j) {
    s.gemm_base[j] = ops.base[j];
    s.gemm_transposed[j] = ops.transposed[j];
  }
  s.gemm = **call;
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
  s = op_step(g, n);
  s.kind = PlanStep::Kind::column_sum;
  s.rows = rows;
  s.row_n = cols;
  s.out_layouts = {g.type(n.outputs[0]).layout()};
  return true;
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
  rs.elementwise = std::move(f.elementwise);
  rs.loop = f.loop;
}

}  // namespace

bool restore_op_step(const Graph& g, int32_t node, PlanStep& s) {
  if (node < 0 || static_cast<size_t>(node) >= g.num_nodes()) return false;
  const Node& n = g.node(node);
  if (n.kind != NodeKind::op || n.outputs.empty()) return false;
  s = op_step(g, n);
  return true;
}

bool restore_row_step(const Graph& g, int32_t node, int32_t pair, const KernelOptions& opt, PlanStep& s) {
  if (node < 0 || static_cast<size_t>(node) >= g.num_nodes() || g.node(node).kind != NodeKind::op) return false;
  const Node& n = g.node(node);
  if (!build_row_step(g, n, opt, s)) return false;
  if (pair < 0) return true;
  // a softmax and a log_softmax of the same input along the same axis (fusion.cpp pairs them)
  if (static_cast<size_t>(pair) >= g.num_nodes() || pair == node) return false;
  const Node& l = g.node(pair);
  if (n.op != OpId::Softmax || l.kind != NodeKind::op || l.op != OpId::LogSoftmax || l.inputs.size() != 1 ||
      l.outputs.size() != 1 || l.inputs[0] != n.inputs[0] || l.attrs.axis != n.attrs.axis ||
      !(g.type(l.outputs[0]) == g.type(n.outputs[0])))
    return false;
  const RowKernel* k = cached_row_kernel(RowOp::softmax_and_log_softmax, false, false, DType::float32);
  if (!k) return false;
  s.row_kernel = step_row_kernel(k, opt);
  s.output2 = l.outputs[0];
  return true;
}

bool restore_gemm_step(const Graph& g, int32_t node, const GemmOperands& ops, const KernelOptions& opt, PlanStep& s,
                       GemmCallMemo* memo) {
  if (node < 0 || static_cast<size_t>(node) >= g.num_nodes()) return false;
  const Node& n = g.node(node);
  if (n.kind != NodeKind::op || n.op != OpId::Matmul || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  const TensorType& out = g.type(n.outputs[0]);
  if ((out.dtype != DType::float32 && out.dtype != DType::float64) || out.shape.size() != 2 ||
      checked_numel(out.shape) == 0)
    return false;
  // each operand is the matmul's input, or (transposed) the input of a
  // permute {1, 0} that is the matmul's input (match_gemm in fusion.cpp)
  for (int j = 0; j < 2; ++j) {
    const int32_t v = n.inputs[j], b = ops.base[j];
    if (b < 0 || static_cast<size_t>(b) >= g.num_values()) return false;
    if (!ops.transposed[j]) {
      if (b != v) return false;
      continue;
    }
    const Node& p = g.node(g.producer(v));
    if (p.kind != NodeKind::op || p.op != OpId::Permute || p.inputs.size() != 1 || p.inputs[0] != b ||
        p.attrs.ints.size() != 2 || p.attrs.ints[0] != 1 || p.attrs.ints[1] != 0)
      return false;
  }
  for (int j = 0; j < 2; ++j) {
    const TensorType& t = g.type(ops.base[j]);
    if (t.dtype != out.dtype || t.shape.size() != 2) return false;
  }
  if (!build_gemm_step(g, n, ops, opt, s, memo)) return false;
  s.node = node;
  return true;
}

bool restore_column_sum_step(const Graph& g, int32_t node, PlanStep& s) {
  if (node < 0 || static_cast<size_t>(node) >= g.num_nodes() || g.node(node).kind != NodeKind::op) return false;
  return build_column_sum_step(g, g.node(node), s);
}

cpu::StridedLoop<kMaxFusedOperands> fused_loop(const Graph& g, std::span<const int32_t> operands, const Shape& shape) {
  std::array<std::vector<int64_t>, kMaxFusedOperands> st;
  for (size_t k = 0; k < kMaxFusedOperands; ++k)
    st[k] = k < operands.size() ? static_strides(g.type(operands[k]).shape, g.type(operands[k]).dtype, shape)
                                : std::vector<int64_t>(shape.size(), 0);
  return cpu::make_loop_from_strides<kMaxFusedOperands>(shape, st);
}

FusionRules cpu_fusion_rules(const KernelOptions& opt) {
  FusionRules r;
  r.max_operands = kMaxFusedOperands;
  r.reduce_in_group = [](OpId op) { return cpu::can_reduce_produced(op); };
  r.gemm = [opt](const Graph& g, const Node& n, const GemmOperands& ops) {
    PlanStep probe;
    return build_gemm_step(g, n, ops, opt, probe);
  };
  r.row = [opt](const Graph& g, const Node& n) {
    PlanStep probe;
    return build_row_step(g, n, opt, probe);
  };
  r.column_sum = [](const Graph& g, const Node& n) {
    PlanStep probe;
    if (!build_column_sum_step(g, n, probe)) return false;
    // Not of a strided view (a transposed value, say): eager's reduce()
    // sums a view in its own order (a unit-stride reduced axis in lanes),
    // so the sum stays an op step running it on the view. (A strided
    // argument is met when the plan runs: ExecutionPlan::run_stepwise.)
    Shape shape;
    Strides strides;
    planned_strides(g, n.inputs[0], shape, strides);
    return is_contiguous(shape, strides);
  };
  return r;
}

std::vector<PlanStep> lower_cpu(const Graph& g, const FusionPlan& fusion, const KernelOptions& opt,
                                const CodeImages* images) {
  std::vector<PlanStep> steps;
  const std::vector<FusionGroup>& groups = fusion.groups;
  // absorb_into[group]: the row node running the group inside its step;
  // -1 once the group's step declines (then both run as steps of their own).
  std::vector<int32_t> absorb_into(groups.size(), -1);
  for (size_t gi = 0; gi < groups.size(); ++gi) absorb_into[gi] = groups[gi].absorbed_by;
  std::vector<PlanStep> stashed(groups.size());  // an absorbed group's built step
  std::vector<char> emitted(g.num_nodes(), 0);
  const CpuTarget target = detect_cpu_target();
  KernelSource kernels(target, opt, images);
  for (const FusionItem& it : fusion.items) {
    if (it.kind == FusionItem::Kind::gemm) {
      const Node& n = g.node(it.node);
      PlanStep s;
      build_gemm_step(g, n, it.gemm_operands, opt, s);
      if (it.gemm_bias >= 0) {
        s.output = it.gemm_output;
        s.inputs.push_back(it.gemm_bias);
        s.gemm.bias = true;
      }
      steps.push_back(std::move(s));
      continue;
    }
    if (it.kind == FusionItem::Kind::column_sum) {
      PlanStep s;
      build_column_sum_step(g, g.node(it.node), s);
      steps.push_back(std::move(s));
      continue;
    }
    if (it.kind == FusionItem::Kind::op) {
      steps.push_back(op_step(g, g.node(it.node)));
      continue;
    }
    if (it.kind == FusionItem::Kind::row) {
      const Node& n = g.node(it.node);
      if (emitted[it.node]) continue;  // ran with its partner
      PlanStep rs;
      if (it.partner >= 0) {
        // the pair's step, where the first of the two runs (x exists there)
        const Node& sm = n.op == OpId::Softmax ? n : g.node(it.partner);
        const Node& lsm = n.op == OpId::Softmax ? g.node(it.partner) : n;
        build_row_step(g, sm, opt, rs);
        const RowKernel* k = cached_row_kernel(RowOp::softmax_and_log_softmax, false, false, DType::float32);
        if (k) {
          rs.row_kernel = step_row_kernel(k, opt);
          rs.output2 = lsm.outputs[0];
          emitted[it.partner] = 1;
          steps.push_back(std::move(rs));
          continue;
        }
      }
      if (build_row_step(g, n, opt, rs)) {
        const int gi = it.group;
        if (gi >= 0 && absorb_into[gi] == it.node) absorb_group(std::move(stashed[gi]), rs);
        steps.push_back(std::move(rs));
      } else {
        steps.push_back(op_step(g, n));
      }
      continue;
    }
    const FusionGroup& grp = groups[it.group];
    PlanStep s;
    const int32_t rn = grp.reduce_node;
    if (build_fused_step(g, grp, opt, target, s)) {
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
        s.reduce_operand = static_cast<int>(std::find(s.operands.begin(), s.operands.begin() + s.num_outputs, v) - s.operands.begin());
        s.reduce_op = r.op;
        s.reduce_output = r.outputs[0];
        s.reduce_nred = grp.reduce_nred;
        s.reduce_nout = grp.reduce_nout;
      }
      steps.push_back(std::move(s));
    } else {
      absorb_into[it.group] = -1;
      for (int32_t ni : grp.nodes) steps.push_back(op_step(g, g.node(ni)));
      if (rn >= 0) steps.push_back(op_step(g, g.node(rn)));
    }
  }
  if (opt.fuse) merge_gemm_epilogues(g, steps, opt, images);
  // The kernels of the groups that run as such (not as a GEMM's epilogue).
  for (PlanStep& s : steps)
    if (s.kind == PlanStep::Kind::fused || s.kind == PlanStep::Kind::fused_row) s.kernel = kernels.get(*s.elementwise, *s.program);
  return steps;
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
  if (n <= 0) return;
  // The outer index of `first` (divisions once), then stepped run by run
  // with carries: a fused_row step's prologue is one run per row when an
  // operand is broadcast along the rows (a softmax's [n, 1, 1, L] mask),
  // and dividing per run cost ~20 ns of each 128-float row.
  int64_t c = first % inner_n;
  std::array<int64_t, 8> idx{};  // the outer axes (nd - 1 of them; more: divided per run below)
  std::array<char*, kMaxFusedOperands> row = base;  // operand pointers at the run's column 0
  {
    int64_t rem = first / inner_n;
    for (int d = nd - 2; d >= 0; --d) {
      const int64_t i = rem % L.shape[d];
      rem /= L.shape[d];
      if (d < static_cast<int>(idx.size())) idx[d] = i;
      for (int k = 0; k < kMaxFusedOperands; ++k) row[k] += i * L.stride[k][d];
    }
  }
  const bool odometer = nd - 1 <= static_cast<int>(idx.size());
  for (int64_t done = 0;;) {
    const int64_t len = std::min(inner_n - c, n - done);
    std::array<char*, kMaxFusedOperands> p = row;
    for (int k = 0; k < kMaxFusedOperands; ++k) p[k] += c * st[k];
    p[red] = dst + done * isz;
    fn(p.data(), st.data(), len);
    done += len;
    if (done >= n) break;
    c = 0;
    if (odometer) {
      for (int d = nd - 2; d >= 0; --d) {
        for (int k = 0; k < kMaxFusedOperands; ++k) row[k] += L.stride[k][d];
        if (++idx[d] < L.shape[d]) break;
        for (int k = 0; k < kMaxFusedOperands; ++k) row[k] -= L.shape[d] * L.stride[k][d];
        idx[d] = 0;
      }
    } else {
      row = base;
      int64_t rem = (first + done) / inner_n;
      for (int d = nd - 2; d >= 0; --d) {
        const int64_t i = rem % L.shape[d];
        rem /= L.shape[d];
        for (int k = 0; k < kMaxFusedOperands; ++k) row[k] += i * L.stride[k][d];
      }
    }
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
  if (s.kind == PlanStep::Kind::gemm_fused) {
    const size_t next = s.operands.size() + !s.imm_table.empty();
    s.small_gemm->run(reinterpret_cast<const float*>(b.base[next]), reinterpret_cast<const float*>(b.base[next + 1]),
                      b.base.data());
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

size_t ExecutionPlan::code_bytes() const {
  size_t n = 0;
  for (const auto& s : steps_)
    n += (s.kernel ? s.kernel->code_size() : 0) + (s.row_kernel ? s.row_kernel->code_size() : 0) +
         (s.small_gemm ? s.small_gemm->code_size() : 0);
  return n;
}

std::string ExecutionPlan::describe(bool with_disassembly) const {
  std::ostringstream os;
  int k = 0;
  for (const auto& s : steps_) {
    os << "step " << k++ << ": ";
    if (s.run_with_next) os << "[runs at once with the next step, one thread each] ";
    if (s.kind == PlanStep::Kind::op) {
      os << op_name(s.op) << " (eager kernel)\n";
      continue;
    }
    if (s.kind == PlanStep::Kind::gemm) {
      const cpu::GemmCall& c = s.gemm;
      os << "matmul: " << (c.f64 ? "d" : "s") << "gemm " << (c.ta ? "T" : "N") << (c.tb ? "T" : "N") << " m=" << c.m
         << " n=" << c.n << " k=" << c.k << (c.bias ? " + bias row" : "")
         << (c.small ? "" : c.pack_b ? ", B packed" : "") << " (" << (c.small ? "generated" : cpu::gemm_backend())
         << (c.small && small_gemm_swaps(c.small->key()) ? ", swapped: C^T = B A^T, B read in place" : "") << ")\n";
      continue;
    }
    if (s.kind == PlanStep::Kind::gemm_fused) {
      const cpu::GemmCall& c = s.gemm;
      os << "matmul: generated sgemm " << (c.ta ? "T" : "N") << (c.tb ? "T" : "N") << " m=" << c.m << " n=" << c.n
         << " k=" << c.k << " (tile " << s.small_gemm->tile_rows() << "x" << s.small_gemm->tile_cols()
         << ") with the epilogue [";
      for (size_t i = 0; i < s.group_nodes.size(); ++i)
        os << (i ? " " : "") << op_name(graph_->node(s.group_nodes[i]).op);
      os << "] on the tile in registers (product never stored)";
      if (s.column_sum_output >= 0)
        os << ", column sums of output " << s.small_gemm->key().column_sums << " made there (%" << s.column_sum_output << ")";
      os << ", " << s.small_gemm->code_size() << " bytes of code\n"
         << *s.program << "\n";
      if (with_disassembly) os << s.small_gemm->disassembly() << "\n";
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
         << *s.program << "\n";
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
    os << ", " << s.kernel->code_size() << " bytes of code\n" << *s.program << "\n";
    if (with_disassembly) os << s.kernel->disassembly() << "\n";
  }
  os << "arena: " << arena_bytes_ << " bytes of scratch per call\n";
  return os.str();
}

}  // namespace kiln::codegen
