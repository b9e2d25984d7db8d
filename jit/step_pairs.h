// kiln (internal): inter-op parallelism in a CPU plan. Two independent GEMM
// steps that each run on one thread (a generated GEMM below its row-split
// size) are placed next to each other and marked to run at once, one per
// core, when each is large enough to pay for the handoff between threads.
// The decision is made per step from its size, at plan time; small steps
// never pair. Each GEMM is still computed by one call on one thread, so the
// bits do not change.
#pragma once
#include <vector>

#include "plan.h"

namespace kiln::codegen {

/// Multiply-adds (m n k) from which a single-threaded GEMM step is worth
/// running beside another: at 100-140 GFLOP/s per core a 2^17-MAC GEMM takes
/// about 2 us, the measured cost of waking the second OpenMP thread and
/// joining it is 1-3.5 us, so below this the pair would be slower
/// (BM_compiled_two_gemms in benchmarks/bench_small_gemm.cpp measures the
/// break-even: the same two GEMMs paired and in order, n = 32 .. 112).
inline constexpr double kInteropMinMacs = double(1 << 17);

/// Multiply-adds of a GEMM step that runs on one thread, or 0 when the step
/// is not such a GEMM (another kind, a generated GEMM that splits its rows
/// among threads, a BLAS call that may thread).
double single_thread_gemm_macs(const PlanStep& s);

/// Reorders `steps` (each moved step keeps every dependency: it reads
/// nothing the steps it moves past write, and writes no graph output) so
/// that independent GEMM steps of at least kInteropMinMacs sit next to each
/// other, and sets run_with_next on the first of each pair. Nothing is
/// paired when `enabled` is false (KILN_JIT_INTEROP=0, or one thread).
void pair_independent_steps(std::vector<PlanStep>& steps, const std::vector<char>& is_output, bool enabled);

/// Marks adjacent pairs only, moving nothing: the pairs
/// pair_independent_steps left in `steps` (it pairs a step with the one after
/// it whenever that one qualifies), so a plan restored from a MEF file's PLAN
/// section, whose memory plan was made for those pairs, runs them at once.
void mark_adjacent_pairs(std::vector<PlanStep>& steps, const std::vector<char>& is_output, bool enabled);

/// Whether inter-op pairing is on for new plans: KILN_JIT_INTEROP=0 turns
/// it off (read when a plan is built).
bool interop_enabled();

}  // namespace kiln::codegen
