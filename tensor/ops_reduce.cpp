// kiln: the Reduce category (sum, mean, prod, max, min, argmax, argmin, var,
// std, logsumexp, any, all): shape rule, eager call into the CPU engine
// (backends/cpu/reduce_kernels.cpp) and the public functions of ops.h.
#include <string>

#include "kernel_registry.h"
#include "op_table.h"
#include "ops.h"

namespace kiln {
namespace detail {
namespace {

struct ReduceGeom {
  std::vector<bool> reduced;  // per input axis
  Shape shape;                // result extents
  DType dtype;
};

bool needs_nonempty(OpId op) {
  return op == OpId::Max || op == OpId::Min || op == OpId::ArgMax || op == OpId::ArgMin;
}

// attrs.ints = axes (empty = all), attrs.flag = keepdim. Axes out of range or
// named twice are IndexErrors; argmax/argmin take at most one axis.
ReduceGeom reduce_geometry(OpId op, DType in_dtype, const Shape& shape, const Attrs& a) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if ((op == OpId::ArgMax || op == OpId::ArgMin) && a.ints.size() > 1)
    throw ValueError(op_prefix(op) + "expected at most one axis, got " + shape_str(a.ints));
  ReduceGeom g;
  g.dtype = result_dtype(op, std::span<const DType>(&in_dtype, 1), a);
  g.reduced.assign(static_cast<size_t>(nd), a.ints.empty());
  for (int64_t ax : a.ints) {
    const int64_t k = normalize_axis(ax, nd, op_name(op));
    if (g.reduced[k])
      throw IndexError(op_prefix(op) + "axis " + std::to_string(ax) + " is named more than once in axes " +
                       shape_str(a.ints) + " for shape " + shape_str(shape));
    g.reduced[k] = true;
  }
  int64_t count = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (g.reduced[d]) {
      count *= shape[d];
      if (a.flag) g.shape.push_back(1);
    } else {
      g.shape.push_back(shape[d]);
    }
  }
  // numpy: no identity, so reducing an empty extent into a non-empty result
  // is an error (an empty result has nothing to reduce).
  if (count == 0 && needs_nonempty(op) && checked_numel(g.shape, op_name(op)) > 0)
    throw ValueError(op_prefix(op) + "cannot reduce an empty extent (shape " + shape_str(shape) + ", axes " +
                     (a.ints.empty() ? std::string("all") : shape_str(a.ints)) + "): " + std::string(op_name(op)) +
                     " has no identity");
  return g;
}

}  // namespace

TensorLayout infer_reduce(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  ReduceGeom g = reduce_geometry(op, in[0].dtype, in[0].shape, attrs);
  return TensorLayout(g.dtype, std::move(g.shape), in[0].device);
}

Tensor eager_reduce(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  check_same_device(op, in);
  const Tensor& x = in[0];
  x.realize();
  ReduceGeom g = reduce_geometry(op, x.dtype(), x.shape(), attrs);
  Tensor out = detail::output_tensor(g.shape, g.dtype, x.device());
  run_kernel(op, x.dtype(), in, out, attrs);
  return out;
}

}  // namespace detail

namespace {
Tensor reduce_call(OpId op, const Tensor& x, const Axes& axes, bool keepdim, double scalar = 0.0) {
  Attrs a;
  a.ints = axes;
  a.flag = keepdim;
  a.scalar = scalar;
  return apply(op, x, a);
}
}  // namespace

Tensor sum(const Tensor& x, const Axes& axes, bool keepdim) { return reduce_call(OpId::Sum, x, axes, keepdim); }
Tensor mean(const Tensor& x, const Axes& axes, bool keepdim) { return reduce_call(OpId::Mean, x, axes, keepdim); }
Tensor prod(const Tensor& x, const Axes& axes, bool keepdim) { return reduce_call(OpId::Prod, x, axes, keepdim); }
Tensor max(const Tensor& x, const Axes& axes, bool keepdim) { return reduce_call(OpId::Max, x, axes, keepdim); }
Tensor min(const Tensor& x, const Axes& axes, bool keepdim) { return reduce_call(OpId::Min, x, axes, keepdim); }
Tensor argmax(const Tensor& x, std::optional<int64_t> axis, bool keepdim) {
  return reduce_call(OpId::ArgMax, x, axis ? Axes{*axis} : Axes{}, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> axis, bool keepdim) {
  return reduce_call(OpId::ArgMin, x, axis ? Axes{*axis} : Axes{}, keepdim);
}
Tensor var(const Tensor& x, const Axes& axes, double correction, bool keepdim) {
  return reduce_call(OpId::Var, x, axes, keepdim, correction);
}
Tensor std(const Tensor& x, const Axes& axes, double correction, bool keepdim) {
  return reduce_call(OpId::Std, x, axes, keepdim, correction);
}
Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdim) {
  return reduce_call(OpId::LogSumExp, x, axes, keepdim);
}
Tensor any(const Tensor& x, const Axes& axes, bool keepdim) { return reduce_call(OpId::Any, x, axes, keepdim); }
Tensor all(const Tensor& x, const Axes& axes, bool keepdim) { return reduce_call(OpId::All, x, axes, keepdim); }

}  // namespace kiln
