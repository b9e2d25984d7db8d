// kiln (internal): rows the code generator computes by calling the eager
// scalar functor (backends/cpu/elementwise_functors.h) on each lane, out of
// line: float pow, floor_divide, remainder, fmod and atan2 (which need the C
// library's exact fmod/pow/atan2; the results are bitwise eager's), and the
// float64 transcendental rows (the C library's double functions; eager's
// contiguous fast path uses Eigen's for some of them, within its tolerance).
// The rest of the fused loop stays vectorised; only these ops cost a call per
// vector.
#include <cstdint>
#include <stdexcept>

#include "../elementwise_functors.h"
#include "assemble.h"
#include "codegen.h"

namespace kiln::codegen::cg {

namespace {

namespace Inst = asmjit::x86::Inst;

template <class T>
void lanes_of(OpId op, const T* a, const T* b, T* y, int64_t n) {
  const bool done = cpu::visit_op<OpCategory::Binary>(op, [&](auto tag) {
    using Fn = typename decltype(tag)::functor;
    if constexpr (std::is_same_v<decltype(Fn{}(T{}, T{})), T>)
      for (int64_t i = 0; i < n; ++i) y[i] = Fn{}(a[i], b[i]);
  });
  if (done) return;
  cpu::visit_op<OpCategory::Unary>(op, [&](auto tag) {
    using Fn = typename decltype(tag)::functor;
    if constexpr (std::is_same_v<decltype(Fn{}(T{})), T>)
      for (int64_t i = 0; i < n; ++i) y[i] = Fn{}(a[i]);
  });
}

}  // namespace

void scalar_lanes(int32_t op, int32_t is64, const void* a, const void* b, void* y, int64_t n) {
  if (is64)
    lanes_of(OpId(op), static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(y), n);
  else
    lanes_of(OpId(op), static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(y), n);
}

bool is_call_op(OpId op, DType cd, bool strict) {
  const VK k = kind_of(cd);
  switch (op) {
    case OpId::Pow:
    case OpId::FloorDivide:
    case OpId::Remainder:
    case OpId::Fmod:
    case OpId::Atan2: return is_float_kind(k);  // eager's functor: bitwise, also in strict mode
    default: return k == VK::f64 && is_math_op(op) && !strict;
  }
}

x86::Vec emit_scalar_call(Ctx& c, OpId op, DType cd, const x86::Vec* x, int n) {
  VecAsm& A = c.A;
  const bool is64 = kind_of(cd) == VK::f64;
  const int bytes = int(x[0].size());
  const uint32_t mov = A.sse() ? Inst::kIdMovups : Inst::kIdVmovups;
  x86::Gp p[3];
  for (int j = 0; j < 3; ++j) {
    x86::Mem m = A.cc.newStack(64, 64);
    m.setSize(uint32_t(bytes));
    p[j] = A.cc.newIntPtr();
    A.cc.lea(p[j], m);
    if (j < n) A.cc.emit(mov, x86::ptr(p[j], 0, uint32_t(bytes)), x[j]);
  }
  asmjit::InvokeNode* call = invoke_callee(
      A.cc, Callee::scalar_lanes, asmjit::FuncSignatureT<void, int32_t, int32_t, const void*, const void*, void*, int64_t>());
  call->setArg(0, asmjit::Imm(int32_t(op)));
  call->setArg(1, asmjit::Imm(is64 ? 1 : 0));
  call->setArg(2, p[0]);
  call->setArg(3, n > 1 ? p[1] : p[0]);
  call->setArg(4, p[2]);
  call->setArg(5, asmjit::Imm(int64_t(c.L)));
  x86::Vec r = A.newv(bytes);
  A.cc.emit(mov, r, x86::ptr(p[2], 0, uint32_t(bytes)));
  return r;
}

}  // namespace kiln::codegen::cg
