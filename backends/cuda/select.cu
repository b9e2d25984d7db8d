// The CUDA kernels of the selection, window and matrix-structure rows:
// topk, searchsorted, max_pool2d, avg_pool2d, tril, triu, diag, nan_to_num
// and cross, with the CPU kernels' semantics (backends/cpu/select_kernels.cpp,
// pool_kernels.cpp). Each thread computes one output element (a line of
// three for cross) through the per-element rules of select_plan.h, which the
// tests also run on the CPU against the CPU kernels; so every result is a
// function of its inputs alone, not of the launch configuration.
//  - topk: one thread per element of each line (x read contiguous as
//    [outer, len, inner]), counting the positions that rank before it and
//    stopping at k: O(len * min(k, rank)) comparisons per element, fine for
//    the lines topk is used on (a long line with a large k is quadratic);
//  - searchsorted: one thread per value, the CPU's bisection;
//  - pools: one thread per output over x's own strides (no copy);
//  - tril/triu, nan_to_num: elementwise over an OffsetCalc; diag: one
//    thread per output element; elements moved as their bits;
//  - cross: one thread per line along the axis, operands converted to the
//    result dtype first (as the CPU kernel does), products rounded.
// TopK and SearchSorted are looked up with their result dtype (int64):
// their kernels check the input's dtype against the CUDA dtypes themselves.
#include <bit>
#include <cstring>

#include "../../tensor/dispatch.h"
#include "device_tensor.h"
#include "dtypes.h"
#include "elementwise.cuh"
#include "launch_plan.h"
#include "select_plan.h"

namespace kiln::cuda {
namespace {

constexpr unsigned kMaxSelectBlocks = 1u << 20;  // grid-stride loops cover the rest
constexpr int kThreads = 256;

template <int B> struct bits_of;
template <> struct bits_of<1> { using type = uint8_t; };
template <> struct bits_of<2> { using type = uint16_t; };
template <> struct bits_of<4> { using type = uint32_t; };
template <> struct bits_of<8> { using type = uint64_t; };

/// Calls f(tag) with tag::type the unsigned integer of `bytes` bytes.
template <class F> void visit_bits(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(type_tag<uint8_t>{});
    case 2: return f(type_tag<uint16_t>{});
    case 4: return f(type_tag<uint32_t>{});
    default: return f(type_tag<uint64_t>{});
  }
}

unsigned grid_of(int64_t n) { return std::min(grid_for(n, kThreads), kMaxSelectBlocks); }

#define KILN_GRID_STRIDE(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

[[noreturn]] void no_dtype(OpId op, DType d) {
  throw DTypeError(detail::op_prefix(op) + "no CUDA kernel for dtype " + std::string(name(d)));
}

// ---- topk -------------------------------------------------------------------------------
/// x contiguous as [outer, len, inner] (g); out contiguous [outer, k, inner].
template <class S, bool Largest>
__global__ void topk_kernel(const S* x, int64_t* out, LineGeometry g, int64_t k) {
  const int64_t n = g.lines() * g.len;
  KILN_GRID_STRIDE(t, n) {
    const int64_t line = t / g.len, i = t % g.len, base = g.base(line);
    auto at = [&](int64_t j) { return to_compute(x[base + j * g.inner]); };
    const int64_t slot = topk_slot<Largest>(at, g.len, i, k);
    if (slot < k) out[(line / g.inner) * k * g.inner + slot * g.inner + line % g.inner] = i;
  }
}

void topk(const KernelArgs& a) {
  const Tensor& out = a.out;
  if (out.numel() == 0) return;
  const int dev = out.device().index;
  use_device(dev);
  require_cuda_dtype(a.op, out.device(), a.in[0].dtype());
  const Tensor x = contiguous_as(a.in[0], a.in[0].dtype());
  const int64_t axis = normalize_axis(a.attrs.axis, x.ndim(), "topk"), k = a.attrs.ints[0];
  const LineGeometry g = line_geometry(std::vector<int64_t>(x.shape().begin(), x.shape().end()), axis);
  write_contiguous(out, [&](const Tensor& dst) {
    visit_storage(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* xp = static_cast<const S*>(x.data_ptr());
      int64_t* op = static_cast<int64_t*>(dst.data_ptr());
      const unsigned grid = grid_of(g.lines() * g.len);
      if (a.attrs.flag) topk_kernel<S, true><<<grid, kThreads, 0, stream(dev)>>>(xp, op, g, k);
      else topk_kernel<S, false><<<grid, kThreads, 0, stream(dev)>>>(xp, op, g, k);
    });
  });
  check(cudaGetLastError(), dev, "topk kernel launch");
}

// ---- searchsorted -----------------------------------------------------------------------
/// seq contiguous [rows, n] (rows 1 when 1-d), values and out contiguous
/// [nv]; value t searches row t / m (batched) or row 0.
template <class S>
__global__ void searchsorted_kernel(const S* seq, const S* values, int64_t* out, int64_t nv, int64_t n, int64_t m,
                                    bool batched, bool right) {
  KILN_GRID_STRIDE(t, nv) {
    const S* row = seq + (batched ? (t / m) * n : 0);
    auto at = [&](int64_t j) { return to_compute(row[j]); };
    out[t] = sorted_position(at, n, to_compute(values[t]), right);
  }
}

void searchsorted(const KernelArgs& a) {
  const Tensor& out = a.out;
  const int64_t nv = out.numel();
  if (nv == 0) return;
  const int dev = out.device().index;
  use_device(dev);
  require_cuda_dtype(a.op, out.device(), a.in[0].dtype());
  const Tensor seq = contiguous_as(a.in[0], a.in[0].dtype());
  const Tensor values = contiguous_as(a.in[1], a.in[0].dtype());
  const bool batched = seq.ndim() > 1;
  const int64_t n = seq.shape().back(), m = batched ? values.shape().back() : 1;
  write_contiguous(out, [&](const Tensor& dst) {
    visit_storage(seq.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      searchsorted_kernel<S><<<grid_of(nv), kThreads, 0, stream(dev)>>>(
          static_cast<const S*>(seq.data_ptr()), static_cast<const S*>(values.data_ptr()),
          static_cast<int64_t*>(dst.data_ptr()), nv, n, m, batched, a.attrs.flag);
    });
  });
  check(cudaGetLastError(), dev, "searchsorted kernel launch");
}

// ---- pools ------------------------------------------------------------------------------
PoolGeometry pool_geometry(const Tensor& out, const Tensor& x, const std::vector<int64_t>& p, bool dilated) {
  PoolGeometry g;
  g.n = x.shape()[0];
  g.c = x.shape()[1];
  g.h = x.shape()[2];
  g.w = x.shape()[3];
  g.oh = out.shape()[2];
  g.ow = out.shape()[3];
  g.kh = p[0], g.kw = p[1], g.sh = p[2], g.sw = p[3], g.ph = p[4], g.pw = p[5];
  g.dh = dilated ? p[6] : 1;
  g.dw = dilated ? p[7] : 1;
  for (int d = 0; d < 4; ++d) {
    g.xs[d] = x.strides()[size_t(d)];
    g.os[d] = out.strides()[size_t(d)];
  }
  return g;
}

template <class S> __global__ void max_pool_kernel(const S* x, S* out, PoolGeometry g) {
  KILN_GRID_STRIDE(t, g.numel()) {
    int64_t oy, ox, xp, oat, best = 0;
    g.locate(t, oy, ox, xp, oat);
    const S* plane = x + xp;
    auto load = [&](int64_t off) { return to_compute(plane[off]); };
    out[oat] = max_pool_window(g, oy, ox, load, best) ? plane[best]
                                                      : to_storage<S>(pool_lowest<compute_t<S>>::get());
  }
}

template <class S> __global__ void avg_pool_kernel(const S* x, S* out, PoolGeometry g, bool count_include_pad) {
  KILN_GRID_STRIDE(t, g.numel()) {
    int64_t oy, ox, xp, oat;
    g.locate(t, oy, ox, xp, oat);
    const S* plane = x + xp;
    auto load = [&](int64_t off) { return double(to_compute(plane[off])); };
    // double -> compute type -> storage: the CPU's convert<T>(double) (via float for 16-bit floats)
    out[oat] = to_storage<S>(compute_t<S>(avg_pool_window(g, oy, ox, count_include_pad, load)));
  }
}

void pool(const KernelArgs& a) {
  const Tensor& out = a.out;
  if (out.numel() == 0) return;
  const int dev = out.device().index;
  use_device(dev);
  const Tensor& x = a.in[0];
  const bool max = a.op == OpId::MaxPool2d;
  const PoolGeometry g = pool_geometry(out, x, a.attrs.ints, max);
  const unsigned grid = grid_of(g.numel());
  visit_storage(x.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* xp = static_cast<const S*>(x.data_ptr());
    S* op = static_cast<S*>(out.data_ptr());
    if (max) {
      max_pool_kernel<S><<<grid, kThreads, 0, stream(dev)>>>(xp, op, g);
    } else if constexpr (is_fp_storage<S>()) {
      avg_pool_kernel<S><<<grid, kThreads, 0, stream(dev)>>>(xp, op, g, a.attrs.flag);
    } else {
      no_dtype(a.op, x.dtype());  // the front end takes float dtypes only
    }
  });
  check(cudaGetLastError(), dev, "pool kernel launch");
}

// ---- tril / triu ------------------------------------------------------------------------
/// Operand offsets: 0 out, 1 x; element t's (row, column) from t itself.
template <class W>
__global__ void triangle_kernel(OffsetCalc<2, int64_t> oc, W* out, const W* x, int64_t n, int64_t rows,
                                int64_t cols, int64_t k, bool lower) {
  KILN_GRID_STRIDE(t, n) {
    int64_t off[2];
    oc.get(t, off);
    const int64_t c = t % cols, r = (t / cols) % rows;
    out[off[0]] = triangle_keeps(r, c, k, lower) ? x[off[1]] : W(0);
  }
}

/// The OffsetCalc of out and x (same shape) over out's shape.
OffsetCalc<2, int64_t> pair_calc(const Tensor& out, const Tensor& x, OpId op) {
  std::vector<int64_t> shape(out.shape().begin(), out.shape().end());
  std::vector<std::vector<int64_t>> st = {std::vector<int64_t>(out.strides().begin(), out.strides().end()),
                                          std::vector<int64_t>(x.strides().begin(), x.strides().end())};
  OffsetCalc<2, int64_t> oc;
  if (!make_offset_calc(coalesce(shape, st), oc))
    throw ShapeError(detail::op_prefix(op) + "more than 12 non-mergeable dimensions on CUDA");
  return oc;
}

void triangle(const KernelArgs& a) {
  const Tensor& out = a.out;
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  use_device(dev);
  const Tensor& x = a.in[0];
  const OffsetCalc<2, int64_t> oc = pair_calc(out, x, a.op);
  const int64_t rows = x.shape()[size_t(x.ndim() - 2)], cols = x.shape()[size_t(x.ndim() - 1)];
  visit_bits(x.itemsize(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    triangle_kernel<W><<<grid_of(n), kThreads, 0, stream(dev)>>>(oc, static_cast<W*>(out.data_ptr()),
                                                                 static_cast<const W*>(x.data_ptr()), n, rows, cols,
                                                                 a.attrs.axis, a.op == OpId::Tril);
  });
  check(cudaGetLastError(), dev, "tril/triu kernel launch");
}

// ---- diag -------------------------------------------------------------------------------
/// 1-d x [len] -> out [n2, n2]: zero but diagonal k (origin r0, c0).
template <class W>
__global__ void diag_place_kernel(W* out, const W* x, int64_t n2, int64_t os0, int64_t os1, int64_t xs, int64_t k,
                                  int64_t r0) {
  KILN_GRID_STRIDE(t, n2 * n2) {
    const int64_t r = t / n2, c = t % n2;
    out[r * os0 + c * os1] = c - r == k ? x[(r - r0) * xs] : W(0);
  }
}
/// 2-d x -> out [len]: out[i] = x[r0 + i, c0 + i].
template <class W>
__global__ void diag_read_kernel(W* out, const W* x, int64_t len, int64_t os, int64_t xs0, int64_t xs1, int64_t r0,
                                 int64_t c0) {
  KILN_GRID_STRIDE(i, len) { out[i * os] = x[(r0 + i) * xs0 + (c0 + i) * xs1]; }
}

void diag(const KernelArgs& a) {
  const Tensor& out = a.out;
  if (out.numel() == 0) return;
  const int dev = out.device().index;
  use_device(dev);
  const Tensor& x = a.in[0];
  const int64_t k = a.attrs.axis;
  int64_t r0, c0;
  diag_origin(k, r0, c0);
  visit_bits(x.itemsize(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    W* op = static_cast<W*>(out.data_ptr());
    const W* xp = static_cast<const W*>(x.data_ptr());
    if (x.ndim() == 1) {
      const int64_t n2 = out.shape()[0];
      diag_place_kernel<W><<<grid_of(n2 * n2), kThreads, 0, stream(dev)>>>(op, xp, n2, out.strides()[0],
                                                                           out.strides()[1], x.strides()[0], k, r0);
    } else {
      const int64_t len = out.shape()[0];
      diag_read_kernel<W><<<grid_of(len), kThreads, 0, stream(dev)>>>(op, xp, len, out.strides()[0], x.strides()[0],
                                                                      x.strides()[1], r0, c0);
    }
  });
  check(cudaGetLastError(), dev, "diag kernel launch");
}

// ---- nan_to_num -------------------------------------------------------------------------
template <class S>
__global__ void nan_to_num_kernel(OffsetCalc<2, int64_t> oc, S* out, const S* x, int64_t n, S rn, S rp, S rm) {
  KILN_GRID_STRIDE(t, n) {
    int64_t off[2];
    oc.get(t, off);
    const S v = x[off[1]];
    out[off[0]] = nan_to_num_of(v, to_compute(v), rn, rp, rm);
  }
}

/// The storage bits of double `v` converted as the CPU converts it
/// (detail::convert<T>, through float for the 16-bit floats).
template <class S> S host_converted(DType d, double v) {
  S r{};
  detail::visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (sizeof(T) == sizeof(S)) {
      const T c = detail::convert<T>(v);
      std::memcpy(static_cast<void*>(&r), &c, sizeof(S));
    }
  });
  return r;
}

void nan_to_num(const KernelArgs& a) {
  const Tensor& out = a.out;
  const int64_t n = out.numel();
  if (n == 0) return;
  const Tensor& x = a.in[0];
  if (!is_floating(x.dtype())) {  // a copy (the Cast row's kernel)
    detail::copy_into(x, out);
    return;
  }
  const int dev = out.device().index;
  use_device(dev);
  const OffsetCalc<2, int64_t> oc = pair_calc(out, x, a.op);
  const double nan = a.attrs.scalar, posinf = std::bit_cast<double>(a.attrs.ints[0]),
               neginf = std::bit_cast<double>(a.attrs.ints[1]);
  visit_storage(x.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    if constexpr (is_fp_storage<S>()) {
      const DType d = x.dtype();
      nan_to_num_kernel<S><<<grid_of(n), kThreads, 0, stream(dev)>>>(
          oc, static_cast<S*>(out.data_ptr()), static_cast<const S*>(x.data_ptr()), n, host_converted<S>(d, nan),
          host_converted<S>(d, posinf), host_converted<S>(d, neginf));
    }
  });
  check(cudaGetLastError(), dev, "nan_to_num kernel launch");
}

// ---- cross ------------------------------------------------------------------------------
/// Operand offsets: 0 out, 1 a, 2 b of element 0 of each line along the
/// axis; st[k] is operand k's stride along it.
template <class S>
__global__ void cross_kernel(OffsetCalc<3, int64_t> oc, S* out, const S* a, const S* b, int64_t lines, int64_t so,
                             int64_t sa, int64_t sb) {
  using C = compute_t<S>;
  KILN_GRID_STRIDE(t, lines) {
    int64_t off[3];
    oc.get(t, off);
    const S* pa = a + off[1];
    const S* pb = b + off[2];
    const C a0 = to_compute(pa[0]), a1 = to_compute(pa[sa]), a2 = to_compute(pa[2 * sa]);
    const C b0 = to_compute(pb[0]), b1 = to_compute(pb[sb]), b2 = to_compute(pb[2 * sb]);
    S* po = out + off[0];
    po[0] = to_storage<S>(cross_term(a1, b2, a2, b1));
    po[so] = to_storage<S>(cross_term(a2, b0, a0, b2));
    po[2 * so] = to_storage<S>(cross_term(a0, b1, a1, b0));
  }
}

void cross(const KernelArgs& k) {
  const Tensor& out = k.out;
  if (out.numel() == 0) return;
  const int dev = out.device().index;
  use_device(dev);
  const DType d = out.dtype();
  // Converted to the result dtype first, as the CPU kernel does (then broadcast by strides).
  const Tensor a = k.in[0].dtype() == d ? k.in[0] : contiguous_as(k.in[0], d);
  const Tensor b = k.in[1].dtype() == d ? k.in[1] : contiguous_as(k.in[1], d);
  const int64_t axis = normalize_axis(k.attrs.axis, out.ndim(), "cross");
  std::vector<int64_t> shape(out.shape().begin(), out.shape().end());
  std::vector<std::vector<int64_t>> st = {broadcast_strides(out, out.shape()), broadcast_strides(a, out.shape()),
                                          broadcast_strides(b, out.shape())};
  const int64_t so = st[0][size_t(axis)], sa = st[1][size_t(axis)], sb = st[2][size_t(axis)];
  shape[size_t(axis)] = 1;  // one thread per line along the axis
  int64_t lines = 1;
  for (int64_t e : shape) lines *= e;
  OffsetCalc<3, int64_t> oc;
  if (!make_offset_calc(coalesce(shape, st), oc))
    throw ShapeError("cross: more than 12 non-mergeable dimensions on CUDA");
  visit_storage(d, [&](auto tag) {
    using S = typename decltype(tag)::type;
    cross_kernel<S><<<grid_of(lines), kThreads, 0, stream(dev)>>>(oc, static_cast<S*>(out.data_ptr()),
                                                                   static_cast<const S*>(a.data_ptr()),
                                                                   static_cast<const S*>(b.data_ptr()), lines, so, sa,
                                                                   sb);
  });
  check(cudaGetLastError(), dev, "cross kernel launch");
}

#undef KILN_GRID_STRIDE

// Registered for every CUDA dtype (the CPU rows take every dtype; avg_pool2d's
// front end takes floats only). TopK and SearchSorted are looked up with
// int64 (their result) and check the input's dtype in the kernel.
[[maybe_unused]] const bool registered = [] {
  detail::register_kernel(OpId::TopK, DeviceType::cuda, topk, kCudaDTypeMask);
  detail::register_kernel(OpId::SearchSorted, DeviceType::cuda, searchsorted, kCudaDTypeMask);
  detail::register_kernel(OpId::MaxPool2d, DeviceType::cuda, pool, kCudaDTypeMask);
  detail::register_kernel(OpId::AvgPool2d, DeviceType::cuda, pool, kCudaDTypeMask);
  detail::register_kernel(OpId::Tril, DeviceType::cuda, triangle, kCudaDTypeMask);
  detail::register_kernel(OpId::Triu, DeviceType::cuda, triangle, kCudaDTypeMask);
  detail::register_kernel(OpId::Diag, DeviceType::cuda, diag, kCudaDTypeMask);
  detail::register_kernel(OpId::NanToNum, DeviceType::cuda, nan_to_num, kCudaDTypeMask);
  detail::register_kernel(OpId::Cross, DeviceType::cuda, cross, kCudaDTypeMask);
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
