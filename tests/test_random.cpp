// Philox-4x32-10 and the uniform/normal draws (random.h).
#include <omp.h>

#include <cstring>

#include "test_util.h"

namespace {

using namespace kiln;

std::vector<uint8_t> bytes(const Tensor& t) {
  std::vector<uint8_t> b(t.numel() * t.itemsize());
  if (!b.empty()) std::memcpy(b.data(), t.data_ptr(), b.size());
  return b;
}

struct Moments {
  double mean, std, lo, hi;
};
Moments moments(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  double s = 0, lo = INFINITY, hi = -INFINITY;
  for (double x : v) {
    s += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  const double m = s / v.size();
  double q = 0;
  for (double x : v) q += (x - m) * (x - m);
  return {m, std::sqrt(q / (v.size() - 1)), lo, hi};
}

// Restores the OpenMP thread count when a test ends.
struct ThreadGuard {
  int saved = omp_get_max_threads();
  ~ThreadGuard() { omp_set_num_threads(saved); }
};

const DType kFloats[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16};

}  // namespace

TEST_SUITE("random") {
  TEST_CASE("philox4x32-10 matches Random123's known-answer vectors") {
    // Random123 tests/kat_vectors: counter words c0..c3, key words k0, k1.
    struct Kat {
      uint32_t c[4], k[2], want[4];
    };
    const Kat kats[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (const Kat& k : kats) {
      uint32_t out[4];
      random::philox4x32(uint64_t(k.c[0]) | uint64_t(k.c[1]) << 32, uint64_t(k.c[2]) | uint64_t(k.c[3]) << 32,
                         uint64_t(k.k[0]) | uint64_t(k.k[1]) << 32, out);
      for (int i = 0; i < 4; ++i) CHECK(out[i] == k.want[i]);
    }
  }

  TEST_CASE("draws are built from the documented Philox words") {
    // float32 uniform in [0, 1): element i is the top 24 bits of word i % 4
    // of block i / 4 (counter = block index, key = seed), times 2^-24.
    random::Generator g(0x0123456789abcdefULL);
    std::vector<float> u = random::uniform({1001}, 0.0, 1.0, DType::float32, &g).to_vector<float>();
    int bad = 0;
    for (int64_t i = 0; i < 1001; ++i) {
      uint32_t w[4];
      random::philox4x32(uint64_t(i / 4), 0, 0x0123456789abcdefULL, w);
      bad += u[i] != float(w[i % 4] >> 8) * 0x1.0p-24f;
    }
    CHECK(bad == 0);
    // float64: 27 + 26 bits of words 2k, 2k+1 of block i / 2; this draw
    // starts after the 251 blocks above (offset 1004 words -> block 251).
    std::vector<double> d = random::uniform({7}, 0.0, 1.0, DType::float64, &g).to_vector<double>();
    for (int64_t i = 0; i < 7; ++i) {
      uint32_t w[4];
      random::philox4x32(uint64_t(251 + i / 2), 0, 0x0123456789abcdefULL, w);
      const int k = int(i % 2);
      CHECK(d[i] == (double(w[2 * k] >> 5) * 67108864.0 + double(w[2 * k + 1] >> 6)) * 0x1.0p-53);
    }
  }

  TEST_CASE("uniform: range, dtype and statistics") {
    for (DType d : kFloats) {
      CAPTURE(d);
      random::Generator g(123);
      Tensor u = random::uniform({100000}, -2.0, 5.0, d, &g);
      CHECK(u.dtype() == d);
      CHECK(u.shape() == Shape{100000});
      Moments m = moments(u);
      CHECK(m.lo >= -2.0);
      CHECK(m.hi < 5.0);
      // mean 1.5, std 7/sqrt(12) = 2.0207; the mean's standard error is 0.0064
      CHECK(std::fabs(m.mean - 1.5) < 0.03);
      CHECK(std::fabs(m.std - 7.0 / std::sqrt(12.0)) < 0.03);
    }
    Tensor def = random::uniform({3, 4});
    CHECK(def.dtype() == DType::float32);
    CHECK(def.shape() == Shape{3, 4});
  }

  TEST_CASE("uniform stays below high after rounding to the dtype") {
    // The range is one unit in the last place: half the draws round to high
    // in the dtype and must be moved back to the value below it.
    random::Generator g(7);
    Moments f32 = moments(random::uniform({4096}, 1.0, 1.0 + std::ldexp(1.0, -23), DType::float32, &g));
    CHECK(f32.hi == 1.0);
    Moments f16 = moments(random::uniform({4096}, 1.0, 1.0 + std::ldexp(1.0, -10), DType::float16, &g));
    CHECK(f16.hi == 1.0);
    Moments bf = moments(random::uniform({4096}, -1.0 - std::ldexp(1.0, -7), -1.0, DType::bfloat16, &g));
    CHECK(bf.hi < -1.0);
    // low == high gives low
    Moments same = moments(random::uniform({100}, 3.0, 3.0, DType::float64, &g));
    CHECK(same.lo == 3.0);
    CHECK(same.hi == 3.0);
  }

  TEST_CASE("normal: statistics and no infinities") {
    for (DType d : kFloats) {
      CAPTURE(d);
      random::Generator g(99);
      Tensor n = random::normal({100000}, 2.0, 3.0, d, &g);
      CHECK(n.dtype() == d);
      Moments m = moments(n);
      CHECK(std::isfinite(m.lo));
      CHECK(std::isfinite(m.hi));
      // standard error of the mean: 3/sqrt(1e5) = 0.0095
      CHECK(std::fabs(m.mean - 2.0) < 0.05);
      CHECK(std::fabs(m.std - 3.0) < 0.05);
    }
    // a fraction of |z| > 2 close to 4.55%
    random::Generator g(5);
    std::vector<double> z = random::normal({200000}, 0.0, 1.0, DType::float64, &g).to_vector<double>();
    double tail = 0;
    for (double v : z) tail += std::fabs(v) > 2.0;
    CHECK(std::fabs(tail / z.size() - 0.0455) < 0.003);
    CHECK(random::normal({10}, 1.0, 0.0).to_vector<float>() == std::vector<float>(10, 1.0f));
  }

  TEST_CASE("seeding reproduces, consecutive draws differ") {
    for (DType d : kFloats) {
      CAPTURE(d);
      random::Generator a(42), b(42), c(43);
      Tensor a1 = random::uniform({1000}, 0, 1, d, &a);
      Tensor b1 = random::uniform({1000}, 0, 1, d, &b);
      CHECK(bytes(a1) == bytes(b1));
      CHECK(bytes(random::uniform({1000}, 0, 1, d, &c)) != bytes(a1));
      Tensor a2 = random::uniform({1000}, 0, 1, d, &a);
      CHECK(bytes(a2) != bytes(a1));
      // a generator copied mid-stream continues identically
      random::Generator a_copy = a;
      CHECK(bytes(random::normal({999}, 0, 1, d, &a)) == bytes(random::normal({999}, 0, 1, d, &a_copy)));
    }
    // the default generator
    random::seed(11);
    Tensor x1 = random::normal({64});
    Tensor x2 = random::normal({64});
    random::seed(11);
    CHECK(bytes(random::normal({64})) == bytes(x1));
    CHECK(bytes(random::normal({64})) == bytes(x2));
    CHECK(bytes(x1) != bytes(x2));
  }

  TEST_CASE("element i depends only on (seed, offset, i)") {
    // A longer draw from the same state starts with the same values.
    for (DType d : kFloats) {
      CAPTURE(d);
      random::Generator a(3), b(3);
      std::vector<double> s = random::normal({10}, 0, 1, d, &a).to_vector<double>();
      std::vector<double> l = random::normal({5000}, 0, 1, d, &b).to_vector<double>();
      CHECK(std::equal(s.begin(), s.end(), l.begin()));
      std::vector<double> us = random::uniform({7}, 0, 1, d, &a).to_vector<double>();
      std::vector<double> ul = random::uniform({70}, 0, 1, d, &b).to_vector<double>();
      // a and b are at different offsets now, so their draws differ ...
      CHECK_FALSE(std::equal(us.begin(), us.end(), ul.begin()));
    }
    // ... and the offset counts 32-bit words in whole Philox blocks.
    random::Generator g(1);
    random::uniform({10}, 0, 1, DType::float32, &g);  // 10 words -> 3 blocks
    CHECK(g.offset == 12);
    random::uniform({3}, 0, 1, DType::float64, &g);  // 6 words -> 2 blocks
    CHECK(g.offset == 20);
    random::normal({5}, 0, 1, DType::float64, &g);  // one block per pair -> 3 blocks
    CHECK(g.offset == 32);
    random::uniform({0}, 0, 1, DType::float32, &g);
    CHECK(g.offset == 32);
  }

  TEST_CASE("results do not depend on the thread count") {
    ThreadGuard guard;
    const Shape big{(1 << 17) + 5};  // above the parallel grain
    for (DType d : kFloats) {
      CAPTURE(d);
      std::vector<uint8_t> u[2], n[2];
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        random::Generator g(2024);
        u[threads - 1] = bytes(random::uniform(big, -1, 1, d, &g));
        n[threads - 1] = bytes(random::normal(big, 0, 1, d, &g));
      }
      CHECK(u[0] == u[1]);
      CHECK(n[0] == n[1]);
    }
  }

  TEST_CASE("bad arguments") {
    for (DType d : {DType::int32, DType::int64, DType::uint8, DType::bool_}) {
      CAPTURE(d);
      CHECK_THROWS_AS(random::uniform({3}, 0, 1, d), DTypeError);
      CHECK_THROWS_AS(random::normal({3}, 0, 1, d), DTypeError);
    }
    CHECK_THROWS_WITH_AS(random::uniform({3}, 0, 1, DType::int32), doctest::Contains("uniform"), DTypeError);
    CHECK_THROWS_AS(random::uniform({3}, 2, 1), ValueError);
    CHECK_THROWS_AS(random::uniform({3}, 0, INFINITY), ValueError);
    CHECK_THROWS_AS(random::uniform({3}, std::nan(""), 1), ValueError);
    CHECK_THROWS_AS(random::uniform({3}, -1e308, 1e308, DType::float64), ValueError);
    CHECK_THROWS_AS(random::normal({3}, 0, -1), ValueError);
    CHECK_THROWS_WITH_AS(random::normal({3}, 0, -1), doctest::Contains("std"), ValueError);
    CHECK_THROWS_AS(random::normal({3}, std::nan(""), 1), ValueError);
    CHECK_THROWS_AS(random::uniform({-1}), ShapeError);
    CHECK_THROWS_AS(random::normal({int64_t(1) << 40, int64_t(1) << 40}), ShapeError);
  }
}
