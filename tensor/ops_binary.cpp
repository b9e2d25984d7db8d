// The Binary rows: shape rule, eager execution (with the integer-domain
// checks), weak scalars and the public functions and operators.
#include <string>

#include "num_str.h"
#include "dispatch.h"
#include "elementwise_util.h"
#include "kernel_registry.h"
#include "op_table.h"
#include "ops.h"
#include "scalar_operand.h"
#include "scalar_store.h"
#include "../trace/weak_scalar.h"

namespace kiln {

namespace detail {

namespace {

/// The dtype a binary row computes in: the promoted dtype, except true
/// division rows, whose integer operands are converted to float32 first,
/// and logical rows, which read their operands as bool (nonzero and NaN
/// are true, which conversion to bool preserves).
DType binary_compute_dtype(OpId op, DType promoted, DType result) {
  switch (op_info(op).dtype_rule) {
    case DTypeRule::TrueDiv: return result;
    case DTypeRule::ToBool: return DType::bool_;
    default: return promoted;
  }
}

/// Integer floor_divide/remainder/fmod by zero and pow with a negative
/// exponent have no value: raise before running the kernel.
void check_integer_domain(OpId op, const Tensor& b) {
  if (op == OpId::FloorDivide || op == OpId::Remainder || op == OpId::Fmod) {
    if (device_utilities(b.device(), op_name(op).data()).any_zero(b))
      throw ValueError(op_prefix(op) + "integer division by zero (the divisor has a zero element; dtype " +
                       std::string(name(b.dtype())) + ")");
  } else if (op == OpId::Pow) {
    if (is_signed(b.dtype()) && device_utilities(b.device(), op_name(op).data()).any_negative(b))
      throw ValueError(op_prefix(op) + "integers to negative integer powers are not allowed (the exponent has a "
                       "negative element; dtype " + std::string(name(b.dtype())) + ")");
  }
}

}  // namespace

Tensor make_scalar(const Scalar& s, DType d, const char* who) {
  Tensor t = Tensor::empty({}, d);
  visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    *static_cast<T*>(t.data_ptr()) = scalar_as<T>(s, who);
  });
  return t;
}

TensorLayout infer_binary(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  const DType d[2] = {in[0].dtype, in[1].dtype};
  const DType od = result_dtype(op, d, attrs);
  Shape s = in[0].shape == in[1].shape ? in[0].shape : broadcast_shapes(in[0].shape, in[1].shape, op_name(op));
  return TensorLayout(od, std::move(s), in[0].device);
}

Tensor eager_binary(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  // Each accessor (dtype(), shape(), device()) is an out-of-line impl() call:
  // read the operands' fields once (the 1-element add is dispatch-bound).
  const TensorImpl& ai = a.impl();
  const TensorImpl& bi = b.impl();
  const Device dev = ai.device == bi.device ? ai.device : common_device(op, in);
  const DType d[2] = {ai.dtype, bi.dtype};
  const DType od = result_dtype(op, d, attrs);
  const DType cd = binary_compute_dtype(op, d[0] == d[1] ? d[0] : promote_types(d[0], d[1]), od);
  // Same shapes (the common case) need no broadcast and no shape copy here.
  Shape bshape;
  const bool same = ai.shape == bi.shape;
  if (!same) bshape = broadcast_shapes(ai.shape, bi.shape, op_name(op));
  Tensor out = detail::output_tensor(same ? ai.shape : bshape, od, dev);
  if (d[0] == cd && d[1] == cd) {
    if (is_integral(cd) && out.numel() > 0) check_integer_domain(op, b);
    run_kernel(op, dev, cd, in, out, attrs);
  } else {
    const Tensor conv[2] = {converted(a, cd), converted(b, cd)};
    if (is_integral(cd) && out.numel() > 0) check_integer_domain(op, conv[1]);
    run_kernel(op, dev, cd, conv, out, attrs);
  }
  return out;
}

}  // namespace detail

namespace {

/// t op s (or s op t when scalar_first) with s weak: the tensor's dtype wins
/// within its kind (see promote_with_scalar); the tensor is cast first when
/// the scalar changes its kind (int32 * 0.5 -> float32, bool + 1 -> int64).
Tensor with_scalar(OpId op, const Tensor& t, Scalar s, bool scalar_first) {
  // (named here: scalar_tensor reads t's dtype before apply could name the op)
  if (!t.defined())
    throw ValueError(detail::op_prefix(op) + "input " + (scalar_first ? "1" : "0") + " is an undefined tensor");
  Tensor st = scalar_tensor(s, t.dtype());
  Tensor tt = t;
  if (st.dtype() != t.dtype()) {
    if (auto k = detail::weak_scalar_kind(t)) {
      // A jit runtime number (trace/weak_scalar.h) and a C++ scalar of a
      // higher kind: two numbers, so the result is a weak number of that
      // kind, exact (an integer number * 2.5 is a float64 number, as numpy's
      // Python int * Python float is a Python float).
      const DType exact = s.kind == ScalarKind::floating ? DType::float64 : DType::int64;
      st = detail::make_scalar(s, exact, "scalar operand");
      if (t.dtype() != exact) {
        const detail::WeakRawScope raw;
        tt = cast(t, exact);
      }
      detail::mark_weak_scalar(tt);
    } else {
      tt = cast(t, st.dtype());
    }
  }
  // (A trace treats st as weak beside a jit runtime number: trace/weak_scalar.h.)
  struct Mark {
    detail::ScalarOperand old = detail::t_scalar_operand;
    ~Mark() { detail::t_scalar_operand = old; }
  } mark;
  detail::t_scalar_operand = {&st.impl(), s.kind};
  return scalar_first ? apply(op, st, tt) : apply(op, tt, st);
}

}  // namespace

#define KILN_BINARY_FUNCTION(fn, id) \
  Tensor fn(const Tensor& a, const Tensor& b) { return apply(OpId::id, a, b); }
KILN_BINARY_FUNCTION(add, Add)
KILN_BINARY_FUNCTION(sub, Sub)
KILN_BINARY_FUNCTION(mul, Mul)
KILN_BINARY_FUNCTION(div, Div)
KILN_BINARY_FUNCTION(pow, Pow)
KILN_BINARY_FUNCTION(maximum, Maximum)
KILN_BINARY_FUNCTION(minimum, Minimum)
KILN_BINARY_FUNCTION(floor_divide, FloorDivide)
KILN_BINARY_FUNCTION(remainder, Remainder)
KILN_BINARY_FUNCTION(fmod, Fmod)
KILN_BINARY_FUNCTION(atan2, Atan2)
KILN_BINARY_FUNCTION(equal, Equal)
KILN_BINARY_FUNCTION(not_equal, NotEqual)
KILN_BINARY_FUNCTION(less, Less)
KILN_BINARY_FUNCTION(less_equal, LessEqual)
KILN_BINARY_FUNCTION(greater, Greater)
KILN_BINARY_FUNCTION(greater_equal, GreaterEqual)
KILN_BINARY_FUNCTION(logical_and, LogicalAnd)
KILN_BINARY_FUNCTION(logical_or, LogicalOr)
KILN_BINARY_FUNCTION(logical_xor, LogicalXor)
#undef KILN_BINARY_FUNCTION

Tensor scalar_tensor(Scalar s, DType like) {
  return detail::make_scalar(s, promote_with_scalar(like, s.kind), "scalar operand");
}

#define KILN_SCALAR_UNARY_NONE(id, name)
#define KILN_SCALAR_BINARY(id, name)                                                              \
  Tensor name(const Tensor& a, Scalar b) { return with_scalar(OpId::id, a, b, false); } \
  Tensor name(Scalar a, const Tensor& b) { return with_scalar(OpId::id, b, a, true); }
#define KILN_OP(id, name, arity, cat, rule) \
  KILN_FOR_ELEMENTWISE_ROW(KILN_SCALAR_UNARY_NONE, KILN_SCALAR_BINARY, id, name, cat, rule)
#include "ops.def"
#undef KILN_OP
#undef KILN_SCALAR_UNARY_NONE
#undef KILN_SCALAR_BINARY

#define KILN_SCALAR_OPERATOR(sym, id)                                                                  \
  Tensor operator sym(const Tensor& a, Scalar b) { return with_scalar(OpId::id, a, b, false); } \
  Tensor operator sym(Scalar a, const Tensor& b) { return with_scalar(OpId::id, b, a, true); }
KILN_SCALAR_OPERATOR(+, Add)
KILN_SCALAR_OPERATOR(-, Sub)
KILN_SCALAR_OPERATOR(*, Mul)
KILN_SCALAR_OPERATOR(/, Div)
KILN_SCALAR_OPERATOR(%, Remainder)
KILN_SCALAR_OPERATOR(==, Equal)
KILN_SCALAR_OPERATOR(!=, NotEqual)
KILN_SCALAR_OPERATOR(<, Less)
KILN_SCALAR_OPERATOR(<=, LessEqual)
KILN_SCALAR_OPERATOR(>, Greater)
KILN_SCALAR_OPERATOR(>=, GreaterEqual)
#undef KILN_SCALAR_OPERATOR

namespace {
// The logical operators take bool tensors only (see ops.h).
void require_bool(const char* op, const Tensor& a, const Tensor* b) {
  if (a.dtype() == DType::bool_ && (!b || b->dtype() == DType::bool_)) return;
  std::string got = std::string(name(a.dtype())) + (b ? " and " + std::string(name(b->dtype())) : "");
  throw DTypeError(std::string(op) + ": operands must be bool tensors, got " + got +
                   " (numpy's " + op + " on integers is bitwise, which kiln does not offer; use logical_and, "
                   "logical_or, logical_xor or logical_not for truthiness)");
}
}  // namespace

Tensor operator&(const Tensor& a, const Tensor& b) {
  require_bool("operator&", a, &b);
  return logical_and(a, b);
}
Tensor operator|(const Tensor& a, const Tensor& b) {
  require_bool("operator|", a, &b);
  return logical_or(a, b);
}
Tensor operator^(const Tensor& a, const Tensor& b) {
  require_bool("operator^", a, &b);
  return logical_xor(a, b);
}
Tensor operator!(const Tensor& x) {
  require_bool("operator!", x, nullptr);
  return logical_not(x);
}
Tensor operator~(const Tensor& x) {
  require_bool("operator~", x, nullptr);
  return logical_not(x);
}

}  // namespace kiln
