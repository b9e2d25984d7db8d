// kiln (internal): comparison, logical and classification rows of the code
// generator; each gives a bool value (see codegen.h).
#include <stdexcept>
#include <string>

#include "codegen.h"

namespace kiln::codegen::cg {

bool is_predicate_op(OpId op) {
  switch (op) {
    case OpId::Equal:
    case OpId::NotEqual:
    case OpId::Less:
    case OpId::LessEqual:
    case OpId::Greater:
    case OpId::GreaterEqual:
    case OpId::LogicalAnd:
    case OpId::LogicalOr:
    case OpId::LogicalXor:
    case OpId::LogicalNot:
    case OpId::IsNan:
    case OpId::IsInf:
    case OpId::IsFinite: return true;
    default: return false;
  }
}

namespace {

Cmp cmp_of(OpId op) {
  switch (op) {
    case OpId::Equal: return Cmp::eq;
    case OpId::NotEqual: return Cmp::ne;
    case OpId::Less: return Cmp::lt;
    case OpId::LessEqual: return Cmp::le;
    case OpId::Greater: return Cmp::gt;
    default: return Cmp::ge;
  }
}

/// a OP b on bool values (false < true).
x86::Vec bool_compare(VecAsm& A, Cmp p, const x86::Vec& a, const x86::Vec& b) {
  const int nb = int(a.size());
  switch (p) {
    case Cmp::eq: return A.xor_(A.xor_(a, b), A.ones(nb));
    case Cmp::ne: return A.xor_(a, b);
    case Cmp::lt: return A.andn(a, b);  // !a & b
    case Cmp::gt: return A.andn(b, a);
    case Cmp::le: return A.xor_(A.andn(b, a), A.ones(nb));
    default: return A.xor_(A.andn(a, b), A.ones(nb));
  }
}

}  // namespace

x86::Vec emit_predicate(Ctx& c, const Instr& ins, DType cd, const x86::Vec* x, int n) {
  VecAsm& A = c.A;
  const VK k = kind_of(cd);
  const OpId op = ins.op;
  switch (op) {
    case OpId::LogicalAnd: return A.and_(x[0], x[1]);
    case OpId::LogicalOr: return A.or_(x[0], x[1]);
    case OpId::LogicalXor: return A.xor_(x[0], x[1]);
    case OpId::LogicalNot: return A.xor_(x[0], A.ones(A.vbytes()));
    case OpId::IsNan:
    case OpId::IsInf:
    case OpId::IsFinite: {
      if (!is_float_kind(k)) return op == OpId::IsFinite ? A.ones(A.vbytes()) : A.zero(A.vbytes());
      const Lane l = lane_of(k);
      if (op == OpId::IsNan) return mask_bool(c, A.cmpf(l, Cmp::unord, x[0], x[0]), k);
      x86::Vec ax = A.and_(x[0], k == VK::f32 ? A.c32(0x7fffffffu) : A.c64(0x7fffffffffffffffull));
      const x86::Mem inf = k == VK::f32 ? A.c32(0x7f800000u) : A.c64(0x7ff0000000000000ull);
      return mask_bool(c, A.cmpf(l, op == OpId::IsInf ? Cmp::eq : Cmp::lt, ax, inf), k);
    }
    default: break;
  }
  if (op >= OpId::Equal && op <= OpId::GreaterEqual) {
    const Cmp p = cmp_of(op);
    if (k == VK::m) return bool_compare(A, p, x[0], x[1]);
    if (is_float_kind(k)) return mask_bool(c, A.cmpf(lane_of(k), p, x[0], x[1]), k);
    return mask_bool(c, A.cmpi(lane_of(k), p, x[0], x[1]), k);
  }
  throw std::logic_error("codegen: predicate op " + std::string(op_name(op)));
}

}  // namespace kiln::codegen::cg
