// The generated small GEMMs (backends/cpu/jit/small_gemm.h) against a
// float64 reference: m, n, k from 1 to ~300 (tile and vector-width
// remainders, k = 1), every transpose combination, each epilogue kind (bias
// + tanh, scaling, relu, the tanh derivative, the momentum update with two
// outputs and a constant-table slot), on AVX2 and AVX-512 when the machine
// runs them, with 1 and 2 threads (bitwise the same).
#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../backends/cpu/jit/pack_b.h"
#include "../backends/cpu/jit/small_gemm.h"
#include "test_util.h"

namespace {

using namespace kiln;
using namespace kiln::codegen;

constexpr double kU = 0x1p-24;  // float32 unit roundoff

std::vector<CpuTarget> targets() {
  std::vector<CpuTarget> v;
  for (CpuTarget t : {CpuTarget::avx2, CpuTarget::avx512})
    if (t <= detect_cpu_target()) v.push_back(t);
  return v;
}

std::vector<float> randn(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

// ---- epilogue programs (operands: outputs first) ----------------------------------
Instr load(int arg) {
  Instr i;
  i.kind = Instr::Kind::load;
  i.dtype = DType::float32;
  i.arg = arg;
  return i;
}
Instr imm(double v, int slot = -1) {
  Instr i;
  i.kind = Instr::Kind::imm;
  i.dtype = DType::float32;
  i.imm = v;
  i.arg = slot;
  return i;
}
Instr op(OpId o, int a, int b = -1) {
  Instr i;
  i.kind = Instr::Kind::op;
  i.op = o;
  i.dtype = DType::float32;
  i.a = a;
  i.b = b;
  return i;
}
Instr store(int arg, int a) {
  Instr i;
  i.kind = Instr::Kind::store;
  i.a = a;
  i.arg = arg;
  return i;
}

/// One epilogue kind: its program and layouts, and its float64 reference
/// given the exact product p and the other operands' values at (i, j).
struct Epi {
  std::string name;
  int outputs = 1;
  std::vector<EpiLayout> layouts;  // product operand included
  std::vector<Instr> code;
  int table_slots = 0;
  double lipschitz = 1;  // |d out / d product| bound, for the tolerance
  // ref(p, inputs at (i, j) indexed by operand) -> outputs
  std::function<std::vector<double>(double, const std::vector<double>&)> ref;
};

constexpr double kMu = 0.9, kLr = 0.05;

std::vector<Epi> epilogues() {
  using L = EpiLayout;
  std::vector<Epi> e;
  e.push_back({"plain", 1, {L::matrix, L::product}, {load(1), store(0, 0)}, 0, 1,
               [](double p, const std::vector<double>&) { return std::vector<double>{p}; }});
  e.push_back({"bias+tanh", 1, {L::matrix, L::product, L::row},
               {load(1), load(2), op(OpId::Add, 0, 1), op(OpId::Tanh, 2), store(0, 3)}, 0, 1,
               [](double p, const std::vector<double>& x) { return std::vector<double>{std::tanh(p + x[2])}; }});
  e.push_back({"scale", 1, {L::matrix, L::product}, {load(1), imm(0.125), op(OpId::Mul, 0, 1), store(0, 2)}, 0, 0.125,
               [](double p, const std::vector<double>&) { return std::vector<double>{p * 0.125}; }});
  e.push_back({"bias+relu", 1, {L::matrix, L::row, L::product},
               {load(2), load(1), op(OpId::Add, 0, 1), op(OpId::Relu, 2), store(0, 3)}, 0, 1,
               [](double p, const std::vector<double>& x) { return std::vector<double>{std::max(0.0, p + x[1])}; }});
  // d = product * (1 - h*h): the tanh derivative of a backward pass
  e.push_back({"tanh'", 1, {L::matrix, L::product, L::matrix},
               {load(1), load(2), op(OpId::Mul, 1, 1), imm(1), op(OpId::Sub, 3, 2), op(OpId::Mul, 0, 4), store(0, 5)},
               0, 1, [](double p, const std::vector<double>& x) {
                 const double h = x[2];
                 return std::vector<double>{p * (1 - static_cast<double>(static_cast<float>(h * h)))};
               }});
  // v' = mu v + g; w' = w - lr v' (lr a scalar operand, mu a table slot)
  e.push_back({"momentum", 2, {L::matrix, L::matrix, L::product, L::matrix, L::matrix, L::scalar},
               {load(2), load(3), imm(kMu, 0), op(OpId::Mul, 1, 2), op(OpId::Add, 3, 0), store(1, 4), load(4),
                load(5), op(OpId::Mul, 7, 4), op(OpId::Sub, 6, 8), store(0, 9)},
               1, 1, [](double p, const std::vector<double>& x) {
                 const double v = static_cast<double>(static_cast<float>(static_cast<float>(kMu) * x[3])) + p;
                 return std::vector<double>{x[4] - x[5] * v, v};
               }});
  return e;
}

/// Checks one GEMM with one epilogue on target t against the float64
/// reference; returns output 0 (m x ldc). column_sums >= 0: that output's
/// column sums are also made in the epilogue (SmallGemmKey::column_sums; the
/// output then has leading dimension n).
std::vector<float> check(CpuTarget t, int64_t m, int64_t n, int64_t k, bool ta, bool tb, const Epi& epi,
                         uint64_t seed, int column_sums = -1) {
  CAPTURE(cpu_target_name(t));
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(epi.name);
  CAPTURE(column_sums);
  // A and B stored with padded leading dimensions (a view into a wider matrix)
  const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = column_sums >= 0 ? n : n + 2;
  const std::vector<float> A = randn((ta ? k : m) * lda, seed), B = randn((tb ? n : k) * ldb, seed + 1);
  auto a_at = [&](int64_t i, int64_t kk) { return double(ta ? A[size_t(kk * lda + i)] : A[size_t(i * lda + kk)]); };
  auto b_at = [&](int64_t kk, int64_t j) { return double(tb ? B[size_t(j * ldb + kk)] : B[size_t(kk * ldb + j)]); };

  // The plain GEMM's key, its epilogue then replaced by the case's.
  SmallGemmKey key = plain_gemm_key(t, m, n, k, ta, tb, lda, ldb, ldc);
  const size_t nops = epi.layouts.size();
  key.layouts = epi.layouts;
  key.lds.assign(nops, 0);
  key.epilogue.operand_dtypes.assign(nops, DType::float32);
  key.epilogue.operand_broadcast.assign(nops, false);
  key.epilogue.num_outputs = epi.outputs;
  key.epilogue.code = epi.code;
  key.epilogue.table_slots = epi.table_slots;
  key.column_sums = column_sums;
  std::vector<std::vector<float>> data(nops);
  std::vector<char*> ptrs(nops + 4, nullptr);
  // the column sums' destination, with a guard float past its end
  std::vector<float> sums = randn(n + 1, seed + 99);
  const float guard = sums[size_t(n)];
  if (column_sums >= 0) ptrs[key.column_sum_slot()] = reinterpret_cast<char*>(sums.data());
  for (size_t o = 0; o < nops; ++o) {
    switch (epi.layouts[o]) {
      case EpiLayout::matrix:
        key.lds[o] = ldc;
        data[o] = randn(m * ldc, seed + 10 + o);
        break;
      case EpiLayout::row: data[o] = randn(n, seed + 10 + o); break;
      case EpiLayout::scalar: data[o] = {static_cast<float>(kLr)}; break;
      case EpiLayout::product: break;
    }
    ptrs[o] = reinterpret_cast<char*>(data[o].data());
  }
  uint64_t table[1] = {table_bits(kMu, DType::float32)};
  ptrs[nops] = reinterpret_cast<char*>(table);
  const std::vector<std::vector<float>> before = data;

  const auto g = generate_small_gemm(key);
  g->run(A.data(), B.data(), ptrs.data());

  int bad = 0;
  std::vector<double> x(nops);
  for (int64_t i = 0; i < m && bad < 5; ++i)
    for (int64_t j = 0; j < n && bad < 5; ++j) {
      double p = 0, mag = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        p += a_at(i, kk) * b_at(kk, j);
        mag += std::fabs(a_at(i, kk) * b_at(kk, j));
      }
      for (size_t o = 0; o < nops; ++o) {
        const EpiLayout l = epi.layouts[o];
        if (l == EpiLayout::matrix) x[o] = before[o][size_t(i * ldc + j)];
        else if (l == EpiLayout::row) x[o] = before[o][size_t(j)];
        else if (l == EpiLayout::scalar) x[o] = before[o][0];
      }
      const std::vector<double> want = epi.ref(p, x);
      const double gemm_err = (double(k) + 2) * kU * mag;
      for (int o = 0; o < epi.outputs; ++o) {
        const double got = data[size_t(o)][size_t(i * ldc + j)];
        const double tol = 2 * epi.lipschitz * gemm_err + 16 * kU * (std::fabs(want[size_t(o)]) + 1) + 1e-7;
        if (!(std::fabs(got - want[size_t(o)]) <= tol)) {
          ++bad;
          CHECK_MESSAGE(false, "output " << o << " at (" << i << ", " << j << "): got " << got << ", want "
                                          << want[size_t(o)] << " (tolerance " << tol << ")");
        }
      }
    }
  // padding columns of the outputs are not written
  for (int o = 0; o < epi.outputs; ++o)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = n; j < ldc; ++j)
        if (data[size_t(o)][size_t(i * ldc + j)] != before[size_t(o)][size_t(i * ldc + j)]) {
          FAIL_CHECK("output " << o << " written past column n at (" << i << ", " << j << ")");
          return data[0];
        }
  CHECK(bad == 0);
  if (column_sums < 0) return data[0];
  // The sums of the output as stored: bitwise the float32 sum in row order
  // from 0 (cpu::column_sum's order), and close to the float64 sum.
  const std::vector<float>& y = data[size_t(column_sums)];
  int wrong = 0;
  for (int64_t j = 0; j < n && wrong < 5; ++j) {
    float s32 = 0.0f;
    double s64 = 0, mag = 0;
    for (int64_t i = 0; i < m; ++i) {
      s32 = s32 + y[size_t(i * ldc + j)];
      s64 += y[size_t(i * ldc + j)];
      mag += std::fabs(double(y[size_t(i * ldc + j)]));
    }
    const bool same = std::memcmp(&s32, &sums[size_t(j)], sizeof(float)) == 0;
    const bool close = std::fabs(double(sums[size_t(j)]) - s64) <= double(m) * kU * mag + 1e-30;
    if (!same || !close) {
      ++wrong;
      CHECK_MESSAGE(false, "column sum " << j << ": got " << sums[size_t(j)] << ", row-order float32 sum " << s32
                                         << ", float64 sum " << s64);
    }
  }
  CHECK(wrong == 0);
  CHECK(sums[size_t(n)] == guard);  // nothing written past n
  return data[0];
}

// g's m x n output on A, B (one output, no epilogue operands) run with 1
// and with 2 OpenMP threads: bitwise the same.
void check_same_at_1_and_2_threads(const SmallGemm& g, const std::vector<float>& A, const std::vector<float>& B,
                                   int64_t mn) {
  std::vector<float> c1(static_cast<size_t>(mn)), c2(static_cast<size_t>(mn));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  char* p1[1] = {reinterpret_cast<char*>(c1.data())};
  g.run(A.data(), B.data(), p1);
  omp_set_num_threads(2);
  char* p2[1] = {reinterpret_cast<char*>(c2.data())};
  g.run(A.data(), B.data(), p2);
  omp_set_num_threads(saved);
  CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_SUITE("small_gemm") {
  TEST_CASE("plain GEMM matches the float64 reference: sizes 1..300, every transpose") {
    const Epi plain = epilogues()[0];
    const int64_t sizes[][3] = {{1, 1, 1},    {1, 17, 1},   {5, 3, 1},     {7, 9, 2},      {13, 33, 5},
                                {64, 64, 64}, {64, 10, 128}, {64, 128, 64}, {128, 10, 64},  {100, 100, 100},
                                {29, 47, 300}, {300, 31, 7}, {17, 300, 19}, {256, 256, 256}, {6, 64, 3},
                                {15, 49, 16}, {14, 16, 9},  {24, 48, 33}, {64, 128, 10}, {3, 130, 13},
                                {9, 5, 4},    {2, 7, 3},    {5, 3, 6}};
    uint64_t seed = 1;
    for (CpuTarget t : targets())
      for (const auto& s : sizes)
        for (int tr = 0; tr < 4; ++tr) check(t, s[0], s[1], s[2], tr & 1, tr & 2, plain, seed++);
  }

  TEST_CASE("each epilogue kind on the tile in registers") {
    const int64_t sizes[][3] = {{64, 128, 64}, {64, 10, 128}, {13, 37, 11}, {1, 1, 1}, {33, 70, 2}};
    uint64_t seed = 100;
    for (CpuTarget t : targets())
      for (const Epi& e : epilogues())
        for (const auto& s : sizes)
          for (int tr = 0; tr < 4; ++tr) check(t, s[0], s[1], s[2], tr & 1, tr & 2, e, seed++);
  }

  // AVX2 packs a last vector of 2 or 4 columns (n % 8) g = 8 / that many rows
  // per register (Blocking::pack): n = 2, 4, 10, 12, 18, 20, 26, 28 (packed
  // block alone or after full blocks, with or without a whole vector before
  // it), m giving whole and partial row groups, k = 1 .. 64; AVX-512 runs the
  // same shapes masked. Every epilogue kind's loads and stores on the packed
  // registers (gathered matrix rows, a repeated bias row).
  TEST_CASE("narrow last columns (2 or 4 lanes, packed rows on AVX2) match the float64 reference") {
    const int64_t sizes[][3] = {{1, 2, 1},   {2, 2, 3},    {3, 4, 2},   {5, 10, 7},  {7, 12, 9},  {8, 10, 10},
                                {9, 10, 4},  {13, 12, 5},  {16, 18, 3}, {17, 20, 6}, {31, 26, 10}, {12, 28, 64},
                                {64, 10, 128}, {128, 10, 64}, {100, 2, 33}, {30, 4, 1}};
    uint64_t seed = 5000;
    const Epi plain = epilogues()[0];
    for (CpuTarget t : targets())
      for (const auto& sz : sizes)
        for (int tr = 0; tr < 4; ++tr) check(t, sz[0], sz[1], sz[2], tr & 1, tr & 2, plain, seed++);
    const int64_t epi_sizes[][3] = {{13, 12, 7}, {7, 18, 5}, {10, 10, 10}, {3, 2, 4}, {6, 28, 3}};
    for (CpuTarget t : targets())
      for (const Epi& e : epilogues())
        for (const auto& sz : epi_sizes)
          for (int tr = 0; tr < 4; ++tr) check(t, sz[0], sz[1], sz[2], tr & 1, tr & 2, e, seed++);
  }

  TEST_CASE("column sums of an epilogue output made in the epilogue: row order from 0, float64 reference") {
    // n not a multiple of the vector width, m not a multiple of the tile
    // rows, one row, one column, k below the unroll; every transpose; the
    // digits step's shapes (dz1 = dz2 W2^T * (1 - h^2) with db1 = its sums)
    const int64_t sizes[][3] = {{64, 128, 10}, {64, 10, 128}, {13, 37, 11}, {1, 1, 1},
                                {1, 17, 3},    {33, 70, 2},   {7, 1, 5},    {20, 300, 4}};
    uint64_t seed = 500;
    for (CpuTarget t : targets())
      for (const Epi& e : epilogues())
        for (int out = 0; out < e.outputs; ++out)
          for (const auto& s : sizes)
            for (int tr = 0; tr < 4; ++tr) check(t, s[0], s[1], s[2], tr & 1, tr & 2, e, seed++, out);
  }

  TEST_CASE("column sums: refused for a non-output operand and from the row-split size on") {
    const CpuTarget t = detect_cpu_target();
    if (t < CpuTarget::avx2) return;
    SmallGemmKey k = plain_gemm_key(t, 16, 16, 16, false, false, 16, 16, 16);
    k.column_sums = 1;  // the product operand
    CHECK(small_gemm_why_not(k).find("not an output") != std::string::npos);
    k.column_sums = 0;
    CHECK(small_gemm_why_not(k).empty());
    k = plain_gemm_key(t, 256, 256, 256, false, false, 256, 256, 256);
    k.column_sums = 0;
    CHECK(small_gemm_why_not(k).find("one thread") != std::string::npos);
    CHECK_THROWS_AS(generate_small_gemm(k), Error);
  }

  TEST_CASE("results do not depend on the thread count") {
    for (CpuTarget t : targets()) {
      CAPTURE(cpu_target_name(t));
      const int64_t m = 200, n = 90, k = 150;
      const auto g = generate_small_gemm(plain_gemm_key(t, m, n, k, false, false, k, n, n));
      const std::vector<float> A = randn(m * k, 7), B = randn(k * n, 8);
      check_same_at_1_and_2_threads(*g, A, B, m * n);
    }
  }

  TEST_CASE("keys without a generated form are refused with the reason") {
    const CpuTarget t = detect_cpu_target();
    CHECK(small_gemm_why_not(plain_gemm_key(CpuTarget::sse2, 4, 4, 4, false, false, 4, 4, 4)).find("sse2") !=
          std::string::npos);
    if (t < CpuTarget::avx2) return;
    CHECK(small_gemm_why_not(plain_gemm_key(t, 0, 4, 4, false, false, 4, 4, 4)).find("sizes") != std::string::npos);
    CHECK(small_gemm_why_not(plain_gemm_key(t, 4, 4, 4, false, false, 2, 4, 4)).find("leading") != std::string::npos);
    SmallGemmKey k = plain_gemm_key(t, 4, 4, 4, false, false, 4, 4, 4);
    k.epilogue.operand_dtypes[0] = DType::float64;
    CHECK(small_gemm_why_not(k).find("float32") != std::string::npos);
    k = plain_gemm_key(t, 4, 4, 4, false, false, 4, 4, 4);
    k.layouts[1] = EpiLayout::matrix;
    k.lds[1] = 4;
    CHECK(small_gemm_why_not(k).find("product") != std::string::npos);
    CHECK_THROWS_AS(generate_small_gemm(k), Error);
  }

  TEST_CASE("pack_transposed_b: an exact transposed copy of any rows, edges and strides") {
    if (detect_cpu_target() < CpuTarget::avx2) return;
    // (n, k, padding of B's rows, padding of P's rows, first row, end row)
    const int64_t cases[][6] = {{1, 1, 0, 0, 0, 1},     {7, 5, 3, 1, 0, 5},       {8, 8, 0, 0, 0, 8},
                                {16, 16, 0, 0, 0, 16},  {17, 9, 5, 3, 0, 9},      {33, 70, 1, 0, 3, 67},
                                {384, 384, 0, 0, 0, 384}, {100, 1536, 2, 7, 64, 1000}, {1536, 65, 11, 0, 0, 65},
                                {9, 200, 0, 2, 128, 200}, {5, 3, 0, 0, 1, 1}};
    uint64_t seed = 500;
    for (const auto& c : cases) {
      const int64_t n = c[0], k = c[1], ldb = k + c[2], ldp = n + c[3], i0 = c[4], i1 = c[5];
      CAPTURE(n);
      CAPTURE(k);
      CAPTURE(ldb);
      CAPTURE(ldp);
      CAPTURE(i0);
      CAPTURE(i1);
      const std::vector<float> B = randn(n * ldb, seed++);
      std::vector<float> P(size_t(k * ldp), -7.0f);
      pack_transposed_b(B.data(), n, k, ldb, P.data(), ldp, i0, i1);
      int bad = 0;
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < ldp; ++j) {
          const float want = (i >= i0 && i < i1 && j < n) ? B[size_t(j * ldb + i)] : -7.0f;  // else untouched
          const float got = P[size_t(i * ldp + j)];
          if (std::memcmp(&got, &want, sizeof got) != 0 && ++bad <= 3)
            FAIL_CHECK("P(" << i << ", " << j << ") = " << got << ", want " << want);
        }
      CHECK(bad == 0);
    }
  }

  TEST_CASE("transposed B with few rows: the swapped route against float64, bitwise the packing route's") {
    // m <= 64 and n k >= 2 (m k + m n): the plain GEMM computes C^T = B op(A)^T
    // (small_gemm_swaps); the same product times 1 (an epilogue: exact) packs
    // B. Sizes with n, k off the vector widths, one row, a transposed A.
    const Epi plain = epilogues()[0];
    const Epi times1{"times 1", 1, {EpiLayout::matrix, EpiLayout::product},
                     {load(1), imm(1), op(OpId::Mul, 0, 1), store(0, 2)}, 0, 1,
                     [](double p, const std::vector<double>&) { return std::vector<double>{p}; }};
    const int64_t sizes[][3] = {{1, 40, 37},  {1, 384, 384}, {3, 100, 77},  {5, 17, 100}, {7, 129, 250},
                                {16, 384, 384}, {16, 1536, 384}, {16, 384, 1536}, {33, 200, 300}, {64, 400, 300},
                                {12, 64, 48}};
    uint64_t seed = 700;
    for (CpuTarget t : targets())
      for (const auto& s : sizes)
        for (bool ta : {false, true}) {
          const int64_t m = s[0], n = s[1], k = s[2];
          CAPTURE(m);
          CAPTURE(n);
          CAPTURE(k);
          const int64_t lda = (ta ? m : k) + 3, ldb = k + 5, ldc = n + 2;  // as check() stores them
          SmallGemmKey key = plain_gemm_key(t, m, n, k, ta, true, lda, ldb, ldc);
          REQUIRE(small_gemm_swaps(key));
          key.epilogue.code = times1.code;
          key.layouts = times1.layouts;
          CHECK_FALSE(small_gemm_swaps(key));
          const std::vector<float> swapped = check(t, m, n, k, ta, true, plain, seed);
          const std::vector<float> packed = check(t, m, n, k, ta, true, times1, seed);
          CHECK(std::memcmp(swapped.data(), packed.data(), swapped.size() * sizeof(float)) == 0);
          ++seed;
        }
    // not swapped: more rows, a short k (B's copy is cheap), B not transposed
    const CpuTarget t = targets().empty() ? CpuTarget::avx2 : targets()[0];
    CHECK_FALSE(small_gemm_swaps(plain_gemm_key(t, 65, 1000, 1000, false, true, 1000, 1000, 1000)));
    CHECK_FALSE(small_gemm_swaps(plain_gemm_key(t, 64, 128, 10, false, true, 10, 10, 128)));
    CHECK_FALSE(small_gemm_swaps(plain_gemm_key(t, 16, 384, 384, false, false, 384, 384, 384)));
  }

  // A^T B with a narrow n (n < m, k >= 16) where C^T's rows of m take at
  // most 3/4 of the FMA lanes of C's rows of n (AVX-512: n = 10 fills 10 of
  // 16 lanes; AVX2 packs n = 10 and keeps the direct route): up to one
  // vector of n (below kSmallGemmParallelMacs) in transposed tiles (C^T's
  // tiles transposed in registers, any epilogue), wider n by the swapped
  // route (plain only). Against float64, and bitwise the direct route's
  // (column sums of the output force it: never transposed nor swapped):
  // the digits step's weight gradient (128 x 10 x 64), n = 1..17, m off the
  // vector width, k off the unroll, every epilogue kind.
  TEST_CASE("transposed A with a narrow n: transposed tiles / the swapped route against float64, bitwise the direct route's") {
    const std::vector<Epi> epis = epilogues();
    const Epi& plain = epis[0];
    std::vector<std::array<int64_t, 3>> sizes = {{128, 10, 64}, {64, 10, 128}, {100, 10, 17}, {37, 10, 33},
                                                 {129, 3, 16},  {200, 16, 20}, {48, 12, 40}, {300, 8, 16}};
    for (int64_t n = 1; n <= 17; ++n) sizes.push_back({64, n, 19});
    for (int64_t n = 1; n <= 17; ++n) sizes.push_back({45, n, 16});
    uint64_t seed = 900;
    int tiles_512 = 0, tiles_avx2 = 0, swapped = 0;
    for (CpuTarget t : targets()) {
      CAPTURE(cpu_target_name(t));
      const int64_t V = t == CpuTarget::avx512 ? 16 : 8;
      for (const auto& s : sizes) {
        const int64_t m = s[0], n = s[1], k = s[2];
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        const int64_t lda = m + 3, ldb = n + 5, ldc = n + 2;  // as check() stores them (ta, not tb)
        const SmallGemmKey key = plain_gemm_key(t, m, n, k, true, false, lda, ldb, ldc);
        // the rule: C^T's FMA lanes (n rows of m) at most 3/4 of C's (m rows of n)
        auto lanes = [&](int64_t cols) {
          if (V == 8 && (cols % 8 == 2 || cols % 8 == 4)) return cols;  // AVX2's packed last vector
          return (cols + V - 1) / V * V;
        };
        const bool narrow = n < m && 4 * n * lanes(m) <= 3 * m * lanes(n);
        const bool tiles = small_gemm_transposed_tiles(key);
        CHECK(tiles == (narrow && n <= V));
        CHECK(small_gemm_swaps(key) == (narrow && n > V));
        tiles_512 += tiles && t == CpuTarget::avx512;
        tiles_avx2 += tiles && t == CpuTarget::avx2;
        swapped += small_gemm_swaps(key);
        const std::vector<float> direct = check(t, m, n, k, true, false, plain, seed, 0);  // ld n
        for (const Epi& e : epis) {
          if (e.name != "plain" && !tiles) continue;  // (the others run the direct route there)
          const std::vector<float> got = check(t, m, n, k, true, false, e, seed);
          if (e.name != "plain") continue;
          int diff = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              diff += std::memcmp(&got[size_t(i * ldc + j)], &direct[size_t(i * n + j)], sizeof(float)) != 0;
          CHECK(diff == 0);
        }
        ++seed;
      }
    }
    if (detect_cpu_target() >= CpuTarget::avx512) {
      CHECK(tiles_512 >= 20);
      CHECK(swapped >= 2);  // n = 17
    }
    if (detect_cpu_target() >= CpuTarget::avx2) CHECK(tiles_avx2 >= 5);
    // never: k below 16, B transposed as well, n >= m, AVX2's packed n = 10, column sums
    for (CpuTarget t : {CpuTarget::avx2, CpuTarget::avx512}) {
      for (const SmallGemmKey& k : {plain_gemm_key(t, 128, 10, 15, true, false, 128, 10, 10),
                                    plain_gemm_key(t, 128, 10, 64, true, true, 128, 64, 10),
                                    plain_gemm_key(t, 10, 12, 64, true, false, 10, 12, 12)}) {
        CHECK_FALSE(small_gemm_swaps(k));
        CHECK_FALSE(small_gemm_transposed_tiles(k));
      }
    }
    SmallGemmKey digits = plain_gemm_key(CpuTarget::avx512, 128, 10, 64, true, false, 128, 10, 10);
    CHECK(small_gemm_transposed_tiles(digits));
    CHECK_FALSE(small_gemm_swaps(digits));
    digits.column_sums = 0;
    CHECK_FALSE(small_gemm_transposed_tiles(digits));
    CHECK_FALSE(small_gemm_transposed_tiles(plain_gemm_key(CpuTarget::avx2, 128, 10, 64, true, false, 128, 10, 10)));
    // past kSmallGemmParallelMacs: the swapped route (its row blocks split among threads)
    const SmallGemmKey big = plain_gemm_key(CpuTarget::avx512, 8192, 10, 64, true, false, 8192, 10, 10);
    CHECK_FALSE(small_gemm_transposed_tiles(big));
    CHECK(small_gemm_swaps(big));
  }

  TEST_CASE("eager runs the swapped route past kSmallGemmMaxMacs; its matmul matches float64") {
    // 32 x 1536 x 384: 2^24.2 multiply-adds, generated only through the swapped route
    CHECK(small_gemm_eager_size(32, 1536, 384));
    CHECK_FALSE(small_gemm_eager_size(65, 1536, 384));
    CHECK_FALSE(small_gemm_eager_size(64, 8192, 1024));  // 2^29
    if (detect_cpu_target() < CpuTarget::avx2) return;
    const int64_t m = 32, n = 1536, k = 384;
    const std::shared_ptr<const SmallGemm> g = eager_small_gemm(m, n, k, false, true, k, k, n);
    REQUIRE(g != nullptr);
    CHECK(small_gemm_swaps(g->key()));
    const std::vector<float> x = randn(m * k, 31), w = randn(n * k, 32);
    const Tensor y = matmul(Tensor::from_vector(x, {m, k}), transpose(Tensor::from_vector(w, {n, k}))).contiguous();
    const std::vector<float> got = y.to_vector<float>();
    int bad = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double p = 0, mag = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          p += double(x[size_t(i * k + kk)]) * w[size_t(j * k + kk)];
          mag += std::fabs(double(x[size_t(i * k + kk)]) * w[size_t(j * k + kk)]);
        }
        if (!(std::fabs(got[size_t(i * n + j)] - p) <= (k + 2) * kU * mag) && ++bad <= 3)
          FAIL_CHECK("y(" << i << ", " << j << ") = " << got[size_t(i * n + j)] << ", want " << p);
      }
    CHECK(bad == 0);
  }

  // The size rule looks at the shape only: a plan binds a transposed-view
  // argument contiguous (tb = false) and must run the generated GEMM eager
  // runs for the view (a BLAS call there would give other bits; found by a
  // new-user test at 64 x 1024 x 1024, 2^26 multiply-adds).
  TEST_CASE("strict compile of x W^T with W^T a transposed-view argument past 2^24 multiply-adds is eager's bits") {
    if (detect_cpu_target() < CpuTarget::avx2) return;
    const int64_t shapes[][3] = {{64, 1024, 1024}, {8, 2048, 1536}, {24, 1000, 1999}};
    uint64_t seed = 70;
    for (const auto& s : shapes) {
      const int64_t m = s[0], n = s[1], k = s[2];
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      const Tensor x = Tensor::from_vector(randn(m * k, seed++), {m, k});
      const Tensor wt = transpose(Tensor::from_vector(randn(n * k, seed++), {n, k}));  // [k, n] view
      const Tensor eager = matmul(x, wt).contiguous();
      CompileOptions so;
      so.session = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
      auto f = [](Tensor a, Tensor b) { return matmul(a, b); };
      const Tensor strict = compile(f, so)(x.layout(), wt.layout())(x, wt).tensor().contiguous();
      CHECK(std::memcmp(eager.data<float>(), strict.data<float>(), size_t(m * n) * sizeof(float)) == 0);
      // and the generated GEMM's value, not just agreement: one entry against float64
      const std::vector<float> xv = x.to_vector<float>(), wv = wt.contiguous().to_vector<float>();
      double p = 0, mag = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        p += double(xv[size_t(kk)]) * wv[size_t(kk * n)];
        mag += std::fabs(double(xv[size_t(kk)]) * wv[size_t(kk * n)]);
      }
      CHECK(std::fabs(eager.data<float>()[0] - p) <= (k + 2) * kU * mag);
    }
  }

  TEST_CASE("the swapped route's results do not depend on the thread count") {
    for (CpuTarget t : targets()) {
      CAPTURE(cpu_target_name(t));
      const int64_t m = 16, n = 1536, k = 384;  // past kSmallGemmParallelMacs: split among threads
      const SmallGemmKey key = plain_gemm_key(t, m, n, k, false, true, k, k, n);
      REQUIRE(small_gemm_swaps(key));
      const auto g = generate_small_gemm(key);
      const std::vector<float> A = randn(m * k, 17), B = randn(n * k, 18);
      check_same_at_1_and_2_threads(*g, A, B, m * n);
    }
  }
}
