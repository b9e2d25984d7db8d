// The CUDA kernels of the Reduce rows (sum, mean, prod, max, min, argmax,
// argmin, var, std, logsumexp, any, all) over any axes, every dtype the CPU
// takes. The input is read as a contiguous [nout, nred] matrix (kept axes
// first: a permuted copy when needed, launch_plan.h) and reduced by the
// two-pass block reduction of launch_plan.h: fixed chunks, fixed thread
// interleaving, a fixed tree, so the result depends on the shape only.
// Accumulators follow the CPU (backends/cpu/accumulate.h): integer/bool
// sums and products in wrapping uint64 (exact, any order), float32 and the
// 16-bit floats in float32, float64 in double; mean/var/std/logsumexp of
// integers in double. var/std and logsumexp are two reductions each, as on
// the CPU. The order differs from the CPU's (docs/cuda_numerics.md).
#include "block_reduce.cuh"
#include "device_tensor.h"
#include "dtypes.h"
#include "elementwise.cuh"
#include "launch_plan.h"

namespace kiln::cuda {
namespace {

// ---- value helpers ------------------------------------------------------------------
template <class T> __device__ __forceinline__ bool nan_of(T v) {
  if constexpr (hd::is_float_v<T>) return v != v;
  else return false;
}
template <class T> __device__ __forceinline__ T lowest_of() {
  if constexpr (hd::is_float_v<T>) return -T(INFINITY);
  else if constexpr (hd::is_bool_v<T>) return false;
  else if constexpr (hd::traits<T>::is_signed) return T(T(1) << (sizeof(T) * 8 - 1));
  else return T(0);
}
template <class T> __device__ __forceinline__ T highest_of() {
  if constexpr (hd::is_float_v<T>) return T(INFINITY);
  else if constexpr (hd::is_bool_v<T>) return true;
  else return T(~lowest_of<T>());
}
/// The CPU's accumulator types (backends/cpu/accumulate.h) for storage S.
template <class S> using sum_acc = std::conditional_t<is_fp_storage<S>(), compute_t<S>, uint64_t>;
template <class S> using sum_out = std::conditional_t<is_fp_storage<S>(), S, int64_t>;
template <class S> using float_acc = std::conditional_t<is_fp_storage<S>() && !hd::same<S, double>::value, float, double>;
template <class S> using float_out = std::conditional_t<is_fp_storage<S>(), S, float>;

template <class A, class S> __device__ __forceinline__ A load_as(S v) {
  if constexpr (hd::same<A, uint64_t>::value) return uint64_t(int64_t(to_compute(v)));  // sign-extended, wraps
  else return A(to_compute(v));
}

// ---- operators: Acc, init, step(acc, x[o][i], i, o), combine(l, r), finish(acc, o) --
template <class S> struct SumOp {
  using In = S;
  using Acc = sum_acc<S>;
  __device__ Acc init() const { return Acc(0); }
  __device__ Acc step(Acc a, S v, int64_t, int64_t) const { return a + load_as<Acc>(v); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  template <class Out> __device__ Out finish(Acc a, int64_t) const {
    if constexpr (hd::same<Acc, uint64_t>::value) return Out(int64_t(a));
    else return to_storage<Out>(a);
  }
};
template <class S> struct ProdOp {
  using In = S;
  using Acc = sum_acc<S>;
  __device__ Acc init() const { return Acc(1); }
  __device__ Acc step(Acc a, S v, int64_t, int64_t) const { return a * load_as<Acc>(v); }
  __device__ Acc combine(Acc a, Acc b) const { return a * b; }
  template <class Out> __device__ Out finish(Acc a, int64_t) const {
    if constexpr (hd::same<Acc, uint64_t>::value) return Out(int64_t(a));
    else return to_storage<Out>(a);
  }
};
/// mean, and var/std's squared deviations from center[o] (divided by
/// max(n - correction, 0), square-rooted for std), in float_acc.
template <class S> struct MomentOp {
  using In = S;
  using Acc = float_acc<S>;
  const Acc* center = nullptr;  // null: the plain sum (mean)
  Acc div = 1;
  bool root = false;
  __device__ Acc init() const { return Acc(0); }
  __device__ Acc step(Acc a, S v, int64_t, int64_t o) const {
    const Acc x = Acc(to_compute(v));
    if (!center) return a + x;
    const Acc d = x - center[o];
    return a + d * d;
  }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  template <class Out> __device__ Out finish(Acc a, int64_t) const { return to_storage<Out>(root ? sqrt(a / div) : a / div); }
};
/// max/min; a NaN beats any number, so NaN propagates. `finite0` (logsumexp's
/// first pass) replaces a non-finite result by 0.
template <class S, bool kMax, class C = compute_t<S>> struct ExtremeOp {
  using In = S;
  using Acc = C;
  bool finite0 = false;
  __device__ static bool wins(Acc x, Acc a) { return (kMax ? x > a : x < a) || nan_of(x); }
  __device__ Acc init() const { return kMax ? lowest_of<Acc>() : highest_of<Acc>(); }
  __device__ Acc step(Acc a, S v, int64_t, int64_t) const {
    const Acc x = Acc(to_compute(v));
    return wins(x, a) ? x : a;
  }
  __device__ Acc combine(Acc a, Acc b) const { return wins(b, a) ? b : a; }
  template <class Out> __device__ Out finish(Acc a, int64_t) const {
    if constexpr (hd::is_float_v<Acc>)
      if (finite0 && !isfinite(a)) return to_storage<Out>(Acc(0));
    return to_storage<Out>(a);
  }
};
/// logsumexp's second pass: sum of exp(x - m[o]); finish log(s) + m[o].
template <class S> struct ExpSumOp {
  using In = S;
  using Acc = float_acc<S>;
  const Acc* m = nullptr;
  __device__ Acc init() const { return Acc(0); }
  __device__ Acc step(Acc a, S v, int64_t, int64_t o) const { return a + exp(Acc(to_compute(v)) - m[o]); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  template <class Out> __device__ Out finish(Acc a, int64_t o) const { return to_storage<Out>(log(a) + m[o]); }
};
template <class S, bool kAll> struct LogicOp {
  using In = S;
  using Acc = bool;
  __device__ Acc init() const { return kAll; }
  __device__ Acc step(Acc a, S v, int64_t, int64_t) const {
    const bool x = to_compute(v) != decltype(to_compute(v))(0);  // nonzero (and NaN) is true
    return kAll ? (a && x) : (a || x);
  }
  __device__ Acc combine(Acc a, Acc b) const { return kAll ? (a && b) : (a || b); }
  template <class Out> __device__ Out finish(Acc a, int64_t) const { return a; }
};
template <class C> struct ArgAcc {
  C v;
  int64_t i;  // -1: nothing seen
};
/// argmax/argmin: the extreme with the smallest position wins (the first
/// NaN beats every number), whatever the combination order.
template <class S, bool kMax> struct ArgOp {
  using In = S;
  using C = compute_t<S>;
  using Acc = ArgAcc<C>;
  __device__ static bool beats(C x, C best) { return (kMax ? x > best : x < best) || (nan_of(x) && !nan_of(best)); }
  __device__ Acc init() const { return {C(0), -1}; }
  __device__ Acc step(Acc a, S v, int64_t i, int64_t) const {
    const C x = to_compute(v);
    return (a.i < 0 || beats(x, a.v)) ? Acc{x, i} : a;
  }
  __device__ Acc combine(Acc l, Acc r) const {
    if (r.i < 0) return l;
    if (l.i < 0 || beats(r.v, l.v)) return r;
    if (beats(l.v, r.v)) return l;
    return r.i < l.i ? r : l;  // equal (or both NaN): the first position
  }
  template <class Out> __device__ Out finish(Acc a, int64_t) const { return a.i; }
};

// ---- the two passes -------------------------------------------------------------------
template <class Op>
__global__ void reduce_pass1(Op op, const typename Op::In* x, typename Op::Acc* part, int64_t nred, int64_t chunk,
                             int64_t chunks, int64_t blocks) {
  using Acc = typename Op::Acc;
  Acc* smem = shared_as<Acc>();
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t o = b / chunks, begin = (b % chunks) * chunk;
    const int64_t end = begin + chunk < nred ? begin + chunk : nred;
    Acc a = op.init();
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) a = op.step(a, x[o * nred + i], i, o);
    a = block_combine(a, smem, [&](Acc l, Acc r) { return op.combine(l, r); });
    if (threadIdx.x == 0) part[b] = a;
  }
}

template <class Op, class Out>
__global__ void reduce_pass2(Op op, const typename Op::Acc* part, Out* out, int64_t chunks, int64_t nout) {
  using Acc = typename Op::Acc;
  Acc* smem = shared_as<Acc>();
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    Acc a = op.init();
    for (int64_t i = threadIdx.x; i < chunks; i += blockDim.x) a = op.combine(a, part[o * chunks + i]);
    a = block_combine(a, smem, [&](Acc l, Acc r) { return op.combine(l, r); });
    if (threadIdx.x == 0) out[o] = op.template finish<Out>(a, o);
  }
}

int pow2_threads(int64_t n) {
  int t = 32;
  while (t < 256 && t < n) t *= 2;
  return t;
}

/// Reduces the contiguous [nout, nred] `x` into nout values of Out at `out`.
template <class Op, class Out>
void run(const Op& op, const void* x, int64_t nout, int64_t nred, Out* out, int dev) {
  using Acc = typename Op::Acc;
  if (nout == 0) return;
  const ReduceLaunch l = reduce_launch(nred);
  cudaStream_t st = stream(dev);
  // Partials live in a device tensor (the caching allocator, stream-ordered).
  Tensor part = Tensor::empty({int64_t(nout * l.chunks * int64_t(sizeof(Acc)))}, DType::uint8, Device::cuda(dev));
  Acc* p = static_cast<Acc*>(part.data_ptr());
  const int64_t blocks = nout * l.chunks;
  reduce_pass1<Op><<<grid_for(blocks, 1), l.threads, size_t(l.threads) * sizeof(Acc), st>>>(
      op, static_cast<const typename Op::In*>(x), p, nred, l.chunk, l.chunks, blocks);
  const int t2 = pow2_threads(l.chunks);
  reduce_pass2<Op, Out><<<grid_for(nout, 1), t2, size_t(t2) * sizeof(Acc), st>>>(op, p, out, l.chunks, nout);
  check(cudaGetLastError(), dev, "reduction kernel launch");
}

template <class S> void reduce_typed(OpId op, const Tensor& x, int64_t nout, int64_t nred, const Tensor& out,
                                     double correction) {
  const int dev = out.device().index;
  const void* xp = x.data_ptr();
  using F = float_acc<S>;
  const DType fd = hd::same<F, double>::value ? DType::float64 : DType::float32;
  auto o = [&](auto tag) { return static_cast<typename decltype(tag)::type*>(out.data_ptr()); };
  switch (op) {
    case OpId::Sum: return run(SumOp<S>{}, xp, nout, nred, o(type_tag<sum_out<S>>{}), dev);
    case OpId::Prod: return run(ProdOp<S>{}, xp, nout, nred, o(type_tag<sum_out<S>>{}), dev);
    case OpId::Mean: {
      MomentOp<S> m;
      m.div = F(nred);
      return run(m, xp, nout, nred, o(type_tag<float_out<S>>{}), dev);
    }
    case OpId::Max: return run(ExtremeOp<S, true>{}, xp, nout, nred, o(type_tag<S>{}), dev);
    case OpId::Min: return run(ExtremeOp<S, false>{}, xp, nout, nred, o(type_tag<S>{}), dev);
    case OpId::ArgMax: return run(ArgOp<S, true>{}, xp, nout, nred, o(type_tag<int64_t>{}), dev);
    case OpId::ArgMin: return run(ArgOp<S, false>{}, xp, nout, nred, o(type_tag<int64_t>{}), dev);
    case OpId::Any: return run(LogicOp<S, false>{}, xp, nout, nred, o(type_tag<bool>{}), dev);
    case OpId::All: return run(LogicOp<S, true>{}, xp, nout, nred, o(type_tag<bool>{}), dev);
    case OpId::Var:
    case OpId::Std: {
      // Two passes as on the CPU: the mean, then squared deviations from it.
      Tensor mu = Tensor::empty({nout}, fd, out.device());
      MomentOp<S> m;
      m.div = F(nred);
      run(m, xp, nout, nred, static_cast<F*>(mu.data_ptr()), dev);
      MomentOp<S> v;
      v.center = static_cast<const F*>(mu.data_ptr());
      v.div = F(std::max(double(nred) - correction, 0.0));
      v.root = op == OpId::Std;
      return run(v, xp, nout, nred, o(type_tag<float_out<S>>{}), dev);
    }
    case OpId::LogSumExp: {
      Tensor m = Tensor::empty({nout}, fd, out.device());
      ExtremeOp<S, true, F> mx;
      mx.finite0 = true;
      run(mx, xp, nout, nred, static_cast<F*>(m.data_ptr()), dev);
      ExpSumOp<S> e;
      e.m = static_cast<const F*>(m.data_ptr());
      return run(e, xp, nout, nred, o(type_tag<float_out<S>>{}), dev);
    }
    default: throw Error("cuda reduce: internal error: " + std::string(op_name(op)) + " is not a reduction");
  }
}

void reduce_kernel(const KernelArgs& k) {
  const Tensor& x = k.in[0];
  const Tensor& out = k.out;
  std::vector<int64_t> shape(x.shape().begin(), x.shape().end());
  std::vector<bool> red(shape.size(), k.attrs.ints.empty());
  for (int64_t ax : k.attrs.ints) red[size_t(normalize_axis(ax, x.ndim(), op_name(k.op)))] = true;
  const ReduceGeometry g = reduce_geometry(shape, red);
  if (g.nout == 0 || out.numel() == 0) return;
  use_device(out.device().index);
  // Kept axes first, reduced last, contiguous.
  const Tensor xc = g.nred == 0 ? x : contiguous_as(g.identity ? x : x.permute(g.perm), x.dtype());
  write_contiguous(out, [&](const Tensor& dst) {
    visit_storage(x.dtype(), [&](auto tag) {
      reduce_typed<typename decltype(tag)::type>(k.op, xc, g.nout, g.nred, dst, k.attrs.scalar);
    });
  });
}

[[maybe_unused]] const bool registered = [] {
  for (OpId op : {OpId::Sum, OpId::Mean, OpId::Prod, OpId::Max, OpId::Min, OpId::ArgMax, OpId::ArgMin, OpId::Var,
                  OpId::Std, OpId::LogSumExp, OpId::Any, OpId::All})
    detail::register_kernel(op, DeviceType::cuda, reduce_kernel, kCudaDTypeMask);
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
