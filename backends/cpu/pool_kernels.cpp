// kiln (internal): CPU kernels of the MaxPool2d and AvgPool2d rows
// (select_kernels.h): one pass over each output's window, planes (n, c)
// split among threads; no im2col, no padded copy (the taps outside x are
// skipped: the window's row and column ranges are clipped once per output).
#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "../../tensor/dispatch.h"
#include "accumulate.h"
#include "parallel_ranges.h"
#include "select_kernels.h"

namespace kiln::cpu {
namespace {

struct PoolGeo {
  int64_t c, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t xs[4], os[4];  // element strides of x and out
};

PoolGeo geometry(const Tensor& out, const Tensor& x, const std::vector<int64_t>& p, bool dilated) {
  PoolGeo g{x.shape()[1], x.shape()[2], x.shape()[3], out.shape()[2], out.shape()[3], p[0], p[1], p[2], p[3], p[4],
            p[5], dilated ? p[6] : 1, dilated ? p[7] : 1, {}, {}};
  for (int d = 0; d < 4; ++d) {
    g.xs[d] = x.strides()[d];
    g.os[d] = out.strides()[d];
  }
  return g;
}

// ceil(a / b) for a > 0, b > 0, without forming a + b - 1 (which wraps
// for a stride or dilation near 2^63).
inline int64_t ceil_div_pos(int64_t a, int64_t b) { return (a - 1) / b + 1; }

// Taps t in [t0, t1) of a window starting at `start` with step `dil` over
// k taps that land in [0, n).
inline void tap_range(int64_t start, int64_t dil, int64_t k, int64_t n, int64_t& t0, int64_t& t1) {
  t0 = start >= 0 ? 0 : ceil_div_pos(-start, dil);
  t1 = n - start <= 0 ? 0 : std::min(k, ceil_div_pos(n - start, dil));
  if (t1 < t0) t1 = t0;
}

// Per output row: the taps in row-major window order (i, then j), each
// applied to every output of the row whose window holds it, so each output
// sees its taps in the same order as a loop per output would (same result,
// NaN and -0/+0 included), and the loop over the row's outputs is a
// strided compare-and-select the compiler can vectorize.
template <class T>
void max_planes(const T* x, T* out, const PoolGeo& g, int64_t p0, int64_t p1) {
  using C = detail::compute_t<T>;
  constexpr bool kSame = std::is_same_v<C, T>;  // 16-bit floats also keep the winning tap's bits
  const C lowest = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                        : std::numeric_limits<C>::lowest();
  const std::unique_ptr<C[]> m(new C[static_cast<size_t>(std::max<int64_t>(g.ow, 1))]);
  const std::unique_ptr<T[]> best(new T[kSame ? 1 : static_cast<size_t>(std::max<int64_t>(g.ow, 1))]);
  // Output columns ox whose tap j lies inside x: 0 <= ox*sw - pw + j*dw < w.
  auto cols = [&](int64_t j, int64_t& o0, int64_t& o1) {
    const int64_t off = j * g.dw - g.pw;  // ix = ox*sw + off
    o0 = off >= 0 ? 0 : ceil_div_pos(-off, g.sw);
    o1 = g.w - off <= 0 ? 0 : std::min(g.ow, ceil_div_pos(g.w - off, g.sw));
    if (o1 < o0) o1 = o0;
  };
  // Column taps j that lie inside x for some output column: the first
  // output column's tap (j dw - pw) must not start past x's last column, the
  // last output column's (j dw - pw + (ow - 1) sw) must reach column 0. A
  // window far wider than x then costs what x's width does, not its own.
  const int64_t j1 = std::min(g.kw, (g.w - 1 + g.pw) / g.dw + 1);
  const int64_t reach = g.pw - (g.ow - 1) * g.sw;  // j dw >= reach
  const int64_t j0 = reach <= 0 ? 0 : std::min(j1, ceil_div_pos(reach, g.dw));
  for (int64_t pl = p0; pl < p1; ++pl) {
    const int64_t n = pl / g.c, ch = pl % g.c;
    const T* xp = x + n * g.xs[0] + ch * g.xs[1];
    T* op = out + n * g.os[0] + ch * g.os[1];
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      const int64_t hs = oy * g.sh - g.ph;
      int64_t i0, i1;
      tap_range(hs, g.dh, g.kh, g.h, i0, i1);
      std::fill(m.get(), m.get() + g.ow, lowest);
      if constexpr (!kSame) std::fill(best.get(), best.get() + g.ow, detail::convert<T>(lowest));
      for (int64_t i = i0; i < i1; ++i) {
        const T* row = xp + (hs + i * g.dh) * g.xs[2];
        for (int64_t j = j0; j < j1; ++j) {
          int64_t o0, o1;
          cols(j, o0, o1);
          if (o0 >= o1) continue;
          const int64_t step = g.sw * g.xs[3], first = (o0 * g.sw + j * g.dw - g.pw) * g.xs[3];
          const T* src = row + first;
          C* mm = m.get();
          if constexpr (kSame) {
            for (int64_t o = o0; o < o1; ++o, src += step) {
              const C v = *src;
              mm[o] = (v > mm[o] || is_nan(v)) ? v : mm[o];  // torch: a NaN tap wins
            }
          } else {
            T* bb = best.get();
            for (int64_t o = o0; o < o1; ++o, src += step) {
              const C v = detail::convert<C>(*src);
              if (v > mm[o] || is_nan(v)) {
                mm[o] = v;
                bb[o] = *src;
              }
            }
          }
        }
      }
      T* orow = op + oy * g.os[2];
      for (int64_t o = 0; o < g.ow; ++o) {
        if constexpr (kSame) orow[o * g.os[3]] = m[o];
        else orow[o * g.os[3]] = best[o];
      }
    }
  }
}

template <class T>
void avg_planes(const T* x, T* out, const PoolGeo& g, bool count_include_pad, int64_t p0, int64_t p1) {
  for (int64_t pl = p0; pl < p1; ++pl) {
    const int64_t n = pl / g.c, ch = pl % g.c;
    const T* xp = x + n * g.xs[0] + ch * g.xs[1];
    T* op = out + n * g.os[0] + ch * g.os[1];
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      const int64_t hs = oy * g.sh - g.ph;
      // torch's divisor: the window clipped to the padded input, or the taps inside x
      const int64_t he = std::min(hs + g.kh, g.h + g.ph), hs_in = std::max<int64_t>(hs, 0),
                    he_in = std::min(he, g.h);
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t ws = ox * g.sw - g.pw;
        const int64_t we = std::min(ws + g.kw, g.w + g.pw), ws_in = std::max<int64_t>(ws, 0),
                      we_in = std::min(we, g.w);
        double s = 0.0;
        for (int64_t i = hs_in; i < he_in; ++i) {
          const T* row = xp + i * g.xs[2];
          for (int64_t j = ws_in; j < we_in; ++j) s += detail::convert<double>(row[j * g.xs[3]]);
        }
        // in float64: a huge window's tap count overflows int64 (2^40 x 2^40)
        const double div = count_include_pad
                               ? static_cast<double>(he - hs) * static_cast<double>(we - ws)
                               : static_cast<double>(std::max<int64_t>(he_in - hs_in, 0)) *
                                     static_cast<double>(std::max<int64_t>(we_in - ws_in, 0));
        op[oy * g.os[2] + ox * g.os[3]] = detail::convert<T>(s / div);
      }
    }
  }
}

}  // namespace

void max_pool2d_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& p) {
  if (out.numel() == 0) return;
  const PoolGeo g = geometry(out, x, p, true);
  const int64_t planes = x.shape()[0] * g.c;
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xb = static_cast<const T*>(x.data_ptr());
    T* ob = static_cast<T*>(out.data_ptr());
    parallel_ranges(planes, out.numel() * std::min(g.kh, g.h) * std::min(g.kw, g.w),
                    [&](int64_t p0, int64_t p1) { max_planes<T>(xb, ob, g, p0, p1); });
  });
}

void avg_pool2d_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& p, bool count_include_pad) {
  if (out.numel() == 0) return;
  const PoolGeo g = geometry(out, x, p, false);
  const int64_t planes = x.shape()[0] * g.c;
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t> || std::is_floating_point_v<T>) {
      const T* xb = static_cast<const T*>(x.data_ptr());
      T* ob = static_cast<T*>(out.data_ptr());
      parallel_ranges(planes, out.numel() * std::min(g.kh, g.h) * std::min(g.kw, g.w),
                      [&](int64_t p0, int64_t p1) { avg_planes<T>(xb, ob, g, count_include_pad, p0, p1); });
    }
  });
}

}  // namespace kiln::cpu
