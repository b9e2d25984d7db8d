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
    // A plain GEMM that reads its transposed B in place (few rows: x W^T at
    // batch 1) stays plain: with an epilogue it would copy all of B first
    // (small_gemm.h), a pass over the weight that costs more than the
    // epilogue's own pass over the m x n product saves.
    if (small_gemm_swaps(s.gemm.small->key())) continue;
    for (size_t k2 = k + 1; k2 < steps.size(); ++k2) {
      const std::vector<int32_t> r = step_reads(steps[k2]);
      if (std::find(r.begin(), r.end(), s.output) == r.end()) continue;
      int product = -1;
      const std::optional<SmallGemmKey> key = epilogue_key(g, s, steps[k2], product);
      if (!key) break;
      std::shared_ptr<const SmallGemm>& gen = cache[key->str()];
      if (!gen && images && !opt.dump) {
        auto im = images->find(key->str());
        if (im != images->end()) {
          try {
            gen = load_small_gemm(*key, im->second);
          } catch (const Error&) {
            // a malformed image: generated below
          }
        }
      }
      if (!gen) gen = generate_small_gemm(*key, opt.dump);
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
  size_t w = 0;
  for (size_t k = 0; k < steps.size(); ++k)
    if (!merged[k]) {
      if (w != k) steps[w] = std::move(steps[k]);
      ++w;
    }
  steps.resize(w);
}

}  // namespace kiln::codegen
