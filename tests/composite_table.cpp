// The composite-op table (composite_table.h): inputs, builders and float64
// loop references.
#include "composite_table.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "test_util.h"

namespace kt::composite {

using namespace kiln;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Vals = std::vector<double>;
Vals V(const Tensor& t) { return t.to_vector<double>(); }

Tensor f64(std::vector<double> v, const Shape& s) { return Tensor::from_vector(v, s); }
Tensor as(std::vector<double> v, const Shape& s, DType d) { return Tensor::from_vector(v, s).to(d); }

// A view equal in value to x, laid out as `k` (test_util.h's raw-view builder).
Tensor lay(const Tensor& x, ViewKind k) { return relayout(x, k); }

// The truth of a double as numpy takes it (NaN is true).
bool truth(double v) { return v != 0.0 || std::isnan(v); }

// ---- einsum ----------------------------------------------------------------------------
Entry einsum_matmul() {
  Vals a = V(random_tensor({3, 4}, DType::float64, 11)), b = V(random_tensor({4, 2}, DType::float64, 12));
  a[5] = kNaN;  // row 1 of the product is NaN
  b[2 * 2 + 1] = kInf;  // column 1 sees +-inf (times a finite nonzero value)
  return {"einsum ij,jk->ik (transposed a, NaN, inf)",
          {lay(f64(a, {3, 4}), ViewKind::transposed), f64(b, {4, 2})},
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{einsum("ij,jk->ik", {in[0], in[1]})}; },
          [](const std::vector<Tensor>& in) {
            const Vals a = V(in[0]), b = V(in[1]);
            Vals r(6, 0.0);
            for (int i = 0; i < 3; ++i)
              for (int k = 0; k < 2; ++k) {
                double s = 0;
                for (int j = 0; j < 4; ++j) s += a[i * 4 + j] * b[j * 2 + k];
                r[i * 2 + k] = s;
              }
            return std::vector<Ref>{{DType::float64, {3, 2}, r}};
          },
          1e-12, 1e-12};
}

Entry einsum_diag() {
  return {"einsum ii->i (negative strides)",
          {lay(random_tensor({4, 4}, DType::float32, 13, true), ViewKind::negative)},
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{einsum("ii->i", {in[0]})}; },
          [](const std::vector<Tensor>& in) {
            const Vals a = V(in[0]);
            Vals r;
            for (int i = 0; i < 4; ++i) r.push_back(a[i * 4 + i]);
            return std::vector<Ref>{{DType::float32, {4}, r}};
          }};
}

Entry einsum_batched_empty() {
  return {"einsum bij,bjk->bik (empty contraction, size-1 batch)",
          {random_tensor({1, 3, 0}, DType::float64, 14), random_tensor({1, 0, 2}, DType::float64, 15)},
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{einsum("bij,bjk->bik", {in[0], in[1]})}; },
          [](const std::vector<Tensor>&) { return std::vector<Ref>{{DType::float64, {1, 3, 2}, Vals(6, 0.0)}}; }};
}

Entry einsum_dot_batch() {
  return {"einsum ...i,...i-> and bi,bj->bij (strided)",
          {lay(random_tensor({2, 5}, DType::float32, 16), ViewKind::strided),
           lay(random_tensor({2, 3}, DType::float32, 17), ViewKind::negative)},
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{einsum("...i,...i->...", {in[0], in[0]}), einsum("bi,bj->bij", {in[0], in[1]})};
          },
          [](const std::vector<Tensor>& in) {
            const Vals a = V(in[0]), b = V(in[1]);
            Vals dot(2, 0.0), o;
            for (int r = 0; r < 2; ++r)
              for (int i = 0; i < 5; ++i) dot[r] += a[r * 5 + i] * a[r * 5 + i];
            for (int r = 0; r < 2; ++r)
              for (int i = 0; i < 5; ++i)
                for (int j = 0; j < 3; ++j) o.push_back(a[r * 5 + i] * b[r * 3 + j]);
            return std::vector<Ref>{{DType::float32, {2}, dot}, {DType::float32, {2, 5, 3}, o}};
          },
          2e-6, 1e-6};
}

// ---- conv1d ----------------------------------------------------------------------------
// out[n, o, l] = bias[o] + sum_{c in group, k} x[n, c, l * stride - pad + k * dil] * w[o, c', k]
Vals conv1d_ref(const Vals& x, const Vals& w, const Vals& bias, int64_t N, int64_t C, int64_t L, int64_t O, int64_t K,
                int64_t stride, int64_t pad, int64_t dil, int64_t groups, int64_t& lout) {
  lout = (L + 2 * pad - dil * (K - 1) - 1) / stride + 1;
  const int64_t cg = C / groups, og = O / groups;
  Vals r;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t l = 0; l < lout; ++l) {
        double s = bias.empty() ? 0.0 : bias[o];
        const int64_t g = o / og;
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t at = l * stride - pad + k * dil;
            if (at < 0 || at >= L) continue;
            s += x[(n * C + g * cg + c) * L + at] * w[(o * cg + c) * K + k];
          }
        r.push_back(s);
      }
  return r;
}

Entry conv1d_groups() {
  return {"conv1d stride 2, padding 1, dilation 2, groups 2, bias (transposed x)",
          {lay(random_tensor({2, 4, 9}, DType::float32, 21), ViewKind::transposed),
           random_tensor({6, 2, 3}, DType::float32, 22), random_tensor({6}, DType::float32, 23)},
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{conv1d(in[0], in[1], in[2], 2, 1, 2, 2)}; },
          [](const std::vector<Tensor>& in) {
            int64_t lout = 0;
            Vals r = conv1d_ref(V(in[0]), V(in[1]), V(in[2]), 2, 4, 9, 6, 3, 2, 1, 2, 2, lout);
            return std::vector<Ref>{{DType::float32, {2, 6, lout}, r}};
          },
          1e-5, 1e-5};
}

Entry conv1d_small() {
  return {"conv1d size-1 extents and an empty batch",
          {random_tensor({1, 1, 1}, DType::float64, 24), random_tensor({1, 1, 1}, DType::float64, 25),
           random_tensor({0, 2, 5}, DType::float64, 26), random_tensor({3, 2, 2}, DType::float64, 27)},
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{conv1d(in[0], in[1]), conv1d(in[2], in[3], {}, 1, 0, 1, 1)};
          },
          [](const std::vector<Tensor>& in) {
            return std::vector<Ref>{{DType::float64, {1, 1, 1}, {V(in[0])[0] * V(in[1])[0]}},
                                    {DType::float64, {0, 3, 4}, {}}};
          },
          1e-12, 0.0};
}

// ---- outer, trace, meshgrid -----------------------------------------------------------------
Entry outer_entry() {
  return {"outer (NaN, inf, -0, negative strides, 2-d a flattened, empty)",
          {f64({1.5, kNaN, -0.0, 2.0}, {2, 2}), lay(f64({kInf, -1.0, 0.0}, {3}), ViewKind::negative),
           as({1, 2, 3}, {3}, DType::int32), f64({}, {0})},
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{outer(in[0], in[1]), outer(in[2], in[3]), outer(in[2], in[1])};
          },
          [](const std::vector<Tensor>& in) {
            const Vals a = V(in[0]), b = V(in[1]), c = V(in[2]);
            Vals ab, cb;
            for (double x : a)
              for (double y : b) ab.push_back(x * y);
            for (double x : c)
              for (double y : b) cb.push_back(x * y);
            return std::vector<Ref>{
                {DType::float64, {4, 3}, ab}, {DType::float64, {3, 0}, {}}, {DType::float64, {3, 3}, cb}};
          }};
}

Vals trace_ref(const Vals& a, int64_t rows, int64_t cols, int64_t k) {
  double s = 0;
  for (int64_t i = 0; i < rows; ++i)
    if (i + k >= 0 && i + k < cols) s += a[i * cols + i + k];
  return {s};
}

Entry trace_entry() {
  return {"trace k = 0, 1, -2 (float NaN; int32 sums in int64; empty)",
          {lay(random_tensor({3, 4}, DType::float64, 31, true), ViewKind::strided),
           as({1, 2, 3, 4, 5, 6}, {2, 3}, DType::int32), f64({}, {0, 3})},
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{trace(in[0]), trace(in[0], 1), trace(in[0], -2), trace(in[1], 1), trace(in[2])};
          },
          [](const std::vector<Tensor>& in) {
            const Vals a = V(in[0]), b = V(in[1]);
            return std::vector<Ref>{{DType::float64, {}, trace_ref(a, 3, 4, 0)},
                                    {DType::float64, {}, trace_ref(a, 3, 4, 1)},
                                    {DType::float64, {}, trace_ref(a, 3, 4, -2)},
                                    {DType::int64, {}, trace_ref(b, 2, 3, 1)},
                                    {DType::float64, {}, {0.0}}};
          },
          1e-12, 1e-12};
}

Entry meshgrid_entry() {
  return {"meshgrid xy and ij (negative strides, an empty input)",
          {as({1, 2, 3}, {3}, DType::float32), lay(as({-1, kNaN}, {2}, DType::float32), ViewKind::negative),
           f64({}, {0})},
          [](const std::vector<Tensor>& in) {
            std::vector<Tensor> r = meshgrid({in[0], in[1]}, "xy");
            for (const Tensor& t : meshgrid({in[0], in[1]}, "ij")) r.push_back(t);
            for (const Tensor& t : meshgrid({in[2], in[0]}, "ij")) r.push_back(t);
            return r;
          },
          [](const std::vector<Tensor>& in) {
            const Vals x = V(in[0]), y = V(in[1]);
            Vals xy0, xy1, ij0, ij1;
            for (int j = 0; j < 2; ++j)  // xy: shape [len(y), len(x)]
              for (int i = 0; i < 3; ++i) {
                xy0.push_back(x[i]);
                xy1.push_back(y[j]);
              }
            for (int i = 0; i < 3; ++i)  // ij: shape [len(x), len(y)]
              for (int j = 0; j < 2; ++j) {
                ij0.push_back(x[i]);
                ij1.push_back(y[j]);
              }
            return std::vector<Ref>{{DType::float32, {2, 3}, xy0}, {DType::float32, {2, 3}, xy1},
                                    {DType::float32, {3, 2}, ij0}, {DType::float32, {3, 2}, ij1},
                                    {DType::float64, {0, 3}, {}},  {DType::float32, {0, 3}, {}}};
          }};
}

// ---- diff, clip, arange, cumprod ------------------------------------------------------------
Entry diff_entry() {
  return {"diff n = 1 along the last axis, n = 2 along axis 0 (NaN, inf), bool (xor), extent 1",
          {f64({0, 1, kInf, 4, kNaN, 2, 2, 2, 5, -kInf, 7, 1, 0, 3, 3}, {3, 5}),
           as({1, 1, 0, 1, 0, 0}, {6}, DType::bool_), lay(random_tensor({1}, DType::float32, 41), ViewKind::strided)},
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{diff(in[0]), diff(in[0], 2, 0), diff(in[1]), diff(in[2])};
          },
          [](const std::vector<Tensor>& in) {
            const Vals a = V(in[0]), b = V(in[1]);
            Vals d1, d2, db;
            for (int r = 0; r < 3; ++r)
              for (int c = 0; c < 4; ++c) d1.push_back(a[r * 5 + c + 1] - a[r * 5 + c]);
            for (int c = 0; c < 5; ++c)  // second difference: a2 - 2 a1 + a0, as (a2 - a1) - (a1 - a0)
              d2.push_back((a[10 + c] - a[5 + c]) - (a[5 + c] - a[c]));
            for (int i = 0; i < 5; ++i) db.push_back(truth(b[i + 1]) != truth(b[i]) ? 1.0 : 0.0);
            return std::vector<Ref>{{DType::float64, {3, 4}, d1},
                                    {DType::float64, {1, 5}, d2},
                                    {DType::bool_, {5}, db},
                                    {DType::float32, {0}, {}}};
          }};
}

Entry clip_entry() {
  return {"clip both bounds, one bound (float NaN, inf; int32 strided view)",
          {as({-3, -0.5, 0, 0.25, 2, kNaN, kInf, -kInf}, {2, 4}, DType::float32),
           lay(as({-9, -3, 0, 4, 5, 6, 100}, {7}, DType::int32), ViewKind::strided)},
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{clip(in[0], -1.0, 1.0), clip(in[0], 0.0, std::nullopt),
                                       clip(in[0], std::nullopt, 0.5), clip(in[1], -3, 5)};
          },
          [](const std::vector<Tensor>& in) {
            auto c = [](double v, double lo, double hi) { return std::isnan(v) ? v : std::min(std::max(v, lo), hi); };
            Vals a = V(in[0]), b = V(in[1]), r0, r1, r2, r3;
            for (double v : a) {
              r0.push_back(c(v, -1, 1));
              r1.push_back(c(v, 0, kInf));
              r2.push_back(c(v, -kInf, 0.5));
            }
            for (double v : b) r3.push_back(c(v, -3, 5));
            return std::vector<Ref>{{DType::float32, {2, 4}, r0},
                                    {DType::float32, {2, 4}, r1},
                                    {DType::float32, {2, 4}, r2},
                                    {DType::int32, {7}, r3}};
          }};
}

// numpy's arange: ceil((stop - start) / step) elements (at least 0), element
// i = start + i * ((start + step) - start).
Vals arange_ref(double start, double stop, double step) {
  const double len = std::ceil((stop - start) / step);
  const int64_t n = len > 0 ? static_cast<int64_t>(len) : 0;
  Vals r;
  const double delta = (start + step) - start;
  for (int64_t i = 0; i < n; ++i) r.push_back(i == 1 ? start + step : start + static_cast<double>(i) * delta);
  return r;
}

Entry arange_entry() {
  // (start, stop, step): 0..1 by 0.1 has 10 elements; 1..2.05 by 0.35 has
  // ceil(3.0000000000000004) = 4 (the last one, 2.05, is not below stop:
  // numpy's rule, kept); a negative step; an empty range.
  struct R {
    double start, stop, step;
  };
  static const R rs[] = {{0, 1, 0.1}, {1, 2.05, 0.35}, {1, -1, -0.5}, {1, 0, 0.5}};
  return {"arange over floats (numpy's length rule) plus a 0-d input",
          {f64({0.5}, {})},
          [](const std::vector<Tensor>& in) {
            std::vector<Tensor> r;
            for (const R& q : rs) r.push_back(arange(q.start, q.stop, q.step, DType::float64) + in[0]);
            r.push_back(arange(0.0, 1.0, 0.25, DType::float32) * cast(in[0], DType::float32));
            return r;
          },
          [](const std::vector<Tensor>& in) {
            const double x = V(in[0])[0];
            std::vector<Ref> out;
            for (const R& q : rs) {
              Vals v = arange_ref(q.start, q.stop, q.step);
              for (double& e : v) e += x;
              out.push_back({DType::float64, {static_cast<int64_t>(v.size())}, v});
            }
            Vals f = arange_ref(0.0, 1.0, 0.25);
            for (double& e : f) e *= x;
            out.push_back({DType::float32, {4}, f});
            return out;
          },
          1e-12, 0.0};
}

Entry cumprod_entry() {
  return {"cumprod along each axis (NaN, inf, -0, negative strides; int32 in int64; empty; size 1)",
          {lay(f64({1, 2, kNaN, 3, -0.0, 0.5, kInf, 2, -1, 4, 0.25, 8}, {3, 4}), ViewKind::negative),
           as({2, -3, 4, 1, 5, -2}, {2, 3}, DType::int32), f64({}, {0, 3}), as({7}, {1}, DType::float32)},
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{cumprod(in[0], 1), cumprod(in[0], 0), cumprod(in[1], -1), cumprod(in[2], 0),
                                       cumprod(in[3], 0)};
          },
          [](const std::vector<Tensor>& in) {
            const Vals a = V(in[0]), b = V(in[1]);
            Vals r1(12), r0(12), rb(6);
            for (int r = 0; r < 3; ++r) {
              double p = 1;
              for (int c = 0; c < 4; ++c) r1[r * 4 + c] = p *= a[r * 4 + c];
            }
            for (int c = 0; c < 4; ++c) {
              double p = 1;
              for (int r = 0; r < 3; ++r) r0[r * 4 + c] = p *= a[r * 4 + c];
            }
            for (int r = 0; r < 2; ++r) {
              double p = 1;
              for (int c = 0; c < 3; ++c) rb[r * 3 + c] = p *= b[r * 3 + c];
            }
            return std::vector<Ref>{{DType::float64, {3, 4}, r1},
                                    {DType::float64, {3, 4}, r0},
                                    {DType::int64, {2, 3}, rb},
                                    {DType::float64, {0, 3}, {}},
                                    {DType::float32, {1}, {7}}};
          }};
}

// ---- logical ops ----------------------------------------------------------------------------
Entry logical_entry() {
  return {"logical and/or/xor/not (NaN is true, -0 false; broadcasting [3,1] x [4]; int8 x uint8; empty)",
          {as({kNaN, -0.0, 2}, {3, 1}, DType::float32), lay(f64({0, kInf, -1, 0}, {4}), ViewKind::negative),
           as({0, 1, -2, 0}, {2, 2}, DType::int8), as({3, 0, 0, 0}, {2, 2}, DType::uint8), f64({}, {0, 4})},
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{logical_and(in[0], in[1]), logical_or(in[0], in[1]), logical_xor(in[0], in[1]),
                                       logical_not(in[1]),        logical_and(in[2], in[3]), logical_xor(in[4], in[1])};
          },
          [](const std::vector<Tensor>& in) {
            const Vals a = V(in[0]), b = V(in[1]), c = V(in[2]), d = V(in[3]);
            Vals land, lor, lxor, lnot, cd;
            for (int i = 0; i < 3; ++i)
              for (int j = 0; j < 4; ++j) {
                land.push_back(truth(a[i]) && truth(b[j]));
                lor.push_back(truth(a[i]) || truth(b[j]));
                lxor.push_back(truth(a[i]) != truth(b[j]));
              }
            for (double v : b) lnot.push_back(!truth(v));
            for (int i = 0; i < 4; ++i) cd.push_back(truth(c[i]) && truth(d[i]));
            return std::vector<Ref>{{DType::bool_, {3, 4}, land}, {DType::bool_, {3, 4}, lor},
                                    {DType::bool_, {3, 4}, lxor}, {DType::bool_, {4}, lnot},
                                    {DType::bool_, {2, 2}, cd},   {DType::bool_, {0, 4}, {}}};
          }};
}

// ---- fixed-size nonzero and unique (tensor/static_size.h) -----------------------------------
// The coordinates of the nonzero elements of a tensor of shape s with values
// v, in row-major order, padded with fill / cut to size: one vector per axis.
std::vector<Vals> nonzero_ref(const Vals& v, const Shape& s, int64_t size, double fill) {
  std::vector<Vals> c(s.size());
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    if (!truth(v[i])) continue;
    const Index ix = unravel(i, s);
    if (static_cast<int64_t>(c[0].size()) >= size) break;
    for (size_t d = 0; d < s.size(); ++d) c[d].push_back(static_cast<double>(ix[d]));
  }
  for (Vals& a : c) a.resize(static_cast<size_t>(size), fill);
  return c;
}

Entry nonzero_static_entry() {
  return {"nonzero_static: padded, cut short, NaN true, -0 false, empty, transposed",
          {lay(f64({0, 1, kNaN, 0, -0.0, 3, 0, 0, 2, 0, 0, 0}, {3, 4}), ViewKind::transposed),
           as({0, 0, 1, 1, 0, 1}, {6}, DType::bool_), f64({}, {2, 0})},
          [](const std::vector<Tensor>& in) {
            std::vector<Tensor> r = nonzero_static(in[0], 6, -1);
            for (const Tensor& t : nonzero_static(in[0], 2)) r.push_back(t);
            for (const Tensor& t : nonzero_static(in[1], 4, 9)) r.push_back(t);
            for (const Tensor& t : nonzero_static(in[2], 3, 7)) r.push_back(t);
            return r;
          },
          [](const std::vector<Tensor>& in) {
            std::vector<Ref> out;
            auto add = [&](const std::vector<Vals>& cs) {
              for (const Vals& c : cs) out.push_back({DType::int64, {static_cast<int64_t>(c.size())}, c});
            };
            add(nonzero_ref(V(in[0]), {3, 4}, 6, -1));
            add(nonzero_ref(V(in[0]), {3, 4}, 2, 0));
            add(nonzero_ref(V(in[1]), {6}, 4, 9));
            add(nonzero_ref({}, {2, 0}, 3, 7));
            return out;
          }};
}

// numpy.unique with counts and inverse (NaNs as one value, last), then
// padded with fill / cut to size.
std::vector<Ref> unique_ref(const Vals& v, const Shape& s, DType d, int64_t size, double fill) {
  Vals vals;
  for (double x : v) {
    bool seen = false;
    for (double y : vals) seen = seen || x == y || (std::isnan(x) && std::isnan(y));
    if (!seen) vals.push_back(x);
  }
  std::sort(vals.begin(), vals.end(), [](double a, double b) { return std::isnan(b) ? !std::isnan(a) : a < b; });
  auto pos = [&](double x) {
    for (size_t k = 0; k < vals.size(); ++k)
      if (x == vals[k] || (std::isnan(x) && std::isnan(vals[k]))) return static_cast<double>(k);
    return -1.0;
  };
  Vals inverse, counts(static_cast<size_t>(size), 0.0), kept(static_cast<size_t>(size), fill);
  for (double x : v) {
    const double p = pos(x);
    inverse.push_back(p);
    if (p < static_cast<double>(size)) counts[static_cast<size_t>(p)] += 1;
  }
  for (size_t k = 0; k < vals.size() && k < static_cast<size_t>(size); ++k) kept[k] = vals[k];
  return {{d, {size}, kept},
          {DType::int64, s, inverse},
          {DType::int64, {size}, counts},
          {DType::int64, {}, {static_cast<double>(vals.size())}}};
}

Entry unique_static_entry() {
  return {"unique_static: padded, cut short, NaNs one value, -0 == 0, int32, empty, negative strides",
          {lay(f64({3, kNaN, 1, 3, -0.0, 0, kNaN, 1, kInf}, {3, 3}), ViewKind::negative),
           as({5, -2, 5, 5, 7}, {5}, DType::int32), f64({}, {0, 2})},
          [](const std::vector<Tensor>& in) {
            std::vector<Tensor> r;
            auto add = [&](const UniqueStatic& u) {
              for (const Tensor& t : {u.values, u.inverse, u.counts, u.count}) r.push_back(t);
            };
            add(unique_static(in[0], 8, -7.5));
            add(unique_static(in[0], 2));
            add(unique_static(in[1], 4, 0));
            add(unique_static(in[2], 2, 1.0));
            return r;
          },
          [](const std::vector<Tensor>& in) {
            std::vector<Ref> out;
            for (auto& r : unique_ref(V(in[0]), {3, 3}, DType::float64, 8, -7.5)) out.push_back(r);
            for (auto& r : unique_ref(V(in[0]), {3, 3}, DType::float64, 2, 0)) out.push_back(r);
            for (auto& r : unique_ref(V(in[1]), {5}, DType::int32, 4, 0)) out.push_back(r);
            for (auto& r : unique_ref({}, {0, 2}, DType::float64, 2, 1.0)) out.push_back(r);
            return out;
          }};
}

}  // namespace

std::vector<Entry> entries() {
  return {einsum_matmul(),  einsum_diag(),    einsum_batched_empty(), einsum_dot_batch(),     conv1d_groups(),
          conv1d_small(),   outer_entry(),    trace_entry(),          meshgrid_entry(),       diff_entry(),
          clip_entry(),     arange_entry(),   cumprod_entry(),        logical_entry(),        nonzero_static_entry(),
          unique_static_entry()};
}

}  // namespace kt::composite
