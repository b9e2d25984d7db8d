// kiln (internal): generate_elementwise, the function skeleton of the CPU
// code generator. One generated function is one loop:
//
//   prologue:  operand pointers, loop-invariant values (broadcast operands,
//              constants and everything computed only from them)
//   loop:      while n - i >= L: body on elements [i, i + L); i += L
//              (AVX-512, and AVX2 for small exp and tanh programs: first
//              while n - i >= 2L, two bodies with their instructions
//              interleaved, see emit_pair)
//   tail:      the last n - i < L elements are copied to 64-byte stack
//              buffers, the same body runs once on the buffers, and the
//              outputs are copied back
//
// On AVX-512 the body also prefetches each input stream 1 KiB ahead, on AVX2
// 2 KiB ahead (one prefetch per pair of AVX2 bodies).
//
// Loads and stores convert between the memory dtype and the register form
// (codegen.h). Outputs are written with streaming stores when the program
// allows it, the run is long and the output pointers are 64-byte aligned
// (an sfence closes such a run). Without strict mode a multiply whose only
// use is an add or subtract of the same float dtype becomes an FMA.
#include <asmjit/x86.h>

#include <atomic>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "assemble.h"
#include "codegen.h"

namespace kiln::codegen {

CpuTarget host_cpu_target();  // cpu_features.cpp

namespace cg {

DType compute_dtype(const Instr& ins, const std::vector<Instr>& code) {
  switch (ins.op) {
    case OpId::LogicalNot:
    case OpId::LogicalAnd:
    case OpId::LogicalOr:
    case OpId::LogicalXor: return DType::bool_;
    case OpId::IsNan:
    case OpId::IsInf:
    case OpId::IsFinite: return code[ins.a].dtype;
    case OpId::Equal:
    case OpId::NotEqual:
    case OpId::Less:
    case OpId::LessEqual:
    case OpId::Greater:
    case OpId::GreaterEqual: return promote_types(code[ins.a].dtype, code[ins.b].dtype);
    default: return ins.dtype;
  }
}

bool emit_interleaved(x86::Compiler& cc, const std::function<void()>& fa, const std::function<void()>& fb) {
  asmjit::BaseNode* s = cc.cursor();
  fa();
  asmjit::BaseNode* e1 = cc.cursor();
  fb();
  asmjit::BaseNode* e2 = cc.cursor();
  std::vector<asmjit::BaseNode*> a, b;
  for (asmjit::BaseNode* n = s->next(); n && e1 != s; n = n->next()) {
    a.push_back(n);
    if (n == e1) break;
  }
  for (asmjit::BaseNode* n = e1->next(); n && e2 != e1; n = n->next()) {
    b.push_back(n);
    if (n == e2) break;
  }
  if (a.empty() || b.empty() || a.back() != e1 || b.back() != e2) return false;
  for (asmjit::BaseNode* n : a)
    if (n->type() != asmjit::NodeType::kInst) return false;
  for (asmjit::BaseNode* n : b)
    if (n->type() != asmjit::NodeType::kInst) return false;
  asmjit::BaseNode* after = e2->next();
  for (size_t k = 0; k < b.size(); ++k) {
    cc.removeNode(b[k]);
    cc.addAfter(b[k], k < a.size() ? a[k] : b[k - 1]);
  }
  cc.setCursor(after ? after->prev() : cc.lastNode());
  return true;
}

}  // namespace cg

namespace {

using namespace cg;
using asmjit::Label;

bool dtype_ok(DType d, CpuTarget t) {
  if (!has_kind(d)) return false;
  if (d == DType::int64) return t == CpuTarget::avx512;
  if (d == DType::float64 || d == DType::float16) return t != CpuTarget::sse2;
  return true;
}

bool needs_rounding(OpId op) {
  switch (op) {
    case OpId::Neg:
    case OpId::Abs:
    case OpId::Sign:
    case OpId::Relu:
    case OpId::Floor:
    case OpId::Ceil:
    case OpId::Round:
    case OpId::Trunc:
    case OpId::Maximum:
    case OpId::Minimum:
    case OpId::Where:
    case OpId::Clamp: return false;  // exact on values of the format
    default: return true;
  }
}

/// Whether row `op` computing in `cd` has a generated form.
bool op_ok(OpId op, DType cd, bool strict) {
  if (op == OpId::Cast) return true;
  if (is_call_op(op, cd, strict)) return true;
  const VK k = kind_of(cd);
  if (is_math_op(op)) return !strict && k == VK::f32;  // not bitwise eager's
  if (is_predicate_op(op)) return true;
  switch (op) {
    case OpId::Add:
    case OpId::Mul:
    case OpId::Maximum:
    case OpId::Minimum:
    case OpId::Where: return true;
    case OpId::Neg:
    case OpId::Abs:
    case OpId::Sign:
    case OpId::Square:
    case OpId::Relu:
    case OpId::Floor:
    case OpId::Ceil:
    case OpId::Round:
    case OpId::Trunc:
    case OpId::Sub:
    case OpId::Clamp: return k != VK::m;
    case OpId::Reciprocal:
    case OpId::Sqrt:
    case OpId::Rsqrt:
    case OpId::Div: return is_float_kind(k);
    default: return false;  // integer pow, floor_divide, remainder, fmod (eager raises on bad input)
  }
}

/// Why `p` cannot be generated for `t`; empty when it can.
std::string why_not(const ElementwiseProgram& p, CpuTarget t) {
  const int nops = int(p.operand_dtypes.size());
  if (t > host_cpu_target()) return std::string("target ") + cpu_target_name(t) + " is not supported by this CPU";
  if (int(p.operand_broadcast.size()) != nops) return "operand_broadcast has the wrong size";
  if (p.num_outputs < 1 || p.num_outputs > nops) return "bad number of outputs";
  for (int k = 0; k < nops; ++k) {
    if (k < p.num_outputs && p.operand_broadcast[k]) return "output " + std::to_string(k) + " is broadcast";
    if (!dtype_ok(p.operand_dtypes[k], t))
      return "operand dtype " + std::string(name(p.operand_dtypes[k])) + " on " + cpu_target_name(t);
  }
  auto value = [&](int32_t r, size_t i) {
    return r >= 0 && size_t(r) < i && p.code[r].kind != Instr::Kind::store;
  };
  for (size_t i = 0; i < p.code.size(); ++i) {
    const Instr& in = p.code[i];
    const std::string at = "instruction " + std::to_string(i) + ": ";
    if (in.kind != Instr::Kind::store && !dtype_ok(in.dtype, t))
      return at + "dtype " + std::string(name(in.dtype)) + " on " + cpu_target_name(t);
    switch (in.kind) {
      case Instr::Kind::load:
        if (in.arg < p.num_outputs || in.arg >= nops) return at + "load of a non-input operand";
        break;
      case Instr::Kind::imm:
        if (in.arg >= p.table_slots) return at + "constant-table slot out of range";
        break;
      case Instr::Kind::store:
        if (in.arg < 0 || in.arg >= p.num_outputs) return at + "store to a non-output operand";
        if (!value(in.a, i)) return at + "bad operand register";
        break;
      case Instr::Kind::op: {
        const OpInfo& info = op_info(in.op);
        if (info.category != OpCategory::Unary && info.category != OpCategory::Binary &&
            info.category != OpCategory::Ternary)
          return at + "'" + std::string(info.name) + "' is not elementwise";
        const int32_t r[3] = {in.a, in.b, in.c};
        for (int j = 0; j < info.arity; ++j)
          if (!value(r[j], i)) return at + "bad operand register";
        const DType cd = compute_dtype(in, p.code);
        if (!dtype_ok(cd, t) || !op_ok(in.op, cd, p.strict))
          return at + "'" + std::string(info.name) + "' on " + std::string(name(cd)) + (p.strict ? " (strict)" : "") +
                 " has no generated form for " + cpu_target_name(t);
        break;
      }
    }
  }
  return {};
}

bool is64(DType d) { return d == DType::float64 || d == DType::int64; }

class JitKernel final : public ElementwiseKernel {
 public:
  JitKernel(InnerLoopFn f, size_t n, std::string dis, CodeImage image)
      : f_(f), size_(n), dis_(std::move(dis)), image_(std::move(image)) {}
  ~JitKernel() override { jit_runtime().release(reinterpret_cast<void*>(f_)); }
  InnerLoopFn fn() const override { return f_; }
  size_t code_size() const override { return size_; }
  const std::string& disassembly() const override { return dis_; }
  const CodeImage& image() const override { return image_; }

 private:
  InnerLoopFn f_;
  size_t size_;
  std::string dis_;
  CodeImage image_;
};

std::atomic<int64_t> g_generated{0}, g_loaded{0};

constexpr int kPrefetchAhead = 1024;      // bytes ahead of each input stream (AVX-512)
constexpr int kPrefetchAheadAvx2 = 2048;  // (AVX2)

/// Emits one program.
class Gen {
 public:
  Gen(const ElementwiseProgram& p, CpuTarget t, x86::Compiler& cc) : p_(p), cc_(cc), A_(cc, t) {}

  void run();

 private:
  const ElementwiseProgram& p_;
  x86::Compiler& cc_;
  VecAsm A_;
  Ctx* c_ = nullptr;
  std::vector<x86::Gp> P_;        // operand pointers
  x86::Gp table_;                 // constant table (program.table_slots > 0)
  x86::Gp i_, nt_;                // element index, streaming flag
  bool stream_ = false;           // the body being emitted writes with streaming stores
  int off_ = 0;                   // element offset of the body being emitted (the unrolled pair's second)
  std::vector<x86::Vec> val_;
  std::vector<bool> done_, invariant_, fuse_;
  std::vector<bool> negx_;  // a float32 neg whose only use is exp (folded into it)
  std::vector<int> uses_;
  std::vector<DType> cd_;

  int isz(int k) const { return int(size_of(p_.operand_dtypes[k])); }
  x86::Mem at(int k) {
    static const int shift[9] = {0, 0, 1, 0, 2, 0, 0, 0, 3};
    if (p_.operand_broadcast[k]) return x86::ptr(P_[k]);
    return x86::ptr(P_[k], i_, uint32_t(shift[isz(k)]), int32_t(off_ * isz(k)));
  }
  x86::Vec get(int32_t r) {
    if (!done_[r]) emit_value(r);
    return val_[r];
  }
  x86::Vec operand(int32_t r, DType to) { return convert(*c_, get(r), p_.code[r].dtype, to); }
  void emit_value(size_t i);
  void emit_store(size_t i);
  void emit_body(bool stream);
  void emit_pair(bool stream, int L);
  void emit_pair_lockstep(bool stream, int L);
  void emit_prefetches();
  bool has_exp_ = false;  // the program has a float32 exp (AVX2: emit_pair_lockstep)
  bool avx2_pairs() const;
  void copy_bytes(const x86::Gp& dst, const x86::Gp& src, const x86::Gp& nbytes, bool into_buffer);
};

// Tails are short (< one vector, so < 64 bytes). AVX-512: one masked byte
// move (masked-off bytes are neither read nor faulted on) whose buffer side
// is a full 64-byte access, so the body's loads from the buffer are
// forwarded from a plain store (a masked store there stalls them).
// Otherwise 8-byte moves, then single bytes; a byte loop alone made a
// 10-element tail cost more than the whole body.
void Gen::copy_bytes(const x86::Gp& dst, const x86::Gp& src, const x86::Gp& nbytes, bool into_buffer) {
  if (A_.evex()) {
    x86::Gp m = cc_.newGpq();
    x86::KReg k = cc_.newKq();
    x86::Vec v = cc_.newZmm();
    cc_.mov(m, -1);
    cc_.bzhi(m, m, nbytes.r64());
    cc_.kmovq(k, m);
    if (into_buffer) {
      cc_.k(k).z().vmovdqu8(v, x86::ptr(src));
      cc_.vmovdqu8(x86::ptr(dst), v);
    } else {
      cc_.vmovdqu8(v, x86::ptr(src));
      cc_.k(k).vmovdqu8(x86::ptr(dst), v);
    }
    return;
  }
  x86::Gp j = cc_.newIntPtr(), end8 = cc_.newIntPtr(), q = cc_.newGpq(), t = cc_.newGpd();
  Label qloop = cc_.newLabel(), bloop = cc_.newLabel(), end = cc_.newLabel();
  cc_.xor_(j, j);
  cc_.mov(end8, nbytes);
  cc_.and_(end8, -8);
  cc_.bind(qloop);
  cc_.cmp(j, end8);
  cc_.jae(bloop);
  cc_.mov(q, x86::qword_ptr(src, j));
  cc_.mov(x86::qword_ptr(dst, j), q);
  cc_.add(j, 8);
  cc_.jmp(qloop);
  cc_.bind(bloop);
  cc_.cmp(j, nbytes);
  cc_.jae(end);
  cc_.movzx(t, x86::byte_ptr(src, j));
  cc_.mov(x86::byte_ptr(dst, j), t.r8());
  cc_.inc(j);
  cc_.jmp(bloop);
  cc_.bind(end);
}

void Gen::emit_value(size_t i) {
  const Instr& in = p_.code[i];
  Ctx& c = *c_;
  x86::Vec v;
  switch (in.kind) {
    case Instr::Kind::imm: {
      if (in.arg >= 0) {  // from the constant table: broadcast like a 1-element operand
        v = load_splat(c, in.dtype, x86::ptr(table_, 8 * in.arg));
        break;
      }
      const int nb = c.bytes(kind_of(in.dtype));
      x86::Vec w = A_.newv(nb);
      switch (kind_of(in.dtype)) {
        case VK::f32: v = A_.reg(A_.cf(float(in.imm)), w); break;
        case VK::f64: v = A_.reg(A_.cd(in.imm), w); break;
        case VK::i32: v = A_.reg(A_.c32(uint32_t(int32_t(in.imm))), w); break;
        case VK::i64: v = A_.reg(A_.c64(uint64_t(int64_t(in.imm))), w); break;
        case VK::m: v = in.imm != 0 ? A_.ones(nb) : A_.zero(nb); break;
      }
      break;
    }
    case Instr::Kind::load: {
      const DType md = p_.operand_dtypes[in.arg];
      x86::Vec raw = p_.operand_broadcast[in.arg] ? load_splat(c, md, at(in.arg)) : load_run(c, md, at(in.arg));
      v = convert(c, raw, md, in.dtype);
      break;
    }
    case Instr::Kind::op: {
      if (in.op == OpId::Cast) {
        v = operand(in.a, in.dtype);
        break;
      }
      const DType cd = cd_[i];
      // a*b +- c as one FMA when the product has no other use
      if ((in.op == OpId::Add || in.op == OpId::Sub) && (fuse_[in.a] || fuse_[in.b])) {
        const bool first = fuse_[in.a];
        const Instr& m = p_.code[first ? in.a : in.b];
        const int32_t oi = first ? in.b : in.a;
        x86::Vec m0 = operand(m.a, cd), m1 = operand(m.b, cd), other = operand(oi, cd);
        const Lane l = lane_of(kind_of(cd));
        const int kind = in.op == OpId::Add ? 0 : first ? 1 : 2;  // a*b + c, a*b - c, c - a*b
        // an addend used only here (and computed per vector) takes the result: no copy
        if (uses_[oi] == 1 && !invariant_[oi]) v = A_.fma_into(kind, l, other, m0, m1, true);
        else if (kind == 0) v = A_.madd(l, m0, m1, other, true);
        else if (kind == 1) v = A_.msub(l, m0, m1, other, true);
        else v = A_.nmadd(l, m0, m1, other, true);
        done_[first ? in.a : in.b] = true;  // consumed
        break;
      }
      const int n = op_info(in.op).arity;
      const int32_t r[3] = {in.a, in.b, in.c};
      x86::Vec x[3];
      for (int j = 0; j < n; ++j)
        if (!negx_[r[j]]) x[j] = operand(r[j], (in.op == OpId::Where && j == 0) ? DType::bool_ : cd);
      if (is_call_op(in.op, cd, p_.strict)) v = emit_scalar_call(c, in.op, cd, x, n);
      else if (is_math_op(in.op) && negx_[in.a]) {
        // exp(-y): the negation folded into exp's reduction (same bits)
        v = emit_math(c, in.op, operand(p_.code[in.a].a, cd), /*negate=*/true);
        done_[in.a] = true;  // consumed
      } else if (is_math_op(in.op)) v = emit_math(c, in.op, x[0]);
      else if (is_predicate_op(in.op)) v = emit_predicate(c, in, cd, x, n);
      else v = emit_arith(c, in, cd, x, n);
      const bool narrow_int = in.dtype == DType::uint8 || in.dtype == DType::int8;
      if (!is_predicate_op(in.op) && (needs_rounding(in.op) || narrow_int)) v = round_to(c, v, in.dtype);
      break;
    }
    case Instr::Kind::store: return;
  }
  val_[i] = v;
  done_[i] = true;
}

void Gen::emit_store(size_t i) {
  const Instr& in = p_.code[i];
  const DType md = p_.operand_dtypes[in.arg];
  x86::Vec v = operand(in.a, md);
  if (stream_ && can_stream(*c_, md)) {  // streaming when nt_ (long, aligned runs; never the tail's pass)
    Label plain = cc_.newLabel(), end = cc_.newLabel();
    cc_.test(nt_, nt_);
    cc_.jz(plain);
    store_run(*c_, md, at(in.arg), v, true);
    cc_.jmp(end);
    cc_.bind(plain);
    store_run(*c_, md, at(in.arg), v, false);
    cc_.bind(end);
  } else {
    store_run(*c_, md, at(in.arg), v, false);
  }
}

// Prefetches of each input stream's line ahead of the body at off_: one
// per vector; on AVX2 none for the second body of a pair (64 bytes of
// float32 a pair: each line is reached once at the pair's stride).
void Gen::emit_prefetches() {
  if (A_.sse()) return;
  if (!A_.evex() && off_ != 0) return;
  for (int k = p_.num_outputs; k < int(p_.operand_dtypes.size()); ++k)
    if (!p_.operand_broadcast[k]) {
      x86::Mem m = at(k);
      m.addOffset(A_.evex() ? kPrefetchAhead : kPrefetchAheadAvx2);
      cc_.prefetcht0(m);
    }
}

// The loop body: the values of elements [i, i + L) (loop-invariant values
// come from the prologue); with `stream`, each store streams when nt_ is set.
void Gen::emit_body(bool stream) {
  const size_t N = p_.code.size();
  stream_ = stream;
  // AVX-512: each input stream's line 1 KiB ahead is prefetched (one
  // prefetch per vector and input; never faults, also past the end or in
  // the tail's stack buffers). The hardware prefetcher starts over at every
  // 4 KiB page of each stream; measured on the chain at 1M float32 (inputs
  // in the last-level cache): 681-687 -> 657-661 us, 2048 and 4096 bytes
  // ahead 661-671 us
  // AVX2: 2 KiB ahead (a prefetch per 32-byte vector, two per line; one per
  // pair of vectors in the pair loop: emit_prefetches). Eager
  // exp of 16M float32 (huge-page tensors, streamed output, this project's
  // VM, min of 30 runs): 1 thread 9.9 -> 7.4 (1 KiB) -> 6.8 ms (2 KiB, as
  // 3-8 KiB), 2 threads 5.0 -> 3.9 -> 3.6 ms; the same kernel on L2-resident
  // data unchanged (0.35 ns per element).
  emit_prefetches();
  for (size_t i = 0; i < N; ++i) {
    if (p_.code[i].kind == Instr::Kind::store) emit_store(i);
    else if (!done_[i] && !fuse_[i] && !negx_[i] && !invariant_[i]) emit_value(i);
  }
  stream_ = false;
}

// AVX2 runs pairs of bodies (the loop of Gen::run) for small programs whose
// one vector math row is a float32 exp or tanh (eager's exp and tanh, and
// fused groups as small): their two bodies fit the 16 ymm registers. The
// vector ALU ports bound these loops in-cache (their time per vector is the
// count of vector ALU instructions at two per cycle); a pair removes one
// loop step and, for exp, half a fast-path test per vector. Per element,
// 32K float32 in L1/L2 on one core of this project's VM (min of 40 runs):
// exp 0.354 -> 0.341 ns, tanh 0.411 -> 0.400 ns.
bool Gen::avx2_pairs() const {
  if (A_.target != CpuTarget::avx2 || p_.code.size() > 8) return false;
  int math = 0, pairable = 0;
  for (size_t i = 0; i < p_.code.size(); ++i) {
    const Instr& in = p_.code[i];
    if (in.kind != Instr::Kind::op || !is_math_op(in.op)) continue;
    ++math;
    if ((in.op == OpId::Exp || in.op == OpId::Tanh) && cd_[i] == DType::float32) ++pairable;
  }
  return math == 1 && pairable == 1;
}

// Two bodies, on elements [i, i + L) and [i + L, i + 2L), their
// instructions interleaved one by one when both are straight-line code (no
// labels, jumps or calls): the two dependency chains of the vector math then
// share the scheduler instead of the first filling it (the chain's exp and
// tanh are each a chain of about 20 dependent operations).
// AVX2 programs with an exp (whose AVX2 form branches per vector, vmath.cpp:
// exp_fast_path) emit the two bodies in lockstep instead, instruction by
// instruction, the exp of both as one emit_exp_pair (one fast-path test for
// the two vectors, their instructions interleaved).
void Gen::emit_pair(bool stream, int L) {
  if (!A_.evex() && has_exp_) {
    emit_pair_lockstep(stream, L);
    return;
  }
  const std::vector<bool> before = done_;
  emit_interleaved(
      cc_, [&] { emit_body(stream); },
      [&] {
        done_ = before;
        off_ = L;
        emit_body(stream);
        off_ = 0;
      });
  done_ = before;
}

// The pair of emit_pair for AVX2 programs with an exp: body A's and body B's
// values instruction by instruction (B's state kept in valB/doneB), exps as
// emit_exp_pair. The same operations on each vector as emit_body's, so the
// same bits.
void Gen::emit_pair_lockstep(bool stream, int L) {
  const size_t N = p_.code.size();
  const std::vector<bool> before = done_;
  std::vector<x86::Vec> valB = val_;
  std::vector<bool> doneB = done_;
  auto as_b = [&](auto&& f) {  // runs f with body B's state
    std::swap(val_, valB);
    std::swap(done_, doneB);
    off_ = L;
    f();
    off_ = 0;
    std::swap(val_, valB);
    std::swap(done_, doneB);
  };
  stream_ = stream;
  emit_prefetches();
  as_b([&] { emit_prefetches(); });
  for (size_t i = 0; i < N; ++i) {
    const Instr& in = p_.code[i];
    if (in.kind == Instr::Kind::store) {
      emit_store(i);
      as_b([&] { emit_store(i); });
      continue;
    }
    if (done_[i] || fuse_[i] || negx_[i] || invariant_[i]) continue;
    if (in.kind == Instr::Kind::op && in.op == OpId::Exp && cd_[i] == DType::float32) {
      const bool neg = negx_[in.a];
      const int32_t src = neg ? p_.code[in.a].a : in.a;
      x86::Vec xa = operand(src, cd_[i]), xb;
      as_b([&] { xb = operand(src, cd_[i]); });
      auto [va, vb] = emit_exp_pair(*c_, xa, xb, neg);
      val_[i] = round_to(*c_, va, in.dtype);
      valB[i] = round_to(*c_, vb, in.dtype);
      done_[i] = doneB[i] = true;
      if (neg) done_[in.a] = doneB[in.a] = true;  // consumed
      continue;
    }
    emit_value(i);
    as_b([&] { emit_value(i); });
  }
  stream_ = false;
  done_ = before;
}

void Gen::run() {
  const size_t N = p_.code.size();
  const int nops = int(p_.operand_dtypes.size());
  cd_.resize(N);
  bool wide = false;
  for (DType d : p_.operand_dtypes) wide |= is64(d);
  for (size_t i = 0; i < N; ++i) {
    const Instr& in = p_.code[i];
    if (in.kind == Instr::Kind::store) continue;
    cd_[i] = in.kind == Instr::Kind::op ? compute_dtype(in, p_.code) : in.dtype;
    wide |= is64(in.dtype) || is64(cd_[i]);
  }
  const Lane lw = wide ? Lane::b64 : Lane::b32;
  Ctx c{A_, A_.vbytes() / lane_bytes(lw), lw, p_.strict};
  c_ = &c;

  // uses, loop invariance, FMA candidates
  uses_.assign(N, 0);
  invariant_.assign(N, false);
  fuse_.assign(N, false);
  std::vector<int> user(N, -1);
  for (size_t i = 0; i < N; ++i) {
    const Instr& in = p_.code[i];
    bool inv = in.kind == Instr::Kind::imm || (in.kind == Instr::Kind::load && p_.operand_broadcast[in.arg]);
    if (in.kind == Instr::Kind::op) {
      inv = true;
      const int n = op_info(in.op).arity;
      const int32_t rr[3] = {in.a, in.b, in.c};
      for (int j = 0; j < n; ++j) {
        const int32_t r = rr[j];
        ++uses_[r];
        user[r] = int(i);
        inv = inv && invariant_[r];
      }
    } else if (in.kind == Instr::Kind::store) {
      ++uses_[in.a];
      user[in.a] = int(i);
    }
    invariant_[i] = inv;
  }
  if (!p_.strict && A_.has_fma()) {
    for (size_t i = 0; i < N; ++i) {
      const Instr& in = p_.code[i];
      if (in.kind != Instr::Kind::op || in.op != OpId::Mul || uses_[i] != 1) continue;
      if (in.dtype != DType::float32 && in.dtype != DType::float64) continue;
      const Instr& u = p_.code[user[i]];
      if (u.kind == Instr::Kind::op && (u.op == OpId::Add || u.op == OpId::Sub) && u.dtype == in.dtype &&
          cd_[user[i]] == in.dtype && invariant_[user[i]] == invariant_[i] && !(u.a == u.b))
        fuse_[i] = true;
    }
  }

  // exp(neg(y)) with the neg used only there: exp of -y in one reduction
  // (FMA targets; float32 math rows are never strict)
  negx_.assign(N, false);
  if (!p_.strict && A_.has_fma()) {
    for (size_t i = 0; i < N; ++i) {
      const Instr& in = p_.code[i];
      if (in.kind != Instr::Kind::op || in.op != OpId::Neg || uses_[i] != 1 || cd_[i] != DType::float32) continue;
      if (p_.code[in.a].dtype != DType::float32 || fuse_[in.a]) continue;
      const Instr& u = p_.code[user[i]];
      if (u.kind == Instr::Kind::op && u.op == OpId::Exp && cd_[user[i]] == DType::float32 &&
          invariant_[user[i]] == invariant_[i])
        negx_[i] = true;
    }
  }

  has_exp_ = false;
  for (size_t i = 0; i < N; ++i)
    if (p_.code[i].kind == Instr::Kind::op && p_.code[i].op == OpId::Exp && cd_[i] == DType::float32 &&
        !invariant_[i] && !p_.strict)
      has_exp_ = true;

  asmjit::FuncNode* fn = cc_.addFunc(asmjit::FuncSignatureT<void, char**, const int64_t*, int64_t>());
  if (!A_.sse()) {
    fn->frame().setAvxEnabled();
    fn->frame().setAvxCleanup();
  }
  if (A_.evex()) fn->frame().setAvx512Enabled();
  x86::Gp ptrs = cc_.newIntPtr("ptrs"), strides = cc_.newIntPtr("strides"), n = cc_.newInt64("n");
  fn->setArg(0, ptrs);
  fn->setArg(1, strides);
  fn->setArg(2, n);
  P_.resize(nops);
  for (int k = 0; k < nops; ++k) {
    P_[k] = cc_.newIntPtr();
    cc_.mov(P_[k], x86::ptr(ptrs, 8 * k));
  }
  if (p_.table_slots > 0) {
    table_ = cc_.newIntPtr();
    cc_.mov(table_, x86::ptr(ptrs, 8 * nops));
  }
  // constants of the vector math are loaded here, once, on AVX-512 (32
  // registers); with 16 registers, reloading from the constant pool is
  // faster than the spills hoisting causes (measured)
  A_.hoist_at = cc_.cursor();
  A_.hoist_budget = A_.evex() ? 24 : 0;
  // AVX2: only the few constants an instruction needs in a register (the
  // bounds of max/min clamps), which would otherwise cost a load each per
  // vector; the body leaves about this many of the 16 ymm registers free
  A_.reg_hoist_budget = A_.evex() || A_.sse() ? 0 : 5;
  i_ = cc_.newIntPtr("i");
  nt_ = cc_.newIntPtr("nt");
  x86::Gp tail = cc_.newIntPtr("tail"), rem = cc_.newIntPtr("rem");
  Label L_after = cc_.newLabel(), L_body = cc_.newLabel(), L_out = cc_.newLabel(), L_done = cc_.newLabel();

  // prologue: loop-invariant values
  val_.assign(N, x86::Vec());
  done_.assign(N, false);
  for (size_t i = 0; i < N; ++i)
    if (invariant_[i] && !fuse_[i] && !negx_[i] && !done_[i]) emit_value(i);

  cc_.xor_(i_, i_);
  cc_.xor_(tail, tail);
  cc_.xor_(nt_, nt_);
  if (p_.streaming_stores) {
    Label skip = cc_.newLabel();
    cc_.cmp(n, kStreamMinElements);
    cc_.jl(skip);
    x86::Gp a = cc_.newIntPtr();
    cc_.xor_(a, a);
    for (int k = 0; k < p_.num_outputs; ++k) cc_.or_(a, P_[k]);
    cc_.test(a, 63);
    cc_.jnz(skip);
    cc_.mov(nt_, 1);
    cc_.bind(skip);
  }

  // The loop: one copy of the body, one index register (scaled addressing),
  // add + cmp/jle per vector while i <= n - L. The last n - i < L elements
  // then go through the same body once more on the stack buffers (i = 0,
  // lim = 0: the loop ends after that one pass) and are copied back.
  x86::Gp lim = cc_.newIntPtr("lim");
  // AVX-512 (32 registers), and AVX2 for small exp and tanh programs
  // (avx2_pairs): first a loop over pairs of vectors, their two bodies
  // interleaved (emit_pair); the single-body loop below then runs at most
  // once before the tail
  if (A_.evex() || avx2_pairs()) {
    Label L_pair = cc_.newLabel(), L_single = cc_.newLabel();
    x86::Gp lim2 = cc_.newIntPtr("lim2");
    cc_.mov(lim2, n);
    cc_.sub(lim2, 2 * c.L);
    cc_.cmp(i_, lim2);
    cc_.jg(L_single);
    cc_.bind(L_pair);
    emit_pair(p_.streaming_stores, c.L);
    cc_.add(i_, 2 * c.L);
    cc_.cmp(i_, lim2);
    cc_.jle(L_pair);
    cc_.bind(L_single);
  }
  cc_.mov(lim, n);
  cc_.sub(lim, c.L);
  cc_.cmp(i_, lim);
  cc_.jg(L_after);
  cc_.bind(L_body);
  emit_body(p_.streaming_stores);
  cc_.add(i_, c.L);
  cc_.cmp(i_, lim);
  cc_.jle(L_body);

  // after the loop: the tail's pass done, a tail to run, or done
  cc_.bind(L_after);
  cc_.test(tail, tail);
  cc_.jnz(L_out);
  cc_.mov(rem, n);
  cc_.sub(rem, i_);
  cc_.test(rem, rem);
  cc_.jle(L_done);
  std::vector<x86::Gp> orig(nops);
  {
    x86::Gp src = cc_.newIntPtr(), nb = cc_.newIntPtr();
    for (int k = 0; k < nops; ++k) {
      if (p_.operand_broadcast[k]) continue;
      x86::Mem buf = cc_.newStack(64, 64);
      x86::Gp b = cc_.newIntPtr();
      cc_.lea(b, buf);
      cc_.lea(src, at(k));
      if (k < p_.num_outputs) {
        orig[k] = cc_.newIntPtr();
        cc_.mov(orig[k], src);
      } else {
        // Zero the buffer first: the lanes past `rem` then hold 0 instead of
        // stack garbage, which the per-lane C library calls (pow, fmod,
        // atan2, remainder: scalar_calls.cpp) would branch on (valgrind's
        // uninitialised-value reports). Once per run, so it costs nothing.
        const int vb = A_.vbytes();
        const x86::Vec z = A_.zero(vb);
        for (int off = 0; off < 64; off += vb)
          cc_.emit(A_.sse() ? asmjit::x86::Inst::kIdMovups : asmjit::x86::Inst::kIdVmovups,
                   x86::ptr(b, off, uint32_t(vb)), z);
        cc_.mov(nb, rem);
        cc_.imul(nb, nb, isz(k));
        copy_bytes(b, src, nb, true);
      }
      cc_.mov(P_[k], b);
    }
  }
  cc_.xor_(i_, i_);
  cc_.xor_(lim, lim);
  cc_.mov(tail, 1);
  cc_.xor_(nt_, nt_);
  cc_.jmp(L_body);

  // tail: copy the outputs back (those the program writes)
  cc_.bind(L_out);
  {
    std::vector<bool> stored(nops, false);
    for (const Instr& in : p_.code)
      if (in.kind == Instr::Kind::store) stored[in.arg] = true;
    x86::Gp nb = cc_.newIntPtr();
    for (int k = 0; k < p_.num_outputs; ++k) {
      if (!stored[k]) continue;
      cc_.mov(nb, rem);
      cc_.imul(nb, nb, isz(k));
      copy_bytes(orig[k], P_[k], nb, false);
    }
  }
  cc_.bind(L_done);
  if (p_.streaming_stores) {
    Label skip = cc_.newLabel();
    cc_.cmp(n, kStreamMinElements);
    cc_.jl(skip);
    cc_.sfence();
    cc_.bind(skip);
  }
  cc_.ret();
  cc_.endFunc();
}

}  // namespace

bool can_generate(const ElementwiseProgram& p, CpuTarget t) { return why_not(p, t).empty(); }

std::unique_ptr<ElementwiseKernel> generate_elementwise(const ElementwiseProgram& p, CpuTarget t,
                                                        bool want_disassembly) {
  const std::string why = why_not(p, t);
  if (!why.empty()) throw Error("codegen: cannot generate this program: " + why);
  Assembled a = assemble(want_disassembly, [&](x86::Compiler& cc) { Gen(p, t, cc).run(); });
  g_generated.fetch_add(1, std::memory_order_relaxed);
  return std::make_unique<JitKernel>(reinterpret_cast<InnerLoopFn>(a.fn), a.code_size, std::move(a.disassembly),
                                     std::move(a.image));
}

std::unique_ptr<ElementwiseKernel> load_elementwise(const CodeImage& image) {
  void* fn = place_image(image);
  g_loaded.fetch_add(1, std::memory_order_relaxed);
  return std::make_unique<JitKernel>(reinterpret_cast<InnerLoopFn>(fn), image.bytes.size(), std::string(), image);
}

CodegenCounts codegen_counts() {
  return {g_generated.load(std::memory_order_relaxed), g_loaded.load(std::memory_order_relaxed)};
}

uint64_t CodeImage::hash(std::string_view key) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto add = [&](const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  const uint64_t nk = key.size(), nb = bytes.size(), nr = relocs.size();
  add(&nk, 8);
  add(key.data(), key.size());
  add(&nb, 8);
  add(bytes.data(), bytes.size());
  add(&nr, 8);
  for (const Reloc& r : relocs) {
    add(&r.offset, 4);
    add(&r.callee, 4);
  }
  return h;
}

}  // namespace kiln::codegen
