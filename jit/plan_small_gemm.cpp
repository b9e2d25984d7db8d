#include "plan_small_gemm.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>

#include "../backends/cpu/jit/small_gemm.h"

namespace kiln::codegen {

namespace {

// How value type t is read by an epilogue over an m x n result.
std::optional<EpiLayout> layout_of(const TensorType& t, int64_t m, int64_t n) {
  if (t.dtype != DType::float32) return std::nullopt;
  const Shape& s = t.shape;
  if (s.size() == 2 && s[0] == m && s[1] == n) return EpiLayout::matrix;
  if (t.layout().numel() == 1) return EpiLayout::scalar;
  if ((s.size() == 1 && s[0] == n) || (s.size() == 2 && s[0] == 1 && s[1] == n)) return EpiLayout::row;
  return std::nullopt;
}

using GemmCache = std::unordered_map<std::string, std::shared_ptr<const SmallGemm>>;

// The key of gemm step `s` with fused step `f` (reading s's product) as its
// epilogue; nullopt when f cannot be one.
std::optional<SmallGemmKey> epilogue_key(const Graph& g, const PlanStep& s, const PlanStep& f, int& product) {
  const cpu::GemmCall& c = s.gemm;
  if (f.kind != PlanStep::Kind::fused || f.reduce_operand >= 0 || !f.elementwise) return std::nullopt;
  const size_t nops = f.operands.size();
  if (nops + !f.imm_table.empty() + 2 > static_cast<size_t>(kMaxFusedOperands)) return std::nullopt;
  SmallGemmKey key = plain_gemm_key(detect_cpu_target(), c.m, c.n, c.k, c.ta, c.tb, c.lda, c.ldb, c.ldc);
  key.epilogue = *f.elementwise;
  key.layouts.clear();
  key.lds.clear();
  product = -1;
  for (size_t j = 0; j < nops; ++j) {
    const int32_t v = f.operands[j];
    if (static_cast<int>(j) >= f.num_outputs && v == s.output) {
      if (product >= 0) return std::nullopt;
      product = static_cast<int>(j);
      key.layouts.push_back(EpiLayout::product);
      key.lds.push_back(0);
      continue;
    }
    const std::optional<EpiLayout> l = layout_of(g.type(v), c.m, c.n);
    if (!l || (static_cast<int>(j) < f.num_outputs && *l != EpiLayout::matrix)) return std::nullopt;
    key.layouts.push_back(*l);
    key.lds.push_back(*l == EpiLayout::matrix ? c.n : 0);
  }
  if (product < 0 || !small_gemm_why_not(key).empty()) return std::nullopt;
  return key;
}

// The generated GEMM of `key`: from the plan's cache, else from `images`,
// else generated.
std::shared_ptr<const SmallGemm> gemm_for(const SmallGemmKey& key, const KernelOptions& opt, const CodeImages* images,
                                          GemmCache& cache) {
  std::shared_ptr<const SmallGemm>& gen = cache[key.str()];
  if (!gen && images && !opt.dump) {
    auto im = images->find(key.str());
    if (im != images->end()) {
      try {
        gen = load_small_gemm(key, im->second);
      } catch (const Error&) {
        // a malformed image: generated below
      }
    }
  }
  if (!gen) gen = generate_small_gemm(key, opt.dump);
  return gen;
}

// Removes the steps marked in `merged` (folded into another step), keeping order.
void drop_merged(std::vector<PlanStep>& steps, const std::vector<char>& merged) {
  size_t w = 0;
  for (size_t k = 0; k < steps.size(); ++k)
    if (!merged[k]) {
      if (w != k) steps[w] = std::move(steps[k]);
      ++w;
    }
  steps.resize(w);
}

// A small float32 gemm step whose bias row the fusion folded into the call
// (GemmCall::bias: C = A B stored, then C += bias in a second pass over C)
// becomes a gemm_fused step with the epilogue out = product + bias on the
// tile in registers: the same add of the same two floats (eager's bits).
void bias_as_epilogue(const Graph& g, PlanStep& s, const KernelOptions& opt, const CodeImages* images, GemmCache& cache) {
  const cpu::GemmCall& c = s.gemm;
  if (s.kind != PlanStep::Kind::gemm || !c.small || !c.bias || c.f64 || s.inputs.size() != 3 || c.ldc != c.n) return;
  // A GEMM that reads its transposed B in place keeps its bias pass (as in
  // merge_gemm_epilogues: an epilogue would make it copy all of B first).
  if (small_gemm_swaps(c.small->key())) return;
  const int32_t product = g.node(s.node).outputs[0], bias = s.inputs[2], out = s.output;
  if (layout_of(g.type(bias), c.m, c.n) != EpiLayout::row || layout_of(g.type(out), c.m, c.n) != EpiLayout::matrix ||
      layout_of(g.type(product), c.m, c.n) != EpiLayout::matrix)
    return;
  auto prog = std::make_shared<ElementwiseProgram>();
  ElementwiseProgram& p = *prog;
  p.operand_dtypes = {DType::float32, DType::float32, DType::float32};
  p.operand_broadcast = {false, false, false};
  p.num_outputs = 1;
  p.strict = opt.strict;
  auto load = [](int32_t arg) {
    Instr in;
    in.kind = Instr::Kind::load;
    in.dtype = DType::float32;
    in.arg = arg;
    return in;
  };
  Instr add;
  add.kind = Instr::Kind::op;
  add.op = OpId::Add;
  add.dtype = DType::float32;
  add.a = 0;  // the product first, as the call's bias pass adds (row[j] + bias[j])
  add.b = 1;
  Instr st;
  st.kind = Instr::Kind::store;
  st.dtype = DType::float32;
  st.a = 2;
  st.arg = 0;
  p.code = {load(1), load(2), add, st};
  SmallGemmKey key = plain_gemm_key(detect_cpu_target(), c.m, c.n, c.k, c.ta, c.tb, c.lda, c.ldb, c.ldc);
  key.epilogue = p;
  key.layouts = {EpiLayout::matrix, EpiLayout::product, EpiLayout::row};
  key.lds = {c.ldc, 0, 0};
  if (!small_gemm_why_not(key).empty()) return;
  s.small_gemm = gemm_for(key, opt, images, cache);
  s.kind = PlanStep::Kind::gemm_fused;
  s.operands = {out, product, bias};
  s.num_outputs = 1;
  s.product_operand = 1;
  s.inputs = {s.inputs[0], s.inputs[1]};
  s.gemm.bias = false;
  s.output = -1;
  s.elementwise = std::move(prog);
  s.program = std::make_shared<const std::string>(s.elementwise->str());
  s.kernel.reset();
  s.group_nodes = {g.producer(out)};  // (a gemm step lists none of its own)
}

// A float32 column_sum step (sum over axis 0) of an output of an earlier
// gemm_fused step is summed in that step's epilogue while each tile is in
// registers (SmallGemmKey::column_sums): the bias gradient db = sum_rows(dz)
// of the GEMM step that computes dz, without reading dz again. Where the
// GEMM runs on one thread only (the sums follow the row blocks in order).
void merge_column_sums(std::vector<PlanStep>& steps, const KernelOptions& opt, const CodeImages* images,
                       GemmCache& cache) {
  std::vector<char> merged(steps.size(), 0);
  for (size_t c = 0; c < steps.size(); ++c) {
    const PlanStep& cs = steps[c];
    if (cs.kind != PlanStep::Kind::column_sum || cs.out_layouts.empty() || cs.out_layouts[0].dtype != DType::float32 ||
        cs.inputs.size() != 1)
      continue;
    const int32_t x = cs.inputs[0];
    for (size_t k = c; k-- > 0;) {
      const std::vector<int32_t> w = step_writes(steps[k]);
      if (std::find(w.begin(), w.end(), x) == w.end()) continue;
      PlanStep& s = steps[k];  // the step that writes x
      if (s.kind != PlanStep::Kind::gemm_fused || !s.small_gemm || s.column_sum_output >= 0 ||
          s.operands.size() + !s.imm_table.empty() + 3 > static_cast<size_t>(kMaxFusedOperands))
        break;
      int out = -1;
      for (int j = 0; j < s.num_outputs; ++j)
        if (s.operands[static_cast<size_t>(j)] == x) out = j;
      SmallGemmKey key = s.small_gemm->key();
      if (out < 0 || key.m != cs.rows || key.n != cs.row_n || key.lds[static_cast<size_t>(out)] != key.n) break;
      key.column_sums = out;
      if (!small_gemm_why_not(key).empty()) break;
      s.small_gemm = gemm_for(key, opt, images, cache);
      s.column_sum_output = cs.output;
      s.group_nodes.push_back(cs.node);
      merged[c] = 1;
      break;
    }
  }
  drop_merged(steps, merged);
}

}  // namespace

void merge_gemm_epilogues(const Graph& g, std::vector<PlanStep>& steps, const KernelOptions& opt,
                          const CodeImages* images) {
  std::vector<int> reads(g.num_values(), 0);
  for (const PlanStep& s : steps)
    for (int32_t v : step_reads(s)) ++reads[static_cast<size_t>(v)];
  for (int32_t v : g.output_ids()) ++reads[static_cast<size_t>(v)];
  std::vector<char> merged(steps.size(), 0);
  GemmCache cache;
  for (size_t k = 0; k < steps.size(); ++k) {
    const PlanStep& s = steps[k];
    // only where eager runs the generated GEMM for this problem (strict: its bits)
    if (s.kind != PlanStep::Kind::gemm || !s.gemm.small || s.gemm.bias || reads[static_cast<size_t>(s.output)] != 1)
      continue;
    // A plain GEMM that takes the swapped route stays plain (small_gemm.h):
    // one that reads its transposed B in place (few rows: x W^T at batch 1)
    // would copy all of B first with an epilogue, a pass over the weight
    // that costs more than the epilogue's own pass over the m x n product
    // saves; A^T B with a narrow n past one vector would fill part of each
    // vector per row. (Up to one vector, A^T B with a narrow n runs in
    // transposed tiles, with its epilogue: small_gemm_transposed_tiles.)
    if (small_gemm_swaps(s.gemm.small->key())) continue;
    for (size_t k2 = k + 1; k2 < steps.size(); ++k2) {
      const std::vector<int32_t> r = step_reads(steps[k2]);
      if (std::find(r.begin(), r.end(), s.output) == r.end()) continue;
      int product = -1;
      const std::optional<SmallGemmKey> key = epilogue_key(g, s, steps[k2], product);
      if (!key) break;
      const std::shared_ptr<const SmallGemm> gen = gemm_for(*key, opt, images, cache);
      PlanStep& f = steps[k2];
      f.kind = PlanStep::Kind::gemm_fused;
      f.node = s.node;
      f.gemm_base[0] = s.gemm_base[0];
      f.gemm_base[1] = s.gemm_base[1];
      f.gemm_transposed[0] = s.gemm_transposed[0];
      f.gemm_transposed[1] = s.gemm_transposed[1];
      f.inputs = {s.inputs[0], s.inputs[1]};
      f.gemm = s.gemm;
      f.small_gemm = gen;
      f.product_operand = product;
      f.kernel.reset();
      {  // the matmul's nodes first, then the group's
        ValueList nodes = s.group_nodes;
        for (int32_t n : f.group_nodes) nodes.push_back(n);
        f.group_nodes = std::move(nodes);
      }
      merged[k] = 1;
      break;
    }
  }
  drop_merged(steps, merged);
  for (PlanStep& s : steps) bias_as_epilogue(g, s, opt, images, cache);
  merge_column_sums(steps, opt, images, cache);
}

}  // namespace kiln::codegen
