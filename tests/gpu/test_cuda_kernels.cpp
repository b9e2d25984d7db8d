// CUDA reductions, scans, row kernels, index kernels and the matmul
// epilogues against float64 references written here (the tolerances of
// docs/cuda_numerics.md), over every dtype the CPU takes, layouts
// (contiguous, transposed) and extents that take more than one pass-1 chunk.
// Label `gpu`; skipped without a device.
#include <algorithm>
#include <cmath>
#include <limits>

#include "../op_table_checks.h"
#include "gpu_util.h"

namespace {
using namespace kiln;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Unit roundoff of the accumulator of an op on dtype d (float32 for the
/// 16-bit floats and float32, double for float64 and integer means).
double acc_u(DType d) { return d == DType::float64 || !is_floating(d) ? 1.2e-16 : 6e-8; }

using kt::group_reduced;

struct Want {
  double v, tol;
};

/// The float64 reference of reduction `op` over one group, with its bound:
/// a tree of <= 64 sequential terms per thread and log2 levels gives
/// |err| <= (64 + log2 n + 16) u sum|x|, plus the final rounding to d.
Want reference(OpId op, const std::vector<double>& g, DType d, double correction) {
  const double n = double(g.size());
  const double levels = 80 + std::log2(n + 1);
  const double u = acc_u(d), r = is_floating(d) ? kt::rtol_for(d) : 0;
  double s = 0, sa = 0;
  for (double x : g) s += x, sa += std::fabs(x);
  auto any_nan = std::any_of(g.begin(), g.end(), [](double x) { return std::isnan(x); });
  switch (op) {
    case OpId::Sum: return {s, is_floating(d) ? levels * u * sa + r * std::fabs(s) : 0};
    case OpId::Mean: return {s / n, levels * u * sa / n + 2e-6 * std::fabs(s / n)};
    case OpId::Prod: {
      double p = 1;
      int64_t ip = 1;
      for (double x : g) p *= x, ip = int64_t(uint64_t(ip) * uint64_t(int64_t(x)));
      if (!is_floating(d)) return {double(ip), 0};
      return {p, (n + 80) * u * std::fabs(p) + r * std::fabs(p)};
    }
    case OpId::Max:
    case OpId::Min: {
      if (any_nan) return {kNaN, 0};
      double m = g[0];
      for (double x : g) m = op == OpId::Max ? std::max(m, x) : std::min(m, x);
      return {m, 0};
    }
    case OpId::ArgMax:
    case OpId::ArgMin: {
      size_t best = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        if (std::isnan(g[i])) return {double(i), 0};
        if (op == OpId::ArgMax ? g[i] > g[best] : g[i] < g[best]) best = i;
      }
      return {double(best), 0};
    }
    case OpId::Var:
    case OpId::Std: {
      const double mu = s / n;
      double q = 0, sq = 0;
      for (double x : g) q += (x - mu) * (x - mu), sq += x * x;
      const double div = std::max(n - correction, 0.0);
      const double var = q / div, tv = 4 * levels * u * sq / div + 2e-6 * var;
      if (op == OpId::Var) return {var, tv + r * var};
      return {std::sqrt(var), std::sqrt(tv) + (r + 2e-6) * std::sqrt(var)};
    }
    case OpId::LogSumExp: {
      double m = -INFINITY;
      for (double x : g) m = std::max(m, x);
      if (!std::isfinite(m)) m = 0;
      double e = 0;
      for (double x : g) e += std::exp(x - m);
      const double v = std::log(e) + m;
      return {v, levels * u + (r + 2e-6) * std::fabs(v)};
    }
    case OpId::Any: return {double(std::any_of(g.begin(), g.end(), [](double x) { return x != 0 || std::isnan(x); })), 0};
    case OpId::All: return {double(std::all_of(g.begin(), g.end(), [](double x) { return x != 0 || std::isnan(x); })), 0};
    default: FAIL("not a reduction"); return {0, 0};
  }
}

const std::vector<DType> kAll = {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32,
                                 DType::int64,   DType::int8,    DType::uint8,    DType::bool_};

using kt::run_reduce;

void check_values(const Tensor& got, const std::vector<Want>& want, DType d, const std::string& what) {
  const std::vector<double> g = kt::values(got.cpu());
  REQUIRE_MESSAGE(g.size() == want.size(), what);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i)
    if (!kt::close(g[i], want[i].v, 0, want[i].tol + (is_floating(d) ? 1e-30 : 0))) {
      ++bad;
      FAIL_CHECK(what << ": element " << i << " got " << g[i] << " want " << want[i].v << " +- " << want[i].tol);
    }
}
}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("reductions over any axes, every dtype, against the float64 reference") {
    if (!kt::gpu_or_skip()) return;
    struct Case {
      Shape shape;
      Axes axes;
      bool keepdim;
      bool transpose;  // reduce a transposed view
    };
    const std::vector<Case> cases = {{{1000}, {}, false, false},      {{3, 50000}, {1}, false, false},
                                     {{64, 33}, {0}, true, false},    {{2, 3, 4, 5}, {0, 2}, false, false},
                                     {{2, 3, 4, 5}, {1, 3}, true, false}, {{40, 70}, {1}, false, true},
                                     {{5, 0}, {1}, false, false},     {{70000}, {0}, false, false},
                                     {{3, 1, 7}, {}, true, false}};
    const std::vector<OpId> ops = {OpId::Sum, OpId::Mean, OpId::Prod, OpId::Max, OpId::Min, OpId::ArgMax,
                                   OpId::ArgMin, OpId::Var, OpId::Std, OpId::LogSumExp, OpId::Any, OpId::All};
    int checked = 0;
    for (OpId op : ops)
      for (DType d : kAll)
        for (const Case& c : cases) {
          const bool arg = op == OpId::ArgMax || op == OpId::ArgMin;
          if (arg && c.axes.size() > 1) continue;
          const bool needs_items = arg || op == OpId::Max || op == OpId::Min;
          if (needs_items && checked_numel(c.shape) == 0) continue;
          const bool specials = needs_items || op == OpId::Any || op == OpId::All;
          Tensor x = kt::random_tensor(c.shape, d, uint64_t(checked) + 3, specials);
          if (op == OpId::Prod && is_floating(d)) x = (x * 0.001 + 1.0).to(d);  // products stay near 1
          if (op == OpId::Prod && !is_floating(d) && d != DType::bool_) x = kt::random_tensor(c.shape, d, 5, false, 1, -2, 2);
          if (c.transpose) x = x.transpose();
          const std::string what = std::string(op_name(op)) + " " + std::string(name(d)) + " " + shape_str(c.shape) +
                                   (c.transpose ? " transposed" : "");
          CAPTURE(what);
          const double corr = op == OpId::Var || op == OpId::Std ? 1.0 : 0.0;
          Tensor want_cpu = run_reduce(op, x, c.axes, c.keepdim, corr);  // dtype and shape of the CPU
          Tensor got = run_reduce(op, x.cuda(), c.axes, c.keepdim, corr);
          CHECK(got.device() == Device::cuda(0));
          CHECK(got.dtype() == want_cpu.dtype());
          CHECK(got.shape() == want_cpu.shape());
          std::vector<bool> red(x.shape().size(), c.axes.empty());
          for (int64_t a : c.axes) red[size_t(normalize_axis(a, x.ndim(), "test"))] = true;
          std::vector<Want> want;
          for (const auto& g : group_reduced(kt::values(x), x.shape(), red)) want.push_back(reference(op, g, d, corr));
          // Results stored in a 16-bit float carry its rounding too.
          if (want_cpu.dtype() == DType::float16 || want_cpu.dtype() == DType::bfloat16)
            for (Want& w : want) w.tol += kt::rtol_for(want_cpu.dtype()) * std::fabs(w.v);
          check_values(got, want, d, what);
          // Deterministic: a second run gives the same bits.
          CHECK(kt::values(run_reduce(op, x.cuda(), c.axes, c.keepdim, corr).cpu()) == kt::values(got.cpu()));
          ++checked;
        }
    MESSAGE(checked << " reductions checked");
  }

  TEST_CASE("cumsum and cumprod: the CPU's sequential order, so the CPU's bits; float64 reference") {
    if (!kt::gpu_or_skip()) return;
    for (DType d : kAll)
      for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
               {{1000}, 0}, {{7, 300}, 1}, {{300, 7}, 0}, {{2, 3, 4}, 1}, {{}, 0}, {{0, 4}, 1}}) {
        for (bool prod : {false, true}) {
          CAPTURE(d);
          CAPTURE(shape_str(shape));
          CAPTURE(prod);
          Tensor x = kt::random_tensor(shape, d, 11, false, 1.0, -1, 1);
          if (prod && is_floating(d)) x = (x * 0.01 + 1.0).to(d);
          Tensor want_cpu = prod ? cumprod(x, axis) : cumsum(x, axis);
          Tensor got = prod ? cumprod(x.cuda(), axis) : cumsum(x.cuda(), axis);
          CHECK(got.dtype() == want_cpu.dtype());
          CHECK(got.shape() == want_cpu.shape());
          CHECK(kt::values(got.cpu()) == kt::values(want_cpu));
          // float64 reference along each line.
          const std::vector<double> v = kt::values(x);
          std::vector<double> ref(v.size());
          const int64_t len = shape.empty() ? 1 : shape[size_t(axis)];
          int64_t inner = 1;
          for (size_t k = size_t(axis) + 1; k < shape.size(); ++k) inner *= shape[k];
          for (size_t i = 0; i < v.size(); ++i) {
            const int64_t j = (int64_t(i) / inner) % std::max<int64_t>(len, 1);
            ref[i] = j == 0 ? v[i] : (prod ? ref[i - size_t(inner)] * v[i] : ref[i - size_t(inner)] + v[i]);
          }
          const std::vector<double> g = kt::values(got.cpu());
          for (size_t i = 0; i < g.size(); ++i) {
            const double tol = is_floating(d) ? (len + 2) * (acc_u(d) + kt::rtol_for(d)) * 4 * (1 + std::fabs(ref[i])) : 0;
            if (!kt::close(g[i], ref[i], 0, tol)) {
              FAIL_CHECK("element " << i << " got " << g[i] << " want " << ref[i]);
              break;
            }
          }
        }
      }
  }

  TEST_CASE("softmax, log_softmax, layer_norm, rms_norm rows against the float64 reference") {
    if (!kt::gpu_or_skip()) return;
    for (DType d : {DType::float32, DType::float16, DType::bfloat16, DType::float64})
      for (const Shape& shape : std::vector<Shape>{{4, 7}, {3, 5000}, {1, 1}, {2, 3, 1025}, {0, 3}}) {
        CAPTURE(d);
        CAPTURE(shape_str(shape));
        Tensor x = kt::random_tensor(shape, d, 21);
        const int64_t n = shape.back();
        Tensor w = kt::random_tensor({n}, d, 22), b = kt::random_tensor({n}, d, 23);
        const std::vector<double> xv = kt::values(x), wv = kt::values(w), bv = kt::values(b);
        const size_t rows = n ? xv.size() / size_t(n) : 0;
        std::vector<double> sm(xv.size()), lsm(xv.size()), ln(xv.size()), rms(xv.size());
        for (size_t r = 0; r < rows; ++r) {
          const double* p = xv.data() + r * size_t(n);
          double m = -INFINITY, s = 0, mu = 0, q = 0, sq = 0;
          for (int64_t j = 0; j < n; ++j) m = std::max(m, p[j]), mu += p[j], sq += p[j] * p[j];
          mu /= double(n);
          for (int64_t j = 0; j < n; ++j) s += std::exp(p[j] - m), q += (p[j] - mu) * (p[j] - mu);
          for (int64_t j = 0; j < n; ++j) {
            const size_t i = r * size_t(n) + size_t(j);
            sm[i] = std::exp(p[j] - m) / s;
            lsm[i] = p[j] - m - std::log(s);
            ln[i] = (p[j] - mu) / std::sqrt(q / double(n) + 1e-5) * wv[size_t(j)] + bv[size_t(j)];
            rms[i] = p[j] / std::sqrt(sq / double(n) + 1e-6) * wv[size_t(j)];
          }
        }
        Tensor g = x.cuda();
        const double rt = 2 * kt::rtol_for(d), at = d == DType::float64 ? 1e-13 : kt::rtol_for(d) * 1e-2;
        kt::check_all_close(softmax(g), sm, rt, at, "softmax");
        kt::check_all_close(log_softmax(g), lsm, rt, at * 10, "log_softmax");
        kt::check_all_close(layer_norm(g, w.cuda(), b.cuda(), 1e-5), ln, rt, at * 10, "layer_norm");
        kt::check_all_close(rms_norm(g, w.cuda(), 1e-6), rms, rt, at * 10, "rms_norm");
        CHECK(softmax(g).dtype() == d);
      }
    // Along a leading axis (lines strided in memory), and rows of -inf / NaN as the CPU.
    Tensor x = kt::random_tensor({5, 7}, DType::float32, 31, true);
    kt::check_cuda_matches_cpu(softmax(x.cuda(), 0), softmax(x, 0), "softmax axis 0 with specials");
    kt::check_cuda_matches_cpu(log_softmax(x.cuda(), 0), log_softmax(x, 0), "log_softmax axis 0 with specials");
    Tensor ints = kt::random_tensor({3, 9}, DType::int32, 32);
    kt::check_cuda_matches_cpu(softmax(ints.cuda()), softmax(ints), "softmax of int32 (float32 result)");
  }

  TEST_CASE("gather, index_select, embedding, one_hot, masked_fill and where against brute force") {
    if (!kt::gpu_or_skip()) return;
    for (DType d : kAll) {
      CAPTURE(d);
      Tensor x = kt::random_tensor({4, 5, 6}, d, 41);
      for (DType id : {DType::int32, DType::int64}) {
        Tensor idx = kt::random_tensor({4, 3, 6}, DType::int64, 42, false, 1, -5, 4).to(id);
        Tensor got = gather(x.cuda(), 1, idx.cuda());
        const std::vector<double> xv = kt::values(x), iv = kt::values(idx);
        std::vector<double> want(iv.size());
        for (int64_t a = 0; a < 4; ++a)
          for (int64_t b = 0; b < 3; ++b)
            for (int64_t c = 0; c < 6; ++c) {
              int64_t j = int64_t(iv[size_t((a * 3 + b) * 6 + c)]);
              if (j < 0) j += 5;
              want[size_t((a * 3 + b) * 6 + c)] = xv[size_t((a * 5 + j) * 6 + c)];
            }
        CHECK(kt::values(got.cpu()) == want);
        CHECK(got.dtype() == d);
        // index_select along axis 2 with negative indices, of a transposed view.
        Tensor sel = Tensor::from_vector(std::vector<int64_t>{-1, 0, 3, 3}).to(id);
        Tensor xt = x.transpose();  // [6, 5, 4]
        kt::check_cuda_matches_cpu(index_select(x.cuda().transpose(), 2, sel.cuda()), index_select(xt, 2, sel),
                                   "index_select");
      }
      // A broadcast index (extent 1 outside the axis).
      Tensor bi = Tensor::from_vector(std::vector<int64_t>{2, -1}, {1, 2, 1});
      kt::check_cuda_matches_cpu(gather(x.cuda(), 1, bi.cuda()), gather(x, 1, bi), "gather broadcast index");
      Tensor m = kt::random_tensor({4, 5, 6}, DType::bool_, 43);
      if (d != DType::bool_)
        kt::check_cuda_matches_cpu(masked_fill(x.cuda(), m.cuda(), 3), masked_fill(x, m, 3), "masked_fill");
      Tensor one = one_hot(Tensor::from_vector(std::vector<int64_t>{0, 4, 2, 2, 1, 3}, {2, 3}).cuda(), 5, d);
      std::vector<double> oh(30, 0.0);
      const int64_t ids[6] = {0, 4, 2, 2, 1, 3};
      for (int p = 0; p < 6; ++p) oh[size_t(p * 5 + ids[p])] = 1;
      CHECK(kt::values(one.cpu()) == oh);
      CHECK(one.dtype() == d);
    }
    Tensor table = kt::random_tensor({10, 8}, DType::float32, 44);
    Tensor ids = Tensor::from_vector(std::vector<int64_t>{3, 9, 0, 3}, {2, 2});
    kt::check_cuda_matches_cpu(embedding(table.cuda(), ids.cuda()), embedding(table, ids), "embedding");
    CHECK_THROWS_AS(gather(table.cuda(), 0, Tensor::from_vector(std::vector<int64_t>{10}, {1, 1}).cuda()), IndexError);
    CHECK_THROWS_AS(one_hot(ids.cuda(), 5), IndexError);
  }

  TEST_CASE("matmul epilogues (bias, GELU, bias+GELU) and the TF32 switch against the float64 reference") {
    if (!kt::gpu_or_skip()) return;
    CHECK_FALSE(cuda::allow_tf32());
    const int64_t B = 2, M = 5, K = 64, N = 12;
    for (DType d : {DType::float32, DType::float16, DType::bfloat16, DType::float64})
      for (cuda::Epilogue e : {cuda::Epilogue::none, cuda::Epilogue::bias, cuda::Epilogue::gelu, cuda::Epilogue::bias_gelu}) {
        CAPTURE(d);
        CAPTURE(int(e));
        Tensor a = kt::random_tensor({B, M, K}, d, 51, false, 1.0), w = kt::random_tensor({K, N}, d, 52, false, 1.0);
        Tensor bias = kt::random_tensor({N}, d, 53, false, 1.0);
        const bool hb = e == cuda::Epilogue::bias || e == cuda::Epilogue::bias_gelu;
        const bool gl = e == cuda::Epilogue::gelu || e == cuda::Epilogue::bias_gelu;
        Tensor got = cuda::matmul_epilogue(a.cuda(), w.cuda(), hb ? bias.cuda() : Tensor(), e);
        CHECK(got.shape() == Shape{B, M, N});
        CHECK(got.dtype() == d);
        const std::vector<double> av = kt::values(a), wv = kt::values(w), bv = kt::values(bias);
        std::vector<double> want(size_t(B * M * N));
        for (int64_t i = 0; i < B * M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) s += av[size_t(i * K + k)] * wv[size_t(k * N + j)];
            if (hb) s += bv[size_t(j)];
            if (gl) s = 0.5 * s * (1 + std::tanh(0.7978845608028654 * (s + 0.044715 * s * s * s)));
            want[size_t(i * N + j)] = s;
          }
        const double rt = d == DType::float64 ? 1e-10 : d == DType::float32 ? 2e-4 : d == DType::float16 ? 2e-2 : 1e-1;
        kt::check_all_close(got, want, rt, rt * std::sqrt(double(K)), "matmul_epilogue");
      }
    cuda::set_allow_tf32(true);
    CHECK(cuda::allow_tf32());
    Tensor a = kt::random_tensor({64, 256}, DType::float32, 61, false, 1.0), b = kt::random_tensor({256, 32}, DType::float32, 62, false, 1.0);
    Tensor ref = matmul(a.to(DType::float64), b.to(DType::float64));
    kt::check_all_close(matmul(a.cuda(), b.cuda()), kt::values(ref), 1e-2, 1e-2 * 16, "tf32 matmul");
    cuda::set_allow_tf32(false);
    kt::check_all_close(matmul(a.cuda(), b.cuda()), kt::values(ref), 2e-4, 2e-4 * 16, "float32 matmul after tf32 off");
  }
}
