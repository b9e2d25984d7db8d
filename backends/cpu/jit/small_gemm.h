// kiln (internal): generated small float32 GEMMs with a fused elementwise
// epilogue. For a compiled plan's small matmul (shapes fixed ahead of time)
// the generator emits one function specialised on every size and stride:
//
//   C tile (mr rows x nr vectors) accumulated in registers over all of k
//   (A elements broadcast from A as stored, so a transposed A is read in
//   place; B rows loaded as vectors), then the epilogue program runs on the
//   tile while it is still in registers and writes its outputs.
//
// B is read in place when it is row-major (k x n). A transposed B (n x k:
// x W^T with a Linear layer's W stored [out, in], the A B^T of a backward
// pass) is copied once into a row-major k x n scratch before the call
// (packing, pack_b.h: 8 x 8 blocks transposed in registers; k n copies for
// m n k multiply-adds; a vector load along n then needs no gather). The plain
// GEMM with a transposed B and few rows (small_gemm_swaps: m <= 64, B's
// n k elements at least twice the m k + m n the swapped route copies)
// instead computes C^T = B op(A)^T by the swapped GEMM, reading B in place
// (copying A, m k elements, when A is not transposed), and transposes the
// n x m result into C: no pass over B besides the product's (a weight at
// batch 1 is streamed once). The same swapped GEMM serves a transposed A
// with a narrow n (C = A^T B, n < m, e.g. n = 10 on AVX-512, where each row
// of C fills 10 of 16 lanes): C^T = B^T A reads both in place and runs
// whole vectors along m. Rows of N that are not a multiple of the vector
// width use masked loads and stores.
//
// Register blocking (measured on this project's machines): AVX-512 keeps up
// to 24 accumulators (6 rows x 4 vectors ... 14 rows x 1 vector), AVX2 up to
// 12 (6 x 2, 12 x 1, 4 x 3); the row and column blocks are balanced over m
// and n so the edge tiles are not much smaller than the others. On AVX2 a
// last vector of 2 or 4 columns (n % 8, e.g. n = 10) is packed: one register
// holds those columns of 4 or 2 rows (A broadcasts blended, B's columns
// repeated), so n = 10 costs 10 lanes of FMA per row, not 16 (8 x (1 + 2/8)
// tiles); other narrow vectors are masked.
//
// Numerics: every C element is one sequential fused multiply-add chain over
// k = 0..K-1 (a fixed order: results never depend on the thread count; the
// swapped route runs the same chains, each product's factors swapped: the
// same bits), so
// it differs from the BLAS's order; a plan uses it only outside strict mode.
// The epilogue's ops are computed as the elementwise code generator computes
// them (codegen.h), without FMA contraction.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../../../jit/elementwise_program.h"

namespace kiln::codegen {

/// How an epilogue operand varies over the m x n result.
enum class EpiLayout : uint8_t {
  matrix,  ///< m x n, row-major with leading dimension `ld` (elements)
  row,     ///< n elements, the same for every row (a bias row)
  scalar,  ///< one element
  product  ///< the GEMM's tile itself (exactly one input operand has it; no memory)
};

/// What selects one generated GEMM.
struct SmallGemmKey {
  CpuTarget target = CpuTarget::avx2;
  int64_t m = 0, n = 0, k = 0;
  /// op(A) is m x k: A stored m x k (ta = false) or k x m (ta = true), leading dimension lda; likewise B.
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;
  /// The epilogue: an elementwise program over float32 (bool for
  /// intermediate predicates) whose operands (outputs first) have the
  /// layouts below; outputs are `matrix`. The plain GEMM is the program
  /// out0 = product.
  ElementwiseProgram epilogue;
  std::vector<EpiLayout> layouts;
  std::vector<int64_t> lds;  ///< leading dimension of each `matrix` operand (elements)
  /// When >= 0: epilogue output `column_sums` is also summed over the m
  /// rows while each tile is in registers (a bias gradient db = sum_rows(dz)
  /// beside dz): n floats written at ptrs[column_sum_slot()], each column
  /// summed in row order from 0 as cpu::column_sum sums it (0 + x0 + x1 ...:
  /// its bits, so reduce()'s). The row blocks then run in order on one
  /// thread: only below kSmallGemmParallelMacs.
  int column_sums = -1;
  /// The ptrs entry of the column sums' destination: after the operands,
  /// the constant table (when the program has one) and two entries the
  /// GEMM does not read (a plan's step keeps A and B there).
  size_t column_sum_slot() const { return layouts.size() + (epilogue.table_slots > 0 ? 1 : 0) + 2; }
  std::string str() const;
};

/// The plain GEMM's key: C (m x n, leading dimension ldc) = op(A) op(B).
SmallGemmKey plain_gemm_key(CpuTarget t, int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t lda,
                            int64_t ldb, int64_t ldc);

/// Why `key` has no generated form (empty when it has one): target below
/// AVX2 or not run by this CPU, an empty or too large problem (m, n, k in
/// 1..2^20), epilogue operands other than float32, an epilogue op without a
/// generated form, bad layouts, column sums of an operand that is not an
/// output or of a problem from kSmallGemmParallelMacs on.
std::string small_gemm_why_not(const SmallGemmKey& key);

/// Generated machine code for one SmallGemmKey. Thread-safe to run.
class SmallGemm {
 public:
  virtual ~SmallGemm() = default;
  /// Runs it: A at a, B at b, the epilogue's operands at ptrs[i] (the
  /// product operand's entry is ignored), then the constant table when the
  /// program has one. From kSmallGemmParallelMacs multiply-adds on, the row
  /// blocks are split among the OpenMP threads (each C element is still
  /// one chain over k computed by one call: the bits do not depend on the
  /// thread count); smaller problems run on the calling thread.
  virtual void run(const float* a, const float* b, char* const* ptrs) const = 0;
  virtual const SmallGemmKey& key() const = 0;
  /// Register block (rows x columns) chosen.
  virtual int tile_rows() const = 0;
  virtual int tile_cols() const = 0;
  virtual size_t code_size() const = 0;
  virtual const std::string& disassembly() const = 0;
  /// The code as a relocatable image (MEF files' CODE section, under the
  /// text key().str()); empty bytes when it has none.
  virtual const CodeImage& image() const = 0;
};

/// Whether run() takes the swapped route for `key` (see above): the plain
/// GEMM (out0 = product) with a transposed B, m <= kSmallGemmSwapMaxM and
/// n k >= 2 (m k + m n) (copying A and C costs less than half of copying
/// B); or with a transposed A, B not transposed, n < m, k >= 16 and C^T's
/// rows of m taking at most 3/4 of the FMA lanes C's rows of n take (a
/// narrow n: on AVX-512 n = 10 fills 10 of 16 lanes; C^T = B^T A runs whole
/// vectors along m, both read in place, e.g. the weight gradient h^T dz of
/// a 10-class layer). Its code (image, disassembly, tile) is then the
/// swapped GEMM's (n x m x k, C^T = op(B)^T op(A)^T); the results are
/// bitwise the unswapped route's.
/// A plan leaves such a GEMM's elementwise successor unfused
/// (plan_small_gemm.cpp) so that it takes this route.
bool small_gemm_swaps(const SmallGemmKey& key);

/// Whether `key` (any epilogue) runs in transposed tiles: A^T B with the
/// narrow n of small_gemm_swaps' second rule, n at most one vector (16
/// floats on AVX-512, 8 on AVX2), below kSmallGemmParallelMacs, no column
/// sums. The code computes C^T's tiles (B^T A, both read in place: all n
/// rows by whole vectors along m), transposes each vector in registers into
/// rows of C and runs the epilogue on them: the swapped route without its
/// C^T scratch and copy, and with an epilogue (such keys never swap, and a
/// plan fuses their epilogues). Each element is the same fused
/// multiply-add chain: bitwise the direct route's.
bool small_gemm_transposed_tiles(const SmallGemmKey& key);
inline constexpr int64_t kSmallGemmSwapMaxM = 64;

/// Generates the GEMM of `key`. Throws kiln::Error naming the reason when
/// small_gemm_why_not(key) is not empty.
std::unique_ptr<SmallGemm> generate_small_gemm(const SmallGemmKey& key, bool want_disassembly = false);

/// Process-wide counts of GEMMs made by generate_small_gemm and placed from
/// images by load_small_gemm (a MEF read that skips code generation adds
/// only to `loaded`).
CodegenCounts small_gemm_counts();

/// The GEMM of `key` from an image generate_small_gemm made for the same key
/// under the same codegen_feature_key (the caller checks key and hash).
/// Throws kiln::Error when small_gemm_why_not(key) is not empty or the image
/// is malformed (place_image).
std::unique_ptr<SmallGemm> load_small_gemm(const SmallGemmKey& key, const CodeImage& image);

/// Problems up to this many multiply-adds (m n k; 256^3) run the generated
/// GEMM (eager and compiled); larger ones stay with the BLAS. Measured
/// (benchmarks/bench_small_gemm.cpp, the project's 2-core AVX-512 VM, against
/// OpenBLAS 0.3.21 with OPENBLAS_CORETYPE=SkylakeX: on this VM's generic CPU
/// model OpenBLAS otherwise picks its Prescott kernels, 4x slower): 1 thread
/// 0.79x OpenBLAS's time at 128^3 and 0.92x at 256^3, 1.09x at 64^3 (call
/// overhead included); 120-145 GFLOP/s at 256^3 on AVX-512.
inline constexpr double kSmallGemmMaxMacs = double(1 << 24);
/// A plain GEMM that takes the swapped route (small_gemm_swaps: a transposed
/// B, m <= 64) runs generated up to this many multiply-adds (2^28): measured
/// (x W^T, 8 distinct weights streamed, the same VM and OpenBLAS), 1 thread
/// 0.43-0.58x OpenBLAS's time for m = 1..32 (n, k 384..4096), 0.64-0.95x at
/// m = 64; 2 threads 0.15-0.75x.
inline constexpr double kSmallGemmSwapMaxMacs = double(1 << 28);
/// Whether eager runs the generated GEMM for this size (then the plan too):
/// up to kSmallGemmMaxMacs multiply-adds, or kSmallGemmSwapMaxMacs for a
/// shape whose plain GEMM takes the swapped route when B is transposed. The
/// shape alone decides, not B's layout: a plan may bind a transposed-view
/// argument contiguous, and must run what eager runs for the view.
bool small_gemm_eager_size(int64_t m, int64_t n, int64_t k);
/// The largest m, n, k and leading dimension (elements) a generated GEMM
/// takes (small_gemm_why_not).
inline constexpr int64_t kSmallGemmMaxDim = int64_t(1) << 20;
/// From this many multiply-adds (128^3) run() splits the row blocks among
/// the OpenMP threads.
inline constexpr double kSmallGemmParallelMacs = double(1 << 21);

/// The plain float32 GEMM that eager matmul runs for C (m x n, leading
/// dimension ldc) = op(A) op(B) (strides as in SmallGemmKey), from one
/// process-wide cache (generated on first use), or null when eager calls the
/// BLAS for it: the CPU target (detect_cpu_target) below AVX2, or a size past
/// small_gemm_eager_size. The problem alone decides: the cache keeps the
/// kEagerGemmCacheMax most recently used problems and evicts the least
/// recently used one to make room (kernel_lru.h), so a problem's kernel never
/// depends on what the process ran before; an evicted problem is generated
/// again on its next use (the same code, the same bits). The caller shares
/// ownership: a compiled plan's GEMM step (cpu::GemmCall::small) keeps its
/// kernel after eviction, and an eager call holds it while it runs. A
/// compiled plan runs the same kernel for the same problem, so its GEMM
/// steps (and, in strict mode, their epilogues) are bitwise eager's. A cache
/// hit allocates nothing (a map search and a reference count).
std::shared_ptr<const SmallGemm> eager_small_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t lda,
                                                  int64_t ldb, int64_t ldc);
inline constexpr size_t kEagerGemmCacheMax = 512;
/// Whether eager_small_gemm gives a GEMM for this shape when the leading
/// dimensions are at most kSmallGemmMaxDim: the target is AVX2 or better,
/// small_gemm_eager_size holds and m, n, k are in 1..kSmallGemmMaxDim. Eager
/// matmul copies an operand strided past kSmallGemmMaxDim first for such a
/// shape, so that the shape alone decides between the generated GEMM and
/// the BLAS (a plan reading a contiguous copy of the view runs the same).
bool eager_small_gemm_shape(int64_t m, int64_t n, int64_t k);
/// The eager cache's entries now and its evictions so far (tests).
struct EagerGemmCacheStats {
  size_t size = 0, evictions = 0;
};
EagerGemmCacheStats eager_small_gemm_cache_stats();

/// Puts the plain GEMM eager_small_gemm would generate for this problem into
/// its cache from an image (evicting the least recently used problem when
/// full), when the cache has no entry for it yet and would make one: `image_for(key)` (key: plain_gemm_key for eager's target) gives
/// the image or null. An image that fails to place is ignored (the problem is
/// generated on first use, as without it). For a MEF read (its CODE section)
/// that must not generate code.
void seed_eager_small_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t lda, int64_t ldb, int64_t ldc,
                           const std::function<const CodeImage*(const SmallGemmKey&)>& image_for);

}  // namespace kiln::codegen
