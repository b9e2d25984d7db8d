// The generated-GEMM caches of eager matmul (codegen::eager_small_gemm,
// kEagerGemmCacheMax problems) and of conv2d's tap path (256 tap GEMMs) evict
// their least recently used kernels (backends/cpu/jit/kernel_lru.h): the
// kernel a problem runs depends on the problem only, never on how many other
// problems the process ran before. Checked here after more than a cache's
// capacity of other problems:
//  - a problem used for the first time runs its generated GEMM: bitwise an
//    explicit sequential FMA chain over k in float (the generated GEMM's
//    documented numerics) and a freshly generated kernel's result;
//  - a problem whose kernel was evicted is generated again: bitwise its
//    result before the evictions;
//  - a compiled plan made before the evictions keeps its kernel (shared
//    ownership: not a dangling pointer) and still gives its old bits, eager's
//    bits and the float64 reference;
//  - conv2d's tap path: a geometry first used after the evictions runs the
//    taps, bitwise the tap-order FMA reference (tap 0's chain, then each
//    later tap's chain added), not the column path.
// Run with KILN_JIT_TARGET=avx2 for the AVX2 kernels.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "../backends/cpu/jit/small_gemm.h"
#include "../jit/engine.h"
#include "../jit/plan.h"
#include "ref_matmul.h"
#include "same_bits.h"
#include "test_util.h"

namespace {
using namespace kiln;
using codegen::PlanStep;

bool generated_target() { return codegen::detect_cpu_target() >= codegen::CpuTarget::avx2; }

Tensor rand32(const Shape& s, uint64_t seed) { return kt::random_tensor(s, DType::float32, seed, false, 1.0); }

// C = A B (row-major, A m x k, B k x n), each element one fused
// multiply-add chain over k = 0..K-1 from 0 in float.
std::vector<float> fma_chain_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
                                    int64_t k) {
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t q = 0; q < k; ++q) acc = std::fma(a[size_t(i * k + q)], b[size_t(q * n + j)], acc);
      c[size_t(i * n + j)] = acc;
    }
  return c;
}

bool same_floats(const Tensor& t, const std::vector<float>& want) {
  const std::vector<float> got = t.contiguous().to_vector<float>();
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      MESSAGE("element " << i << ": got " << got[i] << ", want " << want[i]);
      return false;
    }
  return true;
}

// Eager matmuls of `count` distinct problems (m = 1..count, n = 5, k = 7:
// shapes no other check here uses), each generating its kernel.
void flood_eager(int64_t count) {
  for (int64_t m = 1; m <= count; ++m) {
    const Tensor y = matmul(rand32({m, 7}, 100 + m), rand32({7, 5}, 200));
    REQUIRE(y.shape() == Shape{m, 5});
  }
}

const codegen::ExecutionPlan& plan_of(const CompiledCallable& c) { return c.engine_model().artifact().plan(); }

}  // namespace

TEST_SUITE("gemm_cache") {
  TEST_CASE("eager matmul: a problem first used after more than the cache's capacity of others runs its generated GEMM") {
    if (!generated_target()) return;
    const int64_t extra = 40, cap = static_cast<int64_t>(codegen::kEagerGemmCacheMax);
    const size_t ev0 = codegen::eager_small_gemm_cache_stats().evictions;
    flood_eager(cap + extra);
    const codegen::EagerGemmCacheStats st = codegen::eager_small_gemm_cache_stats();
    CHECK(st.size == codegen::kEagerGemmCacheMax);
    CHECK(st.evictions >= ev0 + static_cast<size_t>(extra));  // the cache was full
    // a new problem: its generated GEMM, not the BLAS
    const int64_t m = 13, n = 37, k = 301;
    const std::shared_ptr<const codegen::SmallGemm> g = codegen::eager_small_gemm(m, n, k, false, false, k, n, n);
    REQUIRE(g != nullptr);
    const Tensor a = rand32({m, k}, 1), b = rand32({k, n}, 2);
    const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
    const Tensor y = matmul(a, b);
    CHECK(same_floats(y, fma_chain_matmul(av, bv, m, n, k)));
    // a freshly generated kernel (the result in a fresh process) gives the same bits
    const auto fresh = codegen::generate_small_gemm(
        codegen::plain_gemm_key(codegen::detect_cpu_target(), m, n, k, false, false, k, n, n));
    std::vector<float> c(static_cast<size_t>(m * n));
    char* ptrs[1] = {reinterpret_cast<char*>(c.data())};
    fresh->run(av.data(), bv.data(), ptrs);
    CHECK(same_floats(y, c));
    kt::check_all_close(y, kt::ref_matmul(kt::values(a), kt::values(b), m, k, n), 1e-4, 1e-5, "y vs float64");
  }

  TEST_CASE("eager matmul: an evicted problem is generated again, with its first use's bits") {
    if (!generated_target()) return;
    const int64_t m = 9, n = 29, k = 77;
    const Tensor a = rand32({m, k}, 3), b = rand32({k, n}, 4);
    const Tensor y1 = matmul(a, b);
    std::weak_ptr<const codegen::SmallGemm> first = codegen::eager_small_gemm(m, n, k, false, false, k, n, n);
    REQUIRE(!first.expired());
    flood_eager(static_cast<int64_t>(codegen::kEagerGemmCacheMax) + 8);
    CHECK(first.expired());  // evicted, and nothing else held it: its code was released
    const int64_t gen0 = codegen::small_gemm_counts().generated;
    const Tensor y2 = matmul(a, b);
    CHECK(codegen::small_gemm_counts().generated == gen0 + 1);  // generated again
    CHECK(kt::same_bits(y1, y2));
    CHECK(same_floats(y2, fma_chain_matmul(a.to_vector<float>(), b.to_vector<float>(), m, n, k)));
  }

  TEST_CASE("a compiled plan made before the evictions keeps its GEMM and eager's bits") {
    if (!generated_target()) return;
    const int64_t m = 11, n = 23, k = 45;
    CompiledCallable run = compile([](Tensor x, Tensor w) { return matmul(x, w); })(
        TensorLayout(DType::float32, {m, k}), TensorLayout(DType::float32, {k, n}));
    std::shared_ptr<const codegen::SmallGemm> held;
    for (const auto& s : plan_of(run).steps())
      if (s.kind == PlanStep::Kind::gemm) held = s.gemm.small;
    REQUIRE(held != nullptr);  // eager's generated GEMM, shared with the plan
    CHECK(held == codegen::eager_small_gemm(m, n, k, false, false, k, n, n));
    const std::weak_ptr<const codegen::SmallGemm> plan_gemm = held;
    held.reset();
    const Tensor x = rand32({m, k}, 5), w = rand32({k, n}, 6);
    const Tensor before = run(x, w);
    flood_eager(static_cast<int64_t>(codegen::kEagerGemmCacheMax) + 8);
    REQUIRE(!plan_gemm.expired());  // the plan still owns it
    // eager generates the problem again: another kernel object, the same code
    const std::shared_ptr<const codegen::SmallGemm> again = codegen::eager_small_gemm(m, n, k, false, false, k, n, n);
    REQUIRE(again != nullptr);
    CHECK(again != plan_gemm.lock());
    const Tensor after = run(x, w);
    CHECK(kt::same_bits(before, after));
    CHECK(kt::same_bits(after, matmul(x, w)));
    CHECK(same_floats(after, fma_chain_matmul(x.to_vector<float>(), w.to_vector<float>(), m, n, k)));
    kt::check_all_close(after, kt::ref_matmul(kt::values(x), kt::values(w), m, k, n), 1e-4, 1e-5, "plan vs float64");
  }

  TEST_CASE("conv2d tap path: a geometry first used after more than the tap cache's capacity of others runs the taps") {
    if (!generated_target()) return;
    // 300 distinct tap GEMMs (1x1 kernels, 16 channels: the tap path; one
    // GEMM each, m = output channels), more than the tap cache's 256
    for (int64_t oc = 1; oc <= 300; ++oc) {
      const Tensor y = conv2d(rand32({1, 16, 1, 1}, 300 + oc), rand32({oc, 16, 1, 1}, 301));
      REQUIRE(y.shape() == Shape{1, oc, 1, 1});
    }
    // a new geometry: 16 channels, 3x3 kernel, padding 1, dilation {1, 2}
    const int64_t C = 16, H = 6, W = 9, O = 5, KH = 3, KW = 3, ph = 1, pw = 2, dh = 1, dw = 2;
    const int64_t OH = H + 2 * ph - dh * (KH - 1), OW = W + 2 * pw - dw * (KW - 1);
    const Tensor x = rand32({1, C, H, W}, 7), w = rand32({O, C, KH, KW}, 8);
    const Tensor y = conv2d(x, w, {}, {1, 1}, {ph, pw}, {dh, dw});
    REQUIRE(y.shape() == Shape{1, O, OH, OW});
    // the tap path's order: out = (...((chain_0 + chain_1) + chain_2) ...),
    // chain_t one FMA chain over the channels in order (padding reads 0)
    const std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>();
    std::vector<float> want(static_cast<size_t>(O * OH * OW));
    std::vector<double> ref(want.size());
    for (int64_t o = 0; o < O; ++o)
      for (int64_t r = 0; r < OH; ++r)
        for (int64_t q = 0; q < OW; ++q) {
          float sum = 0.0f;
          double exact = 0.0;
          for (int64_t t = 0; t < KH * KW; ++t) {
            const int64_t i = t / KW, j = t % KW, ih = r + i * dh - ph, iw = q + j * dw - pw;
            float chain = 0.0f;
            for (int64_t c = 0; c < C; ++c) {
              const float xval = ih >= 0 && ih < H && iw >= 0 && iw < W ? xv[size_t((c * H + ih) * W + iw)] : 0.0f;
              const float wval = wv[size_t(((o * C + c) * KH + i) * KW + j)];
              chain = std::fma(wval, xval, chain);
              exact += double(wval) * xval;
            }
            sum = t == 0 ? chain : chain + sum;
          }
          want[size_t((o * OH + r) * OW + q)] = sum;
          ref[size_t((o * OH + r) * OW + q)] = exact;
        }
    CHECK(same_floats(y, want));
    kt::check_all_close(y, ref, 1e-4, 1e-5, "conv2d vs float64");
  }
}
