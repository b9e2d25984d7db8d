// conv2d on the CPU (the Conv2d row): per sample and group, the column
// matrix [C/groups * KH * KW, OH * OW] is written in one pass over the input
// window (zeros where a window hangs over the padding, no padded copy of the
// input), then one GEMM with the weight [O/groups, C/groups * KH * KW]
// writes the sample's output rows in place.
#include <algorithm>
#include <cstring>

#include "copy.h"
#include "data_kernels.h"
#include "matmul.h"

namespace kiln::cpu {
namespace {

struct Geometry {
  int64_t cg, h, w;         // input channels per group, input extents
  int64_t kh, kw, oh, ow;   // kernel and output extents
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t xc, xh, xw;       // element strides of x's channel, row and column axes
};

// One row (c, i, j) of the column matrix: x[c, oh*sh - ph + i*dh, ow*sw -
// pw + j*dw] for every (oh, ow), 0 outside the input. E is a type of the
// element's size (only bits are moved; 0 bits are 0 in every dtype).
// Output rows [oh0, oh1) only; dst holds (oh1 - oh0) * ow elements.
template <class E>
void column_row(const E* x, const Geometry& g, int64_t row, int64_t oh0, int64_t oh1, E* dst) {
  const int64_t kk = g.kh * g.kw, c = row / kk, i = (row / g.kw) % g.kh, j = row % g.kw;
  const int64_t ioff = i * g.dh - g.ph, joff = j * g.dw - g.pw;
  // ow in [ow0, ow1) reads inside the row: 0 <= ow*sw + joff < w.
  const int64_t ow0 = std::min(g.ow, joff >= 0 ? int64_t{0} : (-joff + g.sw - 1) / g.sw);
  const int64_t ow1 = std::clamp(g.w - joff <= 0 ? int64_t{0} : (g.w - joff + g.sw - 1) / g.sw, ow0, g.ow);
  const E* xc = x + c * g.xc;
  for (int64_t oh = oh0; oh < oh1; ++oh, dst += g.ow) {
    const int64_t ih = oh * g.sh + ioff;
    if (ih < 0 || ih >= g.h) {
      std::memset(dst, 0, sizeof(E) * g.ow);
      continue;
    }
    const E* src = xc + ih * g.xh;
    if (ow0 > 0) std::memset(dst, 0, sizeof(E) * ow0);
    if (g.sw == 1 && g.xw == 1) {
      if (ow1 > ow0) std::memcpy(dst + ow0, src + ow0 + joff, sizeof(E) * (ow1 - ow0));
    } else {
      const int64_t step = g.sw * g.xw;
      const E* s = src + (ow0 * g.sw + joff) * g.xw;
      for (int64_t o = ow0; o < ow1; ++o, s += step) dst[o] = *s;
    }
    if (ow1 < g.ow) std::memset(dst + ow1, 0, sizeof(E) * (g.ow - ow1));
  }
}

// The column matrix of one (sample, group) for output rows [oh0, oh1):
// `rows` rows of (oh1 - oh0) * ow elements at cols. On one thread: the
// GEMM that follows is the BLAS's to thread, and an OpenMP region per band
// between its calls leaves both thread pools spinning against each other
// (13x slower at 2 threads on 2 loaded cores).
template <class E>
void columns(const E* x, const Geometry& g, int64_t rows, int64_t oh0, int64_t oh1, E* cols) {
  const int64_t l = (oh1 - oh0) * g.ow;
  for (int64_t r = 0; r < rows; ++r) column_row(x, g, r, oh0, oh1, cols + r * l);
}

// The column matrix of the channels at element offset `elem_offset` from x's
// element (0, 0, 0, 0), whatever x's dtype.
void columns_any(const Tensor& x, int64_t elem_offset, const Geometry& g, int64_t rows, int64_t oh0, int64_t oh1,
                 void* cols) {
  const char* base = static_cast<const char*>(x.data_ptr()) + elem_offset * static_cast<int64_t>(x.itemsize());
  switch (x.itemsize()) {
    case 1: return columns(reinterpret_cast<const uint8_t*>(base), g, rows, oh0, oh1, static_cast<uint8_t*>(cols));
    case 2: return columns(reinterpret_cast<const uint16_t*>(base), g, rows, oh0, oh1, static_cast<uint16_t*>(cols));
    case 4: return columns(reinterpret_cast<const uint32_t*>(base), g, rows, oh0, oh1, static_cast<uint32_t*>(cols));
    default: return columns(reinterpret_cast<const uint64_t*>(base), g, rows, oh0, oh1, static_cast<uint64_t*>(cols));
  }
}

// Output rows per band of the BLAS path: the band's column matrix (k rows)
// is kept near 256 KiB, so that the GEMM reads it from cache right after it
// is written (one whole sample's matrix is several MiB).
int64_t band_rows(int64_t k, int64_t ow, size_t es) {
  const int64_t per_row = std::max<int64_t>(1, k * ow * static_cast<int64_t>(es));
  // at least 64 columns per GEMM (a narrower one runs far below the BLAS's speed)
  return std::max<int64_t>({int64_t{1}, (int64_t{256} << 10) / per_row, (64 + ow - 1) / std::max<int64_t>(ow, 1)});
}

// t converted to dtype (a contiguous copy when `contiguous`), or t itself.
Tensor as_dtype(const Tensor& t, DType dtype, bool contiguous) {
  if (t.dtype() == dtype && (!contiguous || t.is_contiguous())) return t;
  Tensor r = Tensor::empty(t.shape(), dtype);
  if (r.numel() > 0) copy_into(t, r);
  return r;
}

}  // namespace

void conv2d_into(const Tensor& out, const Tensor& x_in, const Tensor& w_in, const std::vector<int64_t>& p,
                 int64_t groups) {
  if (out.numel() == 0) return;
  const DType dt = out.dtype();
  const Tensor x = as_dtype(x_in, dt, false), w = as_dtype(w_in, dt, true);
  const Tensor y = out.is_contiguous() ? out : Tensor::empty(out.shape(), dt);
  const int64_t n = x.shape()[0], oc = w.shape()[0], ocg = oc / groups;
  Geometry g{x.shape()[1] / groups, x.shape()[2], x.shape()[3], w.shape()[2], w.shape()[3], y.shape()[2],
             y.shape()[3], p[0], p[1], p[2], p[3], p[4], p[5], x.strides()[1], x.strides()[2], x.strides()[3]};
  const int64_t k = g.cg * g.kh * g.kw, l = g.oh * g.ow;
  const bool blas = dt == DType::float32 || dt == DType::float64;
  // K == 0 (no input channels): the GEMM adds nothing, the output is 0.
  const size_t es = size_of(dt);
  const int64_t band = blas ? std::min(g.oh, band_rows(k, g.ow, es)) : g.oh;
  Tensor cols = Tensor::empty({std::max<int64_t>(k, 1), band * g.ow}, dt);
  if (k == 0) {
    fill(y, 0.0);
  } else {
    const char* wp = static_cast<const char*>(w.data_ptr());
    char* yp = static_cast<char*>(y.data_ptr());
    for (int64_t s = 0; s < n; ++s)
      for (int64_t gi = 0; gi < groups; ++gi) {
        const int64_t x_off = s * x.strides()[0] + gi * g.cg * x.strides()[1];
        const int64_t w_off = gi * ocg * k, y_off = (s * oc + gi * ocg) * l;
        if (blas) {  // per band of output rows: its columns, then C[:, band] = W @ columns (ldc = l)
          for (int64_t oh0 = 0; oh0 < g.oh; oh0 += band) {
            const int64_t oh1 = std::min(g.oh, oh0 + band), nb = (oh1 - oh0) * g.ow;
            columns_any(x, x_off, g, k, oh0, oh1, cols.data_ptr());
            const GemmCall call{dt == DType::float64, false, false, ocg, nb, k, k, nb, l};
            gemm(call, wp + w_off * es, cols.data_ptr(), yp + (y_off + oh0 * g.ow) * es);
          }
        } else {
          columns_any(x, x_off, g, k, 0, g.oh, cols.data_ptr());
          const Tensor wv(w.buffer(), dt, {ocg, k}, {k, 1}, w.offset() + w_off);
          const Tensor yv(y.buffer(), dt, {ocg, l}, {l, 1}, y.offset() + y_off);
          matmul(wv, cols, yv);
        }
      }
  }
  if (!y.is_same(out)) copy_into(y, out);
}

}  // namespace kiln::cpu
