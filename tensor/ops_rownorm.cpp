// kiln: the RowNorm category (softmax, log_softmax along attrs.axis;
// layer_norm, rms_norm over the last axis with optional weight and bias):
// shape rules, eager calls and the public functions.
#include <string>
#include <vector>

#include "kernel_registry.h"
#include "op_table.h"
#include "ops.h"

namespace kiln {
namespace detail {
namespace {

bool is_norm(OpId op) { return op == OpId::LayerNorm || op == OpId::RmsNorm; }

// Checks the inputs and attributes; returns the result dtype.
// layer_norm/rms_norm: inputs (x, [weight], [bias]) as flagged by
// attrs.ints = {has_weight, has_bias}; weight and bias of shape [x.shape[-1]].
DType rownorm_check(OpId op, std::span<const TensorLayout> in, const Attrs& a) {
  const TensorLayout& x = in[0];
  if (!is_norm(op)) {
    normalize_axis(a.axis, x.ndim(), op_name(op));
  } else {
    if (a.ints.size() != 2 || (a.ints[0] != 0 && a.ints[0] != 1) || (a.ints[1] != 0 && a.ints[1] != 1))
      throw ValueError(op_prefix(op) + "attrs.ints must be {has_weight, has_bias} with 0/1 entries, got " +
                       shape_str(a.ints));
    if (op == OpId::RmsNorm && a.ints[1])
      throw ValueError(op_prefix(op) + "takes no bias (attrs.ints[1] must be 0)");
    const size_t want = 1 + static_cast<size_t>(a.ints[0] + a.ints[1]);
    if (in.size() != want)
      throw ValueError(op_prefix(op) + "expected " + std::to_string(want) + " tensor inputs (x" +
                       (a.ints[0] ? ", weight" : "") + (a.ints[1] ? ", bias" : "") + "), got " +
                       std::to_string(in.size()));
    if (x.ndim() == 0)
      throw ShapeError(op_prefix(op) + "expected an input with at least one axis (normalised over the last), got shape []");
    const Shape want_shape = {x.shape.back()};
    for (size_t i = 1; i < in.size(); ++i)
      if (in[i].shape != want_shape)
        throw ShapeError(op_prefix(op) + (i == 1 && a.ints[0] ? "weight" : "bias") + " must have shape " +
                         shape_str(want_shape) + " (the last extent of x, shape " + shape_str(x.shape) + "), got " +
                         shape_str(in[i].shape));
  }
  std::vector<DType> dts;
  for (const auto& l : in) dts.push_back(l.dtype);
  return result_dtype(op, dts, a);
}

}  // namespace

TensorLayout infer_rownorm(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  return TensorLayout(rownorm_check(op, in, attrs), in[0].shape, in[0].device);
}

Tensor eager_rownorm(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  check_same_device(op, in);
  std::vector<TensorLayout> ls;
  for (const Tensor& t : in) ls.emplace_back(t.realize().dtype(), t.shape(), t.device());
  const DType dt = rownorm_check(op, ls, attrs);
  Tensor x = in[0];
  if (x.dtype() != dt) {  // integer x, or a weight of a wider dtype: compute in the result dtype
    Tensor c = Tensor::empty(x.shape(), dt, x.device());
    copy_into(x, c);
    x = c;
  }
  Tensor out = detail::output_tensor(x.shape(), dt, x.device());
  if (x.is_same(in[0])) {
    run_kernel(op, dt, in, out, attrs);
  } else {
    std::vector<Tensor> args(in.begin(), in.end());
    args[0] = x;
    run_kernel(op, dt, args, out, attrs);
  }
  return out;
}

}  // namespace detail

namespace {
Tensor softmax_call(OpId op, const Tensor& x, int64_t axis) {
  Attrs a;
  a.axis = axis;
  return apply(op, x, a);
}

Tensor norm_call(OpId op, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  std::vector<Tensor> in = {x};
  if (weight.defined()) in.push_back(weight);
  if (bias.defined()) in.push_back(bias);
  Attrs a;
  a.scalar = eps;
  a.ints = {weight.defined() ? 1 : 0, bias.defined() ? 1 : 0};
  return apply(op, in, a);
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) { return softmax_call(OpId::Softmax, x, axis); }
Tensor log_softmax(const Tensor& x, int64_t axis) { return softmax_call(OpId::LogSoftmax, x, axis); }
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return norm_call(OpId::LayerNorm, x, weight, bias, eps);
}
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return norm_call(OpId::RmsNorm, x, weight, Tensor(), eps);
}

}  // namespace kiln
