// kiln (internal): VecAsm, the SIMD instruction layer (see vec_asm.h).
#include "vec_asm.h"

#include <cstring>
#include <vector>

namespace kiln::codegen::cg {

using asmjit::Imm;
using asmjit::InstId;
namespace Inst = asmjit::x86::Inst;

VecAsm::VecAsm(x86::Compiler& c, CpuTarget t) : cc(c), target(t) {}

x86::Vec VecAsm::newv(int bytes) {
  if (bytes > 32) return cc.newZmm();
  if (bytes > 16) return cc.newYmm();
  return cc.newXmm();
}

namespace {
x86::Mem pool_entry(x86::Compiler& cc, const void* lane, size_t lane_size, int vbytes) {
  std::vector<uint8_t> buf(vbytes);
  for (int i = 0; i < vbytes; i += int(lane_size)) std::memcpy(buf.data() + i, lane, lane_size);
  x86::Mem m = cc.newConst(asmjit::ConstPoolScope::kLocal, buf.data(), buf.size());
  m.setSize(0);  // read at the width of the instruction that uses it
  return m;
}
}  // namespace

x86::Mem VecAsm::c32(uint32_t bits) { return pool_entry(cc, &bits, 4, vbytes()); }
x86::Mem VecAsm::c64(uint64_t bits) { return pool_entry(cc, &bits, 8, vbytes()); }
x86::Mem VecAsm::cf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return c32(u);
}
x86::Mem VecAsm::cd(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return c64(u);
}

Src VecAsm::konst(uint64_t bits, Lane l, int bytes) {
  const auto key = std::make_pair(bits * 2 + (l == Lane::b64 ? 1 : 0), bytes);
  auto it = hoisted_.find(key);
  if (it != hoisted_.end()) return it->second;
  const x86::Mem m = l == Lane::b32 ? c32(uint32_t(bits)) : c64(bits);
  if (hoist_budget <= 0) return m;
  --hoist_budget;
  x86::Vec r = newv(bytes);
  asmjit::BaseNode* prev = hoist_at ? cc.setCursor(hoist_at) : nullptr;
  cc.emit(sse() ? Inst::kIdMovaps : Inst::kIdVmovaps, r, m);
  if (hoist_at) {
    hoist_at = cc.cursor();
    cc.setCursor(prev);
  }
  hoisted_.emplace(key, r);
  hoisted_src_.emplace(r.id(), m);
  return r;
}

x86::Vec VecAsm::fresh(const x86::Vec& a) {
  auto it = hoisted_src_.find(a.id());
  if (it == hoisted_src_.end()) return copy(a);
  x86::Vec d = like(a);
  cc.emit(sse() ? Inst::kIdMovaps : Inst::kIdVmovaps, d, it->second);
  return d;
}

x86::Vec VecAsm::copy(const x86::Vec& a) {
  x86::Vec d = like(a);
  cc.emit(sse() ? Inst::kIdMovaps : Inst::kIdVmovaps, d, a);
  return d;
}

x86::Vec VecAsm::reg(const Src& s, const x86::Vec& width) {
  if (s.is_reg()) return s.reg();
  x86::Vec d = like(width);
  cc.emit(sse() ? Inst::kIdMovaps : Inst::kIdVmovaps, d, s.mem());
  return d;
}

x86::Vec VecAsm::reg_shared(const Src& s, const x86::Vec& width) {
  if (s.is_reg() || !hoist_at) return reg(s, width);
  const x86::Mem& m = s.mem();
  const auto key = std::make_pair(std::make_pair(m.baseId(), m.offset()), int(width.size()));
  auto it = hoisted_mem_.find(key);
  if (it != hoisted_mem_.end()) return it->second;
  if (reg_hoist_budget <= 0) return reg(s, width);
  --reg_hoist_budget;
  x86::Vec r = like(width);
  asmjit::BaseNode* prev = cc.setCursor(hoist_at);
  cc.emit(sse() ? Inst::kIdMovaps : Inst::kIdVmovaps, r, m);
  hoist_at = cc.cursor();
  cc.setCursor(prev);
  hoisted_mem_.emplace(key, r);
  hoisted_src_.emplace(r.id(), m);
  return r;
}

x86::Vec VecAsm::zero(int bytes) {
  x86::Vec d = newv(bytes);
  // xorps on the xmm view zeroes the whole register under VEX/EVEX
  if (sse()) cc.emit(Inst::kIdXorps, d, d);
  else cc.emit(Inst::kIdVxorps, d.xmm(), d.xmm(), d.xmm());
  return d;
}

x86::Vec VecAsm::ones(int bytes) {
  x86::Vec d = newv(bytes);
  if (evex() && bytes > 32) cc.emit(Inst::kIdVpternlogd, d, d, d, Imm(0xff));
  else if (sse()) cc.emit(Inst::kIdPcmpeqd, d, d);
  else cc.emit(Inst::kIdVpcmpeqd, d, d, d);
  return d;
}

void VecAsm::op3(uint32_t sse_id, uint32_t avx_id, const x86::Vec& d, const x86::Vec& a, const Src& b) {
  if (sse()) {
    cc.emit(Inst::kIdMovaps, d, a);
    cc.emit(InstId(sse_id), d, b.op);
  } else {
    cc.emit(InstId(avx_id), d, a, b.op);
  }
}

x86::Vec VecAsm::bin(uint32_t sse_id, uint32_t avx_id, const x86::Vec& a, const Src& b) {
  x86::Vec d = like(a);
  op3(sse_id, avx_id, d, a, b);
  return d;
}

#define KILN_FOP(NAME, PS, PD, VPS, VPD)                                                          \
  x86::Vec VecAsm::NAME(Lane l, const x86::Vec& a, const Src& b) {                                \
    return l == Lane::b32 ? bin(Inst::kId##PS, Inst::kId##VPS, a, b) : bin(Inst::kId##PD, Inst::kId##VPD, a, b); \
  }
KILN_FOP(add, Addps, Addpd, Vaddps, Vaddpd)
KILN_FOP(sub, Subps, Subpd, Vsubps, Vsubpd)
KILN_FOP(mul, Mulps, Mulpd, Vmulps, Vmulpd)
KILN_FOP(div, Divps, Divpd, Vdivps, Vdivpd)
KILN_FOP(maxx, Maxps, Maxpd, Vmaxps, Vmaxpd)
KILN_FOP(minx, Minps, Minpd, Vminps, Vminpd)
#undef KILN_FOP

x86::Vec VecAsm::sqrt(Lane l, const x86::Vec& a) {
  x86::Vec d = like(a);
  if (sse()) cc.emit(l == Lane::b32 ? Inst::kIdSqrtps : Inst::kIdSqrtpd, d, a);
  else cc.emit(l == Lane::b32 ? Inst::kIdVsqrtps : Inst::kIdVsqrtpd, d, a);
  return d;
}

// FMA forms: 213 computes d = a*d + c (c may be memory), 231 computes
// d = a*b + d (b may be memory).
namespace {
struct FmaIds {
  uint32_t f213, f231;
};
FmaIds fma_ids(int kind, Lane l) {
  const bool s = l == Lane::b32;
  switch (kind) {
    case 0: return {s ? Inst::kIdVfmadd213ps : Inst::kIdVfmadd213pd, s ? Inst::kIdVfmadd231ps : Inst::kIdVfmadd231pd};
    case 1: return {s ? Inst::kIdVfmsub213ps : Inst::kIdVfmsub213pd, s ? Inst::kIdVfmsub231ps : Inst::kIdVfmsub231pd};
    case 2:
      return {s ? Inst::kIdVfnmadd213ps : Inst::kIdVfnmadd213pd, s ? Inst::kIdVfnmadd231ps : Inst::kIdVfnmadd231pd};
    default:
      return {s ? Inst::kIdVfnmsub213ps : Inst::kIdVfnmsub213pd, s ? Inst::kIdVfnmsub231ps : Inst::kIdVfnmsub231pd};
  }
}
}  // namespace

// kind 0: a*b + c, 1: a*b - c, 2: c - a*b, 3: -(a*b) - c
static x86::Vec fma_any(VecAsm& A, int kind, Lane l, const x86::Vec& a, const Src& b, const Src& c, bool fused) {
  if (fused && A.has_fma()) {
    // d = a*b + d with the addend put into d: a constant is loaded (from
    // the pool also when it is hoisted into a register: a load, not a
    // move), a computed value is copied, and that copy is free when the
    // addend dies here (the register allocator then gives d its register,
    // as in the accumulations of the vector math)
    FmaIds id = fma_ids(kind, l);
    x86::Vec d = c.is_reg() ? A.fresh(c.reg()) : A.reg(c, a);
    A.cc.emit(InstId(id.f231), d, a, b.op);
    return d;
  }
  x86::Vec p = A.mul(l, a, b);
  if (kind == 0) return A.add(l, p, c);
  if (kind == 1) return A.sub(l, p, c);
  if (kind == 3) return A.xor_(A.add(l, p, c), l == Lane::b32 ? A.cf(-0.0f) : A.cd(-0.0));
  return A.sub(l, A.reg(c, a), p);
}

void VecAsm::madd_acc(Lane l, const x86::Vec& acc, const Src& x, const Src& c) {
  const bool s = l == Lane::b32;
  if (!has_fma()) {
    if (sse()) {
      cc.emit(s ? Inst::kIdMulps : Inst::kIdMulpd, acc, x.op);
      cc.emit(s ? Inst::kIdAddps : Inst::kIdAddpd, acc, c.op);
    } else {
      cc.emit(s ? Inst::kIdVmulps : Inst::kIdVmulpd, acc, acc, x.op);
      cc.emit(s ? Inst::kIdVaddps : Inst::kIdVaddpd, acc, acc, c.op);
    }
    return;
  }
  x86::Vec xr = reg(x, acc);
  cc.emit(l == Lane::b32 ? Inst::kIdVfmadd213ps : Inst::kIdVfmadd213pd, acc, xr, c.op);  // acc = xr*acc + c
}

x86::Vec VecAsm::madd(Lane l, const x86::Vec& a, const Src& b, const Src& c, bool fused) {
  return fma_any(*this, 0, l, a, b, c, fused);
}
x86::Vec VecAsm::msub(Lane l, const x86::Vec& a, const Src& b, const Src& c, bool fused) {
  return fma_any(*this, 1, l, a, b, c, fused);
}
x86::Vec VecAsm::nmadd(Lane l, const x86::Vec& a, const Src& b, const Src& c, bool fused) {
  return fma_any(*this, 2, l, a, b, c, fused);
}
x86::Vec VecAsm::nmsub(Lane l, const x86::Vec& a, const Src& b, const Src& c, bool fused) {
  return fma_any(*this, 3, l, a, b, c, fused);
}
x86::Vec VecAsm::fma_into(int kind, Lane l, const x86::Vec& acc, const x86::Vec& a, const Src& b, bool fused) {
  if (!(fused && has_fma())) return fma_any(*this, kind, l, a, b, acc, fused);
  cc.emit(InstId(fma_ids(kind, l).f231), acc, a, b.op);
  return acc;
}

x86::Vec VecAsm::round(Lane l, const x86::Vec& a, int mode) {
  if (!sse()) {
    x86::Vec d = like(a);
    const int imm = mode | 8;  // suppress the precision exception
    if (a.size() == 64) cc.emit(l == Lane::b32 ? Inst::kIdVrndscaleps : Inst::kIdVrndscalepd, d, a, Imm(imm));
    else cc.emit(l == Lane::b32 ? Inst::kIdVroundps : Inst::kIdVroundpd, d, a, Imm(imm));
    return d;
  }
  // SSE2, float: |x| >= 2^23 (and NaN) are integers already. Otherwise
  // nearest: (|x| + 2^23) - 2^23; trunc through cvttps2dq; floor/ceil fix
  // trunc by one; the sign of x is put back so that -0.x gives -0.
  x86::Vec ax = and_(a, c32(0x7fffffffu));
  x86::Vec t;
  if (mode == 0) {
    t = sub(l, add(l, ax, cf(8388608.0f)), cf(8388608.0f));
    t = or_(t, and_(a, cf(-0.0f)));
  } else {
    t = i2f(f2i_trunc(a));
    t = or_(t, and_(a, cf(-0.0f)));
    if (mode == 1) t = sub(l, t, and_(mask_to_vec(cmpf(l, Cmp::gt, t, a), Lane::b32, int(a.size())), cf(1.0f)));
    // t - (-1), not t + 1: -0 + 0 would give +0
    if (mode == 2) t = sub(l, t, and_(mask_to_vec(cmpf(l, Cmp::lt, t, a), Lane::b32, int(a.size())), cf(-1.0f)));
  }
  return select(l, cmpf(l, Cmp::lt, ax, cf(8388608.0f)), t, a);
}

// ---- bitwise ------------------------------------------------------------------------------
x86::Vec VecAsm::and_(const x86::Vec& a, const Src& b) { return bin(Inst::kIdAndps, Inst::kIdVandps, a, b); }
x86::Vec VecAsm::or_(const x86::Vec& a, const Src& b) { return bin(Inst::kIdOrps, Inst::kIdVorps, a, b); }
x86::Vec VecAsm::xor_(const x86::Vec& a, const Src& b) { return bin(Inst::kIdXorps, Inst::kIdVxorps, a, b); }
x86::Vec VecAsm::andn(const x86::Vec& a, const Src& b) { return bin(Inst::kIdAndnps, Inst::kIdVandnps, a, b); }

// ---- integers ------------------------------------------------------------------------------
x86::Vec VecAsm::iadd(Lane l, const x86::Vec& a, const Src& b) {
  return l == Lane::b32 ? bin(Inst::kIdPaddd, Inst::kIdVpaddd, a, b) : bin(Inst::kIdPaddq, Inst::kIdVpaddq, a, b);
}
x86::Vec VecAsm::isub(Lane l, const x86::Vec& a, const Src& b) {
  return l == Lane::b32 ? bin(Inst::kIdPsubd, Inst::kIdVpsubd, a, b) : bin(Inst::kIdPsubq, Inst::kIdVpsubq, a, b);
}
x86::Vec VecAsm::imul(Lane l, const x86::Vec& a, const x86::Vec& b) {
  if (l == Lane::b64) return bin(0, Inst::kIdVpmullq, a, b);  // AVX-512DQ only
  if (!sse()) return bin(0, Inst::kIdVpmulld, a, b);
  // SSE2: pmuludq multiplies lanes 0 and 2; shift the odd lanes down for the others.
  x86::Vec ev = bin(Inst::kIdPmuludq, 0, a, b);
  x86::Vec as = ishr(Lane::b64, a, 32), bs = ishr(Lane::b64, b, 32);
  x86::Vec od = bin(Inst::kIdPmuludq, 0, as, bs);
  x86::Vec e2 = like(a), o2 = like(a);
  cc.emit(Inst::kIdPshufd, e2, ev, Imm(0x08));
  cc.emit(Inst::kIdPshufd, o2, od, Imm(0x08));
  return bin(Inst::kIdPunpckldq, 0, e2, o2);
}

static x86::Vec shift_imm(VecAsm& A, uint32_t sse_id, uint32_t avx_id, const x86::Vec& a, int n) {
  x86::Vec d = A.like(a);
  if (A.sse()) {
    A.cc.emit(Inst::kIdMovaps, d, a);
    A.cc.emit(InstId(sse_id), d, Imm(n));
  } else {
    A.cc.emit(InstId(avx_id), d, a, Imm(n));
  }
  return d;
}
x86::Vec VecAsm::ishl(Lane l, const x86::Vec& a, int n) {
  return l == Lane::b32 ? shift_imm(*this, Inst::kIdPslld, Inst::kIdVpslld, a, n)
                        : shift_imm(*this, Inst::kIdPsllq, Inst::kIdVpsllq, a, n);
}
x86::Vec VecAsm::ishr(Lane l, const x86::Vec& a, int n) {
  return l == Lane::b32 ? shift_imm(*this, Inst::kIdPsrld, Inst::kIdVpsrld, a, n)
                        : shift_imm(*this, Inst::kIdPsrlq, Inst::kIdVpsrlq, a, n);
}
x86::Vec VecAsm::isra(Lane l, const x86::Vec& a, int n) {
  return l == Lane::b32 ? shift_imm(*this, Inst::kIdPsrad, Inst::kIdVpsrad, a, n)
                        : shift_imm(*this, 0, Inst::kIdVpsraq, a, n);
}
x86::Vec VecAsm::imax(Lane l, const x86::Vec& a, const x86::Vec& b) {
  if (l == Lane::b64) return bin(0, Inst::kIdVpmaxsq, a, b);
  if (!sse()) return bin(0, Inst::kIdVpmaxsd, a, b);
  return select(l, cmpi(l, Cmp::gt, a, b), a, b);
}
x86::Vec VecAsm::imin(Lane l, const x86::Vec& a, const x86::Vec& b) {
  if (l == Lane::b64) return bin(0, Inst::kIdVpminsq, a, b);
  if (!sse()) return bin(0, Inst::kIdVpminsd, a, b);
  return select(l, cmpi(l, Cmp::lt, a, b), a, b);
}
x86::Vec VecAsm::iabs(Lane l, const x86::Vec& a) {
  x86::Vec d = like(a);
  if (l == Lane::b64) {
    cc.emit(Inst::kIdVpabsq, d, a);
    return d;
  }
  if (!sse()) {
    cc.emit(Inst::kIdVpabsd, d, a);
    return d;
  }
  x86::Vec s = isra(l, a, 31);
  return isub(l, xor_(a, s), s);
}

x86::Vec VecAsm::i2f(const x86::Vec& a) {
  x86::Vec d = like(a);
  cc.emit(sse() ? Inst::kIdCvtdq2ps : Inst::kIdVcvtdq2ps, d, a);
  return d;
}
x86::Vec VecAsm::f2i_trunc(const x86::Vec& a) {
  x86::Vec d = like(a);
  cc.emit(sse() ? Inst::kIdCvttps2dq : Inst::kIdVcvttps2dq, d, a);
  return d;
}
x86::Vec VecAsm::f2i_round(const x86::Vec& a) {
  x86::Vec d = like(a);
  cc.emit(sse() ? Inst::kIdCvtps2dq : Inst::kIdVcvtps2dq, d, a);
  return d;
}

// ---- masks ----------------------------------------------------------------------------------
VMask VecAsm::cmpf(Lane l, Cmp c, const x86::Vec& a, const Src& b) {
  VMask m;
  const bool s = l == Lane::b32;
  if (!sse()) {
    // VEX/EVEX predicates: all quiet (no exception on quiet NaN)
    int imm = 0;
    switch (c) {
      case Cmp::eq: imm = 0x00; break;
      case Cmp::ne: imm = 0x04; break;
      case Cmp::lt: imm = 0x11; break;
      case Cmp::le: imm = 0x12; break;
      case Cmp::gt: imm = 0x1e; break;
      case Cmp::ge: imm = 0x1d; break;
      case Cmp::unord: imm = 0x03; break;
    }
    const uint32_t id = s ? Inst::kIdVcmpps : Inst::kIdVcmppd;
    if (evex()) {
      m.k = cc.newKw();
      cc.emit(InstId(id), m.k, a, b.op, Imm(imm));
    } else {
      m.v = like(a);
      cc.emit(InstId(id), m.v, a, b.op, Imm(imm));
    }
    return m;
  }
  // SSE: predicates 0-7 only; gt/ge swap the operands.
  const uint32_t id = s ? Inst::kIdCmpps : Inst::kIdCmppd;
  x86::Vec x = a;
  Src y = b;
  int imm = 0;
  switch (c) {
    case Cmp::eq: imm = 0; break;
    case Cmp::ne: imm = 4; break;
    case Cmp::lt: imm = 1; break;
    case Cmp::le: imm = 2; break;
    case Cmp::unord: imm = 3; break;
    case Cmp::gt: imm = 1; x = reg(b, a); y = a; break;
    case Cmp::ge: imm = 2; x = reg(b, a); y = a; break;
  }
  m.v = copy(x);
  cc.emit(InstId(id), m.v, y.op, Imm(imm));
  return m;
}

VMask VecAsm::cmpi(Lane l, Cmp c, const x86::Vec& a, const x86::Vec& b) {
  VMask m;
  const bool s = l == Lane::b32;
  if (evex()) {
    int imm = 0;
    switch (c) {
      case Cmp::eq: imm = 0; break;
      case Cmp::lt: imm = 1; break;
      case Cmp::le: imm = 2; break;
      case Cmp::ne: imm = 4; break;
      case Cmp::ge: imm = 5; break;
      case Cmp::gt: imm = 6; break;
      case Cmp::unord: imm = 3; break;  // always false
    }
    m.k = cc.newKw();
    cc.emit(s ? Inst::kIdVpcmpd : Inst::kIdVpcmpq, m.k, a, b, Imm(imm));
    return m;
  }
  const uint32_t eq_s = s ? Inst::kIdPcmpeqd : Inst::kIdPcmpeqq, eq_v = s ? Inst::kIdVpcmpeqd : Inst::kIdVpcmpeqq;
  const uint32_t gt_s = s ? Inst::kIdPcmpgtd : Inst::kIdPcmpgtq, gt_v = s ? Inst::kIdVpcmpgtd : Inst::kIdVpcmpgtq;
  switch (c) {
    case Cmp::eq: m.v = bin(eq_s, eq_v, a, b); break;
    case Cmp::ne: m.v = xor_(bin(eq_s, eq_v, a, b), ones(int(a.size()))); break;
    case Cmp::gt: m.v = bin(gt_s, gt_v, a, b); break;
    case Cmp::lt: m.v = bin(gt_s, gt_v, b, a); break;
    case Cmp::le: m.v = xor_(bin(gt_s, gt_v, a, b), ones(int(a.size()))); break;
    case Cmp::ge: m.v = xor_(bin(gt_s, gt_v, b, a), ones(int(a.size()))); break;
    case Cmp::unord: m.v = zero(int(a.size())); break;
  }
  return m;
}

x86::Vec VecAsm::select(Lane l, const VMask& m, const x86::Vec& t, const x86::Vec& f) {
  x86::Vec d = like(t);
  if (evex()) {
    // a copy then a merge-masked move: with vblendmps' merge form asmjit
    // keeps the destination live (and spilled) across the loop
    cc.emit(Inst::kIdVmovaps, d, f);
    cc.k(m.k).emit(l == Lane::b32 ? Inst::kIdVmovaps : Inst::kIdVmovapd, d, t);
  } else if (!sse()) {
    cc.emit(l == Lane::b32 ? Inst::kIdVblendvps : Inst::kIdVblendvpd, d, f, t, m.v);
  } else {
    return or_(and_(m.v, t), andn(m.v, f));
  }
  return d;
}

VMask VecAsm::mand(const VMask& a, const VMask& b) {
  VMask m;
  if (evex()) {
    m.k = cc.newKw();
    cc.emit(Inst::kIdKandw, m.k, a.k, b.k);
  } else {
    m.v = and_(a.v, b.v);
  }
  return m;
}
VMask VecAsm::mor(const VMask& a, const VMask& b) {
  VMask m;
  if (evex()) {
    m.k = cc.newKw();
    cc.emit(Inst::kIdKorw, m.k, a.k, b.k);
  } else {
    m.v = or_(a.v, b.v);
  }
  return m;
}
VMask VecAsm::mandn(const VMask& a, const VMask& b) {
  VMask m;
  if (evex()) {
    m.k = cc.newKw();
    cc.emit(Inst::kIdKandnw, m.k, a.k, b.k);
  } else {
    m.v = andn(a.v, b.v);
  }
  return m;
}

x86::Vec VecAsm::mask_to_vec(const VMask& m, Lane l, int bytes) {
  if (!evex()) return m.v;
  x86::Vec d = newv(bytes);
  cc.emit(l == Lane::b32 ? Inst::kIdVpmovm2d : Inst::kIdVpmovm2q, d, m.k);
  return d;
}
VMask VecAsm::vec_to_mask(const x86::Vec& v, Lane l) {
  VMask m;
  if (!evex()) {
    m.v = v;
    return m;
  }
  m.k = cc.newKw();
  cc.emit(l == Lane::b32 ? Inst::kIdVpmovd2m : Inst::kIdVpmovq2m, m.k, v);
  return m;
}

// ---- width changes ----------------------------------------------------------------------------
x86::Vec VecAsm::lo_half(const x86::Vec& a) {
  if (a.size() == 64) return a.ymm();
  if (a.size() == 32) return a.xmm();
  return a;  // an 8-byte value lives in the low half of the same xmm
}
x86::Vec VecAsm::hi_half(const x86::Vec& a) {
  if (a.size() == 64) {
    x86::Vec d = cc.newYmm();
    cc.emit(Inst::kIdVextractf32x8, d, a, Imm(1));
    return d;
  }
  if (a.size() == 32) {
    x86::Vec d = cc.newXmm();
    cc.emit(Inst::kIdVextractf128, d, a, Imm(1));
    return d;
  }
  x86::Vec d = cc.newXmm();
  cc.emit(sse() ? Inst::kIdPshufd : Inst::kIdVpshufd, d, a, Imm(0xee));
  return d;
}
x86::Vec VecAsm::concat(const x86::Vec& lo, const x86::Vec& hi) {
  if (lo.size() == 32) {
    x86::Vec d = cc.newZmm();
    cc.emit(Inst::kIdVinsertf32x8, d, lo.zmm(), hi, Imm(1));
    return d;
  }
  if (lo.size() == 16 && !sse() && int(lo.size()) * 2 <= vbytes()) {
    x86::Vec d = cc.newYmm();
    cc.emit(Inst::kIdVinsertf128, d, lo.ymm(), hi, Imm(1));
    return d;
  }
  return bin(Inst::kIdPunpcklqdq, Inst::kIdVpunpcklqdq, lo, hi);
}
x86::Vec VecAsm::widen_i32(const x86::Vec& a, int out_bytes) {
  x86::Vec d = newv(out_bytes);
  if (!sse()) {
    cc.emit(Inst::kIdVpmovsxdq, d, out_bytes > 32 ? x86::Vec(a.ymm()) : out_bytes > 16 ? x86::Vec(a.xmm()) : a);
    return d;
  }
  return bin(Inst::kIdPunpckldq, 0, a, isra(Lane::b32, a, 31));
}
x86::Vec VecAsm::narrow_i64(const x86::Vec& a) {
  if (evex()) {
    x86::Vec d = newv(int(a.size()) / 2);
    cc.emit(Inst::kIdVpmovqd, d, a);
    return d;
  }
  if (a.size() == 32) {
    x86::Vec hi = hi_half(a);
    x86::Vec d = cc.newXmm();
    cc.emit(Inst::kIdVshufps, d, a.xmm(), hi, Imm(0x88));
    return d;
  }
  x86::Vec d = cc.newXmm();
  cc.emit(sse() ? Inst::kIdPshufd : Inst::kIdVpshufd, d, a, Imm(0x08));
  return d;
}

// ---- across lanes ------------------------------------------------------------------------------
x86::Vec VecAsm::swap32(const x86::Vec& a, int lanes) {
  x86::Vec d = like(a);
  if (lanes <= 2) {
    const int imm = lanes == 1 ? 0xb1 : 0x4e;  // [1 0 3 2] / [2 3 0 1] within each 128 bits
    if (sse()) {
      cc.emit(Inst::kIdMovaps, d, a);
      cc.emit(Inst::kIdShufps, d, d, Imm(imm));
    } else {
      cc.emit(Inst::kIdVpermilps, d, a, Imm(imm));
    }
  } else if (a.size() == 64) {
    cc.emit(Inst::kIdVshuff32x4, d, a, a, Imm(lanes == 4 ? 0xb1 : 0x4e));  // 128-bit blocks
  } else {
    cc.emit(Inst::kIdVperm2f128, d, a, a, Imm(0x01));
  }
  return d;
}

static x86::Vec hreduce(VecAsm& A, const x86::Vec& a, x86::Vec (VecAsm::*op)(Lane, const x86::Vec&, const Src&)) {
  x86::Vec r = a;
  for (int lanes = int(a.size()) / 8; lanes >= 1; lanes /= 2) r = (A.*op)(Lane::b32, r, A.swap32(r, lanes));
  return r;
}
x86::Vec VecAsm::hadd32(const x86::Vec& a) { return hreduce(*this, a, &VecAsm::add); }
x86::Vec VecAsm::hmax32(const x86::Vec& a) { return hreduce(*this, a, &VecAsm::maxx); }

x86::Vec VecAsm::splat32(const x86::Vec& s, int bytes) {
  x86::Vec d = newv(bytes);
  if (sse()) {
    cc.emit(Inst::kIdMovaps, d, s);
    cc.emit(Inst::kIdShufps, d, d, Imm(0));
  } else {
    cc.emit(Inst::kIdVbroadcastss, d, s.xmm());
  }
  return d;
}

}  // namespace kiln::codegen::cg
