// kiln (internal): matmul's kernels. float32/float64 matrices are handed to
// cblas_?gemm directly on the tensor's memory: a transposed contiguous
// layout is passed with CblasTrans instead of being copied; only other
// layouts (negative or gapped strides) and other dtypes are copied first.
// Eigen's GEMM is the fallback without OpenBLAS and runs batches of small
// matrices (where OpenBLAS would use one thread per call anyway). Eigen's
// own threading is off (its blocking sizes depend on the thread count);
// this file splits Eigen work into fixed (batch, row-chunk) items instead.
// Eigen products appear in no other translation unit of the library.
#define EIGEN_DONT_PARALLELIZE
#include "matmul.h"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../../tensor/dispatch.h"
#include "copy.h"
#include "blas_threads.h"
#include "jit/small_gemm.h"
#include "parallel_ranges.h"

#ifdef KILN_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace kiln::cpu {
namespace {

// Per-matrix M*N*K up to which batches run in parallel through Eigen (above
// 64^3 OpenBLAS threads a single call itself).
constexpr double kSmallGemm = 64.0 * 64.0 * 64.0;
// Rows per Eigen work item.
constexpr int64_t kRowChunk = 128;

// Multiply-adds of a batch of GEMMs, saturated (only decides threading).
int64_t gemm_work(int64_t batch, int64_t m, int64_t n, int64_t k) {
  return static_cast<int64_t>(std::min(1e18, double(batch) * double(m) * double(n) * double(k)));
}

// A matrix (rows x cols, element strides rs, cs) as a GEMM argument: as a
// row-major matrix (trans = false) or as the transpose of one (trans = true),
// with leading dimension ld; ok = false when the strides allow neither.
struct GemmArg {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};

GemmArg gemm_arg(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1)))
    return {true, false, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1)))
    return {true, true, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
  return {};
}

// t converted to dtype dt with its matrices made contiguous; batch axes that
// are broadcast (stride 0) stay broadcast, so nothing is materialised.
Tensor compact_copy(const Tensor& t, DType dt) {
  const int64_t nd = t.ndim();
  Shape s = t.shape();
  Strides st = t.strides();
  for (int64_t d = 0; d < nd - 2; ++d)
    if (st[d] == 0) s[d] = 1;
  Tensor src(t.buffer(), t.dtype(), s, st, t.offset());
  Tensor c = Tensor::empty(s, dt);
  copy_into(src, c);
  Strides cs = c.strides();
  for (int64_t d = 0; d < nd - 2; ++d)
    if (s[d] != t.shape()[d]) cs[d] = 0;
  return Tensor(c.buffer(), dt, t.shape(), cs, 0);
}

// The largest leading dimension a float32 operand is read in place with, in
// a batch of `batch` m x n x k products: eager's generated GEMM takes up to
// kSmallGemmMaxDim, so where the shape runs it (a single product, or a batch
// of small ones: gemm_float) an operand strided further is copied; the shape
// alone then decides between the generated GEMM and the BLAS.
int64_t max_gemm_ld(bool f32, int64_t batch, int64_t m, int64_t n, int64_t k) {
  const bool generated = f32 && codegen::eager_small_gemm_shape(m, n, k) &&
                         (batch == 1 || double(m) * double(n) * double(k) < codegen::kSmallGemmParallelMacs);
  return generated ? codegen::kSmallGemmMaxDim : INT_MAX;
}

// An operand ready for a GEMM of element type T, its leading dimension at
// most max_ld.
template <class T>
Tensor gemm_ready(const Tensor& t, int64_t max_ld) {
  const int64_t nd = t.ndim();
  const GemmArg g = gemm_arg(t.shape()[nd - 2], t.shape()[nd - 1], t.strides()[nd - 2], t.strides()[nd - 1]);
  if (t.dtype() == dtype_v<T> && g.ok && g.ld <= max_ld) return t;
  return compact_copy(t, dtype_v<T>);
}

// The batch axes of (a, b, out) with byte strides, and their count.
struct Batch {
  std::vector<WalkDim<3>> dims;
  int64_t n = 1;
};

Batch batch_of(const Tensor& a, const Tensor& b, const Tensor& out) {
  Batch B;
  const int64_t nd = out.ndim();
  for (int64_t d = 0; d < nd - 2; ++d) {
    const int64_t n = out.shape()[d];
    B.n *= n;
    if (n == 1) continue;
    B.dims.push_back({n,
                      {a.strides()[d] * static_cast<int64_t>(a.itemsize()),
                       b.strides()[d] * static_cast<int64_t>(b.itemsize()),
                       out.strides()[d] * static_cast<int64_t>(out.itemsize())}});
  }
  return B;
}

template <class T>
T* at(const Tensor& t, int64_t byte_off) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + byte_off);
}

// One GEMM problem: C (m x n, row-major, ldc) = A (m x k) B (k x n).
template <class T>
struct Gemm {
  const T* a;
  GemmArg ga;
  const T* b;
  GemmArg gb;
  T* c;
  int64_t m, n, k, ldc;
};

template <class T, bool TA, bool TB>
void eigen_gemm_t(const Gemm<T>& g) {
  using RM = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CM = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<const std::conditional_t<TA, CM, RM>, 0, Stride> A(g.a, g.m, g.k, Stride(g.ga.ld));
  Eigen::Map<const std::conditional_t<TB, CM, RM>, 0, Stride> B(g.b, g.k, g.n, Stride(g.gb.ld));
  Eigen::Map<RM, 0, Stride> C(g.c, g.m, g.n, Stride(g.ldc));
  C.noalias() = A * B;
}

template <class T>
void eigen_gemm(const Gemm<T>& g) {
  if (g.ga.trans) {
    if (g.gb.trans) eigen_gemm_t<T, true, true>(g);
    else eigen_gemm_t<T, true, false>(g);
  } else {
    if (g.gb.trans) eigen_gemm_t<T, false, true>(g);
    else eigen_gemm_t<T, false, false>(g);
  }
}

// Rows [r0, r0 + kRowChunk) of g (fewer at the end): one Eigen work item.
template <class T>
void eigen_row_chunk(Gemm<T> g, int64_t r0) {
  g.m = std::min(kRowChunk, g.m - r0);
  g.a += r0 * (g.ga.trans ? 1 : g.ga.ld);
  g.c += r0 * g.ldc;
  eigen_gemm(g);
}

#ifdef KILN_HAVE_OPENBLAS
// From this many multiply-adds a BLAS product is split among the OpenMP
// threads (below, one thread runs it whole).
constexpr double kBlasSplitMacs = double(1 << 22);

template <class T>
void blas_call(const Gemm<T>& g) {
  const auto ta = g.ga.trans ? CblasTrans : CblasNoTrans;
  const auto tb = g.gb.trans ? CblasTrans : CblasNoTrans;
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const int lda = static_cast<int>(g.ga.ld), ldb = static_cast<int>(g.gb.ld), ldc = static_cast<int>(g.ldc);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, g.a, lda, g.b, ldb, 0.0f, g.c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, g.a, lda, g.b, ldb, 0.0, g.c, ldc);
}

// C = A B through the BLAS: from kBlasSplitMacs on, the longer of C's two
// sides is cut into blocks of whole 64-element strips, each block one BLAS
// call on one thread, and the OpenMP threads share the blocks. The cut
// depends on the problem's sizes only, never on the thread count: a BLAS
// kernel may sum a block's elements over k in another order than the whole
// product's (OpenBLAS 0.3.21's Haswell sgemm and Cooperlake dgemm kernels
// do, for 300- and 512-sized products), so the same cut with any number of
// threads is what keeps the bits. Two blocks, or a power of two up to
// eight of at least 512 each (2048: 4, 4096: 8): each call packs the other
// operand whole again, which costs about 12/(block length) of the block's
// time on one thread (matmul 1024, one thread: 1 block 20.4 ms, 4 blocks
// 21.5, 8 blocks 22.8), and a power of two shares evenly among 2 or 4
// threads.
constexpr int64_t kBlasMinBlock = 512, kBlasMaxBlocks = 8;

template <class T>
void blas_gemm(const Gemm<T>& g) {
  blas_one_thread();
  const bool by_rows = g.m >= g.n;
  const int64_t len = by_rows ? g.m : g.n;
  const int64_t strips = (len + 63) / 64;
  const int64_t parts = std::min<int64_t>(
      strips, std::clamp<int64_t>(int64_t(std::bit_floor(uint64_t(len / kBlasMinBlock))), 2, kBlasMaxBlocks));
  if (parts <= 1 || double(g.m) * double(g.n) * double(g.k) < kBlasSplitMacs) {
    blas_call(g);
    return;
  }
  auto block = [&](int64_t p) {
    const int64_t s0 = strips * p / parts * 64, s1 = std::min(len, strips * (p + 1) / parts * 64);
    if (s0 >= s1) return;
    Gemm<T> b = g;
    if (by_rows) {
      b.m = s1 - s0;
      b.a += s0 * (g.ga.trans ? 1 : g.ga.ld);
      b.c += s0 * g.ldc;
    } else {
      b.n = s1 - s0;
      b.b += s0 * (g.gb.trans ? g.gb.ld : 1);
      b.c += s0;
    }
    blas_call(b);
  };
  parallel_ranges(parts, int64_t{1} << 40, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) block(p);
  });
}
#endif

template <class T>
void gemm_float(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  const int64_t nd = out.ndim();
  const int64_t M = out.shape()[nd - 2], N = out.shape()[nd - 1], K = a_in.shape()[nd - 1];
  const int64_t max_ld = max_gemm_ld(std::is_same_v<T, float>, out.numel() / (M * N), M, N, K);
  const Tensor a = gemm_ready<T>(a_in, max_ld), b = gemm_ready<T>(b_in, max_ld);
  const GemmArg ga = gemm_arg(M, K, a.strides()[nd - 2], a.strides()[nd - 1]);
  const GemmArg gb = gemm_arg(K, N, b.strides()[nd - 2], b.strides()[nd - 1]);
  const Batch B = batch_of(a, b, out);
  auto problem = [&](const Odometer<3>& od) {
    return Gemm<T>{at<const T>(a, od.off[0]), ga, at<const T>(b, od.off[1]), gb, at<T>(out, od.off[2]), M, N, K, N};
  };
  if constexpr (std::is_same_v<T, float>) {
    // a small 2-d product: the generated GEMM (compiled plans run the same one)
    // (held while it runs: the cache may evict it meanwhile)
    const std::shared_ptr<const codegen::SmallGemm> sg =
        B.n == 1 ? codegen::eager_small_gemm(M, N, K, ga.trans, gb.trans, ga.ld, gb.ld, N) : nullptr;
    if (sg) {
      Odometer<3> od(B.dims.data(), static_cast<int>(B.dims.size()));
      const Gemm<T> p = problem(od);
      char* c[1] = {reinterpret_cast<char*>(p.c)};
      sg->run(p.a, p.b, c);
      return;
    }
    // A batch of small products (attention's per-head Q K^T and P V): the
    // matrices split among the threads, each run whole on one thread by the
    // generated GEMM, read in place (strided or transposed). One OpenBLAS
    // call per matrix would run them one after the other, each too small to
    // keep two threads busy. Each matrix is one call, so its bits do not
    // depend on the thread count.
    // (held while the batch runs, as sg above)
    const std::shared_ptr<const codegen::SmallGemm> bsg =
        B.n > 1 && double(M) * double(N) * double(K) < codegen::kSmallGemmParallelMacs
            ? codegen::eager_small_gemm(M, N, K, ga.trans, gb.trans, ga.ld, gb.ld, N)
            : nullptr;
    if (bsg) {
      // (the threshold as the Eigen items' below: 8 multiply-adds per element touched)
      parallel_ranges(B.n, gemm_work(B.n, M, N, K) / 8, [&](int64_t i0, int64_t i1) {
        Odometer<3> od(B.dims.data(), static_cast<int>(B.dims.size()));
        od.seek(i0);
        for (int64_t i = i0; i < i1; ++i, od.next()) {
          const Gemm<T> p = problem(od);
          char* c[1] = {reinterpret_cast<char*>(p.c)};
          bsg->run(p.a, p.b, c);
        }
      });
      return;
    }
  }
#ifdef KILN_HAVE_OPENBLAS
  const bool fits_int = M <= INT_MAX && N <= INT_MAX && K <= INT_MAX;
  if (fits_int && (B.n == 1 || double(M) * double(N) * double(K) > kSmallGemm)) {
    if (B.n > 1 && double(M) * double(N) * double(K) < kBlasSplitMacs) {
      // matrices too small to split: they are split among the threads, one call each
      blas_one_thread();
      parallel_ranges(B.n, gemm_work(B.n, M, N, K) / 8, [&](int64_t i0, int64_t i1) {
        Odometer<3> od(B.dims.data(), static_cast<int>(B.dims.size()));
        od.seek(i0);
        for (int64_t i = i0; i < i1; ++i, od.next()) blas_call(problem(od));
      });
      return;
    }
    // One call per matrix, each split among the threads (blas_gemm).
    Odometer<3> od(B.dims.data(), static_cast<int>(B.dims.size()));
    for (int64_t i = 0; i < B.n; ++i, od.next()) blas_gemm(problem(od));
    return;
  }
#endif
  // Eigen, single-threaded per item; items are (matrix, chunk of kRowChunk rows).
  const int64_t chunks = (M + kRowChunk - 1) / kRowChunk;
  parallel_ranges(B.n * chunks, gemm_work(B.n, M, N, K) / 8, [&](int64_t i0, int64_t i1) {
    Odometer<3> od(B.dims.data(), static_cast<int>(B.dims.size()));
    for (int64_t i = i0; i < i1; ++i) {
      od.seek(i / chunks);
      eigen_row_chunk(problem(od), (i % chunks) * kRowChunk);
    }
  });
}

// Integer and bool matmul: each output row accumulated in uint64 (wrapping,
// as numpy's fixed-width integers) or bool (OR of ANDs).
template <class T>
void gemm_exact(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  using Acc = std::conditional_t<std::is_same_v<T, bool>, bool, uint64_t>;
  const Tensor a = a_in.dtype() == out.dtype() ? a_in : compact_copy(a_in, out.dtype());
  const Tensor b = b_in.dtype() == out.dtype() ? b_in : compact_copy(b_in, out.dtype());
  const int64_t nd = out.ndim();
  const int64_t M = out.shape()[nd - 2], N = out.shape()[nd - 1], K = a.shape()[nd - 1];
  const int64_t ars = a.strides()[nd - 2], acs = a.strides()[nd - 1];
  const int64_t brs = b.strides()[nd - 2], bcs = b.strides()[nd - 1];
  const Batch B = batch_of(a, b, out);
  parallel_ranges(B.n * M, gemm_work(B.n, M, N, K), [&](int64_t i0, int64_t i1) {
    Odometer<3> od(B.dims.data(), static_cast<int>(B.dims.size()));
    std::vector<Acc> acc(static_cast<size_t>(N));
    for (int64_t i = i0; i < i1; ++i) {
      od.seek(i / M);
      const int64_t row = i % M;
      const T* ap = at<const T>(a, od.off[0]) + row * ars;
      const T* bp = at<const T>(b, od.off[1]);
      T* cp = at<T>(out, od.off[2]) + row * N;
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k = 0; k < K; ++k) {
        const T av = ap[k * acs];
        const T* br = bp + k * brs;
        if constexpr (std::is_same_v<T, bool>) {
          if (av)
            for (int64_t j = 0; j < N; ++j) acc[j] = acc[j] | br[j * bcs];
        } else {
          const uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(av));
          for (int64_t j = 0; j < N; ++j) acc[j] += x * static_cast<uint64_t>(static_cast<int64_t>(br[j * bcs]));
        }
      }
      for (int64_t j = 0; j < N; ++j) cp[j] = static_cast<T>(acc[j]);
    }
  });
}

}  // namespace

const char* gemm_backend() {
#ifdef KILN_HAVE_OPENBLAS
  return "OpenBLAS";
#else
  return "Eigen";
#endif
}

namespace {
template <class T>
void gemm_product(const GemmCall& g, const T* a, const T* b, T* c) {
  if (g.k == 0) {  // a sum of nothing
    for (int64_t r = 0; r < g.m; ++r) std::fill(c + r * g.ldc, c + r * g.ldc + g.n, T(0));
    return;
  }
  GemmArg gb{true, g.tb, g.ldb};
  if (g.pack_b && g.tb) {
    // B is stored n x k (ld ldb); the call reads a row-major k x n copy
    static thread_local std::vector<T> packed;
    packed.resize(static_cast<size_t>(g.k * g.n));
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.k; ++i) packed[static_cast<size_t>(i * g.n + j)] = b[j * g.ldb + i];
    b = packed.data();
    gb = GemmArg{true, false, g.n};
  }
  const Gemm<T> p{a, GemmArg{true, g.ta, g.lda}, b, gb, c, g.m, g.n, g.k, g.ldc};
#ifdef KILN_HAVE_OPENBLAS
  if (g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX && g.ldc <= INT_MAX) {
    blas_gemm(p);
    return;
  }
#endif
  // eager's Eigen path: items of kRowChunk rows, split among threads
  const int64_t chunks = (g.m + kRowChunk - 1) / kRowChunk;
  parallel_ranges(chunks, gemm_work(1, g.m, g.n, g.k) / 8, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) eigen_row_chunk(p, i * kRowChunk);
  });
}

template <class T>
void gemm_t(const GemmCall& g, const T* a, const T* b, T* c, const T* bias) {
  if (g.m == 0 || g.n == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (g.small) {
      char* cp[1] = {reinterpret_cast<char*>(c)};
      g.small->run(a, b, cp);
    } else {
      gemm_product(g, a, b, c);
    }
  } else {
    gemm_product(g, a, b, c);
  }
  if (g.bias)
    for (int64_t r = 0; r < g.m; ++r) {
      T* __restrict row = c + r * g.ldc;
#pragma omp simd
      for (int64_t j = 0; j < g.n; ++j) row[j] = row[j] + bias[j];
    }
}
}  // namespace

bool gemm_pack_b_pays(const GemmCall& g) {
#ifdef KILN_HAVE_OPENBLAS
  // OpenBLAS's small-matrix kernels refuse this case (k < 32), the packing
  // ones then dominate; the copy is k * n elements.
  return g.tb && !g.ta && g.k < 32 && g.k * g.n <= 16384 && double(g.m) * double(g.n) * double(g.k) <= 1e6;
#else
  (void)g;
  return false;
#endif
}

std::optional<GemmCall> plan_gemm(bool f64, int64_t m, int64_t n, int64_t k, int64_t a_rs, int64_t a_cs,
                                  int64_t b_rs, int64_t b_cs) {
  const GemmArg ga = gemm_arg(m, k, a_rs, a_cs), gb = gemm_arg(k, n, b_rs, b_cs);
  if (!ga.ok || !gb.ok || ga.ld > INT_MAX || gb.ld > INT_MAX) return std::nullopt;
  return gemm_call(f64, ga.trans, gb.trans, m, n, k, ga.ld, gb.ld, n);
}

GemmCall gemm_call(bool f64, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                   int64_t ldc) {
  GemmCall c;
  c.f64 = f64;
  c.ta = ta;
  c.tb = tb;
  c.m = m;
  c.n = n;
  c.k = k;
  c.lda = lda;
  c.ldb = ldb;
  c.ldc = ldc;
  if (!f64) c.small = codegen::eager_small_gemm(m, n, k, ta, tb, lda, ldb, ldc);
  return c;
}

void gemm(const GemmCall& g, const void* a, const void* b, void* c, const void* bias) {
  if (g.f64)
    gemm_t(g, static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(c),
           static_cast<const double*>(bias));
  else
    gemm_t(g, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(c),
           static_cast<const float*>(bias));
}

void gemm_strided(const GemmCall& g, const Tensor& a_in, const Tensor& b_in, void* c, const void* bias) {
  auto run = [&](auto zero) {
    using T = decltype(zero);
    // as gemm_float: the operands matmul() reads in place, or its copies
    const int64_t max_ld = max_gemm_ld(!g.f64, 1, g.m, g.n, g.k);
    const Tensor a = gemm_ready<T>(a_in, max_ld), b = gemm_ready<T>(b_in, max_ld);
    const GemmArg ga = gemm_arg(g.m, g.k, a.strides()[0], a.strides()[1]);
    const GemmArg gb = gemm_arg(g.k, g.n, b.strides()[0], b.strides()[1]);
    GemmCall e = gemm_call(g.f64, ga.trans, gb.trans, g.m, g.n, g.k, ga.ld, gb.ld, g.ldc);
    e.bias = g.bias;
    gemm(e, a.data_ptr(), b.data_ptr(), c, bias);
  };
  if (g.f64) run(double{});
  else run(float{});
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t nd = out.ndim();
  if (out.numel() == 0) return;
  if (a.shape()[nd - 1] == 0) {  // K = 0: a sum of nothing (all dtypes' zero is all-zero bytes)
    std::memset(out.data_ptr(), 0, static_cast<size_t>(out.numel()) * out.itemsize());
    return;
  }
  switch (out.dtype()) {
    case DType::float32: gemm_float<float>(a, b, out); break;
    case DType::float64: gemm_float<double>(a, b, out); break;
    case DType::float16:
    case DType::bfloat16: {
      Tensor o32 = Tensor::empty(out.shape(), DType::float32);
      gemm_float<float>(a, b, o32);
      copy_into(o32, out);
      break;
    }
    default:
      detail::visit_dtype(out.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_floating_point_v<detail::compute_t<T>>) gemm_exact<T>(a, b, out);
      });
  }
}

}  // namespace kiln::cpu
