// kiln (internal): the per-element rules of the CUDA kernels of the
// selection, window and matrix-structure rows (select.cu: TopK,
// SearchSorted, MaxPool2d, AvgPool2d, Tril, Triu, Diag, NanToNum, Cross).
// Plain C++ with KILN_HD functions (no CUDA headers): each kernel thread
// calls one of these for its output element, and the tests run the same
// functions on the CPU against the CPU kernels (tests/test_cuda_select_plan.cpp),
// so the device's answers are the CPU kernels' (backends/cpu/select_kernels.cpp,
// pool_kernels.cpp) element by element:
//  - topk: the rank of element i in the line's order (NaN largest, ties by
//    lower position: a strict total order, so the first k of a stable sort);
//    position i goes to slot rank when rank < k;
//  - searchsorted: the CPU's binary search in the NaN-last order (that
//    order and the bisection are one header for both: tensor/nan_last_order.h);
//  - max_pool2d: the taps inside x in row-major window order, a tap taken
//    when greater or NaN (torch's rule, so the last NaN wins); the winning
//    tap's own bits are stored (the dtype's lowest when no tap is inside);
//  - avg_pool2d: a float64 sum in row-major tap order, torch's divisor;
//  - tril/triu, diag: index rules; cross: products rounded before the
//    subtraction (no contraction: mul_rn/sub_rn), integers wrap.
#pragma once
#include <cstdint>

#include "../../tensor/nan_last_order.h"
#include "kernel_templates.h"  // KILN_HD

namespace kiln::cuda {

// ---- order ------------------------------------------------------------------------
// The NaN-last order and searchsorted's bisection are the CPU kernels' own
// (tensor/nan_last_order.h, one rule for both backends).
using sort_order::less_nan_last;
using sort_order::ranks_before;
using sort_order::sorted_position;
/// NaN test of a compute value (always false for integers and bool).
template <class C> KILN_HD bool nan_of(C v) { return sort_order::is_nan(v); }

/// The slot of position i in the line's topk order, or k when it is not
/// among the first k: the number of positions ranking before i, counted
/// until it reaches k. at(j) gives the compute key of position j < len.
template <bool Largest, class At> KILN_HD int64_t topk_slot(At at, int64_t len, int64_t i, int64_t k) {
  const auto ki = at(i);
  int64_t r = 0;
  for (int64_t j = 0; j < len && r < k; ++j)
    if (j != i && ranks_before<Largest>(at(j), j, ki, i)) ++r;
  return r;
}

// ---- pools ------------------------------------------------------------------------
/// One window geometry of a pool over x [N, C, H, W] -> out [N, C, OH, OW]:
/// kernel, stride, padding and dilation (1 for avg_pool2d), and the element
/// strides of x's and out's four axes (any sign).
struct PoolGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t xs[4] = {0, 0, 0, 0}, os[4] = {0, 0, 0, 0};
  KILN_HD int64_t numel() const { return n * c * oh * ow; }
  /// Output element t (row-major over [N, C, OH, OW]): its (plane, oy, ox)
  /// and the element offsets of its plane in x and of itself in out.
  KILN_HD void locate(int64_t t, int64_t& oy, int64_t& ox, int64_t& xplane, int64_t& oat) const {
    ox = t % ow;
    oy = (t / ow) % oh;
    const int64_t plane = t / (ow * oh), ni = plane / c, ci = plane % c;
    xplane = ni * xs[0] + ci * xs[1];
    oat = ni * os[0] + ci * os[1] + oy * os[2] + ox * os[3];
  }
};

/// Taps t in [t0, t1) of a window starting at `start` with step `dil` over
/// k taps that land in [0, n) (the CPU's tap_range).
KILN_HD void pool_tap_range(int64_t start, int64_t dil, int64_t k, int64_t n, int64_t& t0, int64_t& t1) {
  // ceil divisions as (a - 1) / dil + 1: a + dil - 1 wraps for a dilation near 2^63
  t0 = start >= 0 ? 0 : (-start - 1) / dil + 1;
  if (n - start <= 0) {
    t1 = 0;
  } else {
    const int64_t reach = (n - start - 1) / dil + 1;
    t1 = k < reach ? k : reach;
  }
  if (t1 < t0) t1 = t0;
}

/// The lowest value of compute type C: max_pool2d's starting value.
template <class C> struct pool_lowest;
template <> struct pool_lowest<bool> { static KILN_HD bool get() { return false; } };
template <> struct pool_lowest<uint8_t> { static KILN_HD uint8_t get() { return 0; } };
template <> struct pool_lowest<int8_t> { static KILN_HD int8_t get() { return int8_t(-128); } };
template <> struct pool_lowest<int32_t> { static KILN_HD int32_t get() { return int32_t(-2147483647 - 1); } };
template <> struct pool_lowest<int64_t> { static KILN_HD int64_t get() { return int64_t(-9223372036854775807LL - 1); } };
template <> struct pool_lowest<float> { static KILN_HD float get() { return -hd::m::inf<float>(); } };
template <> struct pool_lowest<double> { static KILN_HD double get() { return -hd::m::inf<double>(); } };

/// max_pool2d of output (oy, ox): the x element offset (from the plane's)
/// of the winning tap in `best`, false when no tap lies inside x (the
/// result is then pool_lowest). load(off) gives the compute value there.
template <class Load>
KILN_HD bool max_pool_window(const PoolGeometry& g, int64_t oy, int64_t ox, Load load, int64_t& best) {
  using C = decltype(load(int64_t(0)));
  const int64_t hs = oy * g.sh - g.ph, ws = ox * g.sw - g.pw;
  int64_t i0, i1, j0, j1;
  pool_tap_range(hs, g.dh, g.kh, g.h, i0, i1);
  pool_tap_range(ws, g.dw, g.kw, g.w, j0, j1);
  C m = pool_lowest<C>::get();
  bool found = false;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t row = (hs + i * g.dh) * g.xs[2];
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t off = row + (ws + j * g.dw) * g.xs[3];
      const C v = load(off);
      if (v > m || nan_of(v)) {
        m = v;
        best = off;
        found = true;
      }
    }
  }
  return found;
}

/// avg_pool2d of output (oy, ox) in float64: the sum of the taps inside x
/// in row-major order over torch's divisor (the window clipped to the padded
/// input when count_include_pad, else the taps inside x). load(off) gives
/// the tap as a double.
template <class Load>
KILN_HD double avg_pool_window(const PoolGeometry& g, int64_t oy, int64_t ox, bool count_include_pad, Load load) {
  const int64_t hs = oy * g.sh - g.ph, ws = ox * g.sw - g.pw;
  const int64_t he = hs + g.kh < g.h + g.ph ? hs + g.kh : g.h + g.ph;
  const int64_t we = ws + g.kw < g.w + g.pw ? ws + g.kw : g.w + g.pw;
  const int64_t hs_in = hs > 0 ? hs : 0, ws_in = ws > 0 ? ws : 0;
  const int64_t he_in = he < g.h ? he : g.h, we_in = we < g.w ? we : g.w;
  double s = 0.0;
  for (int64_t i = hs_in; i < he_in; ++i)
    for (int64_t j = ws_in; j < we_in; ++j) s += load(i * g.xs[2] + j * g.xs[3]);
  const int64_t nh = he_in - hs_in > 0 ? he_in - hs_in : 0, nw = we_in - ws_in > 0 ? we_in - ws_in : 0;
  const double div = count_include_pad ? double(he - hs) * double(we - ws) : double(nh) * double(nw);
  return s / div;
}

// ---- matrix structure -------------------------------------------------------------
/// tril (lower) keeps column - row <= k, triu keeps column - row >= k.
KILN_HD bool triangle_keeps(int64_t r, int64_t c, int64_t k, bool lower) { return lower ? c - r <= k : c - r >= k; }

/// The first element (r0, c0) of diagonal k of a matrix.
KILN_HD void diag_origin(int64_t k, int64_t& r0, int64_t& c0) {
  r0 = k >= 0 ? 0 : -k;
  c0 = k >= 0 ? k : 0;
}

// ---- nan_to_num -------------------------------------------------------------------
/// Element v (storage S, compute value c): rn for NaN, rp for +inf, rm for
/// -inf (each already converted to S), else v's own bits.
template <class S, class C> KILN_HD S nan_to_num_of(S v, C c, S rn, S rp, S rm) {
  const C inf = hd::m::inf<C>();
  return c != c ? rn : c == inf ? rp : c == -inf ? rm : v;
}

// ---- cross ------------------------------------------------------------------------
/// Products and a difference rounded once each (never an FMA).
KILN_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
KILN_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
KILN_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
KILN_HD double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

/// One component of a cross product, x1 * y2 - x2 * y1, in compute type C:
/// floats with each product rounded; integers and bool wrap (arithmetic
/// modulo 2^64, truncated to the storage type by the caller's conversion).
template <class C> KILN_HD C cross_term(C x1, C y2, C x2, C y1) {
  if constexpr (hd::is_float_v<C>) {
    return sub_rn(mul_rn(x1, y2), mul_rn(x2, y1));
  } else {
    auto u = [](C v) { return uint64_t(int64_t(v)); };
    return C(u(x1) * u(y2) - u(x2) * u(y1));
  }
}

}  // namespace kiln::cuda
