// CPU kernels of the Unary rows. exp computed in float32 (and tanh, on the
// AVX2 and AVX-512 targets) runs the code generator's vector math (jit/unary_vmath.h:
// the compiled plan's kernel of that one op, so eager and compiled agree
// bitwise there).
// Contiguous float/double blocks of the other transcendental ops use Eigen's
// vectorised array functions (the only translation unit of the elementwise
// kernels that includes Eigen); every other case applies the scalar functor
// in a loop the compiler vectorises.
// GCC 12 reports its own AVX-512 intrinsics (`__m512 __Y = __Y;`) as (maybe)
// uninitialized once Eigen's packet math is inlined here: a known false
// positive, silenced for this file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>
#include <cfloat>
#include <string>

#include "elementwise_functors.h"
#include "elementwise_kernels.h"
#include "elementwise_loop.h"
#include "stream_store.h"
#include "jit/unary_vmath.h"

namespace kiln::cpu {

namespace {

// EigenUnary<F, C>: the vectorised form of functor F on arrays of C, when
// there is one. apply(x) is the Eigen expression; slow(x) marks inputs the
// expression handles poorly (Eigen clamps exp's argument, flushes subnormal
// inputs of log, and 0 * inf at -inf), which are recomputed with the scalar
// functor. slow() is a branch-free predicate so that the check vectorises.
// W is the type the expression works in: C, or double for float ops that
// need the precision (the block is widened and narrowed by plain loops,
// which vectorise, unlike Eigen 3.4's float-to-double cast).
template <class F, class C>
struct EigenUnary {
  static constexpr bool enabled = false;
};

#define KILN_EIGEN_UNARY_W(F, C, W, EXPR, SLOW)                 \
  template <>                                                   \
  struct EigenUnary<fn::F, C> {                                 \
    static constexpr bool enabled = true;                       \
    using Wide = W;                                             \
    template <class A>                                          \
    static auto apply(const A& x) {                             \
      return EXPR;                                              \
    }                                                           \
    static bool slow(C x) { return SLOW; }                      \
  };
#define KILN_EIGEN_UNARY(F, C, EXPR, SLOW) KILN_EIGEN_UNARY_W(F, C, C, EXPR, SLOW)

// (float exp runs the generated vector math, float tanh too on AVX2/AVX-512: unary_block)
KILN_EIGEN_UNARY(Exp, double, x.exp(), (x < -708.0) | (x > 709.0))
KILN_EIGEN_UNARY(Log, float, x.log(), (x > 0.0f) & (x < FLT_MIN))
KILN_EIGEN_UNARY(Log, double, x.log(), (x > 0.0) & (x < DBL_MIN))
KILN_EIGEN_UNARY(Log2, float, x.log() * 1.44269504088896340736f, (x > 0.0f) & (x < FLT_MIN))
KILN_EIGEN_UNARY(Log1p, float, x.log1p(), false)
KILN_EIGEN_UNARY(Expm1, float, x.expm1(), x > 88.3f)
// exp2 through double exp: 2^x = e^(x ln 2) without float rounding of x ln 2.
KILN_EIGEN_UNARY_W(Exp2, float, double, (x * 0.69314718055994530942).exp(), false)
KILN_EIGEN_UNARY(Sin, float, x.sin(), false)
KILN_EIGEN_UNARY(Cos, float, x.cos(), false)
KILN_EIGEN_UNARY(Tanh, float, x.tanh(), false)
KILN_EIGEN_UNARY(Erf, float, x.erf(), false)
KILN_EIGEN_UNARY(Sigmoid, float, 1.0f / (1.0f + (-x).exp()), x < -87.0f)
KILN_EIGEN_UNARY(Sigmoid, double, 1.0 / (1.0 + (-x).exp()), x < -708.0)
KILN_EIGEN_UNARY(Silu, float, x / (1.0f + (-x).exp()), x < -87.0f)
KILN_EIGEN_UNARY(Silu, double, x / (1.0 + (-x).exp()), x < -708.0)
// gelu: 1 + erf(x / sqrt 2) cancels for negative x (22 ulp at -2, 3x off at
// -5.5), so x < -1 takes the scalar erfc form in double (fn::Gelu).
KILN_EIGEN_UNARY(Gelu, float, 0.5f * x * (1.0f + (x * 0.70710678118654752440f).erf()), x < -1.0f)
// gelu_tanh as x sigmoid(2u) (see fn::GeluTanh). Rounding u in float costs
// about |2u| ulp for negative x, so below -3 (and -inf, which needs the
// limit) the scalar form, evaluated in double, takes over.
KILN_EIGEN_UNARY(GeluTanh, float, x / (1.0f + (-1.59576912160573071176f * (x + 0.044715f * x * x * x)).exp()),
                 x < -3.0f)
// GCC does not vectorise floor/ceil without -fno-trapping-math; Eigen uses
// vrndscale directly (exact, keeps -0 and NaN). (Eigen 3.4 has no trunc.)
KILN_EIGEN_UNARY(Floor, float, x.floor(), false)
KILN_EIGEN_UNARY(Floor, double, x.floor(), false)
KILN_EIGEN_UNARY(Ceil, float, x.ceil(), false)
KILN_EIGEN_UNARY(Ceil, double, x.ceil(), false)
#undef KILN_EIGEN_UNARY
#undef KILN_EIGEN_UNARY_W

/// Eigen is applied in sub-blocks so the slow-input check rereads x from L1.
constexpr int64_t kEigenBlock = 2048;

/// y[0, m) = F(x[0, m)) for unit-stride arrays of the compute type.
/// Elements per evaluation unit: a multiple of every packet size Eigen uses.
constexpr int64_t kPacketPad = 16;

/// The op-table row whose generated float32 kernel (jit/unary_vmath.h)
/// replaces functor F on float32 blocks; OpId::Cast (no row) for the others.
template <class F>
constexpr OpId kVmathRow = std::is_same_v<F, fn::Exp> ? OpId::Exp : std::is_same_v<F, fn::Tanh> ? OpId::Tanh : OpId::Cast;

template <class F, class C, class O>
void unary_block(const C* __restrict x, O* __restrict y, int64_t m) {
  if constexpr (std::is_same_v<C, float> && std::is_same_v<O, float> && kVmathRow<F> != OpId::Cast) {
    // The generated kernel pads its tail through the vector loop: a value's
    // result does not depend on its position (or the run's strides).
    if (codegen::InnerLoopFn k = codegen::cached_unary_vmath(kVmathRow<F>)) {
      char* p[2] = {reinterpret_cast<char*>(y), reinterpret_cast<char*>(const_cast<float*>(x))};
      const int64_t st[2] = {4, 4};
      k(p, st, m);
      return;
    }
  }
  if constexpr (EigenUnary<F, C>::enabled) {
    using E = EigenUnary<F, C>;
    using W = typename E::Wide;
    using Arr = Eigen::Array<W, Eigen::Dynamic, 1>;
    // Eigen evaluates packets, and a misaligned head or a remainder with its
    // scalar functions, which differ from the packet ones by an ulp: results
    // would then depend on a value's position in its run, i.e. on strides.
    // So Eigen only ever sees aligned outputs of whole packets: remainders
    // (and misaligned outputs) go through a padded, aligned unit.
    auto packets = [](const C* xs, O* ys, int64_t n) {  // n % kPacketPad == 0
      if constexpr (std::is_same_v<W, C>) {
        Eigen::Map<Arr>(ys, n) = E::apply(Eigen::Map<const Arr>(xs, n));
      } else {
        alignas(64) W wx[kEigenBlock], wy[kEigenBlock];
        for (int64_t i = 0; i < n; ++i) wx[i] = W(xs[i]);
        Eigen::Map<Arr>(wy, n) = E::apply(Eigen::Map<const Arr>(wx, n));
        for (int64_t i = 0; i < n; ++i) ys[i] = C(wy[i]);
      }
    };
    for (int64_t i0 = 0; i0 < m; i0 += kEigenBlock) {
      const int64_t k = std::min(kEigenBlock, m - i0);
      int64_t done = 0;
      if (reinterpret_cast<uintptr_t>(y + i0) % 64 == 0) {
        done = k / kPacketPad * kPacketPad;
        if (done) packets(x + i0, y + i0, done);
      }
      while (done < k) {
        const int64_t r = std::min(kPacketPad, k - done);
        alignas(64) C px[kPacketPad];
        alignas(64) O py[kPacketPad];
        for (int64_t j = 0; j < kPacketPad; ++j) px[j] = x[i0 + done + std::min(j, r - 1)];
        packets(px, py, kPacketPad);
        for (int64_t j = 0; j < r; ++j) y[i0 + done + j] = py[j];
        done += r;
      }
      int slow = 0;
      for (int64_t i = i0; i < i0 + k; ++i) slow |= E::slow(x[i]);
      if (slow) {
        for (int64_t i = i0; i < i0 + k; ++i)
          if (E::slow(x[i])) y[i] = F{}(x[i]);
      }
    }
  } else {
    F f;
    for (int64_t i = 0; i < m; ++i) y[i] = f(x[i]);
  }
}

/// Streams y[0, n) = F(x[0, n)) (float32, unit stride) with the generated
/// kernel's own streaming stores when F has one (kVmathRow): the elements
/// before y's first 64-byte boundary through the ordinary kernel, the rest
/// through its streaming-store form (jit/unary_vmath.h), which stores each
/// vector as it is computed. The same generated code computes both, so the
/// values are those of unary_block. Against stream_out's compute-into-L1,
/// then copy-out: no second pass over each block, and the streaming stores
/// interleave with the loads and the arithmetic instead of arriving in
/// bursts of a whole block behind its compute (16M float32, 2 threads, this
/// project's VM: exp on AVX2 3.86 -> 3.50 ms, on AVX-512 2.99 -> 2.47 ms,
/// min of 30 interleaved runs, kernel calls alone). With the AVX2 prefetch
/// (emitter.cpp), bench_ops' BM_kiln_exp_16M/2 over BM_copy_loop/2 went
/// 1.47x -> 1.09x on AVX2 and 0.95x -> 0.76x on AVX-512 (tanh 1.28x -> 1.20x,
/// 1.11x -> 0.91x; 2026-12-05, load 2). False when F has no generated kernel
/// on this target (the caller streams its own way).
template <class F>
bool stream_vmath(const float* x, float* y, int64_t n) {
  if constexpr (kVmathRow<F> == OpId::Cast) {
    return false;
  } else {
    codegen::InnerLoopFn k = codegen::cached_unary_vmath(kVmathRow<F>);
    codegen::InnerLoopFn ks = k ? codegen::cached_unary_vmath(kVmathRow<F>, /*streaming=*/true) : nullptr;
    if (!ks) return false;
    const uintptr_t addr = reinterpret_cast<uintptr_t>(y);
    int64_t head = addr % sizeof(float) != 0 ? n : int64_t((64 - addr % 64) % 64) / int64_t(sizeof(float));
    if (head > n) head = n;
    const int64_t st[2] = {4, 4};
    if (head) {
      char* p[2] = {reinterpret_cast<char*>(y), reinterpret_cast<char*>(const_cast<float*>(x))};
      k(p, st, head);
    }
    if (n > head) {
      char* p[2] = {reinterpret_cast<char*>(y + head), reinterpret_cast<char*>(const_cast<float*>(x + head))};
      ks(p, st, n - head);
    }
    return true;
  }
}

/// The run function of unary_run: Stream selects the streaming-store form
/// of unit-stride runs (stream_store.h) for outputs of kStreamMinBytes and
/// more; the values computed are the same (unary_block's results do not
/// depend on a value's position).
template <class F, class S, bool Stream>
void unary_inner(char** p, const int64_t* st, int64_t n) {
  using C = detail::compute_t<S>;
  using O = decltype(F{}(C{}));
  using SO = std::conditional_t<std::is_same_v<O, bool>, bool, S>;
  ew::StagedInput<S, C> in(p[1], st[1]);
  ew::StagedOutput<O, SO> o(p[0], st[0]);
  if constexpr (Stream) {
    if (in.direct() && o.direct()) {
      const C* x = in.block(0, n);
      if constexpr (std::is_same_v<C, float> && std::is_same_v<O, float>)
        if (stream_vmath<F>(x, o.block(0), n)) return;
      ew::stream_out(o.block(0), n, [&](int64_t i0, int64_t m, O* y) { unary_block<F>(x + i0, y, m); });
      return;
    }
  }
  ew::for_blocks(n, in.direct() && o.direct(), [&](int64_t i0, int64_t m) {
    unary_block<F>(in.block(i0, m), o.block(i0), m);
    o.commit(i0, m);
  });
}

template <class F, class S>
void unary_run(const Tensor& x, const Tensor& out) {
  using C = detail::compute_t<S>;
  using O = decltype(F{}(C{}));
  using SO = std::conditional_t<std::is_same_v<O, bool>, bool, S>;
  if (out.dtype() != dtype_v<SO>)
    throw Error("unary_kernel: output dtype " + std::string(name(out.dtype())) + " does not match the row's " +
                std::string(name(dtype_v<SO>)));
  // Streaming stores for large float/double outputs only (other dtypes keep
  // one instantiation per op: compile time).
  if constexpr ((std::is_same_v<S, float> || std::is_same_v<S, double>) && std::is_same_v<O, SO>) {
    if (out.numel() * static_cast<int64_t>(out.itemsize()) >= ew::kStreamMinBytes) {
      ew::launch<2>({&out, &x}, &unary_inner<F, S, true>);
      return;
    }
  }
  ew::launch<2>({&out, &x}, &unary_inner<F, S, false>);
}

}  // namespace

void unary_kernel(OpId op, const Tensor& x, const Tensor& out) {
  bool found = visit_op<OpCategory::Unary>(op, [&](auto tag) {
    using Tag = decltype(tag);
    using F = typename Tag::functor;
    detail::visit_dtype(x.dtype(), [&](auto tt) {
      using S = typename decltype(tt)::type;
      if constexpr (accepts_dtype<F, Tag::rule, S>() && Tag::op != OpId::Cast)
        unary_run<F, S>(x, out);
      else
        throw DTypeError(detail::op_prefix(op) + "no kernel for dtype " + std::string(name(x.dtype())));
    });
  });
  if (!found) throw Error("unary_kernel: '" + std::string(op_name(op)) + "' is not a unary row");
}

}  // namespace kiln::cpu
