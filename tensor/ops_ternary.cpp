// The Ternary rows (where, clamp): shape rule, eager execution and the
// public functions, including masked_fill.
#include <limits>
#include <string>

#include "dispatch.h"
#include "elementwise_util.h"
#include "kernel_registry.h"
#include "op_table.h"
#include "ops.h"

namespace kiln {

namespace detail {

namespace {

Shape broadcast3(OpId op, const Shape& a, const Shape& b, const Shape& c) {
  if (a == b && b == c) return a;
  return broadcast_shapes(broadcast_shapes(a, b, op_name(op)), c, op_name(op));
}

/// A 0-d tensor of dtype d holding its largest value (+inf for floats) or
/// its lowest (-inf): the "no bound" of clamp.
Tensor extreme_scalar(DType d, bool highest) {
  Tensor t = Tensor::empty({}, d);
  visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(t.data_ptr());
    if constexpr (std::is_integral_v<T>)
      *p = highest ? std::numeric_limits<T>::max() : std::numeric_limits<T>::lowest();
    else
      *p = convert<T>(highest ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity());
  });
  return t;
}

}  // namespace

TensorLayout infer_ternary(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  const DType d[3] = {in[0].dtype, in[1].dtype, in[2].dtype};
  return TensorLayout(result_dtype(op, d, attrs), broadcast3(op, in[0].shape, in[1].shape, in[2].shape),
                      in[0].device);
}

Tensor eager_ternary(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  check_same_device(op, in);
  const DType d[3] = {in[0].dtype(), in[1].dtype(), in[2].dtype()};
  const DType od = result_dtype(op, d, attrs);
  Tensor out = detail::output_tensor(broadcast3(op, in[0].shape(), in[1].shape(), in[2].shape()), od, operands_device(in));
  // where's condition is read as bool (nonzero and NaN are true); the value
  // operands are promoted to the result dtype.
  const DType d0 = op == OpId::Where ? DType::bool_ : od;
  const Tensor conv[3] = {converted(in[0], d0), converted(in[1], od), converted(in[2], od)};
  run_kernel(op, od, conv, out, attrs);
  return out;
}

}  // namespace detail

namespace {

Tensor apply3(OpId op, const Tensor& a, const Tensor& b, const Tensor& c) {
  const Tensor in[3] = {a, b, c};
  return apply(op, std::span<const Tensor>(in, 3));
}

/// t with dtype d (cast when it differs).
Tensor as_dtype(const Tensor& t, DType d) { return t.dtype() == d ? t : cast(t, d); }

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { return apply3(OpId::Where, cond, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  Tensor bs = scalar_tensor(b, a.dtype());
  return apply3(OpId::Where, cond, as_dtype(a, bs.dtype()), bs);
}

Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  Tensor as = scalar_tensor(a, b.dtype());
  return apply3(OpId::Where, cond, as, as_dtype(b, as.dtype()));
}

Tensor detail::where_scalars(const Tensor& cond, Scalar a, Scalar b) {
  // bool promoted with each scalar's kind: float32 if either is floating,
  // int64 if either is an integer, bool for two bools (PyTorch's result)
  const DType d = promote_with_scalar(promote_with_scalar(DType::bool_, a.kind), b.kind);
  return apply3(OpId::Where, cond, scalar_tensor(a, d), scalar_tensor(b, d));
}

Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) { return apply3(OpId::Clamp, x, lo, hi); }

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  if (!lo && !hi) throw ValueError("clamp: expected at least one of lo and hi, got neither");
  DType d = x.dtype();
  if (lo) d = promote_with_scalar(d, lo->kind);
  if (hi) d = promote_with_scalar(d, hi->kind);
  // An integer bound outside d's range bounds nothing on that side (numpy 2's
  // clip): it becomes d's extreme instead of a wrapped value. Compared
  // exactly (int_value), so INT64_MAX and 2^53 + 1 bound exactly.
  auto bound = [&](const std::optional<Scalar>& b, bool upper) {
    if (!b) return detail::extreme_scalar(d, upper);
    if (b->kind == ScalarKind::integer && is_integral(d)) {
      const Tensor hi_lim = detail::extreme_scalar(d, true), lo_lim = detail::extreme_scalar(d, false);
      // uint64's maximum has no int64: compare the magnitude as uint64.
      const uint64_t hi_v = hi_lim.item<uint64_t>();
      const int64_t lo_v = lo_lim.item<int64_t>();
      if (b->above_int64 ? d != DType::uint64 : b->int_value >= 0 && static_cast<uint64_t>(b->int_value) > hi_v)
        return hi_lim;
      if (!b->above_int64 && b->int_value < lo_v) return lo_lim;
    }
    return detail::make_scalar(*b, d, "clamp");
  };
  Tensor lt = bound(lo, false), ht = bound(hi, true);
  return apply3(OpId::Clamp, as_dtype(x, d), lt, ht);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  if (!x.defined()) throw ValueError("masked_fill: x is an undefined tensor");
  if (!mask.defined()) throw ValueError("masked_fill: mask is an undefined tensor");
  // A bool mask only, as PyTorch's: where's "nonzero is true" read of a
  // float mask (0.5 fills, NaN fills) would be a silent surprise here.
  if (mask.dtype() != DType::bool_)
    throw DTypeError("masked_fill: mask must have dtype bool, got " + std::string(name(mask.dtype())) +
                     " (make one with a comparison, e.g. mask != 0)");
  if (broadcast_shapes(x.shape(), mask.shape(), "masked_fill") != x.shape())
    throw ShapeError("masked_fill: mask of shape " + shape_str(mask.shape()) + " does not broadcast to the input's shape " +
                     shape_str(x.shape()));
  // The value takes x's dtype (as torch.masked_fill), so the result keeps it.
  // Stored by Scalar's rules: an integer outside x's range, or a NaN/inf/
  // out-of-range float for an integer x, is a ValueError (numpy 2).
  return apply3(OpId::Where, mask, detail::make_scalar(value, x.dtype(), "masked_fill"), x);
}

}  // namespace kiln
