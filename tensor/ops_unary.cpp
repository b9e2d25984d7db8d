// The Unary rows: shape rule, eager execution and the public functions.
#include <string>

#include "elementwise_util.h"
#include "kernel_registry.h"
#include "op_table.h"
#include "ops.h"

namespace kiln {

namespace detail {

Tensor converted(const Tensor& x, DType d) {
  if (x.dtype() == d) return x;
  Tensor out = Tensor::empty(x.shape(), d, x.device());
  copy_into(x, out);
  return out;
}

TensorLayout infer_unary(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  const DType d = in[0].dtype;
  return TensorLayout(result_dtype(op, std::span<const DType>(&d, 1), attrs), in[0].shape, in[0].device);
}

Tensor eager_unary(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor& x = in[0];
  const DType xd = x.dtype();
  const DType od = result_dtype(op, std::span<const DType>(&xd, 1), attrs);
  Tensor out = detail::output_tensor(x.shape(), od, x.device());
  // Cast converts as it copies; Float rows compute integer and bool inputs
  // in float32 (the result dtype); the others compute in the input's dtype.
  const DType cd = op != OpId::Cast && op_info(op).dtype_rule == DTypeRule::Float ? od : xd;
  if (cd == xd) {
    run_kernel(op, cd, in, out, attrs);
  } else {
    const Tensor xc[1] = {converted(x, cd)};
    run_kernel(op, cd, xc, out, attrs);
  }
  return out;
}

}  // namespace detail

#define KILN_UNARY_FUNCTION(fn, id) \
  Tensor fn(const Tensor& x) { return apply(OpId::id, x); }
KILN_UNARY_FUNCTION(neg, Neg)
KILN_UNARY_FUNCTION(abs, Abs)
KILN_UNARY_FUNCTION(sign, Sign)
KILN_UNARY_FUNCTION(exp, Exp)
KILN_UNARY_FUNCTION(exp2, Exp2)
KILN_UNARY_FUNCTION(log, Log)
KILN_UNARY_FUNCTION(log2, Log2)
KILN_UNARY_FUNCTION(log1p, Log1p)
KILN_UNARY_FUNCTION(expm1, Expm1)
KILN_UNARY_FUNCTION(sqrt, Sqrt)
KILN_UNARY_FUNCTION(rsqrt, Rsqrt)
KILN_UNARY_FUNCTION(square, Square)
KILN_UNARY_FUNCTION(reciprocal, Reciprocal)
KILN_UNARY_FUNCTION(sin, Sin)
KILN_UNARY_FUNCTION(cos, Cos)
KILN_UNARY_FUNCTION(tan, Tan)
KILN_UNARY_FUNCTION(tanh, Tanh)
KILN_UNARY_FUNCTION(atanh, Atanh)
KILN_UNARY_FUNCTION(sigmoid, Sigmoid)
KILN_UNARY_FUNCTION(relu, Relu)
KILN_UNARY_FUNCTION(silu, Silu)
KILN_UNARY_FUNCTION(erf, Erf)
KILN_UNARY_FUNCTION(floor, Floor)
KILN_UNARY_FUNCTION(ceil, Ceil)
KILN_UNARY_FUNCTION(round, Round)
KILN_UNARY_FUNCTION(trunc, Trunc)
KILN_UNARY_FUNCTION(logical_not, LogicalNot)
KILN_UNARY_FUNCTION(isnan, IsNan)
KILN_UNARY_FUNCTION(isinf, IsInf)
KILN_UNARY_FUNCTION(isfinite, IsFinite)
#undef KILN_UNARY_FUNCTION

Tensor gelu(const Tensor& x, bool approximate_tanh) {
  return apply(approximate_tanh ? OpId::GeluTanh : OpId::Gelu, x);
}

Tensor cast(const Tensor& x, DType dtype) {
  if (static_cast<int>(dtype) >= kNumDTypes)
    throw DTypeError("cast: unknown dtype code " + std::to_string(static_cast<int>(dtype)) + " (expected one of the " +
                     std::to_string(kNumDTypes) + " kiln::DType values)");
  Attrs a;
  a.dtype = dtype;
  return apply(OpId::Cast, x, a);
}

Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace kiln
