// The CUDA kernels along one axis: cumsum/cumprod (the Scan rows; sort and
// argsort have none yet) and softmax/log_softmax/layer_norm/rms_norm (the
// RowNorm rows). Operands are read contiguous (a copy when needed) as
// [outer, len, inner] lines (launch_plan.h).
//  - Scans: one thread per line, sequential along it with the CPU's
//    accumulator (float32 for float32 and the 16-bit floats, double for
//    float64, wrapping uint64 for integers/bool into int64): the CPU's own
//    order, so the results are the CPU's.
//  - Rows: one block per line (a power of two of threads from the length,
//    long lines loop); statistics in double whatever the dtype, combined by
//    block_combine's fixed tree; each result rounded once to the dtype.
#include "block_reduce.cuh"
#include "device_tensor.h"
#include "dtypes.h"
#include "elementwise.cuh"
#include "launch_plan.h"

namespace kiln::cuda {
namespace {

// ---- scans ------------------------------------------------------------------------------
template <class S> using scan_acc = std::conditional_t<is_fp_storage<S>(), compute_t<S>, uint64_t>;
template <class S> using scan_out = std::conditional_t<is_fp_storage<S>(), S, int64_t>;

template <class S, bool kProd>
__global__ void scan_kernel(const S* x, scan_out<S>* out, LineGeometry g) {
  using Acc = scan_acc<S>;
  using Out = scan_out<S>;
  const int64_t lines = g.lines();
  for (int64_t l = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; l < lines; l += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = g.base(l);
    Acc a = kProd ? Acc(1) : Acc(0);
    for (int64_t j = 0; j < g.len; ++j) {
      const int64_t at = base + j * g.inner;
      Acc v;
      if constexpr (hd::same<Acc, uint64_t>::value) v = uint64_t(int64_t(to_compute(x[at])));
      else v = to_compute(x[at]);
      a = kProd ? a * v : a + v;
      if constexpr (hd::same<Acc, uint64_t>::value) out[at] = int64_t(a);
      else out[at] = to_storage<Out>(a);
    }
  }
}

void scan(const KernelArgs& k) {
  const Tensor& out = k.out;
  if (out.numel() == 0) return;
  const Tensor& x0 = k.in[0];
  const int dev = out.device().index;
  use_device(dev);
  const int64_t axis = x0.ndim() == 0 ? 0 : normalize_axis(k.attrs.axis, x0.ndim(), op_name(k.op));
  const Tensor x = contiguous_as(x0, x0.dtype());
  const LineGeometry g = line_geometry(std::vector<int64_t>(x.shape().begin(), x.shape().end()), axis);
  write_contiguous(out, [&](const Tensor& dst) {
    visit_storage(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      using Out = scan_out<S>;
      const S* xp = static_cast<const S*>(x.data_ptr());
      Out* op = static_cast<Out*>(dst.data_ptr());
      const unsigned grid = grid_for(g.lines(), 128);
      if (k.op == OpId::CumProd) scan_kernel<S, true><<<grid, 128, 0, stream(dev)>>>(xp, op, g);
      else scan_kernel<S, false><<<grid, 128, 0, stream(dev)>>>(xp, op, g);
    });
  });
  check(cudaGetLastError(), dev, "scan kernel launch");
}

// ---- rows -------------------------------------------------------------------------------
__device__ __forceinline__ double max_nan(double a, double b) { return (b > a || b != b) ? b : a; }

enum class RowOp { softmax, log_softmax, layer_norm, rms_norm };

/// One block per line; w and b (layer_norm/rms_norm, may be null) are
/// contiguous [len] of S.
template <class S, RowOp kOp>
__global__ void row_kernel(const S* x, S* out, const S* w, const S* b, LineGeometry g, double eps) {
  double* smem = shared_as<double>();
  const int64_t lines = g.lines();
  for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    const int64_t base = g.base(l);
    auto at = [&](int64_t j) { return base + j * g.inner; };
    auto xv = [&](int64_t j) { return double(to_compute(x[at(j)])); };
    if constexpr (kOp == RowOp::softmax || kOp == RowOp::log_softmax) {
      double m = -INFINITY;
      for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) m = max_nan(m, xv(j));
      m = block_combine(m, smem, [](double a, double c) { return max_nan(a, c); });
      double s = 0;
      for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) s += exp(xv(j) - m);
      s = block_combine(s, smem, [](double a, double c) { return a + c; });
      const double ls = log(s);
      for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) {
        const double r = kOp == RowOp::softmax ? exp(xv(j) - m) / s : (xv(j) - m) - ls;
        out[at(j)] = to_storage<S>(compute_t<S>(r));
      }
    } else {
      const double n = double(g.len);
      double mean = 0;
      if constexpr (kOp == RowOp::layer_norm) {
        double s = 0;
        for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) s += xv(j);
        mean = block_combine(s, smem, [](double a, double c) { return a + c; }) / n;
      }
      double q = 0;  // sum of squared deviations (layer_norm) or of squares (rms_norm)
      for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) {
        const double d = xv(j) - mean;
        q += d * d;
      }
      const double rstd = 1.0 / sqrt(block_combine(q, smem, [](double a, double c) { return a + c; }) / n + eps);
      for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) {
        double r = (xv(j) - mean) * rstd;
        if (w) r *= double(to_compute(w[j]));
        if (b) r += double(to_compute(b[j]));
        out[at(j)] = to_storage<S>(compute_t<S>(r));
      }
    }
  }
}

template <class S, RowOp kOp>
void launch_rows(const Tensor& x, const Tensor& dst, const Tensor* w, const Tensor* b, const LineGeometry& g,
                 double eps, int dev) {
  const int t = row_threads(g.len);
  row_kernel<S, kOp><<<grid_for(g.lines(), 1), t, size_t(t) * sizeof(double), stream(dev)>>>(
      static_cast<const S*>(x.data_ptr()), static_cast<S*>(dst.data_ptr()),
      w ? static_cast<const S*>(w->data_ptr()) : nullptr, b ? static_cast<const S*>(b->data_ptr()) : nullptr, g, eps);
}

void rownorm(const KernelArgs& k) {
  const Tensor& out = k.out;
  if (out.numel() == 0) return;
  const int dev = out.device().index;
  use_device(dev);
  const DType d = out.dtype();
  const Tensor x = contiguous_as(k.in[0], d);
  const bool norm = k.op == OpId::LayerNorm || k.op == OpId::RmsNorm;
  const int64_t axis = norm ? x.ndim() - 1 : normalize_axis(k.attrs.axis, x.ndim(), op_name(k.op));
  const LineGeometry g = line_geometry(std::vector<int64_t>(x.shape().begin(), x.shape().end()), axis);
  // weight and bias (any dtype, [len]) as contiguous tensors of out's dtype.
  Tensor w, b;
  if (norm) {
    size_t next = 1;
    if (k.attrs.ints.size() >= 1 && k.attrs.ints[0]) w = contiguous_as(k.in[next++], d);
    if (k.attrs.ints.size() >= 2 && k.attrs.ints[1]) b = contiguous_as(k.in[next++], d);
  }
  const Tensor* wp = w.defined() ? &w : nullptr;
  const Tensor* bp = b.defined() ? &b : nullptr;
  write_contiguous(out, [&](const Tensor& dst) {
    visit_storage(d, [&](auto tag) {
      using S = typename decltype(tag)::type;
      if constexpr (is_fp_storage<S>()) {
        switch (k.op) {
          case OpId::Softmax: return launch_rows<S, RowOp::softmax>(x, dst, wp, bp, g, 0, dev);
          case OpId::LogSoftmax: return launch_rows<S, RowOp::log_softmax>(x, dst, wp, bp, g, 0, dev);
          case OpId::LayerNorm: return launch_rows<S, RowOp::layer_norm>(x, dst, wp, bp, g, k.attrs.scalar, dev);
          default: return launch_rows<S, RowOp::rms_norm>(x, dst, wp, bp, g, k.attrs.scalar, dev);
        }
      } else {
        throw DTypeError(detail::op_prefix(k.op) + "no CUDA kernel for dtype " + std::string(name(d)));
      }
    });
  });
  check(cudaGetLastError(), dev, "row kernel launch");
}

[[maybe_unused]] const bool registered = [] {
  const DTypeMask floats = dtype_bit(DType::float16) | dtype_bit(DType::bfloat16) | dtype_bit(DType::float32) |
                           dtype_bit(DType::float64);
  detail::register_kernel(OpId::CumSum, DeviceType::cuda, scan, kCudaDTypeMask);
  detail::register_kernel(OpId::CumProd, DeviceType::cuda, scan, kCudaDTypeMask);
  for (OpId op : {OpId::Softmax, OpId::LogSoftmax, OpId::LayerNorm, OpId::RmsNorm})
    detail::register_kernel(op, DeviceType::cuda, rownorm, floats);
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
