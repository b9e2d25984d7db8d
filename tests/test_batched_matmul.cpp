// Eager float32 matmul of a batch of small matrices (each below
// kSmallGemmParallelMacs multiply-adds, as attention's per-head Q K^T and
// P V): the matrices are split among the threads and each runs whole on the
// generated GEMM, read in place. Checked against float64 loops over the
// operands' own strides (contiguous, head-strided as a permuted
// [n, L, heads, d], transposed, batch-broadcast), edge sizes included; each
// matrix bitwise the 2-d product of that matrix, at 1 and 2 threads. And
// large products through the BLAS, split among the threads (blas_split).
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "../backends/cpu/jit/small_gemm.h"
#include "test_util.h"

namespace {

using namespace kiln;

// x [2, 3, rows, cols] laid out as `kind`: 0 contiguous; 1 head-strided
// (storage [2, rows, 3, cols], the axes permuted as attention's Q); 2
// transposed matrices (storage [2, 3, cols, rows]); 3 batch axis 0
// broadcast (storage [1, 3, rows, cols], stride 0).
Tensor operand(int64_t rows, int64_t cols, int kind, uint64_t seed) {
  if (kind == 1)
    return kt::random_tensor({2, rows, 3, cols}, DType::float32, seed, false, 1.0).permute({0, 2, 1, 3});
  if (kind == 2)
    return kt::random_tensor({2, 3, cols, rows}, DType::float32, seed, false, 1.0).permute({0, 1, 3, 2});
  if (kind == 3) {
    const Tensor s = kt::random_tensor({1, 3, rows, cols}, DType::float32, seed, false, 1.0).contiguous();
    REQUIRE(s.offset() == 0);
    return Tensor(s.buffer(), DType::float32, {2, 3, rows, cols}, {0, rows * cols, cols, 1});
  }
  return kt::random_tensor({2, 3, rows, cols}, DType::float32, seed, false, 1.0);
}

// Element (b0, b1, r, c) of a float32 view, read through its strides.
double at(const Tensor& t, int64_t b0, int64_t b1, int64_t r, int64_t c) {
  const Strides& s = t.strides();
  const float* p = static_cast<const float*>(t.data_ptr());
  return double(p[b0 * s[0] + b1 * s[1] + r * s[2] + c * s[3]]);
}

std::vector<float> floats(const Tensor& t) { return t.contiguous().to_vector<float>(); }

struct Size {
  int64_t m, n, k;
};
// tile and vector-width remainders, k = 1, and the attention sizes (L = 128, d = 32)
const Size kSizes[] = {{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {17, 33, 7}, {3, 65, 129}, {128, 128, 32}, {128, 32, 128}};

}  // namespace

TEST_SUITE("batched_matmul") {
  TEST_CASE("a batch of small float32 products matches float64 loops: strided, transposed, broadcast operands") {
    for (const Size& z : kSizes)
      for (int ka : {0, 1, 2, 3})
        for (int kb : {0, 1, 2, 3}) {
          if (ka == kb && ka != 0) continue;  // keep the distinct problems (the eager GEMM cache) few
          CAPTURE(z.m);
          CAPTURE(z.n);
          CAPTURE(z.k);
          CAPTURE(ka);
          CAPTURE(kb);
          const Tensor a = operand(z.m, z.k, ka, 11 + z.m), b = operand(z.k, z.n, kb, 29 + z.n);
          const std::vector<float> got = floats(matmul(a, b));
          REQUIRE(got.size() == size_t(6 * z.m * z.n));
          int bad = 0;
          for (int64_t b0 = 0; b0 < 2; ++b0)
            for (int64_t b1 = 0; b1 < 3; ++b1)
              for (int64_t i = 0; i < z.m; ++i)
                for (int64_t j = 0; j < z.n; ++j) {
                  double want = 0, mag = 0;
                  for (int64_t kk = 0; kk < z.k; ++kk) {
                    const double p = at(a, b0, b1, i, kk) * at(b, b0, b1, kk, j);
                    want += p;
                    mag += std::fabs(p);
                  }
                  const double g = got[size_t(((b0 * 3 + b1) * z.m + i) * z.n + j)];
                  // float32 accumulation of k products: k units of roundoff of sum |a b|
                  if (!(std::fabs(g - want) <= double(z.k + 1) * 0x1p-24 * mag + 1e-30) && bad++ < 3)
                    FAIL_CHECK("element (" << b0 << ", " << b1 << ", " << i << ", " << j << "): got " << g
                                           << " want " << want);
                }
          CHECK(bad == 0);
        }
  }

  TEST_CASE("each matrix of the batch is bitwise its own 2-d product, at 1 and 2 threads") {
    const int saved = omp_get_max_threads();
    for (const Size& z : {Size{128, 128, 32}, Size{128, 32, 128}, Size{17, 33, 7}}) {
      CAPTURE(z.m);
      const Tensor a = operand(z.m, z.k, 1, 5), b = operand(z.k, z.n, 2, 6);  // Q and K^T of attention
      std::vector<float> per_matrix;
      for (int64_t b0 = 0; b0 < 2; ++b0)
        for (int64_t b1 = 0; b1 < 3; ++b1) {
          const std::vector<float> p = floats(matmul(select(select(a, 0, b0), 0, b1), select(select(b, 0, b0), 0, b1)));
          per_matrix.insert(per_matrix.end(), p.begin(), p.end());
        }
      for (int threads : {1, 2}) {
        CAPTURE(threads);
        omp_set_num_threads(threads);
        const std::vector<float> got = floats(matmul(a, b));
        omp_set_num_threads(saved);
        REQUIRE(got.size() == per_matrix.size());
        CHECK(std::memcmp(got.data(), per_matrix.data(), got.size() * sizeof(float)) == 0);
      }
    }
  }
}

// Products past the generated GEMM's sizes run through the BLAS, split among
// the OpenMP threads by blocks of rows (m >= n) or columns, each block one
// one-threaded BLAS call (backends/cpu/matmul.cpp, blas_gemm).
TEST_SUITE("blas_split") {
  TEST_CASE("large products split among threads: float64 loops on sampled rows, bitwise the same at 1 and 2 threads") {
    struct Case {
      int64_t m, n, k;
      bool ta, tb;
    };
    // rows split (m >= n, m not a multiple of 64), columns split (n > m), every transpose; all past 2^24
    // multiply-adds, and m > 64 (x W^T with few rows takes the generated swapped route)
    const Case cases[] = {{517, 300, 130, false, false}, {517, 300, 130, true, false}, {517, 300, 130, false, true},
                          {100, 1301, 160, false, false}, {100, 1301, 160, true, true}};
    const int saved = omp_get_max_threads();
    for (const Case& c : cases) {
      CAPTURE(c.m);
      CAPTURE(c.n);
      CAPTURE(c.ta);
      CAPTURE(c.tb);
      const Tensor a0 = kt::random_tensor(c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, DType::float32, 3, false, 1.0);
      const Tensor b0 = kt::random_tensor(c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, DType::float32, 4, false, 1.0);
      const Tensor a = c.ta ? a0.permute({1, 0}) : a0, b = c.tb ? b0.permute({1, 0}) : b0;
      std::vector<std::vector<float>> got;
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        got.push_back(floats(matmul(a, b)));
        omp_set_num_threads(saved);
      }
      REQUIRE(got[0].size() == size_t(c.m * c.n));
      CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)) == 0);
      const std::vector<double> av = kt::values(a.contiguous()), bv = kt::values(b.contiguous());
      int bad = 0;
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          // every 7th row and column, and both sides of each 64-element strip's edge
          const bool edge = i % 64 == 0 || i % 64 == 63 || j % 64 == 0 || j % 64 == 63;
          if (!edge && (i % 7 != 0 || j % 7 != 0)) continue;
          double want = 0, mag = 0;
          for (int64_t kk = 0; kk < c.k; ++kk) {
            const double p = av[size_t(i * c.k + kk)] * bv[size_t(kk * c.n + j)];
            want += p;
            mag += std::fabs(p);
          }
          const double g = got[1][size_t(i * c.n + j)];
          if (!(std::fabs(g - want) <= double(c.k + 1) * 0x1p-24 * mag + 1e-30) && bad++ < 3)
            FAIL_CHECK("element (" << i << ", " << j << "): got " << g << " want " << want);
        }
      CHECK(bad == 0);
    }
  }
}
