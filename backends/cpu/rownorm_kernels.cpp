// kiln (internal): softmax, log_softmax, layer_norm and rms_norm, one line
// at a time: a line is copied into a per-thread buffer in the compute type
// (float for float32/16-bit floats, double for float64), its statistics are
// accumulated in double, and the result is written back. Each line is
// computed whole by one thread, so results do not depend on the thread count.
// float32 rows along the last axis (views made contiguous) run the generated
// row kernels instead (jit/row_kernels.h), the very code compiled plans run,
// so eager and compiled results are bitwise equal.
#include "rownorm_kernels.h"

#include <cmath>
#include <limits>
#include <vector>

#include "accumulate.h"
#include "jit/row_kernels.h"
#include "parallel_ranges.h"

namespace kiln::cpu {
namespace {

// Runs the cached generated kernel when it applies (float32 x, weight and
// bias, the last axis: the rule the compiled plan follows, so a view is made
// contiguous rather than sent down the scalar path); returns false otherwise.
bool run_generated(codegen::RowOp op, const Tensor& x_in, int64_t axis, const Tensor& weight, const Tensor& bias,
                   double eps, const Tensor& out) {
  if (x_in.dtype() != DType::float32 || axis != x_in.ndim() - 1 || !out.is_contiguous()) return false;
  for (const Tensor* p : {&weight, &bias})
    if (p->defined() && p->dtype() != DType::float32) return false;
  const codegen::RowKernel* k = codegen::cached_row_kernel(op, weight.defined(), bias.defined(), DType::float32);
  if (!k) return false;
  const Tensor x = x_in.contiguous();
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();  // one row: a copy is cheap
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  codegen::RowArgs a;
  a.n = x.shape().back();
  a.rows = a.n == 0 ? 0 : x.numel() / a.n;
  a.x = x.data<float>();
  a.y = out.data<float>();
  a.weight = w.defined() ? w.data<float>() : nullptr;
  a.bias = b.defined() ? b.data<float>() : nullptr;
  a.eps = static_cast<float>(eps);
  k->run(a);
  return true;
}

// Calls f(buf, out, out_step, n) for every line of x along axis, buf holding
// the line converted to C.
template <class T, class C, class F>
void for_each_row(const Tensor& x, int64_t axis, const Tensor& out, F f) {
  for_each_line<2>(x.shape(), axis, {&out, &x}, [&](const auto& p, const auto& st, int64_t n) {
    thread_local std::vector<C> buf;
    buf.resize(static_cast<size_t>(n));
    const char* s = p[1];
    for (int64_t i = 0; i < n; ++i, s += st[1]) buf[i] = detail::convert<C>(*reinterpret_cast<const T*>(s));
    f(buf.data(), reinterpret_cast<T*>(p[0]), st[0] / static_cast<int64_t>(sizeof(T)), n);
  });
}

}  // namespace

void softmax(const Tensor& x, int64_t axis, bool log, const Tensor& out) {
  if (run_generated(log ? codegen::RowOp::log_softmax : codegen::RowOp::softmax, x, axis, Tensor(), Tensor(), 0.0, out))
    return;
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloat<T>) {
      using C = float_acc_t<T>;
      for_each_row<T, C>(x, axis, out, [log](C* b, T* o, int64_t os, int64_t n) {
        C m = -std::numeric_limits<C>::infinity();
        for (int64_t i = 0; i < n; ++i) m = (b[i] > m || is_nan(b[i])) ? b[i] : m;
        // x - m: -inf - -inf and inf - inf are NaN, so such lines become NaN.
        double s = 0.0;
        if (log) {
          for (int64_t i = 0; i < n; ++i) s += std::exp(b[i] -= m);
          const C ls = static_cast<C>(std::log(s));
          for (int64_t i = 0; i < n; ++i) o[i * os] = detail::convert<T>(b[i] - ls);
        } else {
          for (int64_t i = 0; i < n; ++i) s += (b[i] = std::exp(b[i] - m));
          for (int64_t i = 0; i < n; ++i) o[i * os] = detail::convert<T>(static_cast<C>(b[i] / s));
        }
      });
    } else {
      throw Error("softmax: internal error: non-floating input reached the kernel");
    }
  });
}

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, bool rms, const Tensor& out) {
  if (run_generated(rms ? codegen::RowOp::rms_norm : codegen::RowOp::layer_norm, x, x.ndim() - 1, weight, bias, eps,
                    out))
    return;
  const std::vector<double> w = weight.defined() ? weight.to_vector<double>() : std::vector<double>();
  const std::vector<double> b = bias.defined() ? bias.to_vector<double>() : std::vector<double>();
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloat<T>) {
      using C = float_acc_t<T>;
      for_each_row<T, C>(x, x.ndim() - 1, out, [&](C* v, T* o, int64_t os, int64_t n) {
        double mean = 0.0, sq = 0.0;
        if (!rms) {
          for (int64_t i = 0; i < n; ++i) mean += v[i];
          mean /= static_cast<double>(n);
        }
        for (int64_t i = 0; i < n; ++i) sq += (v[i] - mean) * (v[i] - mean);
        const double r = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
        for (int64_t i = 0; i < n; ++i) {
          double y = (v[i] - mean) * r;
          if (!w.empty()) y *= w[i];
          if (!b.empty()) y += b[i];
          o[i * os] = detail::convert<T>(y);
        }
      });
    } else {
      throw Error("layer_norm: internal error: non-floating input reached the kernel");
    }
  });
}

}  // namespace kiln::cpu
