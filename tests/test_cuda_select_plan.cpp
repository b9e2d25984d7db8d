// kiln tests: the per-element rules of the CUDA selection, window and
// matrix-structure kernels (backends/cuda/select_plan.h, used by
// backends/cuda/select.cu), run on the CPU with each kernel's own index
// math (line geometry, pool geometry over x's strides, offset calculators)
// and compared bit for bit with the CPU kernels through the public ops:
// topk, searchsorted, max_pool2d, avg_pool2d, tril, triu, diag, nan_to_num,
// cross. No GPU needed; tests/gpu/test_cuda_select.cpp runs the kernels
// themselves against the CPU on a device.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "../backends/cuda/launch_plan.h"
#include "../backends/cuda/offset_calc.h"
#include "../backends/cuda/select_plan.h"
#include "../tensor/dispatch.h"
#include "same_bits.h"
#include "tie_values.h"
#include "test_util.h"

namespace {
using namespace kiln;
using kt::tie_tensor;
using namespace kiln::cuda;
using kt::ViewKind;

const std::vector<DType> kCudaDTypes = {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32,
                                        DType::int64,   DType::int8,    DType::uint8,    DType::bool_};

/// f(tag) with tag::type the CPU storage type of one of the CUDA dtypes.
template <class F> void visit_cuda(DType d, F&& f) {
  switch (d) {
    case DType::bool_: return f(detail::TypeTag<bool>{});
    case DType::uint8: return f(detail::TypeTag<uint8_t>{});
    case DType::int8: return f(detail::TypeTag<int8_t>{});
    case DType::int32: return f(detail::TypeTag<int32_t>{});
    case DType::int64: return f(detail::TypeTag<int64_t>{});
    case DType::float16: return f(detail::TypeTag<float16_t>{});
    case DType::bfloat16: return f(detail::TypeTag<bfloat16_t>{});
    case DType::float32: return f(detail::TypeTag<float>{});
    case DType::float64: return f(detail::TypeTag<double>{});
    default: FAIL("not a CUDA dtype");
  }
}


template <class T> const T* elems(const Tensor& t) { return static_cast<const T*>(t.data_ptr()); }
template <class T> T* elems_mut(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

// ---- emulations of select.cu's kernels (one loop iteration per device thread) ----------
Tensor topk_emulated(const Tensor& x0, int64_t k, int64_t axis, bool largest) {
  const Tensor x = x0.contiguous();
  const int64_t ax = axis < 0 ? axis + x.ndim() : axis;
  const LineGeometry g = line_geometry(std::vector<int64_t>(x.shape().begin(), x.shape().end()), ax);
  Shape os = x.shape();
  os[size_t(ax)] = k;
  Tensor out = full(os, -1.0, DType::int64);  // a slot no thread writes stays -1
  visit_cuda(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    const T* xp = elems<T>(x);
    int64_t* op = elems_mut<int64_t>(out);
    for (int64_t t = 0; t < g.lines() * g.len; ++t) {
      const int64_t line = t / g.len, i = t % g.len, base = g.base(line);
      auto at = [&](int64_t j) { return detail::convert<C>(xp[base + j * g.inner]); };
      const int64_t slot = largest ? topk_slot<true>(at, g.len, i, k) : topk_slot<false>(at, g.len, i, k);
      if (slot < k) op[(line / g.inner) * k * g.inner + slot * g.inner + line % g.inner] = i;
    }
  });
  return out;
}

Tensor searchsorted_emulated(const Tensor& seq0, const Tensor& val0, bool right) {
  const Tensor seq = seq0.contiguous(), values = val0.contiguous();
  Tensor out = full(values.shape(), -1.0, DType::int64);
  const bool batched = seq.ndim() > 1;
  const int64_t n = seq.shape().back(), m = batched ? values.shape().back() : 1;
  visit_cuda(seq.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    for (int64_t t = 0; t < values.numel(); ++t) {
      const T* row = elems<T>(seq) + (batched ? (t / m) * n : 0);
      auto at = [&](int64_t j) { return detail::convert<C>(row[j]); };
      elems_mut<int64_t>(out)[t] = sorted_position(at, n, detail::convert<C>(elems<T>(values)[t]), right);
    }
  });
  return out;
}

PoolGeometry geometry_of(const Tensor& x, const Shape& os, const Strides& ost, const std::vector<int64_t>& p) {
  PoolGeometry g;
  g.n = x.shape()[0], g.c = x.shape()[1], g.h = x.shape()[2], g.w = x.shape()[3];
  g.oh = os[2], g.ow = os[3];
  g.kh = p[0], g.kw = p[1], g.sh = p[2], g.sw = p[3], g.ph = p[4], g.pw = p[5];
  g.dh = p.size() > 6 ? p[6] : 1;
  g.dw = p.size() > 7 ? p[7] : 1;
  for (int d = 0; d < 4; ++d) g.xs[d] = x.strides()[size_t(d)], g.os[d] = ost[size_t(d)];
  return g;
}

/// x is read through its own strides (any view), as the kernel reads it.
Tensor max_pool_emulated(const Tensor& x, const Shape& os, const std::vector<int64_t>& p) {
  Tensor out = Tensor::empty(os, x.dtype());
  const PoolGeometry g = geometry_of(x, os, out.strides(), p);
  visit_cuda(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    for (int64_t t = 0; t < g.numel(); ++t) {
      int64_t oy, ox, xp, oat, best = 0;
      g.locate(t, oy, ox, xp, oat);
      const T* plane = elems<T>(x) + xp;
      auto load = [&](int64_t off) { return detail::convert<C>(plane[off]); };
      elems_mut<T>(out)[oat] =
          max_pool_window(g, oy, ox, load, best) ? plane[best] : detail::convert<T>(pool_lowest<C>::get());
    }
  });
  return out;
}

Tensor avg_pool_emulated(const Tensor& x, const Shape& os, const std::vector<int64_t>& p, bool include_pad) {
  Tensor out = Tensor::empty(os, x.dtype());
  const PoolGeometry g = geometry_of(x, os, out.strides(), p);
  visit_cuda(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
      for (int64_t t = 0; t < g.numel(); ++t) {
        int64_t oy, ox, xp, oat;
        g.locate(t, oy, ox, xp, oat);
        const T* plane = elems<T>(x) + xp;
        auto load = [&](int64_t off) { return detail::convert<double>(plane[off]); };
        // the kernel's double -> compute type -> storage
        elems_mut<T>(out)[oat] = detail::convert<T>(C(avg_pool_window(g, oy, ox, include_pad, load)));
      }
    }
  });
  return out;
}

/// OffsetCalc of (out, x) over out's shape, as select.cu's pair_calc.
OffsetCalc<2, int64_t> pair_calc(const Tensor& out, const Tensor& x) {
  std::vector<std::vector<int64_t>> st = {std::vector<int64_t>(out.strides().begin(), out.strides().end()),
                                          std::vector<int64_t>(x.strides().begin(), x.strides().end())};
  OffsetCalc<2, int64_t> oc;
  REQUIRE(make_offset_calc(coalesce(std::vector<int64_t>(out.shape().begin(), out.shape().end()), st), oc));
  return oc;
}

template <class F> void visit_width(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(detail::TypeTag<uint8_t>{});
    case 2: return f(detail::TypeTag<uint16_t>{});
    case 4: return f(detail::TypeTag<uint32_t>{});
    default: return f(detail::TypeTag<uint64_t>{});
  }
}

/// `out` is a strided destination (the kernel writes through out's strides).
void triangle_emulated(const Tensor& out, const Tensor& x, int64_t k, bool lower) {
  const OffsetCalc<2, int64_t> oc = pair_calc(out, x);
  const int64_t rows = x.shape()[size_t(x.ndim() - 2)], cols = x.shape()[size_t(x.ndim() - 1)];
  visit_width(x.itemsize(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    for (int64_t t = 0; t < out.numel(); ++t) {
      int64_t off[2];
      oc.get(t, off);
      const int64_t c = t % cols, r = (t / cols) % rows;
      elems_mut<W>(out)[off[0]] = triangle_keeps(r, c, k, lower) ? elems<W>(x)[off[1]] : W(0);
    }
  });
}

Tensor diag_emulated(const Tensor& x, const Shape& os, int64_t k) {
  Tensor out = full(os, 7.0, x.dtype());  // the kernel writes every element
  int64_t r0, c0;
  diag_origin(k, r0, c0);
  visit_width(x.itemsize(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    W* op = elems_mut<W>(out);
    const W* xp = elems<W>(x);
    if (x.ndim() == 1) {
      const int64_t n2 = os[0];
      for (int64_t t = 0; t < n2 * n2; ++t) {
        const int64_t r = t / n2, c = t % n2;
        op[r * out.strides()[0] + c * out.strides()[1]] = c - r == k ? xp[(r - r0) * x.strides()[0]] : W(0);
      }
    } else {
      for (int64_t i = 0; i < os[0]; ++i)
        op[i * out.strides()[0]] = xp[(r0 + i) * x.strides()[0] + (c0 + i) * x.strides()[1]];
    }
  });
  return out;
}

Tensor nan_to_num_emulated(const Tensor& x, double nan, double posinf, double neginf) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  if (!is_floating(x.dtype())) return x.contiguous();  // the kernel's copy
  const OffsetCalc<2, int64_t> oc = pair_calc(out, x);
  visit_cuda(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
      const T rn = detail::convert<T>(nan), rp = detail::convert<T>(posinf), rm = detail::convert<T>(neginf);
      for (int64_t t = 0; t < out.numel(); ++t) {
        int64_t off[2];
        oc.get(t, off);
        const T v = elems<T>(x)[off[1]];
        elems_mut<T>(out)[off[0]] = nan_to_num_of(v, detail::convert<C>(v), rn, rp, rm);
      }
    }
  });
  return out;
}

std::vector<int64_t> broadcast_strides(const Tensor& t, const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 0);
  const size_t lead = shape.size() - size_t(t.ndim());
  for (size_t j = 0; j < size_t(t.ndim()); ++j) s[lead + j] = t.shape()[j] == 1 ? 0 : t.strides()[j];
  return s;
}

Tensor cross_emulated(const Tensor& a0, const Tensor& b0, int64_t axis) {
  const DType d = promote_types(a0.dtype(), b0.dtype());
  const Tensor a = a0.dtype() == d ? a0 : cast(a0, d), b = b0.dtype() == d ? b0 : cast(b0, d);
  const Shape shape_out = broadcast_shapes(a.shape(), b.shape(), "cross");
  Tensor out = Tensor::empty(shape_out, d);
  const int64_t ax = axis < 0 ? axis + out.ndim() : axis;
  std::vector<std::vector<int64_t>> st = {broadcast_strides(out, shape_out), broadcast_strides(a, shape_out),
                                          broadcast_strides(b, shape_out)};
  const int64_t so = st[0][size_t(ax)], sa = st[1][size_t(ax)], sb = st[2][size_t(ax)];
  std::vector<int64_t> shape(shape_out.begin(), shape_out.end());
  shape[size_t(ax)] = 1;
  int64_t lines = 1;
  for (int64_t e : shape) lines *= e;
  OffsetCalc<3, int64_t> oc;
  REQUIRE(make_offset_calc(coalesce(shape, st), oc));
  visit_cuda(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    for (int64_t t = 0; t < lines; ++t) {
      int64_t off[3];
      oc.get(t, off);
      const T* pa = elems<T>(a) + off[1];
      const T* pb = elems<T>(b) + off[2];
      auto c = [](T v) { return detail::convert<C>(v); };
      const C a0v = c(pa[0]), a1 = c(pa[sa]), a2 = c(pa[2 * sa]), b0v = c(pb[0]), b1 = c(pb[sb]), b2 = c(pb[2 * sb]);
      T* po = elems_mut<T>(out) + off[0];
      po[0] = detail::convert<T>(cross_term(a1, b2, a2, b1));
      po[so] = detail::convert<T>(cross_term(a2, b0v, a0v, b2));
      po[2 * so] = detail::convert<T>(cross_term(a0v, b1, a1, b0v));
    }
  });
  return out;
}

const ViewKind kViews[] = {ViewKind::contiguous, ViewKind::transposed, ViewKind::strided, ViewKind::negative};
}  // namespace

TEST_SUITE("cuda select plan") {
  TEST_CASE("topk: the kernel's slot rule gives the CPU's positions (ties by position, NaN largest, k = 0 .. n)") {
    int checked = 0;
    for (DType d : kCudaDTypes) {
      for (const Shape& s : std::vector<Shape>{{13}, {4, 9}, {3, 5, 7}, {1}, {2, 0, 3}}) {
        for (int64_t axis = 0; axis < int64_t(s.size()); ++axis) {
          const Tensor x = tie_tensor(s, d, uint64_t(checked) + 11);
          const int64_t n = s[size_t(axis)];
          for (int64_t k : {int64_t(0), int64_t(1), n / 2, n}) {
            if (k > n) continue;
            for (bool largest : {true, false}) {
              CAPTURE(d);
              CAPTURE(shape_str(s));
              CAPTURE(axis);
              CAPTURE(k);
              CAPTURE(largest);
              const Tensor want = topk(x, k, axis, largest).indices;
              const Tensor got = topk_emulated(x, k, axis, largest);
              CHECK(kt::same_bits(got, want));
              ++checked;
            }
          }
        }
      }
    }
    CHECK(checked > 300);
    // An all-NaN line and a line of -0/+0 only: by position.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Tensor allnan = Tensor::from_vector(std::vector<double>{nan, nan, 1.0, nan}, {4});
    CHECK(topk_emulated(allnan, 3, 0, true).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 3});
    CHECK(topk_emulated(allnan, 2, 0, false).to_vector<int64_t>() == std::vector<int64_t>{2, 0});
    const Tensor zeros_pm = Tensor::from_vector(std::vector<float>{0.0f, -0.0f, 0.0f}, {3});
    CHECK(topk_emulated(zeros_pm, 3, 0, true).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2});
  }

  TEST_CASE("searchsorted: the kernel's bisection gives the CPU's positions (left/right, NaN last, batched, empty)") {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    int checked = 0;
    for (DType d : kCudaDTypes) {
      const std::vector<double> sorted = is_floating(d) ? std::vector<double>{-inf, -1, 0, 0, 2, 2, 2, 5, inf, nan, nan}
                                                        : std::vector<double>{0, 1, 1, 2, 5, 5, 7};
      const Tensor seq = Tensor::from_vector(sorted, {int64_t(sorted.size())}).to(d);
      const Tensor vals = tie_tensor({3, 5}, d, 5);
      const Tensor empty_seq = Tensor::empty({0}, d);
      // batched: each row sorted (rows of a sorted tie tensor)
      const Tensor rows = sort(tie_tensor({4, 6}, d, 9), -1);
      const Tensor rvals = tie_tensor({4, 3}, d, 13);
      for (bool right : {false, true}) {
        CAPTURE(d);
        CAPTURE(right);
        CHECK(kt::same_bits(searchsorted_emulated(seq, vals, right), searchsorted(seq, vals, right)));
        CHECK(kt::same_bits(searchsorted_emulated(seq, Tensor::empty({0}, d), right),
                            searchsorted(seq, Tensor::empty({0}, d), right)));
        CHECK(kt::same_bits(searchsorted_emulated(empty_seq, vals, right), searchsorted(empty_seq, vals, right)));
        CHECK(kt::same_bits(searchsorted_emulated(rows, rvals, right), searchsorted(rows, rvals, right)));
        CHECK(kt::same_bits(searchsorted_emulated(seq, vals.transpose(), right), searchsorted(seq, vals.transpose(), right)));
        checked += 5;
      }
    }
    CHECK(checked == 90);
    // Known answers: ties left/right and NaN after everything.
    const Tensor s = Tensor::from_vector(std::vector<double>{1, 2, 2, nan}, {4});
    const Tensor v = Tensor::from_vector(std::vector<double>{2, nan, 0, inf}, {4});
    CHECK(searchsorted_emulated(s, v, false).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 3});
    CHECK(searchsorted_emulated(s, v, true).to_vector<int64_t>() == std::vector<int64_t>{3, 4, 0, 3});
  }

  TEST_CASE("max_pool2d/avg_pool2d: the kernel's window rules over x's strides give the CPU's bits") {
    struct P {
      std::vector<int64_t> k, s, p, dl;
    };
    const std::vector<P> params = {{{2, 2}, {2, 2}, {0, 0}, {1, 1}}, {{3, 3}, {1, 1}, {1, 1}, {1, 1}},
                                   {{3, 2}, {2, 1}, {1, 0}, {2, 1}}, {{5, 3}, {3, 2}, {2, 1}, {1, 2}},
                                   {{1, 1}, {1, 1}, {0, 0}, {1, 1}}, {{4, 4}, {3, 3}, {2, 2}, {1, 1}}};
    int checked = 0;
    for (DType d : kCudaDTypes) {
      for (const Shape& s : std::vector<Shape>{{2, 3, 7, 8}, {1, 1, 5, 5}, {0, 2, 6, 6}}) {
        const Tensor base = is_floating(d) && checked % 2 ? kt::random_tensor(s, d, 3, true) : tie_tensor(s, d, 21);
        for (ViewKind vk : kViews) {
          const Tensor x = kt::relayout(base, vk);
          for (const P& p : params) {
            CAPTURE(d);
            CAPTURE(shape_str(s));
            CAPTURE(kt::view_name(vk));
            CAPTURE(p.k[0]);
            CAPTURE(p.dl[0]);
            const Tensor want = max_pool2d(x, p.k, p.s, p.p, p.dl);
            const std::vector<int64_t> attrs = {p.k[0], p.k[1], p.s[0], p.s[1], p.p[0], p.p[1], p.dl[0], p.dl[1]};
            CHECK(kt::same_bits(max_pool_emulated(x, want.shape(), attrs), want));
            if (is_floating(d)) {
              for (bool inc : {true, false}) {
                const Tensor wa = avg_pool2d(x, p.k, p.s, p.p, inc);
                const std::vector<int64_t> aa = {p.k[0], p.k[1], p.s[0], p.s[1], p.p[0], p.p[1]};
                CHECK(kt::same_bits(avg_pool_emulated(x, wa.shape(), aa, inc), wa));
              }
            }
            ++checked;
          }
        }
      }
    }
    CHECK(checked == 9 * 3 * 4 * 6);
    // The last NaN tap wins; -0 then +0 keeps -0 (the first of equal taps).
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Tensor z = Tensor::from_vector(std::vector<float>{-0.0f, 0.0f, -1.0f, -2.0f}, {1, 1, 2, 2});
    const Tensor mz = max_pool_emulated(z, {1, 1, 1, 1}, {2, 2, 2, 2, 0, 0, 1, 1});
    CHECK(std::signbit(mz.to_vector<float>()[0]));
    const Tensor nn = Tensor::from_vector(std::vector<double>{1.0, nan, 3.0, 0.5}, {1, 1, 2, 2});
    CHECK(std::isnan(max_pool_emulated(nn, {1, 1, 1, 1}, {2, 2, 2, 2, 0, 0, 1, 1}).item<double>()));
  }

  TEST_CASE("tril/triu and diag: the kernels' index rules give the CPU's bits for every k, strided in and out") {
    int checked = 0;
    for (DType d : kCudaDTypes) {
      for (const Shape& s : std::vector<Shape>{{5, 7}, {2, 4, 3}, {3, 0, 4}, {1, 1}}) {
        const Tensor base = tie_tensor(s, d, 31);
        for (ViewKind vk : kViews) {
          const Tensor x = kt::relayout(base, vk);
          for (int64_t k : {-9, -2, -1, 0, 1, 3, 9}) {
            for (bool lower : {true, false}) {
              CAPTURE(d);
              CAPTURE(shape_str(s));
              CAPTURE(k);
              const Tensor want = lower ? tril(x, k) : triu(x, k);
              const Tensor out = kt::relayout(full(s, 3.0, d), ViewKind::transposed);  // a strided destination
              triangle_emulated(out, x, k, lower);
              CHECK(kt::same_bits(out, want));
              ++checked;
            }
          }
        }
      }
      for (const Shape& s : std::vector<Shape>{{4}, {0}, {3, 5}, {5, 3}, {0, 2}}) {
        const Tensor base = tie_tensor(s, d, 41);
        for (ViewKind vk : kViews) {
          const Tensor x = kt::relayout(base, vk);
          for (int64_t k : {-6, -2, -1, 0, 1, 2, 6}) {
            CAPTURE(d);
            CAPTURE(shape_str(s));
            CAPTURE(k);
            const Tensor want = diag(x, k);
            CHECK(kt::same_bits(diag_emulated(x, want.shape(), k), want));
            ++checked;
          }
        }
      }
    }
    CHECK(checked == 9 * (4 * 4 * 7 * 2 + 5 * 4 * 7));
  }

  TEST_CASE("nan_to_num and cross: the kernels' element rules give the CPU's bits") {
    const double inf = std::numeric_limits<double>::infinity();
    int checked = 0;
    for (DType d : kCudaDTypes) {
      const Tensor base = is_floating(d) ? kt::random_tensor({6, 5}, d, 51, true) : tie_tensor({6, 5}, d, 51);
      for (ViewKind vk : kViews) {
        const Tensor x = kt::relayout(base, vk);
        CAPTURE(d);
        CAPTURE(kt::view_name(vk));
        // defaults (the dtype's largest finite), explicit values, values beyond the dtype's range
        const Tensor w0 = nan_to_num(x);
        const Tensor& xs = x;
        // the front end turns the defaults into explicit doubles; the kernel sees those
        const auto lim = [&](bool pos) {
          switch (d) {
            case DType::float16: return pos ? 65504.0 : -65504.0;
            case DType::bfloat16: return pos ? 3.3895313892515355e38 : -3.3895313892515355e38;
            case DType::float32: return pos ? double(std::numeric_limits<float>::max()) : -double(std::numeric_limits<float>::max());
            default: return pos ? std::numeric_limits<double>::max() : -std::numeric_limits<double>::max();
          }
        };
        if (is_floating(d)) CHECK(kt::same_bits(nan_to_num_emulated(xs, 0.0, lim(true), lim(false)), w0));
        CHECK(kt::same_bits(nan_to_num_emulated(xs, -7.5, 1e300, -0.0), nan_to_num(xs, -7.5, 1e300, -0.0)));
        CHECK(kt::same_bits(nan_to_num_emulated(xs, inf, 2.0, -inf), nan_to_num(xs, inf, 2.0, -inf)));
        checked += 3;
      }
      for (DType e : {d, DType::float32, DType::int32}) {
        const Tensor a = is_floating(d) ? kt::random_tensor({4, 3, 2}, d, 61, true) : tie_tensor({4, 3, 2}, d, 61);
        const Tensor b = is_floating(e) ? kt::random_tensor({3, 1}, e, 62) : tie_tensor({3, 1}, e, 62);
        for (ViewKind vk : kViews) {
          CAPTURE(d);
          CAPTURE(e);
          CAPTURE(kt::view_name(vk));
          const Tensor av = kt::relayout(a, vk);
          Tensor want;
          try {
            want = cross(av, b, 1);
          } catch (const DTypeError&) {
            continue;  // the front end refuses the pair on every device
          }
          CHECK(kt::same_bits(cross_emulated(av, b, 1), want));
          CHECK(kt::same_bits(cross_emulated(av.transpose(0, 1).contiguous().transpose(0, 1), b, -2), cross(av, b, -2)));
          const Tensor a3 = kt::relayout(tie_tensor({3}, d, 63), vk);
          CHECK(kt::same_bits(cross_emulated(a3, b.reshape({1, 3}), -1), cross(a3, b.reshape({1, 3}), -1)));
          checked += 3;
        }
      }
    }
    CHECK(checked > 9 * 4 * 3);
    // Known answers: NaN, +inf, -inf replaced, the rest kept; e_x x e_y = e_z.
    const Tensor v = Tensor::from_vector(std::vector<double>{std::nan(""), inf, -inf, -0.0}, {4});
    const std::vector<double> r = nan_to_num_emulated(v, 1.0, 2.0, 3.0).to_vector<double>();
    CHECK(r[0] == 1.0);
    CHECK(r[1] == 2.0);
    CHECK(r[2] == 3.0);
    CHECK(std::signbit(r[3]));
    const Tensor ex = Tensor::from_vector(std::vector<float>{1, 0, 0}, {3});
    const Tensor ey = Tensor::from_vector(std::vector<float>{0, 1, 0}, {3});
    CHECK(cross_emulated(ex, ey, 0).to_vector<double>() == std::vector<double>{0, 0, 1});
  }
}
