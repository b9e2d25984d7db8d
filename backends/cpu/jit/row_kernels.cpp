// kiln (internal): the generator of row kernels (see row_kernels.h) and
// their process-wide cache. A kernel is one function:
//
//   for each row:  pass 1, [pass 2,] pass 3 over the row's n elements
//
// and each pass is a loop of U vectors per iteration (U accumulators, so
// that reductions are not bound by the add latency), then a loop of single
// vectors, then a tail of n mod L elements that is copied into stack
// buffers prefilled with a neutral value (-inf for max and exp, 0 for sums,
// the row's first mean for the deviations of layer_norm),
// computed as one full vector, and copied back. Loop-carried accumulators
// are updated in place; everything else is VecAsm's SSA values.
#include "row_kernels.h"

#include <asmjit/x86.h>

#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <sstream>
#include <vector>

#include "../parallel_ranges.h"
#include "assemble.h"
#include "codegen.h"

namespace kiln::codegen {

CpuTarget host_cpu_target();  // cpu_features.cpp

namespace {

using namespace cg;
using asmjit::Label;
namespace Inst = asmjit::x86::Inst;


constexpr float kInf = std::numeric_limits<float>::infinity();

/// One operand of a pass: a row pointer, read and/or written.
struct Stream {
  x86::Gp base;
  bool in = true, out = false;
  float fill = 0.0f;  ///< value of the tail's lanes past n (inputs)
  x86::Vec fill_v;    ///< a register to fill them with instead, when valid
  Stream(const x86::Gp& b, bool i, bool o, float f = 0.0f) : base(b), in(i), out(o), fill(f) {}
};

class RowGen {
 public:
  RowGen(const RowKernelKey& k, x86::Compiler& cc)
      : k_(k), cc_(cc), A_(cc, k.target), W_(A_.vbytes()), L_(W_ / 4), C_{A_, L_, Lane::b32, false} {}
  void run();

 private:
  using Mems = std::array<x86::Mem, 10>;
  const RowKernelKey k_;
  x86::Compiler& cc_;
  VecAsm A_;
  const int W_, L_;  // vector bytes, floats per vector
  Ctx C_;
  x86::Gp n_, i_;

  x86::Vec load(const x86::Mem& m) {
    x86::Vec v = A_.newv(W_);
    cc_.emit(A_.sse() ? Inst::kIdMovups : Inst::kIdVmovups, v, m);
    return v;
  }
  void store(const x86::Mem& m, const x86::Vec& v) { cc_.emit(A_.sse() ? Inst::kIdMovups : Inst::kIdVmovups, m, v); }
  x86::Vec splat(float f) { return A_.reg(A_.cf(f), A_.newv(W_)); }
  /// acc = acc (op) v in place (a loop-carried register).
  void acc_op(uint32_t sse_id, uint32_t avx_id, const x86::Vec& acc, const x86::Vec& v) {
    if (A_.sse()) cc_.emit(asmjit::InstId(sse_id), acc, v);
    else cc_.emit(asmjit::InstId(avx_id), acc, acc, v);
  }
  void acc_add(const x86::Vec& acc, const x86::Vec& v) { acc_op(Inst::kIdAddps, Inst::kIdVaddps, acc, v); }
  void acc_max(const x86::Vec& acc, const x86::Vec& v) { acc_op(Inst::kIdMaxps, Inst::kIdVmaxps, acc, v); }
  /// acc += v * v (one FMA where the target has it).
  void acc_sq(const x86::Vec& acc, const x86::Vec& v) {
    if (A_.has_fma()) cc_.emit(Inst::kIdVfmadd231ps, acc, v, v);
    else acc_add(acc, A_.mul(Lane::b32, v, v));
  }
  std::vector<x86::Vec> accumulators(int u, float init) {
    std::vector<x86::Vec> acc(u);
    for (auto& a : acc) a = splat(init);
    return acc;
  }
  /// Combines accumulators pairwise in a fixed order, then across lanes.
  x86::Vec combine(std::vector<x86::Vec> acc, bool max) {
    for (size_t w = 1; w < acc.size(); w *= 2)
      for (size_t j = 0; j + w < acc.size(); j += 2 * w)
        acc[j] = max ? A_.maxx(Lane::b32, acc[j], acc[j + w]) : A_.add(Lane::b32, acc[j], acc[j + w]);
    return max ? A_.hmax32(acc[0]) : A_.hadd32(acc[0]);
  }
  void copy_dwords(const x86::Gp& dst, const x86::Gp& src, const x86::Gp& count);
  /// softmax/log_softmax of rows of n <= kColumnRowMax elements (AVX2,
  /// AVX-512): L rows at a time, one row per lane; jumps to `done` when all
  /// rows are done. See the comment at its definition.
  void column_softmax_rows(const x86::Gp& px, const x86::Gp& py, const x86::Gp& py2, const x86::Gp& rows,
                           const x86::Gp& bytes, const Label& done);
  bool wants_soft() const { return k_.op != RowOp::log_softmax; }
  bool wants_log() const { return k_.op != RowOp::softmax; }
  /// Emits a pass over the row: body(u, mems) for vector u of an iteration,
  /// mems[s] the memory operand of stream s at that vector.
  template <class Body>
  void pass(const std::vector<Stream>& s, int unroll, Body&& body);
  void rows_body(const std::vector<x86::Gp>& x, const std::vector<x86::Gp>& y, const std::vector<x86::Gp>& y2,
                 const x86::Gp& pw, const x86::Gp& pb, const x86::Gp& bytes, const x86::Vec& inv_n,
                 const x86::Vec& eps);
  // While pass() emits its tail's body: the lanes of the row (rem of them;
  // AVX-512: also as a k mask).
  bool tail_ = false;
  x86::Gp tail_rem_;
  x86::KReg tail_k_;
  /// v with the lanes past the row's end (the tail's, see tail_) zeroed.
  x86::Vec zero_past_row(const x86::Vec& v);
};

// SSE2/AVX2 tails: a dword loop (AVX-512 uses masked moves, see pass()).
void RowGen::copy_dwords(const x86::Gp& dst, const x86::Gp& src, const x86::Gp& count) {
  x86::Gp j = cc_.newIntPtr(), t = cc_.newGpd();
  Label loop = cc_.newLabel(), end = cc_.newLabel();
  cc_.xor_(j, j);
  cc_.bind(loop);
  cc_.cmp(j, count);
  cc_.jae(end);
  cc_.mov(t, x86::dword_ptr(src, j, 2));
  cc_.mov(x86::dword_ptr(dst, j, 2), t);
  cc_.inc(j);
  cc_.jmp(loop);
  cc_.bind(end);
}

template <class Body>
void RowGen::pass(const std::vector<Stream>& s, int unroll, Body&& body) {
  auto at = [&](int u) {
    Mems m;
    for (size_t k = 0; k < s.size(); ++k) m[k] = x86::ptr(s[k].base, i_, 2, u * W_);
    return m;
  };
  x86::Gp rem = cc_.newIntPtr();
  Label L_multi = cc_.newLabel(), L_single = cc_.newLabel(), L_tail = cc_.newLabel(), L_done = cc_.newLabel();
  cc_.xor_(i_, i_);
  if (unroll > 1) {
    cc_.bind(L_multi);
    cc_.mov(rem, n_);
    cc_.sub(rem, i_);
    cc_.cmp(rem, unroll * L_);
    cc_.jl(L_single);
    for (int u = 0; u < unroll; ++u) body(u, at(u));
    cc_.add(i_, unroll * L_);
    cc_.jmp(L_multi);
  }
  cc_.bind(L_single);
  cc_.mov(rem, n_);
  cc_.sub(rem, i_);
  cc_.cmp(rem, L_);
  cc_.jl(L_tail);
  body(0, at(0));
  cc_.add(i_, L_);
  cc_.jmp(L_single);

  cc_.bind(L_tail);
  cc_.test(rem, rem);
  cc_.jz(L_done);
  Mems m;
  std::vector<x86::Gp> buf(s.size()), src(s.size());
  x86::KReg kmask;
  if (A_.evex()) {
    // AVX-512: a merge-masked load puts the tail into a register holding the
    // fill value, and a full store writes the buffer, so the body's loads are
    // forwarded from that store; copying through masked stores instead made
    // every short row stall (rows of 10 cost 5x rows of 16).
    x86::Gp bits = cc_.newGpq();
    kmask = cc_.newKq();
    cc_.mov(bits, -1);
    cc_.bzhi(bits, bits, rem.r64());
    cc_.kmovq(kmask, bits);
  }
  for (size_t k = 0; k < s.size(); ++k) {
    x86::Mem stack = cc_.newStack(64, 64);
    buf[k] = cc_.newIntPtr();
    src[k] = cc_.newIntPtr();
    cc_.lea(buf[k], stack);
    cc_.lea(src[k], x86::ptr(s[k].base, i_, 2));
    if (s[k].in) {
      const x86::Vec fill = s[k].fill_v.isValid() ? s[k].fill_v : splat(s[k].fill);
      if (A_.evex()) {
        x86::Vec v = cc_.newZmm();
        cc_.vmovaps(v, fill);
        cc_.k(kmask).vmovups(v, x86::ptr(src[k]));
        store(x86::ptr(buf[k]), v);
      } else {
        store(x86::ptr(buf[k]), fill);
        copy_dwords(buf[k], src[k], rem);
      }
    }
    m[k] = x86::ptr(buf[k]);
  }
  tail_ = true;
  tail_rem_ = rem;
  tail_k_ = kmask;
  body(0, m);
  tail_ = false;
  for (size_t k = 0; k < s.size(); ++k) {
    if (!s[k].out) continue;
    if (A_.evex()) {
      x86::Vec v = load(x86::ptr(buf[k]));
      cc_.k(kmask).vmovups(x86::ptr(src[k]), v);
    } else {
      copy_dwords(src[k], buf[k], rem);
    }
  }
  cc_.bind(L_done);
}

x86::Vec RowGen::zero_past_row(const x86::Vec& v) {
  if (A_.evex()) {
    x86::Vec d = A_.newv(W_);
    cc_.k(tail_k_).z().vmovaps(d, v);
    return d;
  }
  int32_t io[16];
  for (int i = 0; i < 16; ++i) io[i] = i;
  const x86::Vec iota = load(cc_.newConst(asmjit::ConstPoolScope::kLocal, io, size_t(W_)));
  x86::Xmm t = cc_.newXmm();
  cc_.emit(A_.sse() ? Inst::kIdMovd : Inst::kIdVmovd, t, tail_rem_.r32());
  return A_.and_(A_.cmpi(Lane::b32, Cmp::lt, iota, A_.splat32(t, W_)).v, v);
}

// Rows of at most kColumnRowMax elements (a classifier's 10 logits, say):
// processed one row per vector lane, L rows at a time, so the row's max, its
// sum of exponentials, the log and the reciprocal are vertical operations on
// L rows at once instead of a chain of horizontal ones per row (latency
// bound: 125 ns per row of 10 on AVX-512 before, two rows at a time).
//
// Up to kColumnBlocks blocks of L rows (a super-block) go through each phase
// before the next phase starts, so that each phase has that many independent
// chains (gathers, exponentials, the log and the reciprocal are long
// latency chains; with one block at a time, 64 rows of 10 on AVX-512 took
// 0.68-0.70 us as a step of the digits plan, 0.64-0.66 us so):
//
//   gather column j of each block's rows (j < n), max over j
//   e_j = exp(x_j - max), j < n, into a stack buffer of 16 columns per block
//     (the columns n..15 hold +0)
//   sum = the multi-pass code's order (accumulator lanes i and i + 8, then
//     hadd32's tree): ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)),
//     s_i = e_i + e_{i+8}; every +0 added there is exact
//   log(sum), 1 / sum per lane into a stack buffer
//   then row by row: y = e * (1 / sum), the row's e gathered from the
//     buffer (one gather of n lanes: recomputing exp per row cost 16 vector
//     instructions, 1600 -> 1290 TSC cycles for 64 rows of 10 on AVX-512,
//     2100 -> 1600 on AVX2), y2 = (x - max) - log(sum)
//
// Each result is the bits of the multi-pass code for the same row (the same
// operations on the same values, max exact), so results do not depend on
// the row's position, the block or the thread split.
constexpr int kColumnRowMax = 16;
constexpr int kColumnBlocks = 4;

void RowGen::column_softmax_rows(const x86::Gp& px, const x86::Gp& py, const x86::Gp& py2, const x86::Gp& rows,
                                 const x86::Gp& bytes, const Label& done) {
  const Lane f = Lane::b32;
  const bool z = A_.evex();
  const int lg = L_ == 16 ? 4 : 3;  // log2 of the rows per block
  constexpr int G = kColumnBlocks;
  // lane r's row offset in floats: r * n
  int32_t io[16];
  for (int i = 0; i < 16; ++i) io[i] = i;
  const x86::Vec iota = load(cc_.newConst(asmjit::ConstPoolScope::kLocal, io, size_t(W_)));
  x86::Vec nvec = A_.newv(W_);
  {
    x86::Xmm t = cc_.newXmm();
    cc_.vmovd(t, n_.r32());
    cc_.vpbroadcastd(nvec, t);
  }
  const x86::Vec idx = A_.imul(f, iota, nvec);
  // lane i's column in the exponentials' buffer, in floats: i * L
  const x86::Vec ecol = A_.ishl(f, iota, L_ == 16 ? 4 : 3);
  const x86::Vec ninf = splat(-kInf);
  // per block b: columns at cols + (b 16 + j) W, exponentials likewise; the
  // statistics of slot s (max, log sum, 1 / sum) of the super-block's row r
  // at stats + s G W + 4 r
  const uint32_t block_bytes = uint32_t(kColumnRowMax * W_);
  x86::Mem colm = cc_.newStack(G * block_bytes, 64), em = cc_.newStack(G * block_bytes, 64),
           stm = cc_.newStack(uint32_t(3 * G * W_), 64);
  x86::Gp xb = cc_.newIntPtr("cols"), eb = cc_.newIntPtr("exps"), sb = cc_.newIntPtr("stats");
  cc_.lea(xb, colm);
  cc_.lea(eb, em);
  cc_.lea(sb, stm);
  {
    const x86::Vec zero = A_.zero(W_);
    for (int j = 0; j < G * kColumnRowMax; ++j) store(x86::ptr(eb, j * W_), zero);
  }
  // lanes of a row: a k mask (AVX-512, n <= 16) or two lane masks (AVX2)
  x86::KReg krow;
  x86::Vec mrow[2];
  if (z) {
    x86::Gp bits = cc_.newGpq();
    krow = cc_.newKq();
    cc_.mov(bits, -1);
    cc_.bzhi(bits, bits, n_.r64());
    cc_.kmovq(krow, bits);
  } else {
    mrow[0] = A_.newv(W_);
    cc_.vpcmpgtd(mrow[0], nvec, iota);  // lane < n
    const x86::Vec i8 = A_.iadd(f, iota, A_.c32(8));
    mrow[1] = A_.newv(W_);
    cc_.vpcmpgtd(mrow[1], nvec, i8);  // lane + 8 < n
  }
  const bool soft = wants_soft(), log = wants_log();
  Label L_super = cc_.newLabel();
  x86::Gp qs = cc_.newInt64("qs"), nb = cc_.newInt64("blocks"), left = cc_.newInt64("left"), q = cc_.newInt64("q"),
          j = cc_.newIntPtr("j"), src = cc_.newIntPtr("src"), pxb = cc_.newIntPtr("xblock"),
          cb = cc_.newIntPtr("cb"), ebj = cc_.newIntPtr("eb"), sbb = cc_.newIntPtr("sbb"),
          blk = cc_.newIntPtr("blk");
  cc_.bind(L_super);
  cc_.test(rows, rows);
  cc_.jle(done);
  cc_.mov(qs, G * L_);
  cc_.cmp(rows, qs);
  cc_.cmovl(qs, rows);  // rows of this super-block
  cc_.lea(nb, x86::ptr(qs, L_ - 1));
  cc_.shr(nb, lg);  // its blocks
  // phase 1, block by block: columns gathered into the stack buffer, their max
  {
    Label LB = cc_.newLabel(), L1 = cc_.newLabel();
    cc_.mov(left, qs);
    cc_.mov(pxb, px);
    cc_.mov(blk, xb);
    cc_.mov(sbb, sb);
    cc_.bind(LB);
    cc_.mov(q, L_);
    cc_.cmp(left, q);
    cc_.cmovl(q, left);  // rows of this block
    // lanes of the block's rows
    x86::KReg kq;
    x86::Vec mq;
    if (z) {
      x86::Gp bits = cc_.newGpq();
      kq = cc_.newKq();
      cc_.mov(bits, -1);
      cc_.bzhi(bits, bits, q);
      cc_.kmovq(kq, bits);
    } else {
      x86::Xmm t = cc_.newXmm();
      x86::Vec qv = A_.newv(W_);
      cc_.vmovd(t, q.r32());
      cc_.vpbroadcastd(qv, t);
      mq = A_.newv(W_);
      cc_.vpcmpgtd(mq, qv, iota);
    }
    x86::Vec mx = A_.copy(ninf);
    cc_.mov(src, pxb);
    cc_.mov(cb, blk);
    cc_.mov(j, n_);
    cc_.bind(L1);
    x86::Vec g = A_.copy(ninf);
    if (z) {
      x86::KReg k = cc_.newKq();
      cc_.kmovq(k, kq);
      cc_.k(k).vgatherdps(g, x86::ptr(src, idx, 2));
    } else {
      x86::Vec m = A_.copy(mq);
      cc_.vgatherdps(g, x86::ptr(src, idx, 2), m);
    }
    store(x86::ptr(cb), g);
    acc_max(mx, g);
    cc_.add(src, 4);
    cc_.add(cb, W_);
    cc_.dec(j);
    cc_.jnz(L1);
    store(x86::ptr(sbb), mx);
    cc_.mov(src, bytes);
    cc_.shl(src, lg);
    cc_.add(pxb, src);  // the next block's rows
    cc_.add(blk, block_bytes);
    cc_.add(sbb, W_);
    cc_.sub(left, q);
    cc_.jg(LB);
  }
  // phases 2 and 3 walk the nb blocks, each pointer advancing by its step per block
  struct Walk {
    x86::Gp reg, start;
    uint32_t step;
  };
  auto over_blocks = [&](std::initializer_list<Walk> walks, auto&& body) {
    Label LB = cc_.newLabel();
    cc_.mov(left, nb);
    for (const Walk& w : walks) cc_.mov(w.reg, w.start);
    cc_.bind(LB);
    body();
    for (const Walk& w : walks) cc_.add(w.reg, w.step);
    cc_.dec(left);
    cc_.jnz(LB);
  };
  // phase 2: exponentials of each block's columns
  over_blocks({{blk, xb, block_bytes}, {ebj, eb, block_bytes}, {sbb, sb, uint32_t(W_)}}, [&] {
    Label L2 = cc_.newLabel();
    const x86::Vec mx = load(x86::ptr(sbb));
    cc_.mov(cb, blk);
    cc_.mov(src, ebj);
    cc_.mov(j, n_);
    cc_.bind(L2);
    store(x86::ptr(src), emit_math(C_, OpId::Exp, A_.sub(f, load(x86::ptr(cb)), mx)));
    cc_.add(cb, W_);
    cc_.add(src, W_);
    cc_.dec(j);
    cc_.jnz(L2);
  });
  // phase 3: each block's sums in the multi-pass code's order, log(sum), 1 / sum
  over_blocks({{ebj, eb, block_bytes}, {sbb, sb, uint32_t(W_)}}, [&] {
    x86::Vec s8[8];
    for (int i = 0; i < 8; ++i) s8[i] = A_.add(f, load(x86::ptr(ebj, i * W_)), x86::ptr(ebj, (i + 8) * W_));
    const x86::Vec sum = A_.add(f, A_.add(f, A_.add(f, s8[0], s8[4]), A_.add(f, s8[2], s8[6])),
                                A_.add(f, A_.add(f, s8[1], s8[5]), A_.add(f, s8[3], s8[7])));
    if (log) store(x86::ptr(sbb, G * W_), emit_math(C_, OpId::Log, sum));
    if (soft) store(x86::ptr(sbb, 2 * G * W_), A_.div(f, splat(1.0f), sum));
  });
  // phase 4: the super-block's rows
  {
    Label L3 = cc_.newLabel();
    cc_.xor_(j, j);
    cc_.bind(L3);
    auto bcast = [&](int slot) {
      x86::Vec v = A_.newv(W_);
      cc_.vbroadcastss(v, x86::dword_ptr(sb, j, 2, slot * G * W_));
      return v;
    };
    const x86::Vec mvb = bcast(0);
    const x86::Vec lsb = log ? bcast(1) : x86::Vec(), rb = soft ? bcast(2) : x86::Vec();
    const x86::Gp& ylog = soft ? py2 : py;
    // the row's exponentials from phase 2: block j / L, lane j % L, column i at i W
    x86::Gp erow = cc_.newIntPtr("erow");
    if (soft) {
      x86::Gp t = cc_.newIntPtr();
      cc_.mov(erow, j);
      cc_.shr(erow, lg);
      cc_.imul(erow, erow, int32_t(block_bytes));
      cc_.add(erow, eb);
      cc_.mov(t, j);
      cc_.and_(t, L_ - 1);
      cc_.lea(erow, x86::ptr(erow, t, 2));
    }
    for (int h = 0; h < (z ? 1 : 2); ++h) {
      x86::Vec x = A_.newv(W_);
      const x86::Mem at_x = x86::ptr(px, h * W_), at_y = x86::ptr(py, h * W_), at_y2 = x86::ptr(ylog, h * W_);
      if (z) cc_.k(krow).z().vmovups(x, at_x);
      else cc_.vmaskmovps(x, mrow[h], at_x);
      const x86::Vec d = A_.sub(f, x, mvb);
      if (soft) {
        x86::Vec e = A_.zero(W_);
        if (z) {
          x86::KReg k = cc_.newKq();
          cc_.kmovq(k, krow);
          cc_.k(k).vgatherdps(e, x86::ptr(erow, ecol, 2));
        } else {
          x86::Vec m = A_.copy(mrow[h]);
          cc_.vgatherdps(e, x86::ptr(erow, ecol, 2, h * L_ * W_), m);
        }
        const x86::Vec y = A_.mul(f, e, rb);
        if (z) cc_.k(krow).vmovups(at_y, y);
        else cc_.vmaskmovps(at_y, mrow[h], y);
      }
      if (log) {
        const x86::Vec y2 = A_.sub(f, d, lsb);
        if (z) cc_.k(krow).vmovups(at_y2, y2);
        else cc_.vmaskmovps(at_y2, mrow[h], y2);
      }
    }
    cc_.add(px, bytes);
    cc_.add(py, bytes);
    if (soft && log) cc_.add(py2, bytes);
    cc_.inc(j);
    cc_.cmp(j, qs);
    cc_.jl(L3);
  }
  cc_.sub(rows, qs);
  cc_.jmp(L_super);
}

// The passes of one row (R = 1) or of two rows at once (R = 2; see run()):
// row r at x[r], y[r] (and y2[r]); every value of row r is computed as for
// that row alone.
void RowGen::rows_body(const std::vector<x86::Gp>& x, const std::vector<x86::Gp>& y, const std::vector<x86::Gp>& y2,
                       const x86::Gp& pw, const x86::Gp& pb, const x86::Gp& bytes, const x86::Vec& inv_n,
                       const x86::Vec& eps) {
  const int R = static_cast<int>(x.size());
  const Lane f = Lane::b32;
  std::vector<Stream> X, Y;
  for (int r = 0; r < R; ++r) {
    X.push_back({x[r], true, false, -kInf});
    Y.push_back({y[r], false, true, 0.0f});
  }
  switch (k_.op) {
    case RowOp::softmax:
    case RowOp::log_softmax:
    case RowOp::softmax_and_log_softmax: {
      const bool log = wants_log(), soft = wants_soft();
      // max(x): maxps does not propagate NaN, but a NaN element still makes
      // the row NaN through exp(NaN) in the sum; +inf gives inf - inf = NaN,
      // and a row of -inf gives -inf - -inf = NaN, as eager.
      std::vector<std::vector<x86::Vec>> mx(R), sum(R);
      for (auto& a : mx) a = accumulators(4, -kInf);
      pass(X, 4, [&](int u, const Mems& m) {
        for (int r = 0; r < R; ++r) acc_max(mx[r][u], load(m[r]));
      });
      std::vector<x86::Vec> mv(R), sv(R);
      for (int r = 0; r < R; ++r) mv[r] = combine(mx[r], true);
      for (auto& a : sum) a = accumulators(2, 0.0f);
      // The tail's lanes past the row hold the row's max, so exp gets 0
      // there, and are zeroed after it (adding +0 to the sums as before,
      // the same bits): exp of the old -inf fill went through its
      // underflow path, which cost 4-5x on short rows with a tail
      // (AVX-512, softmax rows of 17: 7.0 -> 1.4 ns per element, rows of
      // 33: 3.7 -> 0.9; rows of 32 or 128: 0.4).
      std::vector<Stream> s2 = X;
      for (int r = 0; r < R; ++r) s2[r].fill_v = mv[r];
      if (soft) s2.insert(s2.end(), Y.begin(), Y.end());
      pass(s2, 2, [&](int u, const Mems& m) {
        for (int r = 0; r < R; ++r) {
          x86::Vec e = emit_math(C_, OpId::Exp, A_.sub(f, load(m[r]), mv[r]));
          if (tail_) e = zero_past_row(e);
          if (soft) store(m[R + r], e);
          acc_add(sum[r][u], e);
        }
      });
      for (int r = 0; r < R; ++r) sv[r] = combine(sum[r], false);
      std::vector<x86::Vec> ls(R), rc(R);
      for (int r = 0; r < R; ++r) {
        if (log) ls[r] = emit_math(C_, OpId::Log, sv[r]);
        if (soft) rc[r] = A_.div(f, splat(1.0f), sv[r]);
      }
      std::vector<Stream> s3;
      if (log && soft) {
        // x, y (read and written), y2 per row
        for (int r = 0; r < R; ++r) {
          s3.push_back(X[r]);
          s3.push_back({y[r], true, true, 0.0f});
          s3.push_back({y2[r], false, true, 0.0f});
        }
        pass(s3, 4, [&](int, const Mems& m) {
          for (int r = 0; r < R; ++r) {
            store(m[3 * r + 1], A_.mul(f, load(m[3 * r + 1]), rc[r]));
            store(m[3 * r + 2], A_.sub(f, A_.sub(f, load(m[3 * r]), mv[r]), ls[r]));
          }
        });
      } else if (log) {
        for (int r = 0; r < R; ++r) {
          s3.push_back(X[r]);
          s3.push_back(Y[r]);
        }
        pass(s3, 4, [&](int, const Mems& m) {
          for (int r = 0; r < R; ++r) store(m[2 * r + 1], A_.sub(f, A_.sub(f, load(m[2 * r]), mv[r]), ls[r]));
        });
      } else {
        for (int r = 0; r < R; ++r) s3.push_back({y[r], true, true, 0.0f});
        pass(s3, 4, [&](int, const Mems& m) {
          for (int r = 0; r < R; ++r) store(m[r], A_.mul(f, load(m[r]), rc[r]));
        });
      }
      break;
    }
    case RowOp::layer_norm:
    case RowOp::rms_norm: {
      const bool rms = k_.op == RowOp::rms_norm;
      std::vector<Stream> X0;
      for (int r = 0; r < R; ++r) X0.push_back({x[r], true, false, 0.0f});
      // layer_norm: the corrected two-pass algorithm (Chan, Golub & LeVeque
      // 1983). With d = x - mean0 (mean0 the float mean), mean = mean0 + c,
      // c = sum(d) / n, and var = sum(d^2) / n - c^2: the float32 mean's
      // rounding error (large when |mean| >> std) is taken out again.
      //
      // The row's statistics are a chain of dependent steps (horizontal sums,
      // the square root, the reciprocal) between the passes, so the three
      // divisions by n are multiplications by 1/n, rounded once per call
      // (an extra half ulp on mean0, which c corrects, on c and on var).
      // The sum of pass 1 takes 8 accumulators: one vaddps per vector is
      // bound by the add latency, not by the loads.
      std::vector<x86::Vec> mean0(R), c(R), rs(R), crs(R);
      std::vector<std::vector<x86::Vec>> sq(R);
      for (auto& a : sq) a = accumulators(4, 0.0f);
      if (rms) {
        pass(X0, 4, [&](int u, const Mems& m) {
          for (int r = 0; r < R; ++r) acc_sq(sq[r][u], load(m[r]));
        });
      } else {
        std::vector<std::vector<x86::Vec>> sum(R), sd(R);
        for (auto& a : sum) a = accumulators(8, 0.0f);
        pass(X0, 8, [&](int u, const Mems& m) {
          for (int r = 0; r < R; ++r) acc_add(sum[r][u], load(m[r]));
        });
        std::vector<Stream> XM = X0;
        for (int r = 0; r < R; ++r) {
          mean0[r] = A_.mul(f, combine(sum[r], false), inv_n);
          XM[r].fill_v = mean0[r];  // lanes past n add 0
        }
        for (auto& a : sd) a = accumulators(4, 0.0f);
        pass(XM, 4, [&](int u, const Mems& m) {
          for (int r = 0; r < R; ++r) {
            const x86::Vec d = A_.sub(f, load(m[r]), mean0[r]);
            acc_add(sd[r][u], d);
            acc_sq(sq[r][u], d);
          }
        });
        for (int r = 0; r < R; ++r) c[r] = A_.mul(f, combine(sd[r], false), inv_n);
      }
      for (int r = 0; r < R; ++r) {
        x86::Vec var = A_.mul(f, combine(sq[r], false), inv_n);
        if (!rms) var = A_.maxx(f, splat(0.0f), A_.sub(f, var, A_.mul(f, c[r], c[r])));  // >= 0, NaN kept
        rs[r] = A_.div(f, splat(1.0f), A_.sqrt(f, A_.add(f, var, eps)));
        // y0 = (d - c) rstd as d rstd - c rstd (one FMA per element instead
        // of a subtraction and a multiplication; c rstd is small, its
        // rounding is far below the result's ulp unless y0 is about 0)
        if (!rms) crs[r] = A_.mul(f, c[r], rs[r]);
      }
      // per row x, y; then weight, bias (shared); then the prefetched rows
      std::vector<Stream> s3;
      for (int r = 0; r < R; ++r) {
        s3.push_back(X0[r]);
        s3.push_back(Y[r]);
      }
      const int wi = int(s3.size());
      if (k_.has_weight) s3.push_back({pw, true, false, 0.0f});
      const int bi = int(s3.size());
      if (k_.has_bias) s3.push_back({pb, true, false, 0.0f});
      // the next rows (the next pair's with R = 2), prefetched while the
      // last pass runs: each row of 1024 floats is a new 4 KiB page, where
      // the hardware prefetcher starts over and the row's first lines
      // would come at the last-level cache's latency (prefetches never
      // fault, also past the last row)
      const int pf = int(s3.size());
      for (int r = 0; r < R; ++r) {
        x86::Gp nx = cc_.newIntPtr("next_x");
        cc_.lea(nx, x86::ptr(x[r], bytes, R == 2 ? 1 : 0));
        s3.push_back({nx, false, false, 0.0f});
      }
      pass(s3, 4, [&](int, const Mems& m) {
        for (int r = 0; r < R; ++r) cc_.prefetcht0(m[pf + r]);
        x86::Vec w, b;
        if (k_.has_weight) w = load(m[wi]);
        if (k_.has_bias) b = load(m[bi]);
        for (int r = 0; r < R; ++r) {
          x86::Vec t = load(m[2 * r]);
          if (!rms) t = A_.msub(f, A_.sub(f, t, mean0[r]), rs[r], crs[r], A_.has_fma());
          else t = A_.mul(f, t, rs[r]);
          if (k_.has_weight && k_.has_bias) t = A_.madd(f, t, w, b, true);
          else if (k_.has_weight) t = A_.mul(f, t, w);
          else if (k_.has_bias) t = A_.add(f, t, b);
          store(m[2 * r + 1], t);
        }
      });
      break;
    }
  }
}

void RowGen::run() {
  asmjit::FuncNode* fn = cc_.addFunc(asmjit::FuncSignatureT<void, const RowArgs*>());
  if (!A_.sse()) {
    fn->frame().setAvxEnabled();
    fn->frame().setAvxCleanup();
  }
  if (A_.evex()) fn->frame().setAvx512Enabled();
  x86::Gp args = cc_.newIntPtr("args");
  fn->setArg(0, args);
  x86::Gp px = cc_.newIntPtr("x"), py = cc_.newIntPtr("y"), py2 = cc_.newIntPtr("y2"), pw = cc_.newIntPtr("w"),
          pb = cc_.newIntPtr("b");
  x86::Gp rows = cc_.newInt64("rows"), bytes = cc_.newIntPtr("row_bytes");
  n_ = cc_.newInt64("n");
  i_ = cc_.newIntPtr("i");
  cc_.mov(px, x86::ptr(args, offsetof(RowArgs, x)));
  cc_.mov(py, x86::ptr(args, offsetof(RowArgs, y)));
  cc_.mov(py2, x86::ptr(args, offsetof(RowArgs, y2)));
  cc_.mov(pw, x86::ptr(args, offsetof(RowArgs, weight)));
  cc_.mov(pb, x86::ptr(args, offsetof(RowArgs, bias)));
  cc_.mov(rows, x86::ptr(args, offsetof(RowArgs, rows)));
  cc_.mov(n_, x86::ptr(args, offsetof(RowArgs, n)));
  cc_.mov(bytes, n_);
  cc_.shl(bytes, 2);
  // per-call constants: n and eps as vectors
  x86::Vec nf, eps, inv_n;
  {
    x86::Vec t = cc_.newXmm();
    if (A_.sse()) {
      cc_.emit(Inst::kIdXorps, t, t);
      cc_.emit(Inst::kIdCvtsi2ss, t, n_);
    } else {
      cc_.emit(Inst::kIdVxorps, t, t, t);
      cc_.emit(Inst::kIdVcvtsi2ss, t, t, n_);
    }
    nf = A_.splat32(t, W_);
    if (k_.op == RowOp::layer_norm || k_.op == RowOp::rms_norm) inv_n = A_.div(Lane::b32, splat(1.0f), nf);
    x86::Vec e = cc_.newXmm();
    cc_.emit(A_.sse() ? Inst::kIdMovss : Inst::kIdVmovss, e, x86::dword_ptr(args, offsetof(RowArgs, eps)));
    eps = A_.splat32(e, W_);
  }
  // constants of the vector math: in registers on AVX-512 (32 of them),
  // from the constant pool elsewhere (as the elementwise generator does)
  A_.hoist_at = cc_.cursor();
  A_.hoist_budget = A_.evex() ? 12 : 0;

  Label L_row = cc_.newLabel(), L_end = cc_.newLabel();
  const bool softmax_like = k_.op == RowOp::softmax || k_.op == RowOp::log_softmax || k_.op == RowOp::softmax_and_log_softmax;
  if (!A_.sse() && softmax_like) {
    Label L_long = cc_.newLabel();
    cc_.cmp(n_, kColumnRowMax);
    cc_.jg(L_long);
    column_softmax_rows(px, py, py2, rows, bytes, L_end);
    cc_.bind(L_long);
  }
  // Softmax rows of up to kPairRowMax floats go two at a time: the same
  // passes run over both rows at once (one loop, each row with its own
  // accumulators), so the chains between the passes (the horizontal
  // reductions, exp, the division), which bound a short row, overlap with
  // the other row's. Each row gets exactly the operations, in the same
  // order, that it gets alone (the same unrolling and the same
  // accumulators per row), so its bits do not depend on the pairing. Rows
  // of 128, AVX-512: 53 -> 45 ns per row in L1, attention's masked softmax
  // over [32, 12, 128, 128] 4.2-4.4 -> 3.5-3.8 ms; AVX2 71 -> 61 ns. Rows
  // of 256 and 512 gained 3-4% in L1 but streamed from memory lost ~10%
  // (as the norms paired: rows of 384 took 60 instead of 76 ns in L1 but
  // 10-20% longer streamed, [4096, 384] 457 -> 487-602 us), so longer rows
  // and the norms go one at a time.
  constexpr int64_t kPairRowMax = 128;
  const bool pairs = !A_.sse() && softmax_like;
  Label L_single = cc_.newLabel();
  if (pairs) {
    Label L_pair = cc_.newLabel();
    x86::Gp x1 = cc_.newIntPtr("x1"), y1 = cc_.newIntPtr("y1"), y21 = cc_.newIntPtr("y2_1");
    cc_.cmp(n_, kPairRowMax);
    cc_.jg(L_single);
    cc_.bind(L_pair);
    cc_.cmp(rows, 2);
    cc_.jl(L_single);
    cc_.lea(x1, x86::ptr(px, bytes));
    cc_.lea(y1, x86::ptr(py, bytes));
    if (k_.op == RowOp::softmax_and_log_softmax) cc_.lea(y21, x86::ptr(py2, bytes));
    rows_body({px, x1}, {py, y1}, {py2, y21}, pw, pb, bytes, inv_n, eps);
    cc_.lea(px, x86::ptr(px, bytes, 1));
    cc_.lea(py, x86::ptr(py, bytes, 1));
    if (k_.op == RowOp::softmax_and_log_softmax) cc_.lea(py2, x86::ptr(py2, bytes, 1));
    cc_.sub(rows, 2);
    cc_.jmp(L_pair);
  }
  cc_.bind(L_single);
  cc_.bind(L_row);
  cc_.test(rows, rows);
  cc_.jle(L_end);
  rows_body({px}, {py}, {py2}, pw, pb, bytes, inv_n, eps);
  cc_.add(px, bytes);
  cc_.add(py, bytes);
  if (k_.op == RowOp::softmax_and_log_softmax) cc_.add(py2, bytes);
  cc_.dec(rows);
  cc_.jmp(L_row);
  cc_.bind(L_end);
  cc_.ret();
  cc_.endFunc();
}

}  // namespace

const char* row_op_name(RowOp op) {
  switch (op) {
    case RowOp::softmax: return "softmax";
    case RowOp::log_softmax: return "log_softmax";
    case RowOp::layer_norm: return "layer_norm";
    case RowOp::rms_norm: return "rms_norm";
    case RowOp::softmax_and_log_softmax: return "softmax+log_softmax";
  }
  return "?";
}

std::optional<RowOp> row_op_of(OpId op) {
  switch (op) {
    case OpId::Softmax: return RowOp::softmax;
    case OpId::LogSoftmax: return RowOp::log_softmax;
    case OpId::LayerNorm: return RowOp::layer_norm;
    case OpId::RmsNorm: return RowOp::rms_norm;
    default: return std::nullopt;
  }
}

RowKernel::RowKernel(RowKernelKey key, RowKernelFn fn, size_t code_size, std::string dis)
    : key_(key), fn_(fn), size_(code_size), dis_(std::move(dis)) {}
RowKernel::~RowKernel() { jit_runtime().release(fn_); }

std::string RowKernel::str() const {
  std::ostringstream os;
  os << "row kernel " << row_op_name(key_.op);
  if (key_.has_weight || key_.has_bias)
    os << "(" << (key_.has_weight ? "weight" : "") << (key_.has_weight && key_.has_bias ? ", " : "")
       << (key_.has_bias ? "bias" : "") << ")";
  os << " " << name(key_.dtype) << " [" << cpu_target_name(key_.target) << "]";
  return os.str();
}

void RowKernel::run(const RowArgs& a) const {
  if (a.rows <= 0 || a.n <= 0) return;
  const RowKernelFn f = fn_;
  cpu::parallel_ranges(a.rows, a.rows * a.n, [&](int64_t r0, int64_t r1) {
    RowArgs part = a;
    part.x += r0 * a.n;
    part.y += r0 * a.n;
    if (part.y2) part.y2 += r0 * a.n;
    part.rows = r1 - r0;
    f(&part);
  });
}

bool can_generate_row(const RowKernelKey& key) {
  return key.dtype == DType::float32 && key.target <= host_cpu_target() &&
         !(key.op == RowOp::rms_norm && key.has_bias) &&
         !((key.op == RowOp::softmax || key.op == RowOp::log_softmax || key.op == RowOp::softmax_and_log_softmax) &&
           (key.has_weight || key.has_bias));
}

std::unique_ptr<RowKernel> generate_row_kernel(const RowKernelKey& key, bool want_disassembly) {
  if (!can_generate_row(key)) throw Error("codegen: no generated row kernel for this key");
  Assembled a = assemble(want_disassembly, [&](x86::Compiler& cc) { RowGen(key, cc).run(); });
  return std::make_unique<RowKernel>(key, reinterpret_cast<RowKernelFn>(a.fn), a.code_size, std::move(a.disassembly));
}

const RowKernel* cached_row_kernel(RowOp op, bool has_weight, bool has_bias, DType dtype) {
  const RowKernelKey key{op, has_weight, has_bias, dtype, detect_cpu_target()};
  if (!can_generate_row(key)) return nullptr;
  // one slot per (op, weight, bias, target) of float32; read without a lock
  constexpr int kTargets = 3;
  static std::array<std::atomic<const RowKernel*>, 5 * 2 * 2 * kTargets> slots{};  // 5 RowOps
  static std::mutex mu;
  const size_t idx = ((size_t(op) * 2 + has_weight) * 2 + has_bias) * kTargets + size_t(key.target);
  if (const RowKernel* k = slots[idx].load(std::memory_order_acquire)) return k;
  std::lock_guard<std::mutex> lock(mu);
  if (const RowKernel* k = slots[idx].load(std::memory_order_relaxed)) return k;
  const RowKernel* k = generate_row_kernel(key).release();  // process lifetime
  slots[idx].store(k, std::memory_order_release);
  return k;
}

}  // namespace kiln::codegen
