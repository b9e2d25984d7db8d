// kiln (internal): the small-GEMM generator (small_gemm.h). One generated
// function runs the row blocks [rb0, rb1) of every column block:
//
//   for each column block j0 (nr vectors; the last one narrower, masked):
//     for each row block i0 in [rb0, rb1) (mr rows; the last one shorter):
//       acc[r][v] = 0
//       for kk in 0..K-1 (unrolled by 4):
//         b[v] = B[kk, j0 + v V .. +V)              (row-major B or its packed copy)
//         for r: s = A[i0 + r, kk] (broadcast)     (A as stored: ta reads a column)
//                acc[r][v] += s * b[v]             (one FMA each)
//       epilogue(acc[r][v]) per register, stores its outputs at (i0 + r, j0 + v V)
//
// AVX2, n % 8 = 2 or 4: the last column block's last vector is packed
// (Blocking::pack): acc[q] lanes [l p, (l + 1) p) are row q g + l's p columns
// (g = 8 / p rows per register), its A factor the row broadcasts blended
// (vblendps), its B factor B[kk, j .. j + p) repeated (vbroadcastsd /
// vbroadcastf128); the epilogue gathers and scatters those rows' p columns.
// Each lane is still one FMA chain over kk in order.
//
// Transposed tiles (Blocking::tout, small_gemm_transposed_tiles: A^T B with
// n <= V and few lanes of C's rows filled): the loops above run on C^T =
// B^T A (rows: C's n columns, all in one row block; A's rows read as
// vectors, B's elements broadcast), then each vector of the tile (V of C's
// rows) is transposed in registers (transpose(): unpack and shufps in the
// 128-bit lanes, then vperm2f128 / vshuff32x4 across them) and the epilogue
// runs on C's rows (n lanes, masked) with C's operands.
//
// Every size, stride and displacement is a constant of the code.
#include "small_gemm.h"

#include <asmjit/x86.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <sstream>
#include <vector>

#include "../parallel_ranges.h"
#include "assemble.h"
#include "codegen.h"
#include "kernel_lru.h"
#include "pack_b.h"

namespace kiln::codegen {

CpuTarget host_cpu_target();  // cpu_features.cpp

namespace {

using namespace cg;
using asmjit::Label;

using GemmFn = void (*)(const float* a, const float* b, char* const* ptrs, int64_t rb0, int64_t rb1);

/// The register blocking of one key.
struct Blocking {
  int V = 8;              // floats per vector
  int mr = 1, nr = 1;     // rows, vectors of a full tile
  int64_t row_full = 0;   // full row blocks
  int mt = 0;             // rows of the last (short) row block, 0: none
  int64_t col_full = 0;   // full column blocks
  int nvt = 0;            // vectors of the last (narrow) column block, 0: none
  int tail_lanes = 0;     // lanes of that block's last vector (V when full)
  // AVX2, a last vector of pack = 2 or 4 lanes (n % 8): packed, V / pack rows
  // per register (lanes [l pack, (l + 1) pack) hold row l of the group), so
  // n = 10 runs 10 of 8 + 2 lanes rather than 16 (0: not packed, masked).
  int pack = 0;
  // Transposed tiles (transposed_tiles()): the code's problem is C^T (rows:
  // C's n columns, all in one row block; columns: C's m rows), and each
  // vector of a tile is transposed in registers into V rows of C (n lanes
  // each) before the epilogue, whose operands are C's.
  bool tout = false;
  int64_t row_blocks() const { return row_full + (mt > 0); }
};

Blocking choose_blocking(const SmallGemmKey& k) {
  Blocking b;
  const bool z = k.target == CpuTarget::avx512;
  b.V = z ? 16 : 8;
  const int64_t nvec = (k.n + b.V - 1) / b.V;
  const int64_t max_nr = z ? 4 : 2;
  int64_t nr = std::min(nvec, max_nr);
  const int64_t jn = (nvec + nr - 1) / nr;
  nr = (nvec + jn - 1) / jn;  // balanced: the last block is not much narrower
  const int64_t budget = z ? 24 : 12;
  int64_t max_mr = std::min<int64_t>(budget / nr, z ? 14 : 12);
  const int64_t cols0 = nr * b.V, rest0 = k.n % cols0;
  const int tail0 = int(rest0 % b.V);
  if (!z && (tail0 == 2 || tail0 == 4) && k.column_sums < 0) {  // the narrow block's last vector packed (Blocking::pack)
    b.pack = tail0;
    const int64_t g = b.V / b.pack, full_v = rest0 / b.V;  // rows per packed register, whole vectors before it
    int64_t mp = 1;  // rows of the narrow block's tile: mp full_v + ceil(mp / g) accumulators
    while (mp < 12 && (mp + 1) * full_v + (mp + g) / g <= budget) ++mp;
    if (k.n >= cols0) max_mr = std::min(max_mr, mp);  // full blocks too: their budget
    else max_mr = mp >= g ? mp - mp % g : mp;          // the packed block only: whole groups
  }
  const int64_t in = (k.m + max_mr - 1) / max_mr;
  const int64_t mr = (k.m + in - 1) / in;
  b.mr = int(mr);
  b.nr = int(nr);
  b.row_full = k.m / mr;
  b.mt = int(k.m % mr);
  const int64_t cols = nr * b.V;
  b.col_full = k.n / cols;
  const int64_t rest = k.n % cols;
  b.nvt = int((rest + b.V - 1) / b.V);
  b.tail_lanes = rest % b.V ? int(rest % b.V) : b.V;
  return b;
}

// Blocking::tout for the code key (C^T: m = C's n <= V rows, n = C's m
// columns): every row in one block, as many vectors as the accumulator
// budget holds (AVX-512 n = 10: 10 x 2), balanced.
Blocking choose_tout_blocking(const SmallGemmKey& k) {
  Blocking b;
  const bool z = k.target == CpuTarget::avx512;
  b.V = z ? 16 : 8;
  b.tout = true;
  const int64_t nvec = (k.n + b.V - 1) / b.V, budget = z ? 24 : 12, max_nr = z ? 4 : 2;
  int64_t nr = std::min(nvec, std::clamp<int64_t>(budget / k.m, 1, max_nr));
  const int64_t jn = (nvec + nr - 1) / nr;
  nr = (nvec + jn - 1) / jn;
  b.mr = int(k.m);
  b.nr = int(nr);
  b.row_full = 1;
  b.mt = 0;
  const int64_t cols = nr * b.V;
  b.col_full = k.n / cols;
  const int64_t rest = k.n % cols;
  b.nvt = int((rest + b.V - 1) / b.V);
  b.tail_lanes = rest % b.V ? int(rest % b.V) : b.V;
  return b;
}

class GemmGen {
 public:
  GemmGen(const SmallGemmKey& k, const Blocking& bl, x86::Compiler& cc)
      : k_(k), p_(k.epilogue), bl_(bl), cc_(cc), A_(cc, k.target) {}
  void run();

 private:
  const SmallGemmKey& k_;
  const ElementwiseProgram& p_;
  const Blocking& bl_;
  x86::Compiler& cc_;
  VecAsm A_;
  Ctx* c_ = nullptr;
  x86::Gp a_, b_;               // operand A, B
  std::vector<x86::Gp> P_;      // epilogue operand pointers
  std::vector<x86::Gp> Q_;      // ... at the current tile's (i0, j0)
  x86::Gp table_;
  x86::Gp colsum_;              // column sums' destination (key.column_sums >= 0)
  x86::KReg kmask_;             // AVX-512: lanes of a narrow last vector
  x86::Mem vmask_;              // AVX2: the same as a lane mask in memory
  x86::KReg emask_;             // Blocking::tout, n < V: C's n lanes of a transposed row (AVX-512)
  x86::Mem evmask_;             // ... AVX2
  bool use_emask_ = false;      // load()/store() mask with emask_ / evmask_
  int vb() const { return A_.vbytes(); }

  int pack_rows_ = 0;           // in epilogue(): rows of the packed register (Blocking::pack), 0: an ordinary one
  x86::Vec load(const x86::Mem& m, bool masked);
  void store(const x86::Mem& m, const x86::Vec& v, bool masked);
  x86::Vec load_packed(int op, int r, int v);
  void store_packed(int op, int r, int v, const x86::Vec& x);
  void tile(const x86::Gp& i0, const x86::Gp& j0, int rows, int nv, bool masked, bool packed);
  void rows_loop(const x86::Gp& rb0, const x86::Gp& rb1, const x86::Gp& j0, int nv, bool masked, bool packed);
  std::vector<x86::Vec> transpose(const std::vector<x86::Vec>& rows);
  void transposed_epilogue(const std::vector<x86::Vec>& acc, int rows, int nv, bool masked);
  // Returns the value stored to output key.column_sums (when set).
  x86::Vec epilogue(const x86::Vec& acc, int r, int v, bool masked);
  void zero_column_sums();
  // The first `lanes` lanes as a mask: k (AVX-512) or, in the constant pool, v (AVX2).
  void lane_mask(int lanes, x86::KReg& k, x86::Mem& v) {
    if (A_.evex()) {
      k = cc_.newKw();
      x86::Gp t = cc_.newGpd();
      cc_.mov(t, (1u << lanes) - 1);
      cc_.kmovw(k, t);
    } else {
      int32_t m[8];
      for (int i = 0; i < 8; ++i) m[i] = i < lanes ? -1 : 0;
      v = cc_.newConst(asmjit::ConstPoolScope::kLocal, m, sizeof m);
    }
  }
};

x86::Vec GemmGen::load(const x86::Mem& m, bool masked) {
  x86::Vec v = A_.newv(vb());
  if (!masked) cc_.vmovups(v, m);
  else if (A_.evex()) cc_.k(use_emask_ ? emask_ : kmask_).z().vmovups(v, m);
  else {
    x86::Vec mk = A_.newv(vb());
    cc_.vmovups(mk, use_emask_ ? evmask_ : vmask_);
    cc_.vmaskmovps(v, mk, m);
  }
  return v;
}

void GemmGen::store(const x86::Mem& m, const x86::Vec& v, bool masked) {
  if (!masked) cc_.vmovups(m, v);
  else if (A_.evex()) cc_.k(use_emask_ ? emask_ : kmask_).vmovups(m, v);
  else {
    x86::Vec mk = A_.newv(vb());
    cc_.vmovups(mk, use_emask_ ? evmask_ : vmask_);
    cc_.vmaskmovps(m, mk, v);
  }
}

// The V x V transpose of `rows` (at most V registers; missing rows read as
// zeros): out[q] lane r = rows[r] lane q. AVX2: unpack, shufps, vperm2f128
// (24 instructions); AVX-512: the same two in-lane steps, then two steps of
// vshuff32x4 over the 128-bit lanes (64). Steps whose inputs are all
// missing rows are skipped (their results are zeros).
std::vector<x86::Vec> GemmGen::transpose(const std::vector<x86::Vec>& rows) {
  const int V = bl_.V;
  std::vector<x86::Vec> in(static_cast<size_t>(V));  // an invalid register: a row of zeros
  for (size_t r = 0; r < rows.size(); ++r) in[r] = rows[r];
  x86::Vec zero;
  auto z = [&](const x86::Vec& x) {
    if (x.isValid()) return x;
    if (!zero.isValid()) zero = A_.zero(vb());
    return zero;
  };
  auto op2 = [&](auto emit, const x86::Vec& a, const x86::Vec& b) {
    if (!a.isValid() && !b.isValid()) return x86::Vec();
    x86::Vec d = A_.newv(vb());
    emit(d, z(a), z(b));
    return d;
  };
  auto unpl = [&](const x86::Vec& a, const x86::Vec& b) {
    return op2([&](const x86::Vec& d, const x86::Vec& x, const x86::Vec& y) { cc_.vunpcklps(d, x, y); }, a, b);
  };
  auto unph = [&](const x86::Vec& a, const x86::Vec& b) {
    return op2([&](const x86::Vec& d, const x86::Vec& x, const x86::Vec& y) { cc_.vunpckhps(d, x, y); }, a, b);
  };
  auto shuf = [&](const x86::Vec& a, const x86::Vec& b, int imm) {
    return op2([&](const x86::Vec& d, const x86::Vec& x, const x86::Vec& y) { cc_.vshufps(d, x, y, imm); }, a, b);
  };
  // s[g][c]: rows 4g .. 4g + 3 at column 4 L + c in 128-bit lane L
  const int G = V / 4;
  std::vector<std::array<x86::Vec, 4>> sg(static_cast<size_t>(G));
  for (int g = 0; g < G; ++g) {
    const x86::Vec& r0 = in[size_t(4 * g)];
    const x86::Vec& r1 = in[size_t(4 * g + 1)];
    const x86::Vec& r2 = in[size_t(4 * g + 2)];
    const x86::Vec& r3 = in[size_t(4 * g + 3)];
    const x86::Vec t0 = unpl(r0, r1), t1 = unph(r0, r1), t2 = unpl(r2, r3), t3 = unph(r2, r3);
    sg[size_t(g)] = {shuf(t0, t2, 0x44), shuf(t0, t2, 0xEE), shuf(t1, t3, 0x44), shuf(t1, t3, 0xEE)};
  }
  std::vector<x86::Vec> out(static_cast<size_t>(V));
  auto lanes = [&](const x86::Vec& a, const x86::Vec& b, int imm) {
    if (A_.evex())
      return op2([&](const x86::Vec& d, const x86::Vec& x, const x86::Vec& y) { cc_.vshuff32x4(d, x, y, imm); }, a, b);
    return op2([&](const x86::Vec& d, const x86::Vec& x, const x86::Vec& y) { cc_.vperm2f128(d, x, y, imm); }, a, b);
  };
  for (int c = 0; c < 4; ++c) {
    if (!A_.evex()) {  // out[c] = the low lanes of groups 0, 1; out[4 + c] the high ones
      out[size_t(c)] = lanes(sg[0][size_t(c)], sg[1][size_t(c)], 0x20);
      out[size_t(4 + c)] = lanes(sg[0][size_t(c)], sg[1][size_t(c)], 0x31);
      continue;
    }
    const x86::Vec u0 = lanes(sg[0][size_t(c)], sg[1][size_t(c)], 0x44), u1 = lanes(sg[0][size_t(c)], sg[1][size_t(c)], 0xEE);
    const x86::Vec u2 = lanes(sg[2][size_t(c)], sg[3][size_t(c)], 0x44), u3 = lanes(sg[2][size_t(c)], sg[3][size_t(c)], 0xEE);
    out[size_t(c)] = lanes(u0, u2, 0x88);
    out[size_t(4 + c)] = lanes(u0, u2, 0xDD);
    out[size_t(8 + c)] = lanes(u1, u3, 0x88);
    out[size_t(12 + c)] = lanes(u1, u3, 0xDD);
  }
  for (auto& x : out) x = z(x);
  return out;
}

// Blocking::tout: the tile's accumulators (rows: C's n columns; vectors:
// V of C's rows each, the last `masked` to tail_lanes rows) transposed
// vector by vector into C's rows, the epilogue run on each (n lanes,
// masked with emask_ when n < V) at C's row j0 + v V + q (Q_ set there).
void GemmGen::transposed_epilogue(const std::vector<x86::Vec>& acc, int rows, int nv, bool masked) {
  for (int v = 0; v < nv; ++v) {
    std::vector<x86::Vec> col(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) col[size_t(r)] = acc[size_t(r) * nv + v];
    const std::vector<x86::Vec> t = transpose(col);
    const int valid = masked && v == nv - 1 ? bl_.tail_lanes : bl_.V;
    use_emask_ = true;
    for (int q = 0; q < valid; ++q) epilogue(t[size_t(q)], v * bl_.V + q, 0, k_.m < bl_.V);  // (k_.m: C's n)
    use_emask_ = false;
  }
}

// A packed register (Blocking::pack lanes of pack_rows_ rows from row r, the
// columns of vector v) of epilogue operand op: a matrix's rows gathered (2
// or 4 floats each), a row's columns repeated.
x86::Vec GemmGen::load_packed(int op, int r, int v) {
  const int32_t col = v * vb();
  x86::Vec x = A_.newv(vb());
  if (k_.layouts[op] == EpiLayout::row) {
    if (bl_.pack == 2) cc_.vbroadcastsd(x, x86::qword_ptr(Q_[op], col));
    else cc_.vbroadcastf128(x, x86::xmmword_ptr(Q_[op], col));
    return x;
  }
  auto at = [&](int i) { return int32_t((int64_t(r) + i) * k_.lds[op] * 4 + col); };
  if (bl_.pack == 4) {
    cc_.vmovups(x.xmm(), x86::xmmword_ptr(Q_[op], at(0)));
    if (pack_rows_ > 1) cc_.vinsertf128(x, x, x86::xmmword_ptr(Q_[op], at(1)), 1);
    return x;
  }
  cc_.vmovsd(x.xmm(), x86::qword_ptr(Q_[op], at(0)));
  if (pack_rows_ > 1) cc_.vmovhps(x.xmm(), x.xmm(), x86::qword_ptr(Q_[op], at(1)));
  if (pack_rows_ > 2) {
    const x86::Xmm h = A_.newv(16).xmm();
    cc_.vmovsd(h, x86::qword_ptr(Q_[op], at(2)));
    if (pack_rows_ > 3) cc_.vmovhps(h, h, x86::qword_ptr(Q_[op], at(3)));
    cc_.vinsertf128(x, x, h, 1);
  }
  return x;
}

// Stores a packed register's pack_rows_ rows (the inverse of load_packed's gather).
void GemmGen::store_packed(int op, int r, int v, const x86::Vec& x) {
  const int32_t col = v * vb();
  auto at = [&](int i) { return int32_t((int64_t(r) + i) * k_.lds[op] * 4 + col); };
  if (bl_.pack == 4) {
    cc_.vmovups(x86::xmmword_ptr(Q_[op], at(0)), x.xmm());
    if (pack_rows_ > 1) cc_.vextractf128(x86::xmmword_ptr(Q_[op], at(1)), x, 1);
    return;
  }
  cc_.vmovlps(x86::qword_ptr(Q_[op], at(0)), x.xmm());
  if (pack_rows_ > 1) cc_.vmovhps(x86::qword_ptr(Q_[op], at(1)), x.xmm());
  if (pack_rows_ > 2) {
    const x86::Xmm h = A_.newv(16).xmm();
    cc_.vextractf128(h, x, 1);
    cc_.vmovlps(x86::qword_ptr(Q_[op], at(2)), h);
    if (pack_rows_ > 3) cc_.vmovhps(x86::qword_ptr(Q_[op], at(3)), h);
  }
}

// The epilogue program on one accumulator register: row r, vector v of the
// tile (when pack_rows_ > 0: the packed register of rows r .. r + pack_rows_ - 1).
x86::Vec GemmGen::epilogue(const x86::Vec& acc, int r, int v, bool masked) {
  x86::Vec summed;
  Ctx& c = *c_;
  const size_t N = p_.code.size();
  std::vector<x86::Vec> val(N);
  auto addr = [&](int op) {
    const int64_t col = int64_t(v) * bl_.V * 4;
    switch (k_.layouts[op]) {
      case EpiLayout::matrix: return x86::ptr(Q_[op], int32_t(int64_t(r) * k_.lds[op] * 4 + col));
      case EpiLayout::row: return x86::ptr(Q_[op], int32_t(col));
      default: return x86::ptr(Q_[op]);
    }
  };
  for (size_t i = 0; i < N; ++i) {
    const Instr& in = p_.code[i];
    switch (in.kind) {
      case Instr::Kind::load: {
        const EpiLayout l = k_.layouts[in.arg];
        x86::Vec x;
        if (l == EpiLayout::product) x = acc;
        else if (l == EpiLayout::scalar) {
          x = A_.newv(vb());
          cc_.vbroadcastss(x, x86::dword_ptr(Q_[in.arg]));
        } else x = pack_rows_ ? load_packed(in.arg, r, v) : load(addr(in.arg), masked);
        val[i] = convert(c, x, DType::float32, in.dtype);
        break;
      }
      case Instr::Kind::imm: {
        if (in.arg >= 0) {
          val[i] = load_splat(c, in.dtype, x86::ptr(table_, 8 * in.arg));
          break;
        }
        x86::Vec w = A_.newv(vb());
        if (in.dtype == DType::bool_) val[i] = in.imm != 0 ? A_.ones(vb()) : A_.zero(vb());
        else val[i] = A_.reg(A_.cf(float(in.imm)), w);
        break;
      }
      case Instr::Kind::op: {
        if (in.op == OpId::Cast) {
          val[i] = convert(c, val[in.a], p_.code[in.a].dtype, in.dtype);
          break;
        }
        const DType cd = compute_dtype(in, p_.code);
        const int n = op_info(in.op).arity;
        const int32_t rr[3] = {in.a, in.b, in.c};
        x86::Vec x[3];
        for (int j = 0; j < n; ++j)
          x[j] = convert(c, val[rr[j]], p_.code[rr[j]].dtype, (in.op == OpId::Where && j == 0) ? DType::bool_ : cd);
        if (is_math_op(in.op)) val[i] = emit_math(c, in.op, x[0]);
        else if (is_predicate_op(in.op)) val[i] = emit_predicate(c, in, cd, x, n);
        else val[i] = emit_arith(c, in, cd, x, n);
        break;
      }
      case Instr::Kind::store: {
        const x86::Vec y = convert(c, val[in.a], p_.code[in.a].dtype, DType::float32);
        if (pack_rows_) store_packed(in.arg, r, v, y);
        else store(addr(in.arg), y, masked);
        if (in.arg == k_.column_sums) summed = y;
        break;
      }
    }
  }
  return summed;
}

// The column sums' n floats set to 0 before the first row block adds to them.
void GemmGen::zero_column_sums() {
  const int64_t full = k_.n / bl_.V;
  const x86::Vec z = A_.zero(vb());
  if (full > 0) {
    x86::Gp p = cc_.newIntPtr(), cnt = cc_.newIntPtr();
    Label top = cc_.newLabel();
    cc_.mov(p, colsum_);
    cc_.mov(cnt, full);
    cc_.bind(top);
    cc_.vmovups(x86::ptr(p), z);
    cc_.add(p, vb());
    cc_.dec(cnt);
    cc_.jnz(top);
  }
  if (k_.n % bl_.V) store(x86::ptr(colsum_, int32_t(full * vb())), z, true);
}

// One tile: rows x nv vectors at (i0, j0); when `packed`, the last vector is
// Blocking::pack lanes wide and packed (g = V / pack rows per accumulator:
// its A factor blends g row broadcasts, its B factor repeats the row's pack
// columns), else `masked` masks the last vector to tail_lanes.
void GemmGen::tile(const x86::Gp& i0, const x86::Gp& j0, int rows, int nv, bool masked, bool packed) {
  const int64_t K = k_.k, lda = k_.lda, ldb = k_.tb ? k_.n : k_.ldb;
  // A and B at the tile's origin
  x86::Gp a = cc_.newIntPtr(), b = cc_.newIntPtr(), cnt = cc_.newIntPtr();
  cc_.mov(a, i0);
  cc_.imul(a, a, int32_t(k_.ta ? 4 : lda * 4));
  cc_.add(a, a_);
  cc_.lea(b, x86::ptr(b_, j0, 2));
  const int nf = packed ? nv - 1 : nv;  // ordinary vectors
  const int g = packed ? bl_.V / bl_.pack : 1;
  const int groups = packed ? (rows + g - 1) / g : 0;
  // acc[r nf + v]: row r, vector v; acc[rows nf + q]: the packed rows q g ..
  std::vector<x86::Vec> acc(size_t(rows) * nf + groups);
  for (auto& x : acc) x = A_.zero(vb());

  auto step = [&](int u) {  // one kk, u steps past a and b
    std::vector<x86::Vec> bv(nf);
    for (int v = 0; v < nf; ++v)
      bv[v] = load(x86::ptr(b, int32_t(u * ldb * 4 + v * vb())), masked && v == nv - 1);
    x86::Vec bt, pat;  // packed: B's pack columns repeated; the blended A factor
    if (packed) {
      bt = A_.newv(vb());
      const int32_t off = int32_t(u * ldb * 4 + nf * vb());
      if (bl_.pack == 2) cc_.vbroadcastsd(bt, x86::qword_ptr(b, off));
      else cc_.vbroadcastf128(bt, x86::xmmword_ptr(b, off));
    }
    for (int r = 0; r < rows; ++r) {
      const int64_t off = k_.ta ? (int64_t(u) * lda + r) * 4 : (int64_t(r) * lda + u) * 4;
      x86::Vec s = A_.newv(vb());
      cc_.vbroadcastss(s, x86::dword_ptr(a, int32_t(off)));
      for (int v = 0; v < nf; ++v) cc_.vfmadd231ps(acc[size_t(r) * nf + v], bv[v], s);
      if (!packed) continue;
      const int l = r % g;  // lanes [l pack, (l + 1) pack) of the group's register
      if (l == 0) pat = s;
      else {
        x86::Vec p2 = A_.newv(vb());
        cc_.vblendps(p2, pat, s, ((1 << bl_.pack) - 1) << (l * bl_.pack));
        pat = p2;
      }
      if (l == g - 1 || r == rows - 1) cc_.vfmadd231ps(acc[size_t(rows) * nf + size_t(r / g)], bt, pat);
    }
  };
  constexpr int U = 4;
  const int64_t loops = K / U;
  if (loops > 0) {
    Label top = cc_.newLabel();
    cc_.mov(cnt, loops);
    cc_.bind(top);
    for (int u = 0; u < U; ++u) step(u);
    cc_.add(a, int32_t(k_.ta ? U * lda * 4 : U * 4));
    cc_.add(b, int32_t(U * ldb * 4));
    cc_.dec(cnt);
    cc_.jnz(top);
  }
  for (int u = 0; u < int(K % U); ++u) step(u);

  if (bl_.tout) {  // C's operands at C's row j0 (the code's column), column 0
    for (size_t op = 0; op < k_.layouts.size(); ++op) {
      const EpiLayout l = k_.layouts[op];
      if (l == EpiLayout::product) continue;
      cc_.mov(Q_[op], P_[op]);
      if (l != EpiLayout::matrix) continue;
      x86::Gp t = cc_.newIntPtr();
      cc_.mov(t, j0);
      cc_.imul(t, t, int32_t(k_.lds[op] * 4));
      cc_.add(Q_[op], t);
    }
    transposed_epilogue(acc, rows, nv, masked);
    return;
  }
  // the epilogue operands at (i0, j0)
  for (size_t op = 0; op < k_.layouts.size(); ++op) {
    const EpiLayout l = k_.layouts[op];
    if (l == EpiLayout::product) continue;
    cc_.mov(Q_[op], P_[op]);
    if (l == EpiLayout::matrix) {
      x86::Gp t = cc_.newIntPtr();
      cc_.mov(t, i0);
      cc_.imul(t, t, int32_t(k_.lds[op] * 4));
      cc_.add(Q_[op], t);
    }
    if (l != EpiLayout::scalar) cc_.lea(Q_[op], x86::ptr(Q_[op], j0, 2));
  }
  if (k_.column_sums < 0) {
    for (int r = 0; r < rows; ++r)
      for (int v = 0; v < nf; ++v) epilogue(acc[size_t(r) * nf + v], r, v, masked && v == nv - 1);
    for (int q = 0; q < groups; ++q) {
      pack_rows_ = std::min(g, rows - q * g);
      epilogue(acc[size_t(rows) * nf + size_t(q)], q * g, nf, false);
      pack_rows_ = 0;
    }
    return;
  }
  // Column sums (choose_blocking never packs such a key, so nf == nv): the
  // partial sums of the rows above (0 for the first row block) plus this
  // tile's rows one at a time, in row order (sum + y).
  x86::Gp q = cc_.newIntPtr();
  cc_.lea(q, x86::ptr(colsum_, j0, 2));
  std::vector<x86::Vec> sums(static_cast<size_t>(nv));
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < nv; ++v) {
      const bool mv = masked && v == nv - 1;
      const x86::Vec y = epilogue(acc[size_t(r) * nv + v], r, v, mv);
      if (r == 0) sums[size_t(v)] = load(x86::ptr(q, v * vb()), mv);
      cc_.vaddps(sums[size_t(v)], sums[size_t(v)], y);
    }
  for (int v = 0; v < nv; ++v) store(x86::ptr(q, v * vb()), sums[size_t(v)], masked && v == nv - 1);
}

// Row blocks [rb0, rb1) of the column block at j0 (nv vectors).
void GemmGen::rows_loop(const x86::Gp& rb0, const x86::Gp& rb1, const x86::Gp& j0, int nv, bool masked,
                        bool packed) {
  x86::Gp ib = cc_.newIntPtr(), i0 = cc_.newIntPtr();
  Label top = cc_.newLabel(), full_done = cc_.newLabel(), done = cc_.newLabel();
  cc_.mov(ib, rb0);
  cc_.bind(top);
  cc_.cmp(ib, rb1);
  cc_.jge(done);
  cc_.cmp(ib, bl_.row_full);
  cc_.jge(full_done);
  cc_.mov(i0, ib);
  cc_.imul(i0, i0, bl_.mr);
  tile(i0, j0, bl_.mr, nv, masked, packed);
  cc_.inc(ib);
  cc_.jmp(top);
  cc_.bind(full_done);
  if (bl_.mt > 0) {  // the short last row block (ib == row_full < rb1)
    cc_.mov(i0, bl_.row_full * bl_.mr);
    tile(i0, j0, bl_.mt, nv, masked, packed);
  }
  cc_.bind(done);
}

void GemmGen::run() {
  Ctx c{A_, bl_.V, Lane::b32, p_.strict};
  c_ = &c;
  using FS = asmjit::FuncSignatureT<void, const float*, const float*, char* const*, int64_t, int64_t>;
  asmjit::FuncNode* fn = cc_.addFunc(FS());
  fn->frame().setAvxEnabled();
  fn->frame().setAvxCleanup();
  if (A_.evex()) fn->frame().setAvx512Enabled();
  x86::Gp ptrs = cc_.newIntPtr("ptrs"), rb0 = cc_.newInt64("rb0"), rb1 = cc_.newInt64("rb1");
  a_ = cc_.newIntPtr("a");
  b_ = cc_.newIntPtr("b");
  fn->setArg(0, a_);
  fn->setArg(1, b_);
  fn->setArg(2, ptrs);
  fn->setArg(3, rb0);
  fn->setArg(4, rb1);
  const int nops = int(k_.layouts.size());
  P_.resize(nops);
  Q_.resize(nops);
  for (int op = 0; op < nops; ++op) {
    if (k_.layouts[op] == EpiLayout::product) continue;
    P_[op] = cc_.newIntPtr();
    Q_[op] = cc_.newIntPtr();
    cc_.mov(P_[op], x86::ptr(ptrs, 8 * op));
  }
  if (p_.table_slots > 0) {
    table_ = cc_.newIntPtr();
    cc_.mov(table_, x86::ptr(ptrs, 8 * nops));
  }
  const bool narrow = bl_.nvt > 0 && bl_.tail_lanes < bl_.V && bl_.pack == 0;  // masked (not packed)
  if (narrow) {
    lane_mask(bl_.tail_lanes, kmask_, vmask_);
  }
  if (bl_.tout && k_.m < bl_.V) {  // C's n lanes of a transposed row (k_.m: C's n)
    lane_mask(int(k_.m), emask_, evmask_);
  }
  if (k_.column_sums >= 0) {  // (one thread runs every row block: small_gemm_why_not)
    colsum_ = cc_.newIntPtr("colsum");
    cc_.mov(colsum_, x86::ptr(ptrs, int32_t(8 * k_.column_sum_slot())));
    zero_column_sums();
  }
  x86::Gp jb = cc_.newIntPtr("jb"), j0 = cc_.newIntPtr("j0");
  if (bl_.col_full > 0) {
    Label top = cc_.newLabel(), done = cc_.newLabel();
    cc_.xor_(jb, jb);
    cc_.bind(top);
    cc_.cmp(jb, bl_.col_full);
    cc_.jge(done);
    cc_.mov(j0, jb);
    cc_.imul(j0, j0, bl_.nr * bl_.V);
    rows_loop(rb0, rb1, j0, bl_.nr, false, false);
    cc_.inc(jb);
    cc_.jmp(top);
    cc_.bind(done);
  }
  if (bl_.nvt > 0) {
    cc_.mov(j0, bl_.col_full * bl_.nr * bl_.V);
    rows_loop(rb0, rb1, j0, bl_.nvt, narrow, bl_.pack > 0);
  }
  cc_.ret();
  cc_.endFunc();
}

// Whether `key` is the plain GEMM (out0 = product, stored as a matrix).
bool is_plain(const SmallGemmKey& key) {
  const ElementwiseProgram& p = key.epilogue;
  if (p.num_outputs != 1 || p.table_slots != 0 || p.code.size() != 2 || key.layouts.size() != 2 ||
      key.layouts[0] != EpiLayout::matrix || key.layouts[1] != EpiLayout::product)
    return false;
  const Instr &ld = p.code[0], &st = p.code[1];
  return ld.kind == Instr::Kind::load && ld.arg == 1 && ld.dtype == DType::float32 && st.kind == Instr::Kind::store &&
         st.arg == 0 && st.a == 0;
}

class Generated final : public SmallGemm {
 public:
  Generated(SmallGemmKey k, Blocking b, Assembled a)
      : key_(std::move(k)), bl_(b), fn_(reinterpret_cast<GemmFn>(a.fn)), size_(a.code_size),
        dis_(std::move(a.disassembly)), image_(std::move(a.image)), swap_(small_gemm_swaps(key_)) {}
  ~Generated() override { jit_runtime().release(fn_); }

  void run(const float* a, const float* b, char* const* ptrs) const override {
    if (bl_.tout) {  // the code's A is B (read transposed), its B is A as stored (transposed_tiles)
      fn_(b, a, ptrs, 0, bl_.row_blocks());
      return;
    }
    if (swap_) {
      run_swapped(a, b, ptrs);
      return;
    }
    const double macs = double(key_.m) * double(key_.n) * double(key_.k);
    if (key_.tb) {  // pack B (stored n x k) into row-major k x n (pack_b.h: an exact copy)
      static thread_local std::vector<float> packed;
      const int64_t n = key_.n, k = key_.k;
      if (packed.size() < size_t(n * k)) packed.resize(size_t(n * k));
      float* p = packed.data();
      if (macs < kSmallGemmParallelMacs) {
        pack_transposed_b(b, n, k, key_.ldb, p, n, 0, k);
      } else {  // rows of the copy in blocks of 64 among the threads
        cpu::parallel_ranges((k + 63) / 64, n * k, [&](int64_t r0, int64_t r1) {
          pack_transposed_b(b, n, k, key_.ldb, p, n, r0 * 64, std::min(k, r1 * 64));
        });
      }
      b = p;
    }
    // Row blocks split among the OpenMP threads from kSmallGemmParallelMacs
    // on: every C element is still one chain over k computed by one call,
    // so the bits do not depend on the split. Below it the fork-join costs
    // more than it saves.
    if (macs < kSmallGemmParallelMacs) {
      fn_(a, b, ptrs, 0, bl_.row_blocks());
      return;
    }
    cpu::parallel_ranges(bl_.row_blocks(), cpu::kParallelGrain,
                         [&](int64_t r0, int64_t r1) { fn_(a, b, ptrs, r0, r1); });
  }
  const SmallGemmKey& key() const override { return key_; }
  int tile_rows() const override { return bl_.mr; }
  int tile_cols() const override { return bl_.nr * bl_.V; }
  size_t code_size() const override { return size_; }
  const std::string& disassembly() const override { return dis_; }
  const CodeImage& image() const override { return image_; }

 private:
  SmallGemmKey key_;
  Blocking bl_;
  GemmFn fn_;
  size_t size_;
  std::string dis_;
  CodeImage image_;
  bool swap_;

  // C = (op(B)^T op(A)^T)^T (small_gemm_swaps; the code is the swapped
  // GEMM's, swapped_key): the transposed product into an n x m scratch (the
  // code reads B as stored in place, and op(A)^T, copied into a k x m
  // scratch first when A is not transposed: m k elements), then transposed
  // into C. Each element of C^T is the same fused multiply-add chain over k
  // (the two factors of each product swapped: the same bits), so C has the
  // bits of the packing route.
  void run_swapped(const float* a, const float* b, char* const* ptrs) const {
    const int64_t m = key_.m, n = key_.n, k = key_.k;
    static thread_local std::vector<float> at, ct;
    if (!key_.ta) {  // op(A)^T = A^T: k x m
      if (at.size() < size_t(k * m)) at.resize(size_t(k * m));
      pack_transposed_b(a, m, k, key_.lda, at.data(), m, 0, k);
      a = at.data();
    }
    if (ct.size() < size_t(n * m)) ct.resize(size_t(n * m));
    char* cp[1] = {reinterpret_cast<char*>(ct.data())};
    // row blocks (of n) among the threads from kSmallGemmParallelMacs on, as run()
    if (double(m) * double(n) * double(k) < kSmallGemmParallelMacs) {
      fn_(b, a, cp, 0, bl_.row_blocks());
    } else {
      cpu::parallel_ranges(bl_.row_blocks(), cpu::kParallelGrain,
                           [&](int64_t r0, int64_t r1) { fn_(b, a, cp, r0, r1); });
    }
    pack_transposed_b(ct.data(), n, m, m, reinterpret_cast<float*>(ptrs[0]), key_.lds[0], 0, m);
  }
};

bool is_f32_or_bool(DType d) { return d == DType::float32 || d == DType::bool_; }

}  // namespace

namespace {
// The shape condition of small_gemm_swaps: B's n k copies (packing route)
// against A's m k and C's m n.
bool swap_shape(int64_t m_, int64_t n_, int64_t k_, bool tb) {
  const double m = double(m_), n = double(n_), k = double(k_);
  return tb && m_ <= kSmallGemmSwapMaxM && n * k >= 2 * (m * k + m * n);
}

// FMA lanes one row of n columns costs in the generated code: whole vectors
// (a masked last vector costs a whole one), except AVX2's packed last
// vector of 2 or 4 lanes (Blocking::pack), which costs its lanes.
int64_t row_lanes(CpuTarget t, int64_t n) {
  const int64_t V = t == CpuTarget::avx512 ? 16 : 8, tail = n % V;
  if (t != CpuTarget::avx512 && (tail == 2 || tail == 4)) return n;
  return (n + V - 1) / V * V;
}

// The narrow-n condition of small_gemm_swaps: op(A) = A^T (A stored k x m),
// B row-major, and C^T (n rows of m) takes at most 3/4 of the FMA lanes of C
// (m rows of n): a narrow n (AVX-512, n = 10: 10 of 16 lanes per row) turned
// into whole vectors along m. Both operands are then read in place (no
// copy); only C^T -> C (m n elements) is added, so k >= 16.
bool narrow_swap_shape(CpuTarget t, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  return ta && !tb && n < m && k >= 16 && 4 * n * row_lanes(t, m) <= 3 * m * row_lanes(t, n);
}
}  // namespace

bool small_gemm_transposed_tiles(const SmallGemmKey& key) {
  const int64_t V = key.target == CpuTarget::avx512 ? 16 : 8;
  return key.column_sums < 0 && key.n <= V && narrow_swap_shape(key.target, key.m, key.n, key.k, key.ta, key.tb) &&
         double(key.m) * double(key.n) * double(key.k) < kSmallGemmParallelMacs;
}

bool small_gemm_swaps(const SmallGemmKey& key) {
  if (key.column_sums >= 0 || !is_plain(key)) return false;
  return swap_shape(key.m, key.n, key.k, key.tb) ||
         (narrow_swap_shape(key.target, key.m, key.n, key.k, key.ta, key.tb) && !small_gemm_transposed_tiles(key));
}

namespace {
// The GEMM whose code a swapped key runs: C^T (n x m, leading dimension m)
// = op(B)^T (n x k: B as stored when B is transposed, else B stored k x n
// read transposed) times op(A)^T (k x m, row-major: A as stored when A is
// transposed, else run_swapped's copy, leading dimension m).
SmallGemmKey swapped_key(const SmallGemmKey& key) {
  return plain_gemm_key(key.target, key.n, key.m, key.k, !key.tb, false, key.ldb, key.ta ? key.lda : key.m, key.m);
}

// The key the code is generated for: the swapped GEMM's (small_gemm_swaps);
// for transposed tiles its sizes and strides with key's epilogue, whose
// operands stay C's; else key.
SmallGemmKey code_key_of(const SmallGemmKey& key) {
  if (small_gemm_swaps(key)) return swapped_key(key);
  if (!small_gemm_transposed_tiles(key)) return key;
  SmallGemmKey c = swapped_key(key);
  c.epilogue = key.epilogue;
  c.layouts = key.layouts;
  c.lds = key.lds;
  return c;
}
Blocking blocking_of(const SmallGemmKey& key, const SmallGemmKey& code) {
  return small_gemm_transposed_tiles(key) ? choose_tout_blocking(code) : choose_blocking(code);
}
}  // namespace

bool small_gemm_eager_size(int64_t m, int64_t n, int64_t k) {
  // The shape alone decides (not whether B is stored transposed): a plan
  // that binds a transposed-view argument contiguous asks for the same m, n,
  // k with tb = false and must run a generated GEMM too (the same FMA chains,
  // so strict mode keeps eager's bits), not the BLAS.
  const double macs = double(m) * double(n) * double(k);
  return macs <= kSmallGemmMaxMacs || (macs <= kSmallGemmSwapMaxMacs && swap_shape(m, n, k, true));
}

std::string SmallGemmKey::str() const {
  std::ostringstream os;
  os << "sgemm " << cpu_target_name(target) << ' ' << (ta ? 'T' : 'N') << (tb ? 'T' : 'N') << " m=" << m
     << " n=" << n << " k=" << k << " lda=" << lda << " ldb=" << ldb << " layouts=";
  for (size_t i = 0; i < layouts.size(); ++i)
    os << "mrsp"[int(layouts[i])] << (layouts[i] == EpiLayout::matrix ? std::to_string(lds[i]) : "") << ',';
  if (column_sums >= 0) os << " column_sums=" << column_sums;
  os << " epilogue:\n" << epilogue.str();
  return os.str();
}

SmallGemmKey plain_gemm_key(CpuTarget t, int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t lda,
                            int64_t ldb, int64_t ldc) {
  SmallGemmKey key;
  key.target = t;
  key.m = m;
  key.n = n;
  key.k = k;
  key.ta = ta;
  key.tb = tb;
  key.lda = lda;
  key.ldb = ldb;
  ElementwiseProgram& p = key.epilogue;
  p.operand_dtypes = {DType::float32, DType::float32};
  p.operand_broadcast = {false, false};
  p.num_outputs = 1;
  Instr ld;
  ld.kind = Instr::Kind::load;
  ld.dtype = DType::float32;
  ld.arg = 1;
  Instr st;
  st.kind = Instr::Kind::store;
  st.a = 0;
  st.arg = 0;
  p.code = {ld, st};
  key.layouts = {EpiLayout::matrix, EpiLayout::product};
  key.lds = {ldc, 0};
  return key;
}

std::string small_gemm_why_not(const SmallGemmKey& key) {
  if (key.target < CpuTarget::avx2) return std::string("target ") + cpu_target_name(key.target) + " (needs avx2 or avx512)";
  if (key.target > host_cpu_target()) return std::string("target ") + cpu_target_name(key.target) + " is not supported by this CPU";
  constexpr int64_t kMax = kSmallGemmMaxDim;
  if (key.m < 1 || key.n < 1 || key.k < 1 || key.m > kMax || key.n > kMax || key.k > kMax)
    return "sizes m, n, k must be in 1..2^20 (got " + std::to_string(key.m) + ", " + std::to_string(key.n) + ", " +
           std::to_string(key.k) + ")";
  if (key.lda < (key.ta ? key.m : key.k) || key.ldb < (key.tb ? key.k : key.n) || key.lda > kMax || key.ldb > kMax)
    return "bad leading dimension of A or B";
  const ElementwiseProgram& p = key.epilogue;
  const size_t nops = p.operand_dtypes.size();
  if (key.layouts.size() != nops || key.lds.size() != nops) return "layouts/lds do not match the epilogue's operands";
  int products = 0;
  for (size_t i = 0; i < nops; ++i) {
    if (p.operand_dtypes[i] != DType::float32) return "epilogue operand " + std::to_string(i) + " is not float32";
    const EpiLayout l = key.layouts[i];
    if (int(i) < p.num_outputs && l != EpiLayout::matrix) return "epilogue output " + std::to_string(i) + " is not a matrix";
    if (l == EpiLayout::matrix && (key.lds[i] < key.n || key.lds[i] > kMax))
      return "epilogue operand " + std::to_string(i) + ": bad leading dimension";
    products += l == EpiLayout::product;
  }
  if (products != 1) return "the epilogue needs exactly one product operand";
  if (key.column_sums >= 0) {
    if (key.column_sums >= p.num_outputs) return "column sums of operand " + std::to_string(key.column_sums) + ", not an output";
    if (double(key.m) * double(key.n) * double(key.k) >= kSmallGemmParallelMacs)
      return "column sums need the row blocks in order on one thread (below kSmallGemmParallelMacs multiply-adds)";
  } else if (key.column_sums != -1) {
    return "bad column_sums " + std::to_string(key.column_sums);
  }
  for (const Instr& in : p.code)
    if (in.kind != Instr::Kind::store && !is_f32_or_bool(in.dtype))
      return "epilogue value of dtype " + std::string(name(in.dtype)) + " (float32 and bool only)";
  // the generic checks (operand indices, ops with a generated form) on an equivalent program
  ElementwiseProgram q = p;
  q.operand_broadcast.assign(nops, false);
  if (!can_generate(q, key.target)) return "the epilogue has no generated form on " + std::string(cpu_target_name(key.target));
  for (const Instr& in : p.code)
    if (in.kind == Instr::Kind::op && in.op != OpId::Cast && is_call_op(in.op, compute_dtype(in, p.code), p.strict))
      return "epilogue op '" + std::string(op_name(in.op)) + "' calls a scalar function";
  return {};
}

namespace {
std::atomic<int64_t> g_generated{0}, g_loaded{0};
}  // namespace

CodegenCounts small_gemm_counts() { return {g_generated.load(), g_loaded.load()}; }

std::unique_ptr<SmallGemm> generate_small_gemm(const SmallGemmKey& key, bool want_disassembly) {
  const std::string why = small_gemm_why_not(key);
  if (!why.empty()) throw Error("small_gemm: cannot generate this GEMM: " + why);
  ++g_generated;
  const SmallGemmKey code_key = code_key_of(key);
  const Blocking bl = blocking_of(key, code_key);
  Assembled a = assemble(want_disassembly, [&](x86::Compiler& cc) { GemmGen(code_key, bl, cc).run(); });
  return std::make_unique<Generated>(key, bl, std::move(a));
}

std::unique_ptr<SmallGemm> load_small_gemm(const SmallGemmKey& key, const CodeImage& image) {
  const std::string why = small_gemm_why_not(key);
  if (!why.empty()) throw Error("small_gemm: cannot load this GEMM: " + why);
  Assembled a;
  a.fn = place_image(image);
  ++g_loaded;
  a.code_size = image.bytes.size();
  a.image = image;
  return std::make_unique<Generated>(key, blocking_of(key, code_key_of(key)), std::move(a));
}

namespace {
using EagerKey = std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t>;
// Least recently used problems are evicted (kernel_lru.h): a problem's
// kernel never depends on how many other problems the process ran before.
KernelLru<EagerKey, SmallGemm>& eager_cache() {
  static auto* c = new KernelLru<EagerKey, SmallGemm>(kEagerGemmCacheMax);  // never destroyed
  return *c;
}
CpuTarget eager_target() {
  static const CpuTarget t = detect_cpu_target();
  return t;
}
}  // namespace

void seed_eager_small_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t lda, int64_t ldb, int64_t ldc,
                           const std::function<const CodeImage*(const SmallGemmKey&)>& image_for) {
  if (!small_gemm_eager_size(m, n, k)) return;
  const CpuTarget t = eager_target();
  if (t < CpuTarget::avx2) return;
  eager_cache().put_if_absent(EagerKey{m, n, k, ta, tb, lda, ldb, ldc}, [&]() -> std::shared_ptr<const SmallGemm> {
    const SmallGemmKey sk = plain_gemm_key(t, m, n, k, ta, tb, lda, ldb, ldc);
    if (!small_gemm_why_not(sk).empty()) return nullptr;
    const CodeImage* im = image_for(sk);
    if (!im) return nullptr;
    try {
      return load_small_gemm(sk, *im);
    } catch (const Error&) {
      return nullptr;  // a malformed image: generated on first use instead
    }
  });
}

bool eager_small_gemm_shape(int64_t m, int64_t n, int64_t k) {
  return small_gemm_eager_size(m, n, k) && eager_target() >= CpuTarget::avx2 && m >= 1 && n >= 1 && k >= 1 &&
         m <= kSmallGemmMaxDim && n <= kSmallGemmMaxDim && k <= kSmallGemmMaxDim;
}

std::shared_ptr<const SmallGemm> eager_small_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t lda,
                                                  int64_t ldb, int64_t ldc) {
  if (!small_gemm_eager_size(m, n, k)) return nullptr;
  const CpuTarget t = eager_target();
  if (t < CpuTarget::avx2) return nullptr;
  return eager_cache().get(EagerKey{m, n, k, ta, tb, lda, ldb, ldc}, [&]() -> std::shared_ptr<const SmallGemm> {
    const SmallGemmKey sk = plain_gemm_key(t, m, n, k, ta, tb, lda, ldb, ldc);
    if (!small_gemm_why_not(sk).empty()) return nullptr;
    return generate_small_gemm(sk);
  });
}

EagerGemmCacheStats eager_small_gemm_cache_stats() {
  const KernelLru<EagerKey, SmallGemm>& c = eager_cache();
  return {c.size(), c.evictions()};
}

}  // namespace kiln::codegen
