// kiln (internal): arithmetic rows (neg ... clamp) of the code generator.
// Each op gives bitwise the result of its eager functor
// (backends/cpu/elementwise_functors.h) for the same inputs.
#include <stdexcept>
#include <string>

#include "codegen.h"

namespace kiln::codegen::cg {

namespace {

x86::Vec fconst(Ctx& c, VK k, double v, int bytes) {
  x86::Vec w = c.A.newv(bytes);
  return c.A.reg(k == VK::f32 ? c.A.cf(float(v)) : c.A.cd(v), w);
}

/// numpy maximum/minimum: a NaN in either operand gives NaN. x86 maxps(b, a)
/// is b > a ? b : a, which is eager's (a >= b || a != a) ? a : b except when
/// only b is NaN.
x86::Vec fmaxmin(Ctx& c, Lane l, const x86::Vec& a, const x86::Vec& b, bool is_max) {
  x86::Vec r = is_max ? c.A.maxx(l, b, a) : c.A.minx(l, b, a);
  return c.A.select(l, c.A.cmpf(l, Cmp::unord, b, b), b, r);
}

x86::Vec float_op(Ctx& c, OpId op, VK k, const x86::Vec* x) {
  VecAsm& A = c.A;
  const Lane l = lane_of(k);
  const int nb = int(x[0].size());
  const x86::Mem sign = k == VK::f32 ? A.c32(0x80000000u) : A.c64(0x8000000000000000ull);
  switch (op) {
    case OpId::Neg: return A.xor_(x[0], sign);  // -x: -(+0) = -0 (IEEE, numpy)
    case OpId::Abs: return A.andn(A.reg(sign, x[0]), x[0]);
    case OpId::Sign: {
      x86::Vec z = A.zero(nb);
      x86::Vec t = A.select(l, A.cmpf(l, Cmp::lt, x[0], z), fconst(c, k, -1.0, nb), z);
      t = A.select(l, A.cmpf(l, Cmp::gt, x[0], z), fconst(c, k, 1.0, nb), t);
      return A.select(l, A.cmpf(l, Cmp::unord, x[0], x[0]), x[0], t);
    }
    case OpId::Square: return A.mul(l, x[0], x[0]);
    case OpId::Reciprocal: return A.div(l, fconst(c, k, 1.0, nb), x[0]);
    case OpId::Sqrt: return A.sqrt(l, x[0]);
    case OpId::Rsqrt: return A.div(l, fconst(c, k, 1.0, nb), A.sqrt(l, x[0]));
    case OpId::Relu: return A.maxx(l, A.zero(nb), x[0]);  // 0 > x ? 0 : x keeps NaN and -0
    case OpId::Floor: return A.round(l, x[0], 1);
    case OpId::Ceil: return A.round(l, x[0], 2);
    case OpId::Round: return A.round(l, x[0], 0);
    case OpId::Trunc: return A.round(l, x[0], 3);
    case OpId::Add: return A.add(l, x[0], x[1]);
    case OpId::Sub: return A.sub(l, x[0], x[1]);
    case OpId::Mul: return A.mul(l, x[0], x[1]);
    case OpId::Div: return A.div(l, x[0], x[1]);
    case OpId::Maximum: return fmaxmin(c, l, x[0], x[1], true);
    case OpId::Minimum: return fmaxmin(c, l, x[0], x[1], false);
    case OpId::Clamp: return fmaxmin(c, l, fmaxmin(c, l, x[0], x[1], true), x[2], false);
    default: break;
  }
  throw std::logic_error("codegen: float op " + std::string(op_name(op)));
}

x86::Vec int_op(Ctx& c, OpId op, VK k, const x86::Vec* x) {
  VecAsm& A = c.A;
  const Lane l = lane_of(k);
  const int nb = int(x[0].size());
  switch (op) {
    case OpId::Neg: return A.isub(l, A.zero(nb), x[0]);
    case OpId::Abs: return A.iabs(l, x[0]);
    case OpId::Sign: {
      x86::Vec z = A.zero(nb);
      x86::Vec lt = A.mask_to_vec(A.cmpi(l, Cmp::lt, x[0], z), l, nb);
      x86::Vec gt = A.mask_to_vec(A.cmpi(l, Cmp::gt, x[0], z), l, nb);
      return A.isub(l, lt, gt);  // (-1 or 0) - (-1 or 0)
    }
    case OpId::Square: return A.imul(l, x[0], x[0]);
    case OpId::Relu: return A.imax(l, x[0], A.zero(nb));
    case OpId::Floor:
    case OpId::Ceil:
    case OpId::Round:
    case OpId::Trunc: return x[0];
    case OpId::Add: return A.iadd(l, x[0], x[1]);
    case OpId::Sub: return A.isub(l, x[0], x[1]);
    case OpId::Mul: return A.imul(l, x[0], x[1]);
    case OpId::Maximum: return A.imax(l, x[0], x[1]);
    case OpId::Minimum: return A.imin(l, x[0], x[1]);
    case OpId::Clamp: return A.imin(l, A.imax(l, x[0], x[1]), x[2]);
    default: break;
  }
  throw std::logic_error("codegen: integer op " + std::string(op_name(op)));
}

x86::Vec bool_op(Ctx& c, OpId op, const x86::Vec* x) {
  switch (op) {
    case OpId::Add:
    case OpId::Maximum: return c.A.or_(x[0], x[1]);
    case OpId::Mul:
    case OpId::Minimum: return c.A.and_(x[0], x[1]);
    default: break;
  }
  throw std::logic_error("codegen: bool op " + std::string(op_name(op)));
}

}  // namespace

x86::Vec emit_arith(Ctx& c, const Instr& ins, DType cd, const x86::Vec* x, int n) {
  const VK k = kind_of(cd);
  if (ins.op == OpId::Where) return c.A.select(c.lane(k), bool_mask(c, x[0], k), x[1], x[2]);
  if (is_float_kind(k)) return float_op(c, ins.op, k, x);
  if (k == VK::m) return bool_op(c, ins.op, x);
  return int_op(c, ins.op, k, x);
}

}  // namespace kiln::codegen::cg
