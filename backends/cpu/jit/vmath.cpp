// kiln (internal): the float32 vector math rows, emitted inline by running
// the algorithms of vmath_alg.h on an asmjit backend (one SIMD instruction
// per backend call). vmath_model.h runs the same templates on scalars.
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "assemble.h"
#include "codegen.h"
#include "vmath_alg.h"

namespace kiln::codegen::cg {

void trig_lanes(const float* x, float* y, int64_t n, int32_t fn) {
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(x[i]) >= vm::kTrigMaxArg) y[i] = vm::trig_slow(x[i], fn);
}

namespace {

using asmjit::Imm;
namespace Inst = asmjit::x86::Inst;


/// Backend of vmath_alg.h that emits code. Values are registers or constant
/// pool operands (Src); every value has the width of `w`.
struct AsmBackend {
  using V = Src;
  using I = Src;
  using M = VMask;
  VecAsm& A;
  x86::Vec w;
  bool fma;

  bool fused() const { return fma; }
  x86::Vec R(const Src& s) { return A.reg_shared(s, w); }  // operands are only read
  static constexpr Lane l = Lane::b32;

  V cf(float c) { return A.konst(std::bit_cast<uint32_t>(c), l, int(w.size())); }
  I ci(int32_t c) { return A.konst(uint32_t(c), l, int(w.size())); }
  // commutative ops take the register first
  static void order(Src& a, Src& b) {
    if (!a.is_reg() && b.is_reg()) std::swap(a, b);
  }
  V add(V a, V b) { order(a, b); return A.add(l, R(a), b); }
  V sub(V a, V b) { return A.sub(l, R(a), b); }
  V mul(V a, V b) { order(a, b); return A.mul(l, R(a), b); }
  V div(V a, V b) { return A.div(l, R(a), b); }
  V madd(V a, V b, V c) { order(a, b); return A.madd(l, R(a), b, c, fma); }
  /// A fresh register holding a (owned by the caller: madd_acc may clobber it).
  V load(V a) { return a.is_reg() ? A.fresh(a.reg()) : A.reg(a, w); }
  V madd_acc(V p, V x, V c) {
    x86::Vec acc = p.is_reg() ? p.reg() : A.reg(p, w);
    A.madd_acc(l, acc, x, c);
    return acc;
  }
  V msub(V a, V b, V c) { order(a, b); return A.msub(l, R(a), b, c, fma); }
  V nmadd(V a, V b, V c) { order(a, b); return A.nmadd(l, R(a), b, c, fma); }
  V nmsub(V a, V b, V c) { order(a, b); return A.nmsub(l, R(a), b, c, fma); }
  /// madd / nmsub whose addend c dies here: c's register takes the result
  /// (a computed register of the algorithm, never a shared constant).
  V madd_in(V a, V b, V c) { return fma_in(0, a, b, c); }
  V nmsub_in(V a, V b, V c) { return fma_in(3, a, b, c); }
  V fma_in(int kind, V a, V b, V c) {
    order(a, b);
    if (!c.is_reg()) return kind == 0 ? A.madd(l, R(a), b, c, fma) : A.nmsub(l, R(a), b, c, fma);
    return A.fma_into(kind, l, c.reg(), R(a), b, fma);
  }
  V maxx(V a, V b) { return A.maxx(l, R(a), b); }
  V minx(V a, V b) { return A.minx(l, R(a), b); }
  /// min(max(x, -c), c), NaN kept (vrangeps would be one instruction on
  /// AVX-512 but gives +-c for a NaN x).
  V clamp_sym(V x, float c) { return minx(cf(c), maxx(cf(-c), x)); }
  V vand(V a, V b) { order(a, b); return A.and_(R(a), b); }
  V vor(V a, V b) { order(a, b); return A.or_(R(a), b); }
  V vxor(V a, V b) { order(a, b); return A.xor_(R(a), b); }
  static I as_i(V a) { return a; }
  static V as_f(I a) { return a; }
  I iadd(I a, I b) { order(a, b); return A.iadd(l, R(a), b); }
  I isub(I a, I b) { return A.isub(l, R(a), b); }
  I iand(I a, I b) { order(a, b); return A.and_(R(a), b); }
  I ishl(I a, int n) { return A.ishl(l, R(a), n); }
  I isra(I a, int n) { return A.isra(l, R(a), n); }
  V i2f(I a) { return A.i2f(R(a)); }
  M lt(V a, V b) { return A.cmpf(l, Cmp::lt, R(a), b); }
  M le(V a, V b) { return A.cmpf(l, Cmp::le, R(a), b); }
  M gt(V a, V b) { return A.cmpf(l, Cmp::gt, R(a), b); }
  M ge(V a, V b) { return A.cmpf(l, Cmp::ge, R(a), b); }
  M eq(V a, V b) { return A.cmpf(l, Cmp::eq, R(a), b); }
  M unord(V a, V b) { return A.cmpf(l, Cmp::unord, R(a), b); }
  M ieq(I a, I b) { return A.cmpi(l, Cmp::eq, R(a), R(b)); }
  V sel(const M& m, V a, V b) { return A.select(l, m, R(a), R(b)); }
  /// +0 where m, else v: one andnps (AVX-512: a select of +0).
  V zero_where(const M& m, V v) { return A.evex() ? sel(m, cf(0.0f), v) : A.andn(m.v, v); }

  /// v 2^k in one rounding: vscalefps on AVX-512, else two exact factors.
  V scale(V v, I k) {
    if (A.evex()) {
      x86::Vec d = A.like(w);
      A.cc.emit(Inst::kIdVscalefps, d, R(v), A.i2f(R(k)));
      return d;
    }
    x86::Vec k1 = A.isra(l, R(k), 1);
    x86::Vec k2 = A.isub(l, R(k), k1);
    x86::Vec s1 = A.ishl(l, A.iadd(l, k1, A.c32(127)), 23);
    x86::Vec s2 = A.ishl(l, A.iadd(l, k2, A.c32(127)), 23);
    return A.mul(l, A.mul(l, R(v), s1), s2);
  }

  /// v 2^k with k = t - bits(kMagic) and kf = k as a float (exp's
  /// reduction): vscalefps by kf on AVX-512 (no integer k needed); else the
  /// two factors of scale() with the exponent bias folded in: k + 254 =
  /// t - (bits(kMagic) - 254), whose halves are (k >> 1) + 127 and
  /// k - (k >> 1) + 127 (two integer instructions fewer).
  V scale_t(V v, I t, V kf) {
    if (A.evex()) {
      x86::Vec d = A.like(w);
      A.cc.emit(Inst::kIdVscalefps, d, R(v), R(kf));
      return d;
    }
    x86::Vec kb = A.isub(l, R(t), A.c32(std::bit_cast<uint32_t>(vm::kMagic) - 254u));
    x86::Vec h1 = A.isra(l, kb, 1);
    x86::Vec h2 = A.isub(l, kb, h1);
    x86::Vec s1 = A.ishl(l, h1, 23), s2 = A.ishl(l, h2, 23);
    return A.mul(l, A.mul(l, R(v), s1), s2);
  }

  /// r, with the lanes where |x| >= kTrigMaxArg replaced by trig_lanes()
  /// (a call taken only when some lane needs it).
  V large_arg(V xs, V rs, int fn) {
    x86::Vec x = R(xs), res = A.copy(R(rs));
    VMask m = A.cmpf(l, Cmp::ge, A.and_(x, A.c32(0x7fffffffu)), A.cf(vm::kTrigMaxArg));
    x86::Gp g = A.cc.newGpd();
    if (A.evex()) A.cc.emit(Inst::kIdKmovw, g, m.k);
    else A.cc.emit(A.sse() ? Inst::kIdMovmskps : Inst::kIdVmovmskps, g, m.v);
    asmjit::Label skip = A.cc.newLabel();
    A.cc.test(g, g);
    A.cc.jz(skip);
    x86::Mem bx = A.cc.newStack(64, 64), by = A.cc.newStack(64, 64);
    bx.setSize(uint32_t(x.size()));
    by.setSize(uint32_t(x.size()));
    const uint32_t mov = A.sse() ? Inst::kIdMovups : Inst::kIdVmovups;
    A.cc.emit(mov, bx, x);
    A.cc.emit(mov, by, res);
    x86::Gp px = A.cc.newIntPtr(), py = A.cc.newIntPtr();
    A.cc.lea(px, bx);
    A.cc.lea(py, by);
    asmjit::InvokeNode* call =
        invoke_callee(A.cc, Callee::trig_lanes, asmjit::FuncSignatureT<void, const float*, float*, int64_t, int32_t>());
    call->setArg(0, px);
    call->setArg(1, py);
    call->setArg(2, Imm(int64_t(x.size() / 4)));
    call->setArg(3, Imm(fn));
    A.cc.emit(mov, res, by);
    A.cc.bind(skip);
    return res;
  }

  /// ax - qf pi/2 in double (SSE2: no FMA for an exact float reduction).
  V reduce_double(V ax, V qf) {
    x86::Vec x = R(ax), q = R(qf);
    auto half = [&](const x86::Vec& f, bool hi) {
      x86::Vec s = hi ? A.hi_half(f) : f;
      x86::Vec d = A.cc.newXmm();
      A.cc.emit(Inst::kIdCvtps2pd, d, s);
      return d;
    };
    x86::Vec out[2];
    for (int h = 0; h < 2; ++h) {
      x86::Vec xd = half(x, h), qd = half(q, h);
      x86::Vec r = A.sub(Lane::b64, xd, A.mul(Lane::b64, qd, A.cd(vm::kPio2D1)));
      r = A.sub(Lane::b64, r, A.mul(Lane::b64, qd, A.cd(vm::kPio2D2)));
      r = A.sub(Lane::b64, r, A.mul(Lane::b64, qd, A.cd(vm::kPio2D3)));
      out[h] = A.cc.newXmm();
      A.cc.emit(Inst::kIdCvtpd2ps, out[h], r);
    }
    return A.concat(out[0], out[1]);
  }
};

/// e^x (e^{-x} with neg) on AVX2 and SSE2, with the bits of vm::exp_signed:
/// t is formed from the unclamped x and, when every lane has k = bits(t) -
/// bits(kMagic) in [-125, 127] (|x| up to ~87: e^r 2^k is a normal float,
/// NaN and +-inf are outside), the scaling is one integer add of k << 23 to
/// the exponent field of e^r (exact; the same value as the two exact factors
/// of scale_t) and the clamp to [-104, 104] is skipped (it changes no lane
/// there). Otherwise the whole exp_signed sequence runs (one branch per
/// vector), as vm::exp_signed_zeroing: lanes whose result is +0 are
/// computed on 0 and cleared, so that they do not underflow (masked softmax
/// rows). AVX2 (KILN_JIT_DUMP of y = exp(x)): the fast path has 17 vector
/// ALU instructions per vector (was 21: the two clamps and scale_t's seven
/// become a vpslld and a vpaddd; the test adds a vpaddd, a vpcmpgtd and a
/// vmovmskps), 15 of them for ports 0/1 (was 19), plus test+jnz and a jmp;
/// 0.49 -> 0.37 ns per element on one core, data in L2 (bench_codegen
/// BM_op_generated/3/1). AVX-512 keeps the straight sequence: its clamps and
/// one vscalefps cost less than the test.
Src exp_fast_path(AsmBackend& b, const x86::Vec& x, bool neg) {
  VecAsm& A = b.A;
  constexpr uint32_t kMagicBits = std::bit_cast<uint32_t>(vm::kMagic);
  constexpr Lane l = Lane::b32;
  Src t = vm::exp_t(b, Src(x), neg);
  // e = (bits(t) - (bits(kMagic) - 125)) ^ 0x80000000, one wrapping add:
  // k in [-125, 127] exactly when e <= INT_MIN + 252 (signed). A lane whose
  // t is not in [2^23, 2^24) (|x log2e| >= 2^22, +-inf, NaN) has bits far
  // from bits(kMagic) and falls outside too.
  x86::Vec e = A.iadd(l, b.R(t), b.ci(int32_t(0x80000000u - (kMagicBits - 125u))));
  const Src lim = b.ci(int32_t(0x80000000u + 252u));
  x86::Vec bad = A.like(x);
  if (A.sse()) {
    A.cc.emit(Inst::kIdMovaps, bad, e);
    A.cc.emit(Inst::kIdPcmpgtd, bad, lim.op);
  } else {
    A.cc.emit(Inst::kIdVpcmpgtd, bad, e, lim.op);
  }
  x86::Gp g = A.cc.newGpd();
  A.cc.emit(A.sse() ? Inst::kIdMovmskps : Inst::kIdVmovmskps, g, bad);
  x86::Vec res = A.like(x);
  const uint32_t mov = A.sse() ? Inst::kIdMovaps : Inst::kIdVmovaps;
  asmjit::Label slow = A.cc.newLabel(), done = A.cc.newLabel();
  A.cc.test(g, g);
  A.cc.jnz(slow);
  {
    Src kf = b.sub(t, b.cf(vm::kMagic));
    Src p = vm::exp_poly(b, Src(x), kf, neg, /*xc_dies=*/false);
    // bits(t) << 23 = k << 23 (bits(kMagic) << 23 wraps to 0)
    A.cc.emit(mov, res, A.iadd(l, b.R(p), A.ishl(l, b.R(t), 23)));
    A.cc.jmp(done);
  }
  A.cc.bind(slow);
  A.cc.emit(mov, res, b.R(vm::exp_signed_zeroing(b, Src(x), neg)));
  A.cc.bind(done);
  return res;
}

/// exp_fast_path on two independent vectors x0, x1 (AVX2): one test for
/// both (the signed maximum of their e, then one compare), so the pair takes
/// the fast path when every lane of both vectors has k in [-125, 127], else
/// both go through exp_signed; each path's two chains interleaved. Each
/// lane's result is that of exp_fast_path (whose two paths give the same
/// bits where both apply). AVX2 per pair of vectors: 33 vector ALU
/// instructions (two exp_fast_path: 34) and one test and branch (two).
std::pair<x86::Vec, x86::Vec> exp_fast_path2(AsmBackend& b0, AsmBackend& b1, const x86::Vec& x0, const x86::Vec& x1,
                                             bool neg) {
  VecAsm& A = b0.A;
  constexpr uint32_t kMagicBits = std::bit_cast<uint32_t>(vm::kMagic);
  constexpr Lane l = Lane::b32;
  Src t0, t1;
  x86::Vec e0, e1;
  const Src shift = b0.ci(int32_t(0x80000000u - (kMagicBits - 125u)));
  emit_interleaved(
      A.cc,
      [&] {
        t0 = vm::exp_t(b0, Src(x0), neg);
        e0 = A.iadd(l, b0.R(t0), shift);
      },
      [&] {
        t1 = vm::exp_t(b1, Src(x1), neg);
        e1 = A.iadd(l, b1.R(t1), shift);
      });
  const Src lim = b0.ci(int32_t(0x80000000u + 252u));
  x86::Vec bad = A.like(x0);
  A.cc.emit(Inst::kIdVpcmpgtd, bad, A.imax(l, e0, e1), lim.op);
  x86::Gp g = A.cc.newGpd();
  A.cc.emit(Inst::kIdVmovmskps, g, bad);
  x86::Vec r0 = A.like(x0), r1 = A.like(x1);
  asmjit::Label slow = A.cc.newLabel(), done = A.cc.newLabel();
  A.cc.test(g, g);
  A.cc.jnz(slow);
  auto fast = [&](AsmBackend& b, const x86::Vec& x, const Src& t, const x86::Vec& r) {
    Src kf = b.sub(t, b.cf(vm::kMagic));
    Src p = vm::exp_poly(b, Src(x), kf, neg, /*xc_dies=*/false);
    A.cc.emit(Inst::kIdVmovaps, r, A.iadd(l, b.R(p), A.ishl(l, b.R(t), 23)));
  };
  emit_interleaved(A.cc, [&] { fast(b0, x0, t0, r0); }, [&] { fast(b1, x1, t1, r1); });
  A.cc.jmp(done);
  A.cc.bind(slow);
  emit_interleaved(
      A.cc, [&] { A.cc.emit(Inst::kIdVmovaps, r0, b0.R(vm::exp_signed_zeroing(b0, Src(x0), neg))); },
      [&] { A.cc.emit(Inst::kIdVmovaps, r1, b1.R(vm::exp_signed_zeroing(b1, Src(x1), neg))); });
  A.cc.bind(done);
  return {r0, r1};
}

}  // namespace

std::pair<x86::Vec, x86::Vec> emit_exp_pair(Ctx& c, const x86::Vec& x0, const x86::Vec& x1, bool negate) {
  if (c.A.target != CpuTarget::avx2) throw std::logic_error("codegen: emit_exp_pair is for the AVX2 target");
  AsmBackend b0{c.A, x0, true}, b1{c.A, x1, true};
  return exp_fast_path2(b0, b1, x0, x1, negate);
}

bool is_math_op(OpId op) {
  switch (op) {
    case OpId::Exp:
    case OpId::Exp2:
    case OpId::Expm1:
    case OpId::Log:
    case OpId::Log2:
    case OpId::Log1p:
    case OpId::Tanh:
    case OpId::Sigmoid:
    case OpId::Silu:
    case OpId::Gelu:
    case OpId::GeluTanh:
    case OpId::Erf:
    case OpId::Sin:
    case OpId::Cos:
    case OpId::Tan:
    case OpId::Atanh: return true;
    default: return false;
  }
}

x86::Vec emit_math(Ctx& c, OpId op, const x86::Vec& x, bool negate) {
  AsmBackend b{c.A, x, c.A.has_fma()};
  if (negate && (op != OpId::Exp || !b.fused()))
    throw std::logic_error("codegen: a negated input is folded only into exp on FMA targets");
  Src r;
  switch (op) {
    case OpId::Exp: r = c.A.evex() ? vm::exp_signed(b, Src(x), negate) : exp_fast_path(b, x, negate); break;
    case OpId::Exp2: r = vm::exp2(b, Src(x)); break;
    case OpId::Expm1: r = vm::expm1(b, Src(x)); break;
    case OpId::Log: r = vm::log(b, Src(x)); break;
    case OpId::Log2: r = vm::log2(b, Src(x)); break;
    case OpId::Log1p: r = vm::log1p(b, Src(x)); break;
    case OpId::Tanh: r = vm::tanh(b, Src(x)); break;
    case OpId::Sigmoid: r = vm::sigmoid(b, Src(x)); break;
    case OpId::Silu: r = vm::silu(b, Src(x)); break;
    case OpId::Gelu: r = vm::gelu(b, Src(x)); break;
    case OpId::GeluTanh: r = vm::gelu_tanh(b, Src(x)); break;
    case OpId::Erf: r = vm::erf(b, Src(x)); break;
    case OpId::Sin: r = vm::sin(b, Src(x)); break;
    case OpId::Cos: r = vm::cos(b, Src(x)); break;
    case OpId::Tan: r = vm::tan(b, Src(x)); break;
    case OpId::Atanh: r = vm::atanh(b, Src(x)); break;
    default: throw std::logic_error("codegen: not a math op: " + std::string(op_name(op)));
  }
  return b.R(r);
}

}  // namespace kiln::codegen::cg
