// The generated row kernels (backends/cpu/jit/row_kernels.h): softmax,
// log_softmax, layer_norm and rms_norm on float32 rows against a float64
// reference, on every CPU target this machine runs (SSE2, AVX2, AVX-512),
// with NaN/inf rows, n = 1, tails (n not a multiple of the vector width),
// 0 rows and weight/bias present or absent; then eager == compiled bitwise
// (default and strict sessions), independent of the thread count, and the
// plan's row step.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../backends/cpu/jit/row_kernels.h"
#include "../jit/plan.h"
#include "test_util.h"

namespace {

using namespace kiln;
using namespace kiln::codegen;
using kt::ThreadGuard;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kU = 0x1p-24;  // float32 unit roundoff

std::vector<CpuTarget> targets() {
  std::vector<CpuTarget> v;
  for (CpuTarget t : {CpuTarget::sse2, CpuTarget::avx2, CpuTarget::avx512})
    if (t <= detect_cpu_target()) v.push_back(t);
  return v;
}

/// The arguments of a row kernel call over `rows` rows of n floats.
RowArgs row_args(const float* x, float* y, int64_t rows, int64_t n, float* y2 = nullptr, const float* weight = nullptr,
                 const float* bias = nullptr, float eps = 0.0f) {
  return RowArgs{.x = x, .y = y, .y2 = y2, .weight = weight, .bias = bias, .rows = rows, .n = n, .eps = eps};
}

/// k on the rows of `a` one row per call (row r reads x + r * n and writes
/// y + r * n, and y2 + r * n when y2 is given; a's other operands as they are).
void run_row_by_row(const RowKernel& k, const RowArgs& a, const float* x, float* y, float* y2 = nullptr) {
  for (int64_t r = 0; r < a.rows; ++r) {
    RowArgs c = a;
    c.x = x + r * a.n;
    c.y = y + r * a.n;
    c.y2 = y2 ? y2 + r * a.n : nullptr;
    c.rows = 1;
    k.fn()(&c);
  }
}

/// k on `a` in place: on a copy of x that is also the output (y = x); returns it.
std::vector<float> run_in_place(const RowKernel& k, const RowArgs& a, const std::vector<float>& x) {
  std::vector<float> inplace = x;
  RowArgs c = a;
  c.x = inplace.data();
  c.y = inplace.data();
  k.fn()(&c);
  return inplace;
}

/// rows x n float32 values: normal(offset, scale), with row r % 8 == 1..4
/// made special (a NaN; a +inf; all -inf; some -inf) when `specials`.
std::vector<float> make_rows(int64_t rows, int64_t n, uint64_t seed, double scale, bool specials, double offset = 0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(offset, scale);
  std::vector<float> v(static_cast<size_t>(rows * n));
  for (auto& x : v) x = static_cast<float>(nd(rng));
  if (!specials) return v;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = v.data() + r * n;
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    switch (r % 8) {
      case 1: row[j] = static_cast<float>(kNaN); break;
      case 2: row[j] = static_cast<float>(kInf); break;
      case 3:
        for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(-kInf);
        break;
      case 4:
        for (int64_t i = 0; i < n; i += 3) row[i] = static_cast<float>(-kInf);
        break;
      default: break;
    }
  }
  return v;
}

/// Float64 reference of one row, with the tolerance of each element
/// (the bounds documented in row_kernels.h).
void reference(RowOp op, const float* x, int64_t n, const float* w, const float* b, double eps, double* want,
               double* tol) {
  if (op == RowOp::softmax || op == RowOp::log_softmax) {
    double m = -kInf, s = 0;
    for (int64_t i = 0; i < n; ++i) m = std::isnan(x[i]) || std::isnan(m) ? kNaN : std::max(m, double(x[i]));
    for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
    const double ls = std::log(s), sum_err = (8 + 2 * std::log2(double(n))) * kU;
    for (int64_t i = 0; i < n; ++i) {
      const double d = std::isfinite(x[i] - m) ? std::fabs(x[i] - m) : 0.0;  // -inf elements: exact 0 / -inf
      if (op == RowOp::softmax) {
        want[i] = std::exp(x[i] - m) / s;
        tol[i] = want[i] * ((d + 1) * 2 * kU + sum_err + 8 * kU) + 0x1p-148;
      } else {
        want[i] = x[i] - m - ls;
        // log(sum) takes the float32 sum's relative error as absolute error
        tol[i] = (d + std::fabs(ls) + 1) * 2 * kU + sum_err + 4 * kU * std::fabs(want[i]);
      }
    }
    return;
  }
  const bool rms = op == RowOp::rms_norm;
  double mean = 0, var = 0;
  if (!rms) {
    for (int64_t i = 0; i < n; ++i) mean += x[i];
    mean /= double(n);
  }
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= double(n);
  const double r = 1 / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) {
    const double y = (x[i] - mean) * r;
    want[i] = y * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
    tol[i] = 2e-6 * (std::fabs(y) + 1) * std::fabs(w ? w[i] : 1.0) + 4 * kU * std::fabs(want[i]);
  }
}

/// Runs `k` on rows x n values and checks every element against the reference.
void check_kernel(const RowKernel& k, int64_t rows, int64_t n, uint64_t seed, double scale, bool specials,
                  double offset = 0) {
  const RowKernelKey& key = k.key();
  const std::vector<float> x = make_rows(rows, n, seed, scale, specials, offset);
  const std::vector<float> w = make_rows(1, n, seed + 1, 1.0, false), b = make_rows(1, n, seed + 2, 1.0, false);
  std::vector<float> y(x.size(), 12345.0f);
  RowArgs a = row_args(x.data(), y.data(), rows, n, nullptr, key.has_weight ? w.data() : nullptr,
                       key.has_bias ? b.data() : nullptr, 1e-5f);
  k.fn()(&a);  // the generated function itself, on every row
  std::vector<double> want(static_cast<size_t>(n)), tol(static_cast<size_t>(n));
  int bad = 0;
  for (int64_t r = 0; r < rows && bad < 3; ++r) {
    reference(key.op, x.data() + r * n, n, a.weight, a.bias, 1e-5, want.data(), tol.data());
    for (int64_t i = 0; i < n && bad < 3; ++i) {
      const double g = y[r * n + i];
      const bool ok = std::isnan(want[i]) ? std::isnan(g)
                      : std::isinf(want[i]) ? g == want[i]
                                            : std::fabs(g - want[i]) <= tol[i];
      if (!ok) {
        ++bad;
        FAIL_CHECK(k.str() << " rows " << rows << " n " << n << " scale " << scale << ": row " << r << " element "
                           << i << " got " << g << " want " << want[i] << " tol " << tol[i]);
      }
    }
  }
}

std::vector<RowKernelKey> keys(CpuTarget t) {
  return {{RowOp::softmax, false, false, DType::float32, t},   {RowOp::log_softmax, false, false, DType::float32, t},
          {RowOp::layer_norm, false, false, DType::float32, t}, {RowOp::layer_norm, true, false, DType::float32, t},
          {RowOp::layer_norm, false, true, DType::float32, t},  {RowOp::layer_norm, true, true, DType::float32, t},
          {RowOp::rms_norm, false, false, DType::float32, t},   {RowOp::rms_norm, true, false, DType::float32, t}};
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<size_t>(ca.numel()) * size_of(ca.dtype())) == 0;
}

/// The four ops through the public API (weight/bias as given).
Tensor apply_row(RowOp op, const Tensor& x, const Tensor& w, const Tensor& b) {
  switch (op) {
    case RowOp::softmax: return softmax(x, -1);
    case RowOp::log_softmax: return log_softmax(x, -1);
    case RowOp::layer_norm: return layer_norm(x, w, b, 1e-5);
    case RowOp::rms_norm: return rms_norm(x, w, 1e-5);
    case RowOp::softmax_and_log_softmax: break;  // not an op of its own
  }
  return {};
}

}  // namespace

TEST_SUITE("row kernels") {
  TEST_CASE("generated row kernels against the float64 reference on every target") {
    const std::vector<int64_t> widths = {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 65, 100, 257, 1024, 1031};
    uint64_t seed = 1;
    for (CpuTarget t : targets()) {
      for (const RowKernelKey& key : keys(t)) {
        REQUIRE(can_generate_row(key));
        const auto k = generate_row_kernel(key);
        CHECK(k->code_size() > 0);
        for (int64_t n : widths) {
          check_kernel(*k, 9, n, ++seed, 2.0, false);
          check_kernel(*k, 9, n, ++seed, 2.0, true);
          check_kernel(*k, 2, n, ++seed, 300.0, false);  // softmax: many exp underflows
          check_kernel(*k, 2, n, ++seed, 1.0, false, 1000.0);  // norms: mean far from 0
        }
        check_kernel(*k, 0, 5, ++seed, 1.0, false);  // 0 rows: nothing read or written
      }
    }
  }

  TEST_CASE("short softmax rows (n <= 16, a block of rows at a time on AVX2 and AVX-512) give each row's bits alone") {
    for (CpuTarget t : targets())
      for (RowOp op : {RowOp::softmax, RowOp::log_softmax}) {
        const auto k = generate_row_kernel({op, false, false, DType::float32, t});
        // a partial block, whole and several blocks of 8 or 16 rows; super-blocks
        // of 4 blocks (each phase over up to 4 L rows), whole, partial and several
        for (int64_t rows : {7, 16, 17, 40, 63, 64, 65, 100, 129})
          for (int64_t n : {1, 2, 3, 5, 8, 9, 10, 15, 16, 17}) {
            const std::vector<float> x = make_rows(rows, n, 77 + static_cast<uint64_t>(n), 3.0, true);
            std::vector<float> all(x.size()), one(x.size());
            RowArgs a = row_args(x.data(), all.data(), rows, n);
            k->fn()(&a);
            run_row_by_row(*k, a, x.data(), one.data());
            INFO(cpu_target_name(t) << " " << row_op_name(op) << " rows " << rows << " n " << n);
            CHECK(std::memcmp(all.data(), one.data(), all.size() * sizeof(float)) == 0);
            // in place (y = x): each block reads its rows before it writes them
            const std::vector<float> inplace = run_in_place(*k, a, x);
            CHECK(std::memcmp(all.data(), inplace.data(), all.size() * sizeof(float)) == 0);
          }
      }
  }

  // The column code for n <= 16 (AVX2, AVX-512) runs each phase over a
  // super-block of up to 4 blocks of L rows and takes the rows' exponentials
  // from the column phase's buffer: softmax, log_softmax and both at once
  // against the float64 reference for every n up to 17 and row counts that
  // end anywhere in a block or super-block, specials included; in place too.
  TEST_CASE("short softmax rows over several blocks against the float64 reference, both outputs, in place") {
    for (CpuTarget t : targets()) {
      const auto both = generate_row_kernel({RowOp::softmax_and_log_softmax, false, false, DType::float32, t});
      const auto sm = generate_row_kernel({RowOp::softmax, false, false, DType::float32, t});
      for (int64_t n = 1; n <= 17; ++n)
        for (int64_t rows : {1, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129}) {
          for (bool specials : {false, true}) {
            const std::vector<float> x =
                make_rows(rows, n, 5150 + static_cast<uint64_t>(n * 1000 + rows) + specials, 3.0, specials);
            std::vector<float> y(x.size(), 7.0f), y2(x.size(), 7.0f);
            RowArgs a = row_args(x.data(), y.data(), rows, n, y2.data());
            both->fn()(&a);
            std::vector<double> ws(static_cast<size_t>(n)), ts(ws.size()), wl(ws.size()), tl(ws.size());
            int bad = 0;
            for (int64_t r = 0; r < rows; ++r) {
              reference(RowOp::softmax, x.data() + r * n, n, nullptr, nullptr, 0, ws.data(), ts.data());
              reference(RowOp::log_softmax, x.data() + r * n, n, nullptr, nullptr, 0, wl.data(), tl.data());
              for (int64_t i = 0; i < n; ++i) {
                const size_t u = static_cast<size_t>(r * n + i), v = static_cast<size_t>(i);
                auto ok = [](double g, double want, double tol) {
                  return std::isnan(want) ? std::isnan(g) : std::isinf(want) ? g == want : std::fabs(g - want) <= tol;
                };
                if ((!ok(y[u], ws[v], ts[v]) || !ok(y2[u], wl[v], tl[v])) && bad++ == 0)
                  MESSAGE("row " << r << " element " << i << " x " << x[u] << ": softmax " << y[u] << " want " << ws[v]
                                 << " tol " << ts[v] << "; log_softmax " << y2[u] << " want " << wl[v] << " tol "
                                 << tl[v]);
              }
            }
            INFO(cpu_target_name(t) << " rows " << rows << " n " << n << " specials " << specials);
            CHECK(bad == 0);
            // in place: softmax into x itself, and both with the log_softmax into x
            std::vector<float> xi = x;
            RowArgs c = a;
            c.x = xi.data();
            c.y = xi.data();
            c.y2 = nullptr;
            sm->fn()(&c);
            CHECK(std::memcmp(xi.data(), y.data(), y.size() * sizeof(float)) == 0);
            std::vector<float> xj = x, yj(x.size());
            c.x = xj.data();
            c.y = yj.data();
            c.y2 = xj.data();
            both->fn()(&c);
            CHECK(std::memcmp(yj.data(), y.data(), y.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(xj.data(), y2.data(), y2.size() * sizeof(float)) == 0);
          }
        }
    }
  }

  // On AVX2 and AVX-512, rows of n <= 16 run the column code
  // (row_kernels.cpp), longer rows the multi-pass code; a row padded with
  // -inf to 17 elements runs the latter, with the same max, the same
  // exponentials (the padding's are +0) summed in the same order: the column
  // code must give its bits. (SSE2 runs the multi-pass code on every row,
  // four lanes wide: another order.)
  TEST_CASE("short softmax rows give the multi-pass code's bits (the row padded with -inf to 17)") {
    constexpr int64_t kPadded = 17;
    for (CpuTarget t : targets()) {
      if (t == CpuTarget::sse2) continue;
      const auto both = generate_row_kernel({RowOp::softmax_and_log_softmax, false, false, DType::float32, t});
      for (int64_t n : {1, 3, 8, 9, 10, 15, 16}) {
        const int64_t rows = 21;
        const std::vector<float> x = make_rows(rows, n, 4242 + static_cast<uint64_t>(n), 4.0, true);
        std::vector<float> xp(static_cast<size_t>(rows * kPadded), -std::numeric_limits<float>::infinity());
        for (int64_t r = 0; r < rows; ++r)
          std::copy(x.begin() + r * n, x.begin() + (r + 1) * n, xp.begin() + r * kPadded);
        std::vector<float> y(x.size()), y2(x.size()), yp(xp.size()), y2p(xp.size());
        RowArgs a = row_args(x.data(), y.data(), rows, n, y2.data());
        both->fn()(&a);
        RowArgs b = a;
        b.x = xp.data();
        b.y = yp.data();
        b.y2 = y2p.data();
        b.n = kPadded;
        both->fn()(&b);
        int differ = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < n; ++i) {
            const size_t u = static_cast<size_t>(r * n + i), v = static_cast<size_t>(r * kPadded + i);
            const bool nan_both = std::isnan(y[u]) && std::isnan(yp[v]) && std::isnan(y2[u]) && std::isnan(y2p[v]);
            if (!nan_both && (std::memcmp(&y[u], &yp[v], 4) != 0 || std::memcmp(&y2[u], &y2p[v], 4) != 0)) ++differ;
          }
        INFO(std::string(cpu_target_name(t)) << " n " << n);
        CHECK(differ == 0);
      }
    }
  }

  TEST_CASE("layer_norm and rms_norm of many rows at once give each row's bits alone and the float64 values") {
    // 7 rows in one call (each row's next-row prefetch points into the
    // following row, the last one's past the end) against each row alone
    for (CpuTarget t : targets())
      for (RowOp op : {RowOp::layer_norm, RowOp::rms_norm})
        for (int wb = 0; wb < 4; ++wb) {
          const bool w = wb & 1, b = wb & 2;
          if (!can_generate_row({op, w, b, DType::float32, t})) continue;
          const auto k = generate_row_kernel({op, w, b, DType::float32, t});
          for (int64_t n : {1, 8, 24, 64, 100, 1024}) {
            const int64_t rows = 7;
            const std::vector<float> x = make_rows(rows, n, 91 + static_cast<uint64_t>(n), 3.0, false, 5.0);
            const std::vector<float> wt = make_rows(1, n, 5, 1.0, false, 1.0), bs = make_rows(1, n, 6, 1.0, false);
            std::vector<float> all(x.size()), one(x.size());
            RowArgs a = row_args(x.data(), all.data(), rows, n, nullptr, w ? wt.data() : nullptr,
                                 b ? bs.data() : nullptr, 1e-5f);
            k->fn()(&a);
            run_row_by_row(*k, a, x.data(), one.data());
            INFO(cpu_target_name(t) << " " << row_op_name(op) << " w " << w << " b " << b << " n " << n);
            CHECK(std::memcmp(all.data(), one.data(), all.size() * sizeof(float)) == 0);
            // and against the float64 formula (the pair path's values, not only its consistency)
            for (int64_t r = 0; r < rows; ++r) {
              double mean = 0, ss = 0;
              for (int64_t j = 0; j < n; ++j) mean += x[r * n + j];
              mean = op == RowOp::rms_norm ? 0.0 : mean / double(n);
              for (int64_t j = 0; j < n; ++j) ss += (x[r * n + j] - mean) * (x[r * n + j] - mean);
              const double rstd = 1.0 / std::sqrt(ss / double(n) + 1e-5);
              for (int64_t j = 0; j < n; ++j) {
                double y0 = (x[r * n + j] - mean) * rstd, want = y0;
                if (w) want *= wt[j];
                if (b) want += bs[j];
                CHECK(std::fabs(all[r * n + j] - want) <= 2e-6 * (std::fabs(y0) + 1) * (w ? std::fabs(wt[j]) : 1.0) +
                                                             4 * std::fabs(want) * 0x1p-24 + 1e-30);
              }
            }
          }
        }
  }

  TEST_CASE("softmax and log_softmax in one kernel give each kernel's own bits") {
    for (CpuTarget t : targets()) {
      const auto both = generate_row_kernel({RowOp::softmax_and_log_softmax, false, false, DType::float32, t});
      const auto sm = generate_row_kernel({RowOp::softmax, false, false, DType::float32, t});
      const auto lsm = generate_row_kernel({RowOp::log_softmax, false, false, DType::float32, t});
      for (int64_t n : {1, 3, 10, 16, 17, 33, 100, 1031})
        for (int64_t rows : {1, 2, 5, 9}) {
          const std::vector<float> x = make_rows(rows, n, 900 + static_cast<uint64_t>(n * rows), 3.0, true);
          std::vector<float> y(x.size()), y2(x.size()), s(x.size()), l(x.size());
          RowArgs a = row_args(x.data(), y.data(), rows, n, y2.data());
          both->fn()(&a);
          a.y2 = nullptr;
          a.y = s.data();
          sm->fn()(&a);
          a.y = l.data();
          lsm->fn()(&a);
          INFO(cpu_target_name(t) << " rows " << rows << " n " << n);
          CHECK(std::memcmp(y.data(), s.data(), s.size() * sizeof(float)) == 0);
          CHECK(std::memcmp(y2.data(), l.data(), l.size() * sizeof(float)) == 0);
        }
    }
  }

  // Softmax rows of up to 128 floats run two at a time (AVX2, AVX-512): each
  // row of a pair must get its bits alone, with tails, the odd last row,
  // specials and in place; the norms (one row at a time) likewise.
  TEST_CASE("rows run in pairs give each row's bits alone") {
    uint64_t seed = 4400;
    for (CpuTarget t : targets())
      for (RowOp op : {RowOp::softmax, RowOp::log_softmax, RowOp::softmax_and_log_softmax, RowOp::layer_norm,
                       RowOp::rms_norm})
        for (int wb = 0; wb < 4; ++wb) {
          const bool norm = op == RowOp::layer_norm || op == RowOp::rms_norm, w = wb & 1, b = wb & 2;
          if ((!norm && wb != 0) || !can_generate_row({op, w, b, DType::float32, t})) continue;
          const auto k = generate_row_kernel({op, w, b, DType::float32, t});
          for (int64_t n : {17, 33, 100, 128, 384, 511, 512, 513})
            for (int64_t rows : {2, 3, 6, 9}) {
              const std::vector<float> x = make_rows(rows, n, ++seed, 3.0, !norm, norm ? 2.0 : 0.0);
              const std::vector<float> wt = make_rows(1, n, ++seed, 1.0, false, 1.0), bs = make_rows(1, n, ++seed, 1.0, false);
              const bool both = op == RowOp::softmax_and_log_softmax;
              std::vector<float> all(x.size(), 7.0f), all2(x.size(), 7.0f), one(x.size(), 5.0f), one2(x.size(), 5.0f);
              RowArgs a;
              a.x = x.data();
              a.y = all.data();
              a.y2 = both ? all2.data() : nullptr;
              a.weight = w ? wt.data() : nullptr;
              a.bias = b ? bs.data() : nullptr;
              a.rows = rows;
              a.n = n;
              a.eps = 1e-5f;
              k->fn()(&a);
              run_row_by_row(*k, a, x.data(), one.data(), both ? one2.data() : nullptr);
              INFO(cpu_target_name(t) << " " << row_op_name(op) << " w " << w << " b " << b << " n " << n << " rows "
                                      << rows);
              CHECK(std::memcmp(all.data(), one.data(), all.size() * sizeof(float)) == 0);
              if (both) CHECK(std::memcmp(all2.data(), one2.data(), all2.size() * sizeof(float)) == 0);
              if (op == RowOp::softmax || op == RowOp::log_softmax) {
                const std::vector<float> inplace = run_in_place(*k, a, x);
                CHECK(std::memcmp(all.data(), inplace.data(), all.size() * sizeof(float)) == 0);
              }
            }
        }
  }

  TEST_CASE("special rows as the eager scalar kernel") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (CpuTarget t : targets()) {
      const auto sm = generate_row_kernel({RowOp::softmax, false, false, DType::float32, t});
      const auto lsm = generate_row_kernel({RowOp::log_softmax, false, false, DType::float32, t});
      auto run = [](const RowKernel& k, std::vector<float> x) {
        std::vector<float> y(x.size());
        RowArgs a = row_args(x.data(), y.data(), 1, static_cast<int64_t>(x.size()));
        k.fn()(&a);
        return y;
      };
      INFO(cpu_target_name(t));
      CHECK(run(*sm, {1000.f, 1000.f}) == std::vector<float>{0.5f, 0.5f});
      CHECK(run(*sm, {-inf, 0.f}) == std::vector<float>{0.f, 1.f});
      CHECK(run(*sm, {3.f}) == std::vector<float>{1.f});
      CHECK(run(*lsm, {-inf, 0.f}) == std::vector<float>{-inf, 0.f});
      for (const auto& x : {std::vector<float>{-inf, -inf, -inf}, std::vector<float>{1.f, inf, 2.f},
                            std::vector<float>{1.f, 2.f, nan, 3.f, 4.f}, std::vector<float>{nan}}) {
        for (float v : run(*sm, x)) CHECK(std::isnan(v));
        for (float v : run(*lsm, x)) CHECK(std::isnan(v));
      }
    }
  }

  TEST_CASE("eager and compiled are bitwise equal and independent of the thread count") {
    const std::vector<Shape> shapes = {{1}, {5, 1}, {3, 17}, {4, 64}, {2, 3, 100}, {0, 8}, {64, 1024}};
    auto strict = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
    uint64_t seed = 77;
    for (RowOp op : {RowOp::softmax, RowOp::log_softmax, RowOp::layer_norm, RowOp::rms_norm}) {
      for (int wb = 0; wb < 4; ++wb) {
        const bool has_w = (wb & 1) && op != RowOp::softmax && op != RowOp::log_softmax;
        const bool has_b = (wb & 2) && op == RowOp::layer_norm;
        if ((wb & 1) != has_w || ((wb & 2) != 0) != has_b) continue;
        for (const Shape& s : shapes) {
          const int64_t n = s.back();
          const Tensor x = kt::random_tensor(s, DType::float32, ++seed, true);
          const Tensor w = has_w ? kt::random_tensor({n}, DType::float32, ++seed) : Tensor();
          const Tensor b = has_b ? kt::random_tensor({n}, DType::float32, ++seed) : Tensor();
          const std::string what = std::string(row_op_name(op)) + " " + shape_str(s) + " w" + std::to_string(wb);
          Tensor eager1, eager2;
          {
            ThreadGuard one(1);
            eager1 = apply_row(op, x, w, b);
          }
          {
            ThreadGuard two(2);
            eager2 = apply_row(op, x, w, b);
          }
          CHECK_MESSAGE(same_bits(eager1, eager2), what);
          // eager runs the cached kernel
          if (const RowKernel* k = cached_row_kernel(op, has_w, has_b, DType::float32); k && x.numel() > 0) {
            Tensor y = Tensor::empty(s, DType::float32);
            RowArgs a = row_args(x.data<float>(), y.data<float>(), x.numel() / n, n, nullptr,
                                 has_w ? w.data<float>() : nullptr, has_b ? b.data<float>() : nullptr, 1e-5f);
            k->fn()(&a);
            CHECK_MESSAGE(same_bits(eager1, y), what);
          }
          for (const auto& session : {std::shared_ptr<InferenceSession>(), strict}) {
            CompileOptions co;
            co.session = session;
            const TensorLayout l(DType::float32, s);
            Tensor got;
            if (has_w && has_b) {
              auto run = compile([op](Tensor x, Tensor w, Tensor b) { return apply_row(op, x, w, b); }, co)(
                  l, TensorLayout(DType::float32, {n}), TensorLayout(DType::float32, {n}));
              got = run(x, w, b).leaves[0];
            } else if (has_w || has_b) {
              auto run = compile([op, has_w](Tensor x, Tensor v) { return has_w ? apply_row(op, x, v, {}) : apply_row(op, x, {}, v); },
                                 co)(l, TensorLayout(DType::float32, {n}));
              got = run(x, has_w ? w : b).leaves[0];
            } else {
              auto run = compile([op](Tensor x) { return apply_row(op, x, {}, {}); }, co)(l);
              got = run(x).leaves[0];
            }
            CHECK_MESSAGE(same_bits(eager1, got), what << (session ? " strict" : ""));
          }
        }
      }
    }
  }

  TEST_CASE("the plan runs RowNorm nodes as row steps") {
    auto g = std::make_shared<Graph>("rows", std::vector<TensorType>{TensorType(DType::float32, {6, 33}),
                                                                      TensorType(DType::float32, {33})});
    const auto in = g->inputs();
    Attrs sa;
    sa.axis = -1;
    Attrs la;
    la.scalar = 1e-5;
    la.ints = {1, 0};
    const GraphValue s = g->add_op(OpId::Softmax, std::vector<GraphValue>{in[0]}, sa);
    const GraphValue l = g->add_op(OpId::LayerNorm, std::vector<GraphValue>{s, in[1]}, la);
    Attrs a0;
    a0.axis = 0;  // not the last axis: the eager kernel
    const GraphValue s0 = g->add_op(OpId::Softmax, std::vector<GraphValue>{l}, a0);
    g->output_values({l, s0});
    const ExecutionPlan plan(g, KernelOptions{});
    int rows = 0, ops = 0;
    for (const PlanStep& st : plan.steps()) {
      rows += st.kind == PlanStep::Kind::row;
      ops += st.kind == PlanStep::Kind::op;
    }
    CHECK(rows == 2);
    CHECK(ops == 1);
    CHECK(plan.describe(false).find("row kernel layer_norm(weight) float32") != std::string::npos);
    const Tensor x = kt::random_tensor({6, 33}, DType::float32, 5), w = kt::random_tensor({33}, DType::float32, 6);
    std::vector<Tensor> out;
    plan.run(std::vector<Tensor>{x, w}, {}, out);
    REQUIRE(out.size() == 2);
    const Tensor want = layer_norm(softmax(x, -1), w, Tensor(), 1e-5);
    CHECK(same_bits(out[0], want));
    CHECK(same_bits(out[1], softmax(want, 0)));
  }

  TEST_CASE("the plan runs softmax and log_softmax of one input as one row step, bitwise eager") {
    // the loss and the gradient of a softmax cross-entropy
    auto f = [](Tensor z, Tensor y) {
      Tensor loss = -sum(y * log_softmax(z, -1));
      Tensor grad = softmax(z, -1) - y;
      return std::make_tuple(loss, grad);
    };
    for (Shape s : {Shape{64, 10}, Shape{7, 100}, Shape{3, 1}, Shape{0, 5}})
      for (bool strict : {false, true}) {
        CAPTURE(s);
        CAPTURE(strict);
        CompileOptions co;
        co.session = std::make_shared<InferenceSession>(KernelOptions{.strict = strict});
        const TensorLayout l(DType::float32, s);
        CompiledCallable run = compile(f, co)(l, l);
        int pairs = 0, rows = 0;
        for (const PlanStep& st : run.engine_model().artifact().plan().steps()) {
          rows += st.kind == PlanStep::Kind::row;
          pairs += st.kind == PlanStep::Kind::row && st.output2 >= 0;
        }
        CHECK(rows == 1);
        CHECK(pairs == 1);
        const Tensor z = kt::random_tensor(s, DType::float32, 40, /*specials=*/true), y = kt::random_tensor(s, DType::float32, 41);
        auto [loss, grad] = run(z, y).as<std::tuple<Tensor, Tensor>>();
        auto [loss2, grad2] = f(z, y);
        CHECK(kt::values(grad).size() == kt::values(grad2).size());
        const std::vector<double> g1 = kt::values(grad), g2 = kt::values(grad2);
        for (size_t i = 0; i < g1.size(); ++i) CHECK((g1[i] == g2[i] || (std::isnan(g1[i]) && std::isnan(g2[i]))));
        const double a = loss.item<double>(), b = loss2.item<double>();
        CHECK((a == b || (std::isnan(a) && std::isnan(b))));
      }
  }

  TEST_CASE("keys without a generated form") {
    CHECK_FALSE(can_generate_row({RowOp::softmax, false, false, DType::float64, CpuTarget::sse2}));
    CHECK_FALSE(can_generate_row({RowOp::rms_norm, true, true, DType::float32, CpuTarget::sse2}));
    CHECK(cached_row_kernel(RowOp::softmax, false, false, DType::float64) == nullptr);
    CHECK_THROWS_AS(generate_row_kernel({RowOp::softmax, false, false, DType::float16, CpuTarget::sse2}), kiln::Error);
    CHECK(row_op_of(OpId::Add) == std::nullopt);
    CHECK(row_op_of(OpId::RmsNorm) == RowOp::rms_norm);
  }
}
