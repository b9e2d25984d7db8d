#include "step_pairs.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "../backends/cpu/jit/small_gemm.h"

namespace kiln::codegen {

double single_thread_gemm_macs(const PlanStep& s) {
  double macs = 0;
  if (s.kind == PlanStep::Kind::gemm) {
    // The generated GEMM eager runs for this problem (bias and pack_b are
    // done around it on the calling thread); a BLAS call may start threads.
    if (!s.gemm.small || s.gemm.f64) return 0;
    macs = double(s.gemm.m) * double(s.gemm.n) * double(s.gemm.k);
  } else if (s.kind == PlanStep::Kind::gemm_fused && s.small_gemm) {
    const SmallGemmKey& k = s.small_gemm->key();
    macs = double(k.m) * double(k.n) * double(k.k);
  } else {
    return 0;
  }
  return macs < kSmallGemmParallelMacs ? macs : 0;
}

namespace {

bool intersects(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  for (int32_t x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}

// Step b may run at the same time as (or before) step a: it reads nothing a
// writes and writes nothing a reads or writes.
bool independent(const PlanStep& a, const PlanStep& b) {
  const std::vector<int32_t> ra = step_reads(a), wa = step_writes(a), rb = step_reads(b), wb = step_writes(b);
  return !intersects(rb, wa) && !intersects(wb, ra) && !intersects(wb, wa);
}

bool writes_output(const PlanStep& s, const std::vector<char>& is_output) {
  for (int32_t v : step_writes(s))
    if (is_output[v]) return true;
  return false;
}

// How far ahead a partner is looked for: plans are short between GEMMs, and
// each candidate is checked against every step it moves past.
constexpr size_t kWindow = 16;

}  // namespace

bool interop_enabled() {
  const char* e = std::getenv("KILN_JIT_INTEROP");
  return !(e && std::strcmp(e, "0") == 0);
}

namespace {
// Steps k and k + 1 run at once from now on.
void set_pair(std::vector<PlanStep>& steps, size_t k, const std::vector<char>& is_output) {
  steps[k].run_with_next = true;
  steps[k].pair_writes_output = writes_output(steps[k], is_output) || writes_output(steps[k + 1], is_output);
}
bool big(const PlanStep& s) { return single_thread_gemm_macs(s) >= kInteropMinMacs; }
}  // namespace

void mark_adjacent_pairs(std::vector<PlanStep>& steps, const std::vector<char>& is_output, bool enabled) {
  for (PlanStep& s : steps) s.run_with_next = s.pair_writes_output = false;
  if (!enabled) return;
  for (size_t k = 0; k + 1 < steps.size(); ++k)
    if (big(steps[k]) && big(steps[k + 1]) && independent(steps[k], steps[k + 1])) set_pair(steps, k++, is_output);
}

void pair_independent_steps(std::vector<PlanStep>& steps, const std::vector<char>& is_output, bool enabled) {
  for (PlanStep& s : steps) s.run_with_next = s.pair_writes_output = false;
  if (!enabled) return;
  for (size_t k = 0; k + 1 < steps.size(); ++k) {
    if (!big(steps[k])) continue;
    // The first later GEMM that can move up to k + 1: independent of k and
    // of every step between, and writing no graph output (an output may be
    // the memory of an input that a step in between reads: in-place
    // write-back).
    for (size_t j = k + 1; j < steps.size() && j <= k + kWindow; ++j) {
      bool movable = big(steps[j]) && independent(steps[k], steps[j]) && (j == k + 1 || !writes_output(steps[j], is_output));
      for (size_t i = k + 1; movable && i < j; ++i) movable = independent(steps[i], steps[j]);
      if (!movable) continue;
      std::rotate(steps.begin() + static_cast<std::ptrdiff_t>(k + 1), steps.begin() + static_cast<std::ptrdiff_t>(j),
                  steps.begin() + static_cast<std::ptrdiff_t>(j + 1));
      set_pair(steps, k, is_output);
      ++k;  // the partner is taken
      break;
    }
  }
}

}  // namespace kiln::codegen
