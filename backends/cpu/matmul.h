// kiln (internal): batched matrix multiplication on the CPU.
#pragma once
#include <memory>
#include <optional>

#include "../../tensor/tensor.h"

namespace kiln::codegen {
class SmallGemm;  // jit/small_gemm.h
}

namespace kiln::cpu {

/// out[i] = a[i] @ b[i] for every batch index i. a: [batch..., M, K] and
/// b: [batch..., K, N] with any strides (broadcast batch axes have stride 0)
/// and any dtype; out: contiguous [batch..., M, N]. Operands are converted to
/// out's dtype. float32/float64 go to the BLAS (OpenBLAS when built with it,
/// else Eigen's GEMM); float16/bfloat16 compute in float32; integer dtypes
/// accumulate in int64 (wrapping), bool is the OR of ANDs. The GEMM chosen
/// depends on the shapes only (a float32 operand strided past the generated
/// GEMM's leading dimension, 2^20, is copied first where the shape runs it);
/// kiln's own GEMMs (generated up to 256^3 multiply-adds, 2^28 for x W^T with
/// few rows: codegen::small_gemm_eager_size; Eigen's per batch item) give the
/// same bits at any thread count, a BLAS call gives the BLAS's (OpenBLAS's
/// Haswell/Zen sgemm differs at rounding level between thread counts).
void matmul(const Tensor& a, const Tensor& b, const Tensor& out);

/// "OpenBLAS" or "Eigen".
const char* gemm_backend();

/// One 2-d float32/float64 GEMM fixed ahead of time (a compiled plan's
/// matmul step): C (m x n, row-major, leading dimension ldc) = op(A) op(B),
/// where op(A) is m x k: A stored row-major m x k (ta = false) or k x m
/// (ta = true, a transposed view) with leading dimension lda; likewise B.
struct GemmCall {
  bool f64 = false;
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  /// C = op(A) op(B) + bias (a row of n, repeated): the row is added to C
  /// while it is still in cache after the call, each element rounded once
  /// more, exactly as a separate add (bitwise eager's matmul then add).
  bool bias = false;
  /// B (tb) is copied into a row-major k x n scratch first: OpenBLAS runs a
  /// transposed B with a small k (the A B^T of a backward pass) through its
  /// packing kernels, 25% slower than its small-matrix kernel for the copy.
  bool pack_b = false;
  /// float32: the generated GEMM eager matmul runs for this problem
  /// (codegen::eager_small_gemm), null when it calls the BLAS. gemm() runs
  /// it, so a plan's GEMM step keeps eager's bits either way. Shared with
  /// eager's cache: the step keeps it after the cache evicts it.
  std::shared_ptr<const codegen::SmallGemm> small;
};

/// The GemmCall for op(A) (m x k) op(B) (k x n) into C (row stride ldc),
/// with eager's generated GEMM for it when float32 has one (the first call
/// for a problem generates it).
GemmCall gemm_call(bool f64, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                   int64_t ldc);

/// The GemmCall for C (m x n) = A (m x k, element strides a_rs, a_cs) times
/// B (k x n, strides b_rs, b_cs) as matmul() would issue it (with eager's
/// generated GEMM when it has one: the first call for a problem generates it), or nullopt
/// when a stride pattern needs a copy first (matmul() copies such operands).
std::optional<GemmCall> plan_gemm(bool f64, int64_t m, int64_t n, int64_t k, int64_t a_rs, int64_t a_cs,
                                  int64_t b_rs, int64_t b_cs);

/// Runs the GEMM `g` on A at a, B at b (element type float, or double when
/// g.f64), writing C at c; `bias` (n elements) when g.bias. Without bias and
/// pack_b this is the call matmul() makes for the same 2-d problem, so the
/// result is bitwise eager's.
void gemm(const GemmCall& g, const void* a, const void* b, void* c, const void* bias = nullptr);

/// Runs the GEMM of g's problem (f64, m, n, k, ldc, bias) on A and B given
/// as tensors of any strides (a: m x k, b: k x n, of g's dtype), making the
/// call matmul() makes for those layouts, whatever g's ta, tb, lda and ldb
/// say: a transposed or row-strided matrix is read in place with its own
/// transpose flag and leading dimension (float32: with eager's generated
/// GEMM for that layout), any other layout is copied first, as matmul()
/// copies it; pack_b is not applied. Bitwise matmul() on the same views (then
/// the bias added, as gemm()). A compiled plan's GEMM step runs this when an
/// operand is a strided view at run time (an argument passed transposed or
/// sliced): the call for a contiguous copy of it would sum in another order
/// in the BLAS.
void gemm_strided(const GemmCall& g, const Tensor& a, const Tensor& b, void* c, const void* bias = nullptr);

/// Whether pack_b is worth it for `g` (a transposed B, small k) with this
/// BLAS.
bool gemm_pack_b_pays(const GemmCall& g);

}  // namespace kiln::cpu
