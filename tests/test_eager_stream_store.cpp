// Eager elementwise kernels write outputs of at least ew::kStreamMinBytes
// with streaming (non-temporal) stores (backends/cpu/stream_store.h). The
// values must be the bits of the ordinary path: checked here on outputs
// above the threshold against float64 references (add, mul, scalar mul,
// sqrt, neg: exactly rounded, so bitwise) and against the same op run on
// short pieces (below the threshold: ordinary stores) for exp and tanh, with
// aligned and unaligned inputs and outputs (out= into an offset slice), odd
// lengths, and 1 and 2 threads.
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../backends/cpu/stream_store.h"
#include "test_util.h"

namespace {

using namespace kiln;

uint32_t fbits(float f) { return std::bit_cast<uint32_t>(f); }

/// n float32 values in [lo, hi) from a fixed seed.
Tensor uniform_f32(int64_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return Tensor::from_vector(v, {n});
}

/// Elements [off, off + n) of t (a contiguous view starting off elements in).
Tensor piece(const Tensor& t, int64_t off, int64_t n) { return kiln::slice(t, 0, off, off + n); }

/// Counts positions where got differs from want (bits; NaN matches NaN).
int64_t count_diff(const float* got, const float* want, int64_t n) {
  int64_t d = 0;
  for (int64_t i = 0; i < n; ++i)
    d += fbits(got[i]) != fbits(want[i]) && !(std::isnan(got[i]) && std::isnan(want[i]));
  return d;
}

struct Threads {
  int before = omp_get_max_threads();
  explicit Threads(int t) { omp_set_num_threads(t); }
  ~Threads() { omp_set_num_threads(before); }
};

// an odd length whose output is above the streaming threshold
const int64_t kN = cpu::ew::kStreamMinBytes / 4 + 37;

}  // namespace

TEST_SUITE("eager_stream_store") {
  TEST_CASE("large float32 add, mul and scalar mul: float64 reference bits, aligned and unaligned, 1 and 2 threads") {
    const Tensor A = uniform_f32(kN + 3, -4.0f, 4.0f, 1), B = uniform_f32(kN + 3, 0.5f, 3.0f, 2);
    std::vector<float> want(static_cast<size_t>(kN));
    for (int threads : {1, 2}) {
      Threads th(threads);
      for (int64_t in_off : {0, 1}) {
        for (int64_t out_off : {0, 1, 3}) {
          CAPTURE(threads);
          CAPTURE(in_off);
          CAPTURE(out_off);
          const Tensor a = piece(A, in_off, kN), b = piece(B, 2 - in_off, kN);
          const float* pa = a.data<float>();
          const float* pb = b.data<float>();
          Tensor Y = Tensor::empty(Shape{kN + 3}, DType::float32);
          const Tensor y = piece(Y, out_off, kN);
          for (int op = 0; op < 3; ++op) {
            CAPTURE(op);
            // float(double op) is the correctly rounded float result
            for (int64_t i = 0; i < kN; ++i)
              want[size_t(i)] = op == 0   ? float(double(pa[i]) + double(pb[i]))
                                : op == 1 ? float(double(pa[i]) * double(pb[i]))
                                          : float(double(pa[i]) * 2.5);
            Tensor r;
            if (op == 0) r = kiln::add(a, b, Out(y));
            else if (op == 1) r = kiln::mul(a, b, Out(y));
            else r = kiln::mul(a, 2.5, Out(y));
            REQUIRE(r.data_ptr() == y.data_ptr());  // written in place, not through a temporary
            CHECK(count_diff(y.data<float>(), want.data(), kN) == 0);
            // the result as a fresh tensor (64-byte aligned output)
            const Tensor f = op == 0 ? a + b : op == 1 ? a * b : a * 2.5;
            CHECK(count_diff(f.data<float>(), want.data(), kN) == 0);
          }
        }
      }
    }
  }

  TEST_CASE("large float32 sqrt and neg: float64 reference bits; exp and tanh: the bits of short runs") {
    // exp's inputs cover its fast and slow lanes (overflow, underflow to
    // subnormals and 0); a few specials sit at the start and the end
    Tensor X = uniform_f32(kN + 1, -110.0f, 95.0f, 3);
    float* px = X.data<float>();
    const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, 88.72f, -103.5f};
    for (int i = 0; i < 8; ++i) {
      px[i] = specials[i];
      px[kN - i] = specials[i];
    }
    for (int threads : {1, 2}) {
      Threads th(threads);
      for (int64_t in_off : {0, 1}) {
        for (int64_t out_off : {0, 2}) {
          CAPTURE(threads);
          CAPTURE(in_off);
          CAPTURE(out_off);
          const Tensor x = piece(X, in_off, kN);
          const float* p = x.data<float>();
          Tensor Y = Tensor::empty(Shape{kN + 2}, DType::float32);
          const Tensor y = piece(Y, out_off, kN);
          {
            kiln::sqrt(kiln::abs(x), Out(y));
            std::vector<float> want(static_cast<size_t>(kN));
            for (int64_t i = 0; i < kN; ++i) want[size_t(i)] = float(std::sqrt(std::fabs(double(p[i]))));
            CHECK(count_diff(y.data<float>(), want.data(), kN) == 0);
            kiln::neg(x, Out(y));
            for (int64_t i = 0; i < kN; ++i) want[size_t(i)] = -p[i];
            CHECK(count_diff(y.data<float>(), want.data(), kN) == 0);
          }
          for (int op = 0; op < 2; ++op) {
            CAPTURE(op);
            const Tensor r = op == 0 ? kiln::exp(x, Out(y)) : kiln::tanh(x, Out(y));
            REQUIRE(r.data_ptr() == y.data_ptr());
            // the same op on pieces of 100003 elements (0.4 MB: ordinary stores)
            int64_t diff = 0;
            for (int64_t i0 = 0; i0 < kN; i0 += 100003) {
              const int64_t m = std::min<int64_t>(100003, kN - i0);
              const Tensor s = op == 0 ? kiln::exp(piece(x, i0, m)) : kiln::tanh(piece(x, i0, m));
              diff += count_diff(y.data<float>() + i0, s.data<float>(), m);
            }
            CHECK(diff == 0);
          }
        }
      }
    }
  }

  TEST_CASE("large float64 add: the bits of a scalar loop") {
    const int64_t n = cpu::ew::kStreamMinBytes / 8 + 5;
    std::vector<double> va(static_cast<size_t>(n)), vb(static_cast<size_t>(n));
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (int64_t i = 0; i < n; ++i) va[size_t(i)] = d(rng), vb[size_t(i)] = d(rng);
    const Tensor a = Tensor::from_vector(va, {n}), b = Tensor::from_vector(vb, {n});
    for (int threads : {1, 2}) {
      Threads th(threads);
      CAPTURE(threads);
      const Tensor r = a + b;
      const double* pr = r.data<double>();
      int64_t diff = 0;
      for (int64_t i = 0; i < n; ++i) diff += std::bit_cast<uint64_t>(pr[i]) != std::bit_cast<uint64_t>(va[size_t(i)] + vb[size_t(i)]);
      CHECK(diff == 0);
    }
  }
}
