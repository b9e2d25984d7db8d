// kiln: the Scan category (cumsum along attrs.axis): shape rule, eager call
// and the public function.
#include "../backends/cpu/reduce_kernels.h"
#include "eager_cpu.h"
#include "op_table.h"
#include "ops.h"

namespace kiln {
namespace detail {

TensorLayout infer_scan(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  const TensorLayout& x = in[0];
  normalize_axis(attrs.axis, x.ndim(), op_name(op));
  return TensorLayout(result_dtype(op, std::span<const DType>(&x.dtype, 1), attrs), x.shape, x.device);
}

Tensor eager_scan(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  require_cpu(op, in);
  const Tensor& x = in[0];
  x.realize();
  const int64_t axis = normalize_axis(attrs.axis, x.ndim(), op_name(op));
  const DType xd = x.dtype();
  Tensor out = detail::output_tensor(x.shape(), result_dtype(op, std::span<const DType>(&xd, 1), attrs));
  cpu::cumsum(x, axis, out);
  return out;
}

}  // namespace detail

Tensor cumsum(const Tensor& x, int64_t axis) {
  Attrs a;
  a.axis = axis;
  return apply(OpId::CumSum, x, a);
}

}  // namespace kiln
