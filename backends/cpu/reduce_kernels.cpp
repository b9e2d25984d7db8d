// kiln (internal): the reduction engine and the Reduce rows built on it.
//
// A reduction is planned on x's axes: extent-1 axes are dropped, kept (K)
// and reduced (R) axes are each sorted by decreasing |stride| and merged
// where one steps through the other. Two loop shapes cover every case:
//  - inner: the innermost R axis has the smallest stride. Each output is
//    reduced over fixed blocks of kInnerBlock consecutive R elements;
//    contiguous runs use independent lane accumulators (vectorisable);
//    block results are combined pairwise.
//  - outer: a K axis has the smallest stride. kChunk neighbouring outputs
//    are accumulated side by side (vectorised across outputs) over fixed
//    blocks of kOuterRows R indices; block results are combined pairwise.
// Work items are (outputs, block) pairs, each computed whole by one thread,
// and the combination tree depends on the extents only: results never depend
// on the thread count. var/std and logsumexp are two passes over the engine.
#include "reduce_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <utility>

#include "accumulate.h"
#include "parallel_ranges.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kInnerBlock = 8192;  // R elements per block (inner loop shape)
constexpr int64_t kOuterRows = 128;    // R indices per block (outer loop shape)
static_assert(kOuterRows == kColumnSumMaxRows, "column_sum repeats one block of run_outer");
// Outputs per work item (outer loop shape): 16 KiB of accumulators (in L1), so each
// row visit reads a long contiguous piece.
template <class Acc>
constexpr int64_t kChunk = std::max<int64_t>(16, 16384 / sizeof(Acc));

// ---- plan ---------------------------------------------------------------------

struct Plan {
  std::vector<WalkDim<2>> k;  // kept: s[0] = x byte stride, s[1] = out element stride
  std::vector<WalkDim<1>> r;  // reduced: s[0] = x byte stride; never empty
  int64_t nout = 1, nred = 1;
  bool outer = false;
};

template <int S>
void merge_axes(std::vector<WalkDim<S>>& v) {
  std::vector<WalkDim<S>> m;
  for (const auto& a : v) {
    bool join = !m.empty();
    for (int k = 0; join && k < S; ++k) join = m.back().s[k] == a.s[k] * a.n;
    if (join) {
      m.back().n *= a.n;
      m.back().s = a.s;
    } else {
      m.push_back(a);
    }
  }
  v = std::move(m);
}

// keep_order: R axes stay in logical order (argmax/argmin report logical
// positions; they reduce one axis, or a contiguous tensor flattened).
Plan make_plan(const Tensor& x, const std::vector<bool>& red, bool keep_order) {
  Plan P;
  const Shape& sh = x.shape();
  const Strides& st = x.strides();
  const int64_t item = static_cast<int64_t>(x.itemsize());
  const int nd = static_cast<int>(sh.size());
  std::vector<int64_t> os(nd, 0);
  for (int d = nd - 1; d >= 0; --d) {
    if (red[d]) {
      P.nred *= sh[d];
    } else {
      os[d] = P.nout;
      P.nout *= sh[d];
    }
  }
  for (int d = 0; d < nd; ++d) {
    if (sh[d] == 1) continue;
    if (red[d]) P.r.push_back({sh[d], {st[d] * item}});
    else P.k.push_back({sh[d], {st[d] * item, os[d]}});
  }
  auto by_stride = [](const auto& a, const auto& b) { return std::abs(a.s[0]) > std::abs(b.s[0]); };
  if (!keep_order) std::stable_sort(P.r.begin(), P.r.end(), by_stride);
  std::stable_sort(P.k.begin(), P.k.end(), by_stride);
  merge_axes(P.r);
  merge_axes(P.k);
  P.outer = !P.k.empty() && !P.r.empty() && std::abs(P.k.back().s[0]) < std::abs(P.r.back().s[0]);
  if (P.r.empty()) P.r.push_back({1, {0}});
  return P;
}

// ---- reduction operators ------------------------------------------------------
// Op: In (stored input type), Acc, init(), step(acc, v, logical R index),
// combine(left, right) (order-aware), kLanes (step may run in lanes).

template <class In_, class Acc_>
struct SumOp {
  using In = In_;
  using Acc = Acc_;
  static constexpr bool kLanes = true;
  static Acc init() { return Acc(0); }
  static void step(Acc& a, In v, int64_t) { a += acc_load<Acc>(v); }
  static Acc combine(Acc a, Acc b) { return a + b; }
};

template <class In_, class Acc_>
struct ProdOp {
  using In = In_;
  using Acc = Acc_;
  static constexpr bool kLanes = true;
  static Acc init() { return Acc(1); }
  static void step(Acc& a, In v, int64_t) { a *= acc_load<Acc>(v); }
  static Acc combine(Acc a, Acc b) { return a * b; }
};

// max/min; a NaN wins over any number, so NaN propagates.
template <class In_, class Acc_, bool kMax>
struct ExtremeOp {
  using In = In_;
  using Acc = Acc_;
  using L = std::numeric_limits<Acc>;
  static constexpr bool kLanes = true;
  static Acc init() {
    if constexpr (L::has_infinity) return kMax ? -L::infinity() : L::infinity();
    else return kMax ? L::lowest() : L::max();
  }
  static bool wins(Acc x, Acc a) { return (kMax ? x > a : x < a) || is_nan(x); }
  static void step(Acc& a, In v, int64_t) {
    Acc x = acc_load<Acc>(v);
    a = wins(x, a) ? x : a;
  }
  static Acc combine(Acc a, Acc b) { return wins(b, a) ? b : a; }
};

template <class In_, bool kAll>
struct LogicOp {
  using In = In_;
  using Acc = bool;
  static constexpr bool kLanes = true;
  static Acc init() { return kAll; }
  static void step(Acc& a, In v, int64_t) {
    const bool x = detail::convert<bool>(v);  // nonzero (and NaN) is true
    a = kAll ? (a & x) : (a | x);
  }
  static Acc combine(Acc a, Acc b) { return kAll ? (a & b) : (a | b); }
};

template <class C>
struct ArgAcc {
  C v;
  int64_t i;  // -1: nothing seen yet
};

// argmax/argmin: the first extreme wins; the first NaN beats every number.
template <class In_, bool kMax>
struct ArgOp {
  using In = In_;
  using C = detail::compute_t<In>;
  using Acc = ArgAcc<C>;
  static constexpr bool kLanes = false;
  static Acc init() { return {C(0), -1}; }
  static bool beats(C x, C best) { return (kMax ? x > best : x < best) || (is_nan(x) && !is_nan(best)); }
  static void step(Acc& a, In v, int64_t i) {
    C x = detail::convert<C>(v);
    if (a.i < 0 || beats(x, a.v)) a = {x, i};
  }
  static Acc combine(Acc l, Acc r) {
    if (r.i < 0) return l;
    if (l.i < 0 || beats(r.v, l.v)) return r;
    return l;
  }
};

// ---- the engine -------------------------------------------------------------------

// Reduces n elements at byte stride st; i0 is the logical index of the first.
template <class Op>
typename Op::Acc reduce_run(const char* p, int64_t st, int64_t n, int64_t i0) {
  using In = typename Op::In;
  using Acc = typename Op::Acc;
  if constexpr (Op::kLanes) {
    // Independent lanes (a fixed interleaving) let the compiler vectorise
    // without reassociating; lanes are then folded pairwise. Short runs go
    // straight to the sequential loop.
    constexpr int kL = std::max<int>(8, static_cast<int>(128 / sizeof(Acc)));
    if (st == static_cast<int64_t>(sizeof(In)) && n >= kL) {
      const In* q = reinterpret_cast<const In*>(p);
      Acc lane[kL];
      for (int l = 0; l < kL; ++l) lane[l] = Op::init();
      int64_t i = 0;
      for (; i + kL <= n; i += kL)
        for (int l = 0; l < kL; ++l) Op::step(lane[l], q[i + l], 0);
      Acc tail = Op::init();
      for (; i < n; ++i) Op::step(tail, q[i], 0);
      for (int w = kL / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) lane[l] = Op::combine(lane[l], lane[l + w]);
      return Op::combine(lane[0], tail);
    }
  }
  Acc a = Op::init();
  for (int64_t i = 0; i < n; ++i) Op::step(a, *reinterpret_cast<const In*>(p + i * st), i0 + i);
  return a;
}

// Block partials (not std::vector: vector<bool> has no element addresses).
template <class Acc>
struct Partials {
  explicit Partials(int64_t n) : p(n > 0 ? new Acc[static_cast<size_t>(n)] : nullptr) {}
  Acc& operator[](int64_t i) { return p[i]; }
  const Acc* get() const { return p.get(); }
  std::unique_ptr<Acc[]> p;
};

// Pairwise combination of n >= 1 partials, in order.
template <class Op>
typename Op::Acc tree(const typename Op::Acc* p, int64_t n) {
  if (n == 1) return p[0];
  const int64_t h = n / 2;
  return Op::combine(tree<Op>(p, h), tree<Op>(p + h, n - h));
}

// tree<Op> applied to w columns at once: rows[b * stride + j] (b < n) are
// combined in place into rows[j].
template <class Op>
void tree_rows(typename Op::Acc* rows, int64_t stride, int64_t n, int64_t w) {
  if (n == 1) return;
  const int64_t h = n / 2;
  tree_rows<Op>(rows, stride, h, w);
  tree_rows<Op>(rows + h * stride, stride, n - h, w);
  const typename Op::Acc* right = rows + h * stride;
  for (int64_t j = 0; j < w; ++j) rows[j] = Op::combine(rows[j], right[j]);
}

// out[o] = fin(tree(part[o * nb ...])) for every output o.
template <class Op, class Out, class Fin>
void combine_pass(const Plan& P, const typename Op::Acc* part, int64_t nb, Out* ob, Fin& fin) {
  parallel_ranges(P.nout, P.nout * nb, [&](int64_t o0, int64_t o1) {
    Odometer<2> ko(P.k.data(), static_cast<int>(P.k.size()));
    ko.seek(o0);
    for (int64_t o = o0; o < o1; ++o, ko.next()) ob[ko.off[1]] = fin(tree<Op>(&part[o * nb], nb));
  });
}

// The inner loop shape's schedule: every output o is reduced over nb fixed
// blocks, block_of(o, b, scratch) giving a block's accumulator; block results
// are combined pairwise. Shared by stored inputs (run_inner) and produced
// ones (reduce_produced), so both give bitwise the same results. `State` is
// per-thread scratch made by make_state().
template <class Op, class Out, class Fin, class MakeState, class Block>
void run_blocks(const Plan& P, int64_t nb, Out* ob, Fin& fin, MakeState make_state, Block block_of) {
  using Acc = typename Op::Acc;
  const int64_t work = P.nout * P.nred;
  const int nk = static_cast<int>(P.k.size());
  if (nb == 1) {
    parallel_ranges(P.nout, work, [&](int64_t o0, int64_t o1) {
      Odometer<2> ko(P.k.data(), nk);
      auto st = make_state();
      ko.seek(o0);
      for (int64_t o = o0; o < o1; ++o, ko.next()) ob[ko.off[1]] = fin(block_of(o, ko.off[0], 0, st));
    });
    return;
  }
  Partials<Acc> part(P.nout * nb);
  parallel_ranges(P.nout * nb, work, [&](int64_t i0, int64_t i1) {
    Odometer<2> ko(P.k.data(), nk);
    auto st = make_state();
    int64_t cur = -1;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t o = i / nb;
      if (o != cur) ko.seek(cur = o);
      part[i] = block_of(o, ko.off[0], i % nb, st);
    }
  });
  combine_pass<Op>(P, part.get(), nb, ob, fin);
}

template <class Op, class Out, class Fin>
void run_inner(const Plan& P, const char* xb, Out* ob, Fin& fin) {
  using Acc = typename Op::Acc;
  const WalkDim<1>& rin = P.r.back();
  const int nro = static_cast<int>(P.r.size()) - 1;
  const int64_t nb = (P.nred + kInnerBlock - 1) / kInnerBlock;
  // Block b of the output whose first input element is at byte offset kx.
  auto block = [&](int64_t, int64_t kx, int64_t b, Odometer<1>& ro) {
    int64_t s = b * kInnerBlock;
    const int64_t e = std::min(P.nred, s + kInnerBlock);
    ro.seek(s / rin.n);
    int64_t pos = s % rin.n;
    Acc acc = Op::init();
    while (s < e) {
      const int64_t len = std::min(rin.n - pos, e - s);
      acc = Op::combine(acc, reduce_run<Op>(xb + kx + ro.off[0] + pos * rin.s[0], rin.s[0], len, s));
      s += len;
      pos = 0;
      ro.next();
    }
    return acc;
  };
  run_blocks<Op>(P, nb, ob, fin, [&] { return Odometer<1>(P.r.data(), nro); }, block);
}

// acc[j] (j < w) accumulates the element at p + j * st.
template <class Op>
void accumulate_row(typename Op::Acc* acc, const char* p, int64_t st, int64_t w, int64_t r) {
  using In = typename Op::In;
  if (st == static_cast<int64_t>(sizeof(In))) {
    const In* q = reinterpret_cast<const In*>(p);
    for (int64_t j = 0; j < w; ++j) Op::step(acc[j], q[j], r);
  } else {
    for (int64_t j = 0; j < w; ++j) Op::step(acc[j], *reinterpret_cast<const In*>(p + j * st), r);
  }
}

template <class Op, class Out, class Fin>
void run_outer(const Plan& P, const char* xb, Out* ob, Fin& fin) {
  using Acc = typename Op::Acc;
  const WalkDim<2>& kin = P.k.back();
  const int nko = static_cast<int>(P.k.size()) - 1;
  const int64_t outer_n = P.nout / kin.n;
  constexpr int64_t W = kChunk<Acc>;
  const int64_t nc = (kin.n + W - 1) / W;
  const int64_t nb = (P.nred + kOuterRows - 1) / kOuterRows;
  // Block partials are stored block-major (part[b * nout + o]) so each item
  // writes, and the combination reads, contiguous runs of outputs.
  Partials<Acc> part(nb > 1 ? P.nout * nb : 0);
  parallel_ranges(outer_n * nc * nb, P.nout * P.nred, [&](int64_t i0, int64_t i1) {
    Odometer<2> ko(P.k.data(), nko);
    Odometer<1> ro(P.r.data(), static_cast<int>(P.r.size()));
    Acc acc[W];
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i % nb, c = (i / nb) % nc, kk = i / (nb * nc);
      ko.seek(kk);
      const int64_t j0 = c * W, w = std::min(W, kin.n - j0);
      for (int64_t j = 0; j < w; ++j) acc[j] = Op::init();
      const int64_t r0 = b * kOuterRows, r1 = std::min(P.nred, r0 + kOuterRows);
      ro.seek(r0);
      const char* base = xb + ko.off[0] + j0 * kin.s[0];
      for (int64_t r = r0; r < r1; ++r, ro.next()) accumulate_row<Op>(acc, base + ro.off[0], kin.s[0], w, r);
      if (nb == 1) {
        for (int64_t j = 0; j < w; ++j) ob[ko.off[1] + (j0 + j) * kin.s[1]] = fin(acc[j]);
      } else {
        std::copy(acc, acc + w, &part[b * P.nout + kk * kin.n + j0]);
      }
    }
  });
  if (nb == 1) return;
  // The same pairwise tree as tree<Op>, on rows of w outputs at a time.
  parallel_ranges(outer_n * nc, P.nout * nb, [&](int64_t i0, int64_t i1) {
    Odometer<2> ko(P.k.data(), nko);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t c = i % nc, kk = i / nc;
      ko.seek(kk);
      const int64_t j0 = c * W, w = std::min(W, kin.n - j0);
      Acc* rows = &part[kk * kin.n + j0];
      tree_rows<Op>(rows, P.nout, nb, w);
      for (int64_t j = 0; j < w; ++j) ob[ko.off[1] + (j0 + j) * kin.s[1]] = fin(rows[j]);
    }
  });
}

// Runs reduction Op over plan P of the tensor at xb; ob is the contiguous
// output and fin maps a final accumulator to the stored value.
template <class Op, class Out, class Fin>
void run_reduce(const Plan& P, const void* x, Out* ob, Fin fin) {
  const char* xb = static_cast<const char*>(x);
  if (P.nout == 0) return;
  if (P.nred == 0) {
    const Out v = fin(Op::init());
    std::fill(ob, ob + P.nout, v);
    return;
  }
  if (P.outer) run_outer<Op>(P, xb, ob, fin);
  else run_inner<Op>(P, xb, ob, fin);
}

// ---- two-pass reductions --------------------------------------------------------

// dst = f(x, m) elementwise, m broadcast (keepdim shape) over x's shape.
template <class In, class F, class Fn>
void map_with(const Tensor& x, const Tensor& m, const Tensor& dst, Fn f) {
  auto L = make_loop<3>(x.shape(), {&dst, &x, &m});
  run_loop(L, [&](char** p, const int64_t* st, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<F*>(p[0] + i * st[0]) = f(detail::convert<F>(*reinterpret_cast<const In*>(p[1] + i * st[1])),
                                                  *reinterpret_cast<const F*>(p[2] + i * st[2]));
  });
}

Shape keepdim_shape(const Shape& s, const std::vector<bool>& red) {
  Shape k = s;
  for (size_t d = 0; d < k.size(); ++d)
    if (red[d]) k[d] = 1;
  return k;
}

// The two-pass reductions' intermediates come from this thread's scratch
// blocks (one per slot), kept for its next call: a compiled plan's var, std
// or logsumexp step then allocates only its output (issue 18: hot paths
// allocation-free). Blocks above kScratchKeep bytes are not kept (a thread
// would hold them for good); nor is one still viewed (a nested call).
constexpr size_t kScratchKeep = size_t{1} << 20;
Tensor scratch_tensor(int slot, const Shape& shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(checked_numel(shape, "reduce scratch")) * size_of(dtype);
  if (bytes > kScratchKeep) return Tensor::empty(shape, dtype);
  thread_local Buffer blocks[3];
  Buffer& b = blocks[slot];
  if (!b || b.nbytes() < bytes || b.use_count() != 1) b = Buffer::allocate(std::bit_ceil(std::max(bytes, size_t{256})));
  return Tensor(b, dtype, shape, contiguous_strides(shape), 0);
}

// Two-pass variance (mean first, then squared deviations), divided by
// max(n - correction, 0) as numpy does (inf or NaN when that is 0).
template <class In>
void var_std(const Plan& P, const Tensor& x, const std::vector<bool>& red, double correction, bool take_sqrt,
             const Tensor& out) {
  using F = float_acc_t<In>;
  using Out = float_out_t<In>;
  const int64_t n = P.nred;
  const Shape ks = keepdim_shape(x.shape(), red);
  Tensor m = scratch_tensor(0, ks, dtype_v<F>);
  run_reduce<SumOp<In, F>>(P, x.data_ptr(), m.data<F>(), [n](F a) { return a / F(n); });
  Tensor dev = scratch_tensor(1, x.shape(), dtype_v<F>);
  map_with<In, F>(x, m, dev, [](F v, F mu) { return (v - mu) * (v - mu); });
  Tensor s = scratch_tensor(2, ks, dtype_v<F>);
  run_reduce<SumOp<F, F>>(make_plan(dev, red, false), dev.data_ptr(), s.data<F>(), [](F a) { return a; });
  const F div = F(std::max(static_cast<double>(n) - correction, 0.0));
  const F* sp = s.data<F>();
  Out* op = out.data<Out>();
  for (int64_t i = 0; i < P.nout; ++i) {
    const F v = sp[i] / div;
    op[i] = detail::convert<Out>(take_sqrt ? std::sqrt(v) : v);
  }
}

// m + log(sum(exp(x - m))), m the max. m is replaced by 0 where it is not
// finite, so rows of -inf give -inf, rows with +inf give +inf, NaN gives NaN.
template <class In>
void logsumexp(const Plan& P, const Tensor& x, const std::vector<bool>& red, const Tensor& out) {
  using F = float_acc_t<In>;
  using Out = float_out_t<In>;
  const Shape ks = keepdim_shape(x.shape(), red);
  Tensor m = scratch_tensor(0, ks, dtype_v<F>);
  run_reduce<ExtremeOp<In, F, true>>(P, x.data_ptr(), m.data<F>(), [](F a) { return std::isfinite(a) ? a : F(0); });
  Tensor e = scratch_tensor(1, x.shape(), dtype_v<F>);
  map_with<In, F>(x, m, e, [](F v, F mu) { return std::exp(v - mu); });
  Tensor s = scratch_tensor(2, ks, dtype_v<F>);
  run_reduce<SumOp<F, F>>(make_plan(e, red, false), e.data_ptr(), s.data<F>(), [](F a) { return a; });
  const F* sp = s.data<F>();
  const F* mp = m.data<F>();
  Out* op = out.data<Out>();
  for (int64_t i = 0; i < P.nout; ++i) op[i] = detail::convert<Out>(std::log(sp[i]) + mp[i]);
}

template <class In>
void dispatch(OpId op, const Plan& P, const Tensor& x, const std::vector<bool>& red, double correction,
              const Tensor& out) {
  using C = detail::compute_t<In>;
  using SA = sum_acc_t<In>;
  using SO = sum_out_t<In>;
  using F = float_acc_t<In>;
  using FO = float_out_t<In>;
  const void* xp = x.data_ptr();
  const int64_t n = P.nred;
  auto to = [](auto tag) { return [](auto a) { return detail::convert<typename decltype(tag)::type>(a); }; };
  switch (op) {
    case OpId::Sum: run_reduce<SumOp<In, SA>>(P, xp, out.data<SO>(), to(detail::TypeTag<SO>{})); break;
    case OpId::Prod: run_reduce<ProdOp<In, SA>>(P, xp, out.data<SO>(), to(detail::TypeTag<SO>{})); break;
    case OpId::Mean:
      run_reduce<SumOp<In, F>>(P, xp, out.data<FO>(), [n](F a) { return detail::convert<FO>(a / F(n)); });
      break;
    case OpId::Max: run_reduce<ExtremeOp<In, C, true>>(P, xp, out.data<In>(), to(detail::TypeTag<In>{})); break;
    case OpId::Min: run_reduce<ExtremeOp<In, C, false>>(P, xp, out.data<In>(), to(detail::TypeTag<In>{})); break;
    case OpId::ArgMax:
      run_reduce<ArgOp<In, true>>(P, xp, out.data<int64_t>(), [](ArgAcc<C> a) { return a.i; });
      break;
    case OpId::ArgMin:
      run_reduce<ArgOp<In, false>>(P, xp, out.data<int64_t>(), [](ArgAcc<C> a) { return a.i; });
      break;
    case OpId::Any: run_reduce<LogicOp<In, false>>(P, xp, out.data<bool>(), [](bool a) { return a; }); break;
    case OpId::All: run_reduce<LogicOp<In, true>>(P, xp, out.data<bool>(), [](bool a) { return a; }); break;
    case OpId::Var: var_std<In>(P, x, red, correction, false, out); break;
    case OpId::Std: var_std<In>(P, x, red, correction, true, out); break;
    case OpId::LogSumExp: logsumexp<In>(P, x, red, out); break;
    default: throw Error("reduce: internal error: " + std::string(op_name(op)) + " is not a reduction");
  }
}

// Produced input: the plan of a contiguous [nout, nred] tensor reduced over
// its last axis (one R axis of unit stride, so each block is one run).
// The buffer one thread's produced blocks are written to: the thread's own,
// kept between calls (a new 32 KiB block per call cost ~0.1 us of the
// digits step's 640-element loss), or a new one when a call on this thread
// already holds it.
template <class In>
class ProducedBlock {
 public:
  ProducedBlock() {
    thread_local std::unique_ptr<In[]> kept;
    thread_local bool kept_busy = false;
    if (kept_busy) {
      own_.reset(new In[kInnerBlock]);
      p_ = own_.get();
      return;
    }
    if (!kept) kept.reset(new In[kInnerBlock]);
    kept_busy = true;
    busy_ = &kept_busy;
    p_ = kept.get();
  }
  ~ProducedBlock() {
    if (busy_) *busy_ = false;
  }
  ProducedBlock(const ProducedBlock&) = delete;
  ProducedBlock& operator=(const ProducedBlock&) = delete;
  In* get() const { return p_; }

 private:
  In* p_ = nullptr;
  std::unique_ptr<In[]> own_;
  bool* busy_ = nullptr;
};

template <class In>
void dispatch_produced(OpId op, int64_t nout, int64_t nred, const ReduceProducer& produce, const Tensor& out) {
  using C = detail::compute_t<In>;
  using SA = sum_acc_t<In>;
  using SO = sum_out_t<In>;
  using F = float_acc_t<In>;
  using FO = float_out_t<In>;
  Plan P;
  P.nout = nout;
  P.nred = nred;
  if (nout > 1) P.k.push_back({nout, {nred * static_cast<int64_t>(sizeof(In)), 1}});
  P.r.push_back({nred, {static_cast<int64_t>(sizeof(In))}});
  if (nout == 0) return;
  const int64_t nb = (nred + kInnerBlock - 1) / kInnerBlock;
  auto run = [&](auto op_tag, auto* ob, auto fin) {
    using Op = typename decltype(op_tag)::type;
    if (nred == 0) {
      std::fill(ob, ob + nout, fin(Op::init()));
      return;
    }
    auto state = [] { return ProducedBlock<In>(); };
    auto block = [&](int64_t o, int64_t, int64_t b, ProducedBlock<In>& buf) {
      const int64_t s = b * kInnerBlock, len = std::min(nred - s, kInnerBlock);
      produce(o * nred + s, len, buf.get());
      return Op::combine(Op::init(), reduce_run<Op>(reinterpret_cast<const char*>(buf.get()), sizeof(In), len, s));
    };
    run_blocks<Op>(P, nb, ob, fin, state, block);
  };
  auto to = [](auto tag) { return [](auto a) { return detail::convert<typename decltype(tag)::type>(a); }; };
  switch (op) {
    case OpId::Sum: run(detail::TypeTag<SumOp<In, SA>>{}, out.data<SO>(), to(detail::TypeTag<SO>{})); break;
    case OpId::Prod: run(detail::TypeTag<ProdOp<In, SA>>{}, out.data<SO>(), to(detail::TypeTag<SO>{})); break;
    case OpId::Mean:
      run(detail::TypeTag<SumOp<In, F>>{}, out.data<FO>(), [nred](F a) { return detail::convert<FO>(a / F(nred)); });
      break;
    case OpId::Max: run(detail::TypeTag<ExtremeOp<In, C, true>>{}, out.data<In>(), to(detail::TypeTag<In>{})); break;
    case OpId::Min: run(detail::TypeTag<ExtremeOp<In, C, false>>{}, out.data<In>(), to(detail::TypeTag<In>{})); break;
    default: throw Error("reduce_produced: internal error: " + std::string(op_name(op)) + " is not supported");
  }
}

}  // namespace

bool can_reduce_produced(OpId op) {
  return op == OpId::Sum || op == OpId::Prod || op == OpId::Mean || op == OpId::Max || op == OpId::Min;
}

void reduce_produced(OpId op, DType in, int64_t nout, int64_t nred, const ReduceProducer& produce, const Tensor& out) {
  detail::visit_dtype(in, [&](auto tag) {
    using In = typename decltype(tag)::type;
    dispatch_produced<In>(op, nout, nred, produce, out);
  });
}

void reduce(OpId op, const Tensor& x_in, const std::vector<bool>& reduced, double correction, const Tensor& out) {
  const bool arg = op == OpId::ArgMax || op == OpId::ArgMin;
  // argmax/argmin over several axes (the flattened tensor) index row-major
  // order: a contiguous copy makes that the memory order.
  const Tensor x = arg && std::count(reduced.begin(), reduced.end(), true) > 1 ? x_in.contiguous() : x_in;
  const Plan P = make_plan(x, reduced, arg);
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using In = typename decltype(tag)::type;
    dispatch<In>(op, P, x, reduced, correction, out);
  });
}

namespace {
// Each column summed in row order from 0 (reduce()'s bits). Full blocks of
// kColumnBlock columns keep their sums in registers over all rows (summing
// into out row by row stored and reloaded every partial sum: 0.35 us for
// 64 x 128 floats, the digits step's bias gradient); the last columns so.
template <class T>
void column_sum_rows(const T* __restrict x, int64_t rows, int64_t cols, int64_t w, T* __restrict out) {
#pragma omp simd
  for (int64_t j = 0; j < w; ++j) out[j] = T(0) + x[j];
  for (int64_t r = 1; r < rows; ++r) {
    const T* __restrict row = x + r * cols;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) out[j] += row[j];
  }
}
// The last w <= 64 bytes of columns (a 10-class bias gradient): w fixed at
// compile time, so the sums stay in registers over all rows (the loop above
// stores and reloads out[] every row: 324 TSC cycles for 64 x 10 floats,
// more than the 272 of 64 x 128 in registers; 200 so). The same additions in
// the same order.
template <class T, int W>
void column_sum_fixed(const T* __restrict x, int64_t rows, int64_t cols, T* __restrict out) {
  T acc[W];
  for (int j = 0; j < W; ++j) acc[j] = T(0) + x[j];
  for (int64_t r = 1; r < rows; ++r) {
    const T* __restrict row = x + r * cols;
    for (int j = 0; j < W; ++j) acc[j] += row[j];
  }
  for (int j = 0; j < W; ++j) out[j] = acc[j];
}
template <class T, size_t... I>
void column_sum_narrow(const T* x, int64_t rows, int64_t cols, int64_t w, T* out, std::index_sequence<I...>) {
  using Fn = void (*)(const T*, int64_t, int64_t, T*);
  static constexpr Fn fns[] = {&column_sum_fixed<T, int(I) + 1>...};
  fns[w - 1](x, rows, cols, out);
}
template <class T>
void column_sum_t(const T* __restrict x, int64_t rows, int64_t cols, T* __restrict out) {
  constexpr int64_t kColumnBlock = 512 / sizeof(T);  // 8 AVX-512 registers
  int64_t j0 = 0;
  for (; j0 + kColumnBlock <= cols; j0 += kColumnBlock) {
    T acc[kColumnBlock];
#pragma omp simd
    for (int64_t j = 0; j < kColumnBlock; ++j) acc[j] = T(0) + x[j0 + j];
    for (int64_t r = 1; r < rows; ++r) {
      const T* __restrict row = x + r * cols + j0;
#pragma omp simd
      for (int64_t j = 0; j < kColumnBlock; ++j) acc[j] += row[j];
    }
#pragma omp simd
    for (int64_t j = 0; j < kColumnBlock; ++j) out[j0 + j] = acc[j];
  }
  constexpr int64_t kNarrow = 64 / sizeof(T);
  if (j0 < cols && cols - j0 <= kNarrow)
    column_sum_narrow(x + j0, rows, cols, cols - j0, out + j0, std::make_index_sequence<size_t(kNarrow)>{});
  else if (j0 < cols)
    column_sum_rows(x + j0, rows, cols, cols - j0, out + j0);
}
}  // namespace

void column_sum(bool f64, const void* x, int64_t rows, int64_t cols, void* out) {
  if (rows == 0) {
    if (f64) std::fill_n(static_cast<double*>(out), cols, 0.0);
    else std::fill_n(static_cast<float*>(out), cols, 0.0f);
    return;
  }
  if (f64) column_sum_t(static_cast<const double*>(x), rows, cols, static_cast<double*>(out));
  else column_sum_t(static_cast<const float*>(x), rows, cols, static_cast<float*>(out));
}

}  // namespace kiln::cpu
