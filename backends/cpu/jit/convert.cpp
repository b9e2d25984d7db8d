// kiln (internal): dtype conversions, loads and stores of the code generator.
#include <algorithm>
#include <stdexcept>

#include "codegen.h"

namespace kiln::codegen::cg {

using asmjit::Imm;
namespace Inst = asmjit::x86::Inst;

bool has_kind(DType d) {
  switch (d) {
    case DType::uint8:
    case DType::int8:
    case DType::bool_:
    case DType::int32:
    case DType::int64:
    case DType::float16:
    case DType::bfloat16:
    case DType::float32:
    case DType::float64: return true;
    default: return false;
  }
}

VK kind_of(DType d) {
  switch (d) {
    case DType::bool_: return VK::m;
    case DType::uint8:
    case DType::int8:
    case DType::int32: return VK::i32;
    case DType::int64: return VK::i64;
    case DType::float64: return VK::f64;
    case DType::float16:
    case DType::bfloat16:
    case DType::float32: return VK::f32;
    default: throw std::logic_error("codegen: no register form for this dtype");
  }
}

namespace {

x86::Mem sized(const x86::Mem& m, int n) {
  x86::Mem r = m;
  r.setSize(uint32_t(n));
  return r;
}

x86::Vec view(const x86::Vec& v, int bytes) {
  if (bytes > 32) return v.zmm();
  if (bytes > 16) return v.ymm();
  return v.xmm();
}

/// Loads `n` bytes (4, 8, 16, 32 or 64) into a register.
x86::Vec load_bytes(VecAsm& A, const x86::Mem& addr, int n) {
  x86::Vec r = A.newv(n);
  const bool v = !A.sse();
  if (n >= 16) A.cc.emit(v ? Inst::kIdVmovups : Inst::kIdMovups, r, sized(addr, n));
  else if (n == 8) A.cc.emit(v ? Inst::kIdVmovq : Inst::kIdMovq, r, sized(addr, 8));
  else A.cc.emit(v ? Inst::kIdVmovd : Inst::kIdMovd, r, sized(addr, 4));
  return r;
}

void store_bytes(VecAsm& A, const x86::Mem& addr, const x86::Vec& r, int n, bool nt) {
  const bool v = !A.sse();
  if (n >= 16) {
    const uint32_t id = nt ? (v ? Inst::kIdVmovntps : Inst::kIdMovntps) : (v ? Inst::kIdVmovups : Inst::kIdMovups);
    A.cc.emit(id, sized(addr, n), view(r, n));
  } else if (n == 8) {
    A.cc.emit(v ? Inst::kIdVmovq : Inst::kIdMovq, sized(addr, 8), r.xmm());
  } else {
    A.cc.emit(v ? Inst::kIdVmovd : Inst::kIdMovd, sized(addr, 4), r.xmm());
  }
}

x86::Mem one_of(Ctx& c, VK k) {
  switch (k) {
    case VK::f32: return c.A.cf(1.0f);
    case VK::f64: return c.A.cd(1.0);
    case VK::i64: return c.A.c64(1);
    default: return c.A.c32(1);
  }
}

x86::Vec cvt(VecAsm& A, uint32_t id, int out_bytes, const x86::Vec& v) {
  x86::Vec d = A.newv(out_bytes);
  A.cc.emit(id, d, v);
  return d;
}

}  // namespace

VMask bool_mask(Ctx& c, const x86::Vec& m, VK k) {
  if (c.A.evex()) return c.A.vec_to_mask(m, c.lw);
  if (c.lane(k) == c.lw) return c.A.vec_to_mask(m, c.lw);
  return c.A.vec_to_mask(c.A.narrow_i64(m), Lane::b32);
}

x86::Vec mask_bool(Ctx& c, const VMask& m, VK k) {
  if (c.A.evex()) return c.A.mask_to_vec(m, c.lw, c.A.vbytes());
  if (c.lane(k) == c.lw) return m.v;
  return c.A.widen_i32(m.v, c.A.vbytes());
}

x86::Vec round_to(Ctx& c, const x86::Vec& v, DType d) {
  VecAsm& A = c.A;
  // 8-bit integers live in int32 lanes: wrap to the type (static_cast)
  if (d == DType::uint8) return A.and_(v, A.c32(0xff));
  if (d == DType::int8) return A.isra(Lane::b32, A.ishl(Lane::b32, v, 24), 24);
  if (d == DType::float16) {
    // F16C: vcvtps2ph with imm 0 rounds to nearest even regardless of MXCSR.
    const int n = int(v.size());
    x86::Vec h = A.newv(n / 2);
    A.cc.emit(Inst::kIdVcvtps2ph, h, v, Imm(0));
    x86::Vec r = A.newv(n);
    A.cc.emit(Inst::kIdVcvtph2ps, r, view(h, n / 2));
    return r;
  }
  if (d == DType::bfloat16) {
    // Round to nearest even on the top 16 bits: x + 0x7fff + bit16(x);
    // a NaN is kept a (quiet) NaN as in bfloat16_t::from_float.
    x86::Vec odd = A.and_(A.ishr(Lane::b32, v, 16), A.c32(1));
    x86::Vec r = A.and_(A.iadd(Lane::b32, A.iadd(Lane::b32, v, A.c32(0x7fff)), odd), A.c32(0xffff0000u));
    x86::Vec qn = A.and_(A.or_(v, A.c32(0x00400000u)), A.c32(0xffff0000u));
    x86::Vec ax = A.and_(v, A.c32(0x7fffffffu));
    VMask nan = A.cmpi(Lane::b32, Cmp::gt, ax, A.reg(A.c32(0x7f800000u), ax));
    return A.select(Lane::b32, nan, qn, r);
  }
  return v;
}

x86::Vec convert(Ctx& c, const x86::Vec& v, DType from, DType to) {
  if (from == to) return v;
  VecAsm& A = c.A;
  const VK kf = kind_of(from), kt = kind_of(to);
  x86::Vec r = v;
  if (kf == kt) {
    // same register form: only a narrower format changes the value
  } else if (kt == VK::m) {
    x86::Vec z = A.zero(int(v.size()));
    VMask m = is_float_kind(kf) ? A.cmpf(lane_of(kf), Cmp::ne, v, z) : A.cmpi(lane_of(kf), Cmp::ne, v, z);
    return mask_bool(c, m, kf);
  } else if (kf == VK::m) {
    x86::Vec m = (lane_of(kt) == c.lw) ? v : A.narrow_i64(v);
    r = A.and_(view(m, c.bytes(kt)), one_of(c, kt));
  } else if (is_float_kind(kf) && (to == DType::int8 || to == DType::uint8)) {
    // numpy (detail::convert): int8 is the truncation when it fits, else
    // -128; uint8 is the low 8 bits of the truncation (through int64), so
    // take the value modulo 256 exactly first (x - 256 floor(x / 256);
    // NaN and inf give 0 through the integer conversion's minimum)
    const Lane l = lane_of(kf);
    x86::Vec t = A.round(l, v, 3);
    if (to == DType::uint8) {
      const Src k256 = kf == VK::f32 ? Src(A.cf(256.0f)) : Src(A.cd(256.0));
      const Src inv = kf == VK::f32 ? Src(A.cf(1.0f / 256)) : Src(A.cd(1.0 / 256));
      t = A.nmadd(l, A.round(l, A.mul(l, t, inv), 1), k256, t, false);
    }
    x86::Vec i = kf == VK::f32 ? A.f2i_trunc(t) : cvt(A, Inst::kIdVcvttpd2dq, c.bytes(kt), t);
    if (to == DType::int8) {
      const Src lo = kf == VK::f32 ? Src(A.cf(-128.0f)) : Src(A.cd(-128.0));
      const Src hi = kf == VK::f32 ? Src(A.cf(128.0f)) : Src(A.cd(128.0));
      VMask in = A.mand(A.cmpf(l, Cmp::ge, v, lo), A.cmpf(l, Cmp::lt, v, hi));
      if (!A.evex() && kf == VK::f64) in = A.vec_to_mask(A.narrow_i64(in.v), Lane::b32);
      i = A.select(Lane::b32, in, i, A.reg(A.c32(0xffffff80u), i));
    }
    r = i;
  } else {
    const int ob = c.bytes(kt);
    switch (kf) {
      case VK::f32:
        r = kt == VK::f64 ? cvt(A, Inst::kIdVcvtps2pd, ob, v)
          : kt == VK::i32 ? A.f2i_trunc(v)
                          : cvt(A, Inst::kIdVcvttps2qq, ob, v);
        break;
      case VK::f64:
        r = kt == VK::f32 ? cvt(A, Inst::kIdVcvtpd2ps, ob, v)
          : kt == VK::i32 ? cvt(A, Inst::kIdVcvttpd2dq, ob, v)
                          : cvt(A, Inst::kIdVcvttpd2qq, ob, v);
        break;
      case VK::i32:
        r = kt == VK::f32 ? A.i2f(v) : kt == VK::f64 ? cvt(A, Inst::kIdVcvtdq2pd, ob, v) : A.widen_i32(v, ob);
        break;
      case VK::i64:
        r = kt == VK::f32 ? cvt(A, Inst::kIdVcvtqq2ps, ob, v)
          : kt == VK::f64 ? cvt(A, Inst::kIdVcvtqq2pd, ob, v)
                          : A.narrow_i64(v);
        break;
      default: break;
    }
  }
  return round_to(c, r, to);
}

// ---- memory ---------------------------------------------------------------------------------

x86::Vec load_run(Ctx& c, DType d, const x86::Mem& addr) {
  VecAsm& A = c.A;
  const int n = c.L * int(size_of(d));
  switch (d) {
    case DType::float16: {
      x86::Vec raw = load_bytes(A, addr, n);
      return cvt(A, Inst::kIdVcvtph2ps, 2 * n, view(raw, n));
    }
    case DType::bfloat16: {
      x86::Vec raw = load_bytes(A, addr, n);
      if (A.sse()) return A.bin(Inst::kIdPunpcklwd, 0, A.zero(16), raw);  // x << 16 per lane
      x86::Vec w = cvt(A, Inst::kIdVpmovzxwd, 2 * n, view(raw, n));
      return A.ishl(Lane::b32, w, 16);
    }
    case DType::uint8:
    case DType::int8: {
      x86::Vec raw = load_bytes(A, addr, n);
      const bool sgn = d == DType::int8;
      if (!A.sse()) return cvt(A, sgn ? Inst::kIdVpmovsxbd : Inst::kIdVpmovzxbd, 4 * n, raw.xmm());
      x86::Vec z = A.zero(16);
      x86::Vec w = A.bin(Inst::kIdPunpcklbw, 0, z, raw);  // byte to the top of each word
      w = A.bin(Inst::kIdPunpcklwd, 0, z, w);             // ... and of each dword
      return sgn ? A.isra(Lane::b32, w, 24) : A.ishr(Lane::b32, w, 24);
    }
    case DType::bool_: {
      x86::Vec raw = load_bytes(A, addr, n);
      if (A.evex()) {
        VMask m;
        m.k = A.cc.newKq();
        A.cc.emit(Inst::kIdVptestmb, m.k, raw.xmm(), raw.xmm());
        return A.mask_to_vec(m, c.lw, A.vbytes());
      }
      x86::Vec z = A.bin(Inst::kIdPcmpeqb, Inst::kIdVpcmpeqb, raw, A.zero(16));  // 0xff where false
      x86::Vec w;
      if (A.sse()) {
        w = A.bin(Inst::kIdPunpcklbw, 0, z, z);
        w = A.bin(Inst::kIdPunpcklwd, 0, w, w);
      } else {
        w = cvt(A, c.lw == Lane::b32 ? Inst::kIdVpmovsxbd : Inst::kIdVpmovsxbq, A.vbytes(), z);
      }
      return A.xor_(w, A.ones(A.vbytes()));
    }
    default: return load_bytes(A, addr, n);
  }
}

x86::Vec load_splat(Ctx& c, DType d, const x86::Mem& addr) {
  VecAsm& A = c.A;
  const VK k = kind_of(d);
  const int ob = c.bytes(k);
  x86::Vec out = A.newv(ob);
  auto splat32 = [&](const x86::Vec& x) {
    if (A.sse()) A.cc.emit(Inst::kIdPshufd, out, x, Imm(0));
    else A.cc.emit(Inst::kIdVpbroadcastd, out, x.xmm());
  };
  auto splat64 = [&](const x86::Vec& x) {
    if (A.sse()) A.cc.emit(Inst::kIdPshufd, out, x, Imm(0x44));
    else A.cc.emit(Inst::kIdVpbroadcastq, out, x.xmm());
  };
  switch (d) {
    case DType::float32:
    case DType::int32:
      if (A.sse()) splat32(load_bytes(A, addr, 4));
      else A.cc.emit(Inst::kIdVbroadcastss, out, sized(addr, 4));
      return out;
    case DType::float64:
    case DType::int64:
      if (ob <= 16) splat64(load_bytes(A, addr, 8));
      else A.cc.emit(Inst::kIdVbroadcastsd, out, sized(addr, 8));
      return out;
    case DType::float16: {
      x86::Gp g = A.cc.newGpd();
      A.cc.movzx(g, sized(addr, 2));
      x86::Vec x = A.cc.newXmm();
      A.cc.emit(Inst::kIdVmovd, x, g);
      A.cc.emit(Inst::kIdVcvtph2ps, x, x);
      splat32(x);
      return out;
    }
    case DType::bfloat16: {
      x86::Gp g = A.cc.newGpd();
      A.cc.movzx(g, sized(addr, 2));
      A.cc.shl(g, 16);
      x86::Vec x = A.cc.newXmm();
      A.cc.emit(A.sse() ? Inst::kIdMovd : Inst::kIdVmovd, x, g);
      splat32(x);
      return out;
    }
    case DType::uint8:
    case DType::int8: {
      x86::Gp g = A.cc.newGpd();
      if (d == DType::int8) A.cc.movsx(g, sized(addr, 1));
      else A.cc.movzx(g, sized(addr, 1));
      x86::Vec x = A.cc.newXmm();
      A.cc.emit(A.sse() ? Inst::kIdMovd : Inst::kIdVmovd, x, g);
      splat32(x);
      return out;
    }
    case DType::bool_: {
      x86::Gp g = A.cc.newGpq();
      A.cc.xor_(g.r32(), g.r32());
      A.cc.cmp(sized(addr, 1), 0);
      A.cc.setne(g.r8());
      A.cc.neg(g);  // 0 or all ones
      x86::Vec x = A.cc.newXmm();
      if (c.lw == Lane::b32) {
        A.cc.emit(A.sse() ? Inst::kIdMovd : Inst::kIdVmovd, x, g.r32());
        splat32(x);
      } else {
        A.cc.emit(A.sse() ? Inst::kIdMovq : Inst::kIdVmovq, x, g);
        splat64(x);
      }
      return out;
    }
    default: throw std::logic_error("codegen: load_splat dtype");
  }
}

bool can_stream(const Ctx& c, DType d) { return c.L * int(size_of(d)) >= 16; }

void store_run(Ctx& c, DType d, const x86::Mem& addr, const x86::Vec& v, bool nt) {
  VecAsm& A = c.A;
  const int n = c.L * int(size_of(d));
  nt = nt && n >= 16;
  switch (d) {
    case DType::float16: {
      x86::Vec h = A.newv(n);
      A.cc.emit(Inst::kIdVcvtps2ph, view(h, std::max(n, 16)), v, Imm(0));
      store_bytes(A, addr, h, n, nt);
      return;
    }
    case DType::bfloat16: {
      x86::Vec w;
      if (A.sse()) {
        x86::Vec t = A.isra(Lane::b32, v, 16);
        w = A.bin(Inst::kIdPackssdw, 0, t, t);
      } else {
        x86::Vec t = A.ishr(Lane::b32, v, 16);
        if (A.evex()) {
          w = A.newv(n);
          A.cc.emit(Inst::kIdVpmovdw, view(w, std::max(n, 16)), t);
        } else if (t.size() == 32) {
          w = A.bin(0, Inst::kIdVpackusdw, t.xmm(), A.hi_half(t));
        } else {
          w = A.bin(0, Inst::kIdVpackusdw, t, t);
        }
      }
      store_bytes(A, addr, w, n, nt);
      return;
    }
    case DType::uint8:
    case DType::int8: {
      // values are in the type's range: truncating packs are exact
      x86::Vec w;
      if (A.evex()) {
        w = A.cc.newXmm();
        A.cc.emit(Inst::kIdVpmovdb, w, v);
      } else {
        x86::Vec t = v.size() == 32 ? A.bin(0, Inst::kIdVpackssdw, v.xmm(), A.hi_half(v))
                                    : A.bin(Inst::kIdPackssdw, Inst::kIdVpackssdw, v, v);
        w = d == DType::int8 ? A.bin(Inst::kIdPacksswb, Inst::kIdVpacksswb, t, t)
                             : A.bin(Inst::kIdPackuswb, Inst::kIdVpackuswb, t, t);
      }
      store_bytes(A, addr, w, n, nt);
      return;
    }
    case DType::bool_: {
      x86::Vec w;
      if (A.evex()) {
        x86::Vec t = c.lw == Lane::b32 ? A.ishr(Lane::b32, v, 31) : A.ishr(Lane::b64, v, 63);
        w = A.cc.newXmm();
        A.cc.emit(c.lw == Lane::b32 ? Inst::kIdVpmovdb : Inst::kIdVpmovqb, w, t);
      } else {
        x86::Vec m = c.lw == Lane::b64 ? A.narrow_i64(v) : v;
        x86::Vec t = A.ishr(Lane::b32, m, 31);
        if (t.size() == 32) t = A.bin(0, Inst::kIdVpackusdw, t.xmm(), A.hi_half(t));
        else t = A.bin(Inst::kIdPackssdw, Inst::kIdVpackusdw, t, t);
        w = A.bin(Inst::kIdPackuswb, Inst::kIdVpackuswb, t, t);
      }
      store_bytes(A, addr, w, n, nt);
      return;
    }
    default: store_bytes(A, addr, v, n, nt);
  }
}

}  // namespace kiln::codegen::cg
