// kiln (internal): the vector instruction layer of the CPU code generator.
// VecAsm wraps an asmjit x86::Compiler and emits one SIMD operation per call
// on virtual registers, choosing the SSE2 (two-operand, xmm), AVX2 (VEX,
// ymm) or AVX-512 (EVEX, zmm, k-mask) form for the target. Every result is a
// fresh virtual register (SSA style); asmjit's register allocator assigns and
// spills. The width of an operation is the width of its first register
// operand, so the same call serves xmm, ymm and zmm values.
//
// Masks (VMask) are k registers on AVX-512 and all-ones/all-zeros vector
// lanes on SSE2/AVX2. Constants are splatted into the function's constant
// pool and used as memory operands.
#pragma once
#include <asmjit/x86.h>

#include <cstdint>
#include <map>
#include <utility>

#include "../../../jit/elementwise_program.h"

namespace kiln::codegen::cg {

namespace x86 = asmjit::x86;

/// Element width of a vector operation.
enum class Lane : uint8_t { b32, b64 };
inline int lane_bytes(Lane l) { return l == Lane::b32 ? 4 : 8; }

/// Comparison predicates (IEEE: every ordered predicate is false for NaN,
/// `ne` and `unord` are true).
enum class Cmp : uint8_t { eq, ne, lt, le, gt, ge, unord };

/// A vector register operand or a memory operand (a constant).
struct Src {
  asmjit::Operand op;
  Src() = default;
  Src(const x86::Vec& v) : op(v) {}   // NOLINT: implicit by design
  Src(const x86::Mem& m) : op(m) {}   // NOLINT
  bool is_reg() const { return op.isReg(); }
  const x86::Vec& reg() const { return op.as<x86::Vec>(); }
  const x86::Mem& mem() const { return op.as<x86::Mem>(); }
};

/// A lane mask: a k register (AVX-512) or a vector of all-ones lanes.
struct VMask {
  x86::KReg k;
  x86::Vec v;
};

class VecAsm {
 public:
  VecAsm(x86::Compiler& cc, CpuTarget t);

  x86::Compiler& cc;
  const CpuTarget target;
  bool evex() const { return target == CpuTarget::avx512; }
  bool sse() const { return target == CpuTarget::sse2; }
  /// The target has FMA3 (avx2, avx512).
  bool has_fma() const { return target != CpuTarget::sse2; }
  /// Bytes of the widest vector register.
  int vbytes() const { return evex() ? 64 : target == CpuTarget::avx2 ? 32 : 16; }

  // ---- registers and constants ----------------------------------------------------
  /// A new register holding at least `bytes` (xmm for <= 16).
  x86::Vec newv(int bytes);
  x86::Vec like(const x86::Vec& v) { return newv(int(v.size())); }
  /// A constant pool entry: `bits` (of the lane width) repeated over the widest vector.
  x86::Mem c32(uint32_t bits);
  x86::Mem c64(uint64_t bits);
  x86::Mem cf(float f);
  x86::Mem cd(double d);
  /// A constant (bits of lane width l) as an operand of `bytes` width: a
  /// register loaded once where hoist_at points (before the loop), while the
  /// hoisting budget lasts, else a constant pool operand. Registers are
  /// shared: callers must not modify them.
  Src konst(uint64_t bits, Lane l, int bytes);
  /// Insertion point of hoisted constant loads (null: emit in place).
  asmjit::BaseNode* hoist_at = nullptr;
  int hoist_budget = 0;
  /// Loads s into a register of v's width (no-op for a register).
  x86::Vec reg(const Src& s, const x86::Vec& width);
  /// As reg(), for an operand the caller only reads: a constant-pool operand
  /// is loaded once where hoist_at points while reg_hoist_budget lasts (the
  /// constants an instruction needs in a register, e.g. the first operand of
  /// max/min, which AVX2 would otherwise reload every iteration), else as reg().
  x86::Vec reg_shared(const Src& s, const x86::Vec& width);
  int reg_hoist_budget = 0;
  x86::Vec copy(const x86::Vec& a);
  x86::Vec zero(int bytes);
  x86::Vec ones(int bytes);  ///< all bits set

  // ---- floating point (Lane::b32 = float, b64 = double) -----------------------------
  x86::Vec add(Lane l, const x86::Vec& a, const Src& b);
  x86::Vec sub(Lane l, const x86::Vec& a, const Src& b);
  x86::Vec mul(Lane l, const x86::Vec& a, const Src& b);
  x86::Vec div(Lane l, const x86::Vec& a, const Src& b);
  /// x86 maxps/minps: a > b ? a : b and a < b ? a : b (b when either is NaN).
  x86::Vec maxx(Lane l, const x86::Vec& a, const Src& b);
  x86::Vec minx(Lane l, const x86::Vec& a, const Src& b);
  x86::Vec sqrt(Lane l, const x86::Vec& a);
  /// a*b + c, fused when `fused` (and the target has FMA), else mul then add.
  x86::Vec madd(Lane l, const x86::Vec& a, const Src& b, const Src& c, bool fused);
  /// acc = acc*x + c in place (acc must be a register the caller owns);
  /// fused on FMA targets. Saves the copy of a three-operand form.
  void madd_acc(Lane l, const x86::Vec& acc, const Src& x, const Src& c);
  /// a*b - c and c - a*b, likewise.
  x86::Vec msub(Lane l, const x86::Vec& a, const Src& b, const Src& c, bool fused);
  x86::Vec nmadd(Lane l, const x86::Vec& a, const Src& b, const Src& c, bool fused);
  /// -(a*b) - c, likewise.
  x86::Vec nmsub(Lane l, const x86::Vec& a, const Src& b, const Src& c, bool fused);
  /// As madd (kind 0), msub (1), nmadd (2), nmsub (3) with the addend `acc`
  /// overwritten by the result (231 form, no copy) on FMA targets when
  /// `fused`: for an addend that dies here. Returns the result register.
  x86::Vec fma_into(int kind, Lane l, const x86::Vec& acc, const x86::Vec& a, const Src& b, bool fused);
  /// Rounding: 0 nearest even, 1 floor, 2 ceil, 3 trunc (roundps semantics:
  /// -0 and NaN kept). SSE2 (float only) emulates it with integer conversion.
  x86::Vec round(Lane l, const x86::Vec& a, int mode);

  // ---- bitwise (any lane type) ----------------------------------------------------------
  x86::Vec and_(const x86::Vec& a, const Src& b);
  x86::Vec or_(const x86::Vec& a, const Src& b);
  x86::Vec xor_(const x86::Vec& a, const Src& b);
  /// ~a & b
  x86::Vec andn(const x86::Vec& a, const Src& b);

  // ---- integers ----------------------------------------------------------------------------
  x86::Vec iadd(Lane l, const x86::Vec& a, const Src& b);
  x86::Vec isub(Lane l, const x86::Vec& a, const Src& b);
  x86::Vec imul(Lane l, const x86::Vec& a, const x86::Vec& b);  ///< low bits (wrapping)
  x86::Vec ishl(Lane l, const x86::Vec& a, int n);
  x86::Vec ishr(Lane l, const x86::Vec& a, int n);  ///< logical
  x86::Vec isra(Lane l, const x86::Vec& a, int n);  ///< arithmetic (b64: AVX-512 only)
  x86::Vec imax(Lane l, const x86::Vec& a, const x86::Vec& b);
  x86::Vec imin(Lane l, const x86::Vec& a, const x86::Vec& b);
  x86::Vec iabs(Lane l, const x86::Vec& a);
  /// int32 <-> float32 (cvtdq2ps; cvttps2dq truncates, cvtps2dq rounds to even).
  x86::Vec i2f(const x86::Vec& a);
  x86::Vec f2i_trunc(const x86::Vec& a);
  x86::Vec f2i_round(const x86::Vec& a);

  // ---- masks ---------------------------------------------------------------------------------
  VMask cmpf(Lane l, Cmp c, const x86::Vec& a, const Src& b);
  /// Integer compare (eq, ne, lt, le, gt, ge), signed.
  VMask cmpi(Lane l, Cmp c, const x86::Vec& a, const x86::Vec& b);
  /// m ? t : f, lanes of width l.
  x86::Vec select(Lane l, const VMask& m, const x86::Vec& t, const x86::Vec& f);
  VMask mand(const VMask& a, const VMask& b);
  VMask mor(const VMask& a, const VMask& b);
  VMask mandn(const VMask& a, const VMask& b);  ///< ~a & b
  /// All-ones/zero lanes of width `l` in a register of `bytes` bytes.
  x86::Vec mask_to_vec(const VMask& m, Lane l, int bytes);
  /// From all-ones/zero lanes of width l.
  VMask vec_to_mask(const x86::Vec& v, Lane l);

  // ---- width changes ------------------------------------------------------------------------
  /// Low half / high half of a vector (as the next smaller register).
  x86::Vec lo_half(const x86::Vec& a);
  x86::Vec hi_half(const x86::Vec& a);
  /// Concatenates two halves into a register of twice the width.
  x86::Vec concat(const x86::Vec& lo, const x86::Vec& hi);
  /// Sign-extends 32-bit lanes of a (half width) to 64-bit lanes (full width).
  x86::Vec widen_i32(const x86::Vec& a, int out_bytes);
  /// Truncates 64-bit lanes to 32-bit lanes (result half the width).
  x86::Vec narrow_i64(const x86::Vec& a);

  // ---- across lanes (32-bit float lanes) ------------------------------------------------
  /// a with neighbouring blocks of `lanes` 32-bit lanes swapped (1, 2, 4 or 8,
  /// less than a's lane count).
  x86::Vec swap32(const x86::Vec& a, int lanes);
  /// Horizontal sum / maximum (maxps) of a's float lanes, repeated in every
  /// lane. Fixed pairing (halves, then quarters, ...): deterministic.
  x86::Vec hadd32(const x86::Vec& a);
  x86::Vec hmax32(const x86::Vec& a);
  /// The float in the low lane of `s` repeated over a register of `bytes`.
  x86::Vec splat32(const x86::Vec& s, int bytes);

  /// A fresh register holding a's value: for a constant hoisted into a
  /// register by konst()/reg_shared(), a load from the constant pool (a load
  /// port) rather than a register move (a vector ALU slot on CPUs that do
  /// not eliminate moves); else a register copy.
  x86::Vec fresh(const x86::Vec& a);

  std::map<std::pair<uint64_t, int>, x86::Vec> hoisted_;
  std::map<uint32_t, x86::Mem> hoisted_src_;  // hoisted register id -> its pool operand
  std::map<std::pair<std::pair<uint32_t, int64_t>, int>, x86::Vec> hoisted_mem_;  // (label, offset), bytes

  /// asmjit instruction selection helpers (public for the emitters).
  void op3(uint32_t sse_id, uint32_t avx_id, const x86::Vec& d, const x86::Vec& a, const Src& b);
  x86::Vec bin(uint32_t sse_id, uint32_t avx_id, const x86::Vec& a, const Src& b);
};

}  // namespace kiln::codegen::cg
