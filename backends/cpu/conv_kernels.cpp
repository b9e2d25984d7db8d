// conv2d on the CPU (the Conv2d row). Three paths, chosen by dtype and
// geometry only (never by the thread count):
// - float32, stride 1 (at least 16 input channels per group, or a 1x1
//   kernel), when the code generator runs on this CPU: one generated GEMM
//   per kernel tap on a padded slab of the band's input rows, the taps
//   accumulated in a band buffer (conv_taps below; no column matrix).
// - other float32 and float64: per band of output rows the column matrix
//   [C/groups * KH * KW, band * OW] is written in one pass over the input
//   window (zeros where a window hangs over the padding, no padded copy of
//   the input), then one GEMM with the weight [O/groups, C/groups * KH * KW]
//   writes the band's output columns in place. float32 runs the generated
//   GEMM (eager_small_gemm) and splits the (sample, group, band) items among
//   the threads; float64 (or a float32 problem the generator refuses) calls
//   the BLAS band by band, the BLAS threading each call.
// - other dtypes: one column matrix per (sample, group), then matmul()'s
//   exact kernels.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "copy.h"
#include "data_kernels.h"
#include "jit/kernel_lru.h"
#include "jit/small_gemm.h"
#include "matmul.h"
#include "parallel_ranges.h"

namespace kiln::cpu {
namespace {

// Calls fn(i) for every item i in [0, n): on the calling thread when `work`
// (multiply-adds) is below kParallelGrain, when one thread is allowed or
// when already inside a parallel region; else the items are handed out one
// at a time to the OpenMP threads (a thread slowed by another process takes
// fewer). Each item is computed whole by one call of fn, so results do not
// depend on which thread runs it. fn must not throw.
template <class F>
void for_items(int64_t n, double work, F&& fn) {
  const int max_t = omp_get_max_threads();
  if (work < double(kParallelGrain) || max_t == 1 || n <= 1 || omp_in_parallel()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const int nt = static_cast<int>(std::min<int64_t>(max_t, n));
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

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
  // (ceil divisions written (a - 1) / sw + 1: a + sw - 1 wraps for a stride near 2^63)
  const int64_t ow0 = std::min(g.ow, joff >= 0 ? int64_t{0} : (-joff - 1) / g.sw + 1);
  const int64_t ow1 = std::clamp(g.w - joff <= 0 ? int64_t{0} : (g.w - joff - 1) / g.sw + 1, ow0, g.ow);
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
// `rows` rows of (oh1 - oh0) * ow elements at cols. On the calling thread:
// where the GEMM that follows is the BLAS's, the BLAS threads it, and an
// OpenMP region per band between its calls leaves both thread pools
// spinning against each other (13x slower at 2 threads on 2 loaded cores);
// where it is generated, the caller splits whole items among the threads.
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

// ---- float32, stride 1: one GEMM per kernel tap on a padded slab, no im2col ----
//
// For stride 1 the column of output (oh, ow) for tap (i, j) and channel c is
// xpad[c, oh + i dh, ow + j dw] (xpad: x with its padding written out). On a
// band of output rows laid out at the padded width Wp (output column
// ow of band row r at r Wp + ow; the columns ow >= OW are not outputs and are
// dropped), tap (i, j)'s column matrix [cg, band Wp] is the slab of xpad's
// rows [oh0, oh0 + band + (kh - 1) dh) itself, read from element
// i dh Wp + j dw with leading dimension = one channel's slab: no 9x larger
// column matrix is written. The taps' GEMMs accumulate into one band buffer:
// tap 0's writes W_0 @ B_0, every later tap's epilogue adds its product to
// it (C = W_t @ B_t + C), so each output element is
// (...((chain_0 + chain_1) + chain_2) ... + chain_{kk-1}), every chain_t one
// fused multiply-add chain over the input channels in order (the generated
// GEMM's numerics). The order depends on nothing but the geometry: not on
// the band, the thread count or whether the call is eager or compiled.
// Work items are (sample, group, band), split among the OpenMP threads; each
// thread fills its own slab and band buffer and runs the GEMMs on itself
// (the generated GEMM does not fork inside a parallel region).

// The generated GEMMs of the tap path: C (m x n, ldc) = A (m x k, lda) B (k x
// n, ldb), plain (accumulate = false) or adding the product to P (m x n,
// leading dimension ldp; P may be C itself: accumulate = true). One
// process-wide cache, as eager_small_gemm's.
struct TapGemmKey {
  int64_t m, n, k, lda, ldb, ldc;
  bool accumulate;
  int64_t ldp;
  auto operator<=>(const TapGemmKey&) const = default;
};

codegen::CpuTarget tap_target() {
  static const codegen::CpuTarget t = codegen::detect_cpu_target();
  return t;
}

codegen::SmallGemmKey tap_key(const TapGemmKey& k) {
  using codegen::EpiLayout;
  using codegen::Instr;
  codegen::SmallGemmKey key = codegen::plain_gemm_key(tap_target(), k.m, k.n, k.k, false, false, k.lda, k.ldb, k.ldc);
  if (!k.accumulate) return key;
  // out0 = product + P (operands: 0 the output, 1 the product, 2 P)
  codegen::ElementwiseProgram& p = key.epilogue;
  p.operand_dtypes.assign(3, DType::float32);
  p.operand_broadcast.assign(3, false);
  p.num_outputs = 1;
  p.strict = true;
  Instr prod, prev, add, st;
  prod.kind = prev.kind = Instr::Kind::load;
  prod.dtype = prev.dtype = add.dtype = DType::float32;
  prod.arg = 1;
  prev.arg = 2;
  add.kind = Instr::Kind::op;
  add.op = OpId::Add;
  add.a = 0;
  add.b = 1;
  st.kind = Instr::Kind::store;
  st.a = 2;
  st.arg = 0;
  p.code = {prod, prev, add, st};
  key.layouts = {EpiLayout::matrix, EpiLayout::product, EpiLayout::matrix};
  key.lds = {k.ldc, 0, k.ldp};
  return key;
}

constexpr size_t kTapGemmCacheMax = 256;
// Input channels per group from which the tap path is taken (a kernel of
// more than one tap; a 1x1 kernel always takes it: one GEMM per band).
constexpr int64_t kTapMinChannels = 16;

// The GEMM for k, generated on first use; null when it has no generated
// form (which depends on k alone, so a geometry always takes the same path).
// The cache keeps the kTapGemmCacheMax most recently used keys (kernel_lru.h):
// an evicted key is generated again on its next use, so the path and the
// bits never depend on the geometries the process ran before. A TapPlan holds
// its kernels while the call runs.
std::shared_ptr<const codegen::SmallGemm> tap_gemm(const TapGemmKey& k) {
  static auto* cache = new codegen::KernelLru<TapGemmKey, codegen::SmallGemm>(kTapGemmCacheMax);  // never destroyed
  return cache->get(k, [&]() -> std::shared_ptr<const codegen::SmallGemm> {
    if (tap_target() < codegen::CpuTarget::avx2) return nullptr;
    const codegen::SmallGemmKey key = tap_key(k);
    if (!codegen::small_gemm_why_not(key).empty()) return nullptr;
    return codegen::generate_small_gemm(key);
  });
}

// Output rows per band of the tap path: n = band Wp of at least 384 columns
// per GEMM (per-call costs amortised), its last column block preferably
// wider than 16 lanes (a one-vector edge tile runs at a fraction of the
// speed of the full 4-vector ones), with the slab and the band buffer kept
// within 1 MiB (L2). Depends on the geometry only.
int64_t tap_band_rows(const Geometry& g, int64_t ocg) {
  const int64_t wp = g.w + 2 * g.pw, halo = (g.kh - 1) * g.dh;
  const int64_t band0 = std::max<int64_t>(1, (384 + wp - 1) / wp);
  int64_t band = band0;
  for (int64_t b = band0; b < band0 + 8; ++b)
    if ((b * wp) % 64 == 0 || (b * wp) % 64 > 16) {
      band = b;
      break;
    }
  while (band > 1 && 4 * (ocg * band * wp + g.cg * (band + halo) * wp) > (int64_t{1} << 20)) --band;
  return std::min(band, g.oh);
}

struct TapPlan {
  int64_t band = 0, wp = 0, halo = 0;
  // [0]: full bands, [1]: the last (shorter) band; per each: plain,
  // accumulate, and (kw > 1) the last tap's per output row: n = OW columns
  // of the band buffer's row plus the product written to y's row
  std::shared_ptr<const codegen::SmallGemm> gemm[2][3];
};

// The tap path's plan for this geometry, or nullopt when it does not apply
// (stride other than 1, a GEMM without generated form).
std::optional<TapPlan> tap_plan(const Geometry& g, int64_t ocg, int64_t l) {
  // few input channels: each tap's GEMM is too short for its pass over the band buffer
  if (g.sh != 1 || g.sw != 1 || (g.cg < kTapMinChannels && g.kh * g.kw > 1)) return std::nullopt;
  TapPlan tp;
  tp.band = tap_band_rows(g, ocg);
  tp.wp = g.w + 2 * g.pw;
  tp.halo = (g.kh - 1) * g.dh;
  const int64_t bands[2] = {tp.band, g.oh - (g.oh - 1) / tp.band * tp.band};
  for (int b = 0; b < 2; ++b) {
    // kw == 1: no dropped columns (OW = Wp), the GEMM writes y in place (ldc = OH OW)
    const int64_t n = bands[b] * tp.wp, ldb = (bands[b] + tp.halo) * tp.wp, ldc = g.kw == 1 ? l : n;
    for (int acc = 0; acc < 2; ++acc) {
      if (acc == 1 && g.kh * g.kw == 1) continue;
      tp.gemm[b][acc] = tap_gemm({ocg, n, g.cg, g.cg, ldb, ldc, acc == 1, ldc});
      if (!tp.gemm[b][acc]) return std::nullopt;
    }
    if (g.kw > 1) {
      tp.gemm[b][2] = tap_gemm({ocg, g.ow, g.cg, g.cg, ldb, l, true, n});
      if (!tp.gemm[b][2]) return std::nullopt;
    }
  }
  return tp;
}

// Rows [oh0, oh0 + rows) of the padded input of one (sample, group): slab
// [cg, rows, wp], zeros outside x. x at xp (float elements, strides in g).
void fill_slab(const float* xp, const Geometry& g, int64_t wp, int64_t ih0, int64_t rows, float* slab) {
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t q = 0; q < rows; ++q) {
      float* dst = slab + (c * rows + q) * wp;
      const int64_t ih = ih0 + q;
      if (ih < 0 || ih >= g.h) {
        std::memset(dst, 0, sizeof(float) * wp);
        continue;
      }
      const float* src = xp + c * g.xc + ih * g.xh;
      std::memset(dst, 0, sizeof(float) * g.pw);
      if (g.xw == 1) {
        std::memcpy(dst + g.pw, src, sizeof(float) * g.w);
      } else {
        for (int64_t z = 0; z < g.w; ++z) dst[g.pw + z] = src[z * g.xw];
      }
      std::memset(dst + g.pw + g.w, 0, sizeof(float) * (wp - g.pw - g.w));
    }
}

void conv_taps(const TapPlan& tp, const Tensor& x, const Tensor& w, const Tensor& y, const Geometry& g, int64_t n,
               int64_t groups, int64_t ocg) {
  const int64_t kk = g.kh * g.kw, k = g.cg, l = g.oh * g.ow, oc = ocg * groups;
  const int64_t nbands = (g.oh + tp.band - 1) / tp.band, items = n * groups * nbands;
  // the weight as [groups, kk, ocg, cg]: tap t's matrix of group gi is row-major ocg x cg
  std::vector<float> wt(static_cast<size_t>(groups * kk * ocg * k));
  const float* wp = static_cast<const float*>(w.data_ptr());
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t o = 0; o < ocg; ++o)
      for (int64_t c = 0; c < k; ++c)
        for (int64_t t = 0; t < kk; ++t)
          wt[static_cast<size_t>(((gi * kk + t) * ocg + o) * k + c)] = wp[((gi * ocg + o) * k + c) * kk + t];
  const float* xp = static_cast<const float*>(x.data_ptr());
  float* yp = static_cast<float*>(y.data_ptr());
  // slack after the slab: the last channel's last row is read up to (kw - 1) dw past its end
  const int64_t slack = (g.kw - 1) * g.dw + 16;
  const double macs = double(items) * double(ocg) * double(tp.band * tp.wp) * double(k * kk);
  for_items(items, macs, [&](int64_t it) {
    static thread_local std::vector<float> slab, cbuf;
    slab.resize(static_cast<size_t>(k * (tp.band + tp.halo) * tp.wp + slack));
    if (g.kw != 1) cbuf.resize(static_cast<size_t>(ocg * tp.band * tp.wp));
    const int64_t s = it / (groups * nbands), gi = it / nbands % groups, b = it % nbands;
    const int64_t oh0 = b * tp.band, rows = std::min(tp.band, g.oh - oh0), last = b == nbands - 1 ? 1 : 0;
    const int64_t srows = rows + tp.halo;
    fill_slab(xp + s * x.strides()[0] + gi * g.cg * g.xc, g, tp.wp, oh0 - g.ph, srows, slab.data());
    std::fill(slab.begin() + k * srows * tp.wp, slab.end(), 0.0f);
    float* ybase = yp + (s * oc + gi * ocg) * l;
    float* c = g.kw == 1 ? ybase + oh0 * g.ow : cbuf.data();
    char* ptrs[3] = {reinterpret_cast<char*>(c), nullptr, reinterpret_cast<char*>(c)};
    for (int64_t t = 0; t < kk; ++t) {
      const int64_t i = t / g.kw, j = t % g.kw;
      const float* a = wt.data() + (gi * kk + t) * ocg * k;
      const float* b0 = slab.data() + i * g.dh * tp.wp + j * g.dw;
      if (t == kk - 1 && g.kw != 1) {
        // the last tap per band row: its product plus the row's first OW
        // columns of the band buffer go to y's row (the other Wp - OW
        // columns are not outputs)
        for (int64_t r = 0; r < rows; ++r) {
          char* rp[3] = {reinterpret_cast<char*>(ybase + (oh0 + r) * g.ow), nullptr,
                         reinterpret_cast<char*>(c + r * tp.wp)};
          tp.gemm[last][2]->run(a, b0 + r * tp.wp, rp);
        }
      } else {
        tp.gemm[last][t == 0 ? 0 : 1]->run(a, b0, ptrs);
      }
    }
  });
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
  std::optional<TapPlan> taps;
  if (dt == DType::float32 && k > 0) taps = tap_plan(g, ocg, l);
  if (taps) {
    conv_taps(*taps, x, w, y, g, n, groups, ocg);
    if (!y.is_same(out)) copy_into(y, out);
    return;
  }
  // K == 0 (no input channels): the GEMM adds nothing, the output is 0.
  if (k == 0) {
    fill(y, 0.0);
    if (!y.is_same(out)) copy_into(y, out);
    return;
  }
  const size_t es = size_of(dt);
  const char* wp = static_cast<const char*>(w.data_ptr());
  char* yp = static_cast<char*>(y.data_ptr());
  if (blas) {
    // per (sample, group, band of output rows): the band's columns, then
    // C[:, band] = W @ columns (ldc = l)
    const int64_t band = std::min(g.oh, band_rows(k, g.ow, es)), nbands = (g.oh + band - 1) / band;
    const int64_t items = n * groups * nbands;
    // float32: the output channels in chunks of mc rows, so that each
    // chunk's GEMM is small enough for a generated one (every output element
    // is still one chain over k)
    const int64_t mc_max = dt == DType::float32
                               ? std::max<int64_t>(1, static_cast<int64_t>(codegen::kSmallGemmMaxMacs /
                                                                           (double(band * g.ow) * double(k))))
                               : ocg;
    const int64_t chunks = (ocg + mc_max - 1) / mc_max, mc = (ocg + chunks - 1) / chunks;
    auto call_for = [&](int64_t m, int64_t nb) {
      return gemm_call(dt == DType::float64, false, false, m, nb, k, k, nb, l);
    };
    const int64_t nb_tail = (g.oh - (nbands - 1) * band) * g.ow, m_tail = ocg - (chunks - 1) * mc;
    // [band full, band last][chunk full, chunk last]
    const GemmCall calls[2][2] = {{call_for(mc, band * g.ow), call_for(m_tail, band * g.ow)},
                                  {call_for(mc, nb_tail), call_for(m_tail, nb_tail)}};
    auto item = [&](int64_t it, void* cols) {
      const int64_t s = it / (groups * nbands), gi = it / nbands % groups, oh0 = it % nbands * band;
      const int64_t oh1 = std::min(g.oh, oh0 + band);
      const int64_t x_off = s * x.strides()[0] + gi * g.cg * x.strides()[1];
      const int64_t w_off = gi * ocg * k, y_off = (s * oc + gi * ocg) * l;
      columns_any(x, x_off, g, k, oh0, oh1, cols);
      for (int64_t ch = 0; ch < chunks; ++ch) {
        const int64_t m0 = ch * mc;
        gemm(calls[oh1 == g.oh][ch == chunks - 1], wp + (w_off + m0 * k) * es, cols,
             yp + (y_off + m0 * l + oh0 * g.ow) * es);
      }
    };
    const bool generated = calls[0][0].small && calls[0][1].small && calls[1][0].small && calls[1][1].small;
    if (generated) {
      // generated GEMMs (float32): items split among the threads, each with
      // its own column buffer; the GEMM runs on the calling thread inside
      // the parallel region, and gives the same bits wherever it runs
      const double macs = double(n * groups) * double(ocg) * double(l) * double(k);
      for_items(items, macs, [&](int64_t it) {
        static thread_local std::vector<float> cols;
        cols.resize(static_cast<size_t>(k * band * g.ow));
        item(it, cols.data());
      });
    } else {
      // the BLAS threads each call itself
      Tensor cols = Tensor::empty({k, band * g.ow}, dt);
      for (int64_t it = 0; it < items; ++it) item(it, cols.data_ptr());
    }
  } else {
    Tensor cols = Tensor::empty({k, l}, dt);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t gi = 0; gi < groups; ++gi) {
        const int64_t x_off = s * x.strides()[0] + gi * g.cg * x.strides()[1];
        const int64_t w_off = gi * ocg * k, y_off = (s * oc + gi * ocg) * l;
        columns_any(x, x_off, g, k, 0, g.oh, cols.data_ptr());
        const Tensor wv(w.buffer(), dt, {ocg, k}, {k, 1}, w.offset() + w_off);
        const Tensor yv(y.buffer(), dt, {ocg, l}, {l, 1}, y.offset() + y_off);
        matmul(wv, cols, yv);
      }
  }
  if (!y.is_same(out)) copy_into(y, out);
}

}  // namespace kiln::cpu
