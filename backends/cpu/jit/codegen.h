// kiln (internal): shared declarations of the CPU code generator's pieces.
// A program is generated as one loop that handles L elements per iteration
// (L = vector bytes / lane bytes, the lane being 64 bits when any value of the
// program is float64 or int64, else 32 bits). Every SSA value lives in one
// register:
//   float32, float16, bfloat16 -> f32 lanes (16-bit floats are float32 values
//                                  rounded to their format after every op)
//   float64 -> f64, int32 -> i32, int64 -> i64,
//   bool -> all-ones/all-zeros lanes of the program's lane width.
// A 32-bit value in a 64-bit-lane program fills half a register.
#pragma once
#include <functional>
#include <string>
#include <utility>

#include "../../../jit/elementwise_program.h"
#include "vec_asm.h"

namespace kiln::codegen::cg {

enum class VK : uint8_t { f32, f64, i32, i64, m };

/// Whether values of dtype d have a register form (bool, int32, int64 and the floats).
bool has_kind(DType d);
VK kind_of(DType d);
inline Lane lane_of(VK k) { return (k == VK::f64 || k == VK::i64) ? Lane::b64 : Lane::b32; }
inline bool is_float_kind(VK k) { return k == VK::f32 || k == VK::f64; }

struct Ctx {
  VecAsm& A;
  int L;        ///< elements per iteration
  Lane lw;      ///< the program's lane width (of bool values)
  bool strict;  ///< no FMA contraction
  /// Lane width of kind k's values (bool: the program's lane width).
  Lane lane(VK k) const { return k == VK::m ? lw : lane_of(k); }
  /// Register bytes of a value of kind k.
  int bytes(VK k) const {
    return k == VK::m ? A.vbytes() : L * (lane_of(k) == Lane::b64 ? 8 : 4);
  }
};

/// Converts a value between dtypes with eager's semantics (detail::convert):
/// float -> int truncates, NaN/out of range give the integer minimum;
/// nonzero (and NaN) -> true; results of dtype float16/bfloat16 are rounded
/// to that format.
x86::Vec convert(Ctx& c, const x86::Vec& v, DType from, DType to);
/// Rounds an f32-kind value to float16 / bfloat16 (round to nearest even,
/// NaN kept NaN: bit-identical to tensor/half.h); identity for other dtypes.
x86::Vec round_to(Ctx& c, const x86::Vec& v, DType d);
/// A bool value as a lane mask for selects on lanes of kind k.
VMask bool_mask(Ctx& c, const x86::Vec& m, VK k);
/// A lane mask of kind k's lanes (from a compare) as a bool value.
x86::Vec mask_bool(Ctx& c, const VMask& m, VK k);

/// L elements of dtype d at addr (f16/bf16 widened to f32).
x86::Vec load_run(Ctx& c, DType d, const x86::Mem& addr);
/// One element of dtype d at addr, repeated over L lanes.
x86::Vec load_splat(Ctx& c, DType d, const x86::Mem& addr);
/// Stores L elements of dtype d (v of kind_of(d), already rounded for f16/bf16).
/// `nt`: non-temporal when the store is at least 16 bytes.
void store_run(Ctx& c, DType d, const x86::Mem& addr, const x86::Vec& v, bool nt);
/// Whether store_run can stream (store of >= 16 bytes).
bool can_stream(const Ctx& c, DType d);

/// The operation of instruction `ins` on operands already converted to its
/// compute dtype `cd`; returns a value of ins.dtype (rounded for f16/bf16).
x86::Vec emit_arith(Ctx& c, const Instr& ins, DType cd, const x86::Vec* x, int n);
/// Compare, logical and predicate rows: returns a bool value.
x86::Vec emit_predicate(Ctx& c, const Instr& ins, DType cd, const x86::Vec* x, int n);
/// float32 transcendental rows (vmath.cpp).
/// A float32 math row of x (vmath_alg.h); with `negate`, exp of -x (exp
/// only, FMA targets: the negation folded into the reduction, same bits as
/// exp of the negated value).
x86::Vec emit_math(Ctx& c, OpId op, const x86::Vec& x, bool negate = false);
/// exp (with `negate`: exp of -x) of two independent vectors x0, x1 on the
/// AVX2 target, as emit_math(Exp) on each (the same bits), with one fast-path
/// test for both and their instructions interleaved (vmath.cpp:
/// exp_fast_path2). Throws std::logic_error on other targets.
std::pair<x86::Vec, x86::Vec> emit_exp_pair(Ctx& c, const x86::Vec& x0, const x86::Vec& x1, bool negate);
/// Runs a() then b(), which emit code at cc's cursor, and interleaves the
/// nodes they added one by one (a's first, then b's first, ...) when both
/// added only instructions (no labels, jumps or calls); else leaves them in
/// order. Two independent dependency chains then share the scheduler instead
/// of the first filling it. Returns whether it interleaved.
bool emit_interleaved(x86::Compiler& cc, const std::function<void()>& a, const std::function<void()>& b);
bool is_math_op(OpId op);
bool is_predicate_op(OpId op);

/// Rows computed by calling eager's scalar functor per lane (scalar_calls.cpp):
/// float pow/floor_divide/remainder/fmod/atan2, and float64 vector math
/// (not in strict mode).
bool is_call_op(OpId op, DType cd, bool strict);
x86::Vec emit_scalar_call(Ctx& c, OpId op, DType cd, const x86::Vec* x, int n);

/// The dtype an op computes in (see emitter.cpp).
DType compute_dtype(const Instr& ins, const std::vector<Instr>& code);

/// Called from generated code (Callee::scalar_lanes): y[i] = op(a[i][, b[i]])
/// for i < n, in float (is64 = 0) or double.
void scalar_lanes(int32_t op, int32_t is64, const void* a, const void* b, void* y, int64_t n);
/// Called from generated code (Callee::trig_lanes): sin/cos/tan (fn) of the
/// lanes of x with |x| >= kTrigMaxArg into y; other lanes untouched.
void trig_lanes(const float* x, float* y, int64_t n, int32_t fn);

}  // namespace kiln::codegen::cg
