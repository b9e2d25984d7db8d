// kiln: the Scan category (cumsum, cumprod, sort, argsort along attrs.axis):
// shape rule, eager call and the public functions.
#include "sorting.h"

#include "kernel_registry.h"
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
  check_same_device(op, in);
  const Tensor& x = in[0];
  x.realize();
  normalize_axis(attrs.axis, x.ndim(), op_name(op));  // IndexError for a bad axis before any allocation
  const DType xd = x.dtype();
  Tensor out = detail::output_tensor(x.shape(), result_dtype(op, std::span<const DType>(&xd, 1), attrs), x.device());
  run_kernel(op, xd, in, out, attrs);
  return out;
}

}  // namespace detail

namespace {
Tensor along(OpId op, const Tensor& x, int64_t axis, bool flag = false) {
  Attrs a;
  a.axis = axis;
  a.flag = flag;
  return apply(op, x, a);
}
}  // namespace

Tensor cumsum(const Tensor& x, int64_t axis) {
  // A 0-d tensor is its own cumulative sum along axis 0 / -1 (numpy's
  // cumsum of a 0-d array, torch.cumsum(t, 0)): through a 1-element axis,
  // so the result dtype and the recorded graph follow the op's rules.
  if (x.ndim() == 0 && (axis == 0 || axis == -1)) return cumsum(x.reshape({1}), 0).reshape({});
  return along(OpId::CumSum, x, axis);
}
Tensor cumprod(const Tensor& x, int64_t axis) {
  if (x.ndim() == 0 && (axis == 0 || axis == -1)) return cumprod(x.reshape({1}), 0).reshape({});  // as cumsum
  return along(OpId::CumProd, x, axis);
}
Tensor sort(const Tensor& x, int64_t axis, bool descending) { return along(OpId::Sort, x, axis, descending); }
Tensor argsort(const Tensor& x, int64_t axis, bool descending) { return along(OpId::ArgSort, x, axis, descending); }

}  // namespace kiln
