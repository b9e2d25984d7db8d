// kiln: the front end of the scatter rows (scatter, scatter_add, index_add);
// shape, dtype and index checks are in tensor/ops_data.cpp.
#include "op_table.h"
#include "ops.h"

namespace kiln {
namespace {
Attrs axis_attrs(int64_t axis) {
  Attrs a;
  a.axis = axis;
  return a;
}
}  // namespace

Tensor scatter(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src) {
  const Tensor in[3] = {x, index, src};
  return apply(OpId::Scatter, in, axis_attrs(axis));
}

Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src) {
  const Tensor in[3] = {x, index, src};
  return apply(OpId::ScatterAdd, in, axis_attrs(axis));
}

Tensor index_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, Scalar alpha) {
  // alpha scales src first (in src's dtype, weak scalar), as torch.index_add does.
  // An integer tensor takes an integer alpha only (as torch.index_add): a
  // float alpha would be truncated silently by the cast below.
  if (src.defined() && (is_integral(src.dtype()) || src.dtype() == DType::bool_) && alpha.kind == ScalarKind::floating)
    throw DTypeError("index_add: alpha " + alpha.str() + " is a float but src has the integer dtype " +
                     std::string(name(src.dtype())) + "; pass an integer alpha or cast src to a float dtype");
  const bool unit = alpha.kind != ScalarKind::floating ? alpha.int_value == 1 : alpha.value == 1.0;
  const Tensor s = unit || !src.defined() ? src : cast(mul(src, alpha), src.dtype());
  const Tensor in[3] = {x, index, s};
  return apply(OpId::IndexAdd, in, axis_attrs(axis));
}

}  // namespace kiln
