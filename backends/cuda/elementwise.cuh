// kiln (internal): the precompiled CUDA elementwise kernels, shared by the
// .cu files that instantiate them per op-table row (elementwise_unary.cu,
// elementwise_binary.cu, cast.cu). An op is one of kiln::hd's functors
// (kernel_templates.h); operands are loaded from their storage type into
// the compute type (float for float16/bfloat16) and the result is stored
// rounded once.
//
// Two kernels per (row, dtype):
//   - contiguous: every operand contiguous with the result's shape (or a
//     by-value scalar) and 4-element aligned: 4 elements per thread and
//     step through one vector load/store per operand;
//   - strided: any strides and broadcasting through an OffsetCalc computed
//     once per call, with 32-bit indices when they fit.
// Each element is computed by one thread from its operands alone, so
// results do not depend on the launch configuration.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <vector>

#include "../../tensor/dispatch.h"
#include "../../tensor/kernel_registry.h"
#include "dtypes.h"
#include "kernel_templates.h"
#include "offset_calc.h"
#include "runtime.h"

namespace kiln::cuda {

// ---- storage and compute types ---------------------------------------------------
template <class S> struct compute_of { using type = S; };
template <> struct compute_of<__half> { using type = float; };
template <> struct compute_of<__nv_bfloat16> { using type = float; };
template <class S> using compute_t = typename compute_of<S>::type;

template <class S> __device__ __forceinline__ compute_t<S> to_compute(S v) { return v; }
template <> __device__ __forceinline__ float to_compute(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_compute(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class S, class C> __device__ __forceinline__ S to_storage(C v) { return S(v); }
template <> __device__ __forceinline__ __half to_storage<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 to_storage<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half to_storage<__half, bool>(bool v) { return __float2half_rn(v ? 1.f : 0.f); }
template <> __device__ __forceinline__ __nv_bfloat16 to_storage<__nv_bfloat16, bool>(bool v) { return __float2bfloat16_rn(v ? 1.f : 0.f); }

/// Calls f(tag) with tag::type the device storage type of `d`.
template <class T> struct type_tag { using type = T; };
template <class F> void visit_storage(DType d, F&& f) {
  switch (d) {
    case DType::bool_: return f(type_tag<bool>{});
    case DType::uint8: return f(type_tag<uint8_t>{});
    case DType::int8: return f(type_tag<int8_t>{});
    case DType::int32: return f(type_tag<int32_t>{});
    case DType::int64: return f(type_tag<int64_t>{});
    case DType::float16: return f(type_tag<__half>{});
    case DType::bfloat16: return f(type_tag<__nv_bfloat16>{});
    case DType::float32: return f(type_tag<float>{});
    case DType::float64: return f(type_tag<double>{});
    default: break;  // int16, uint16, uint32, uint64: no device kernels (dtypes.h); the registry refuses them first
  }
  throw DTypeError("cuda: unknown dtype code " + std::to_string(int(d)));
}
template <class S> constexpr bool is_fp_storage() {
  if constexpr (hd::same<S, __half>::value || hd::same<S, __nv_bfloat16>::value) return true;
  else return hd::is_float_v<S>;
}

/// The value of a 0-d CPU tensor (a scalar operand) in compute type C.
template <class C> C host_scalar(const Tensor& t) {
  return detail::visit_dtype(t.dtype(), [&](auto tag) -> C {
    using T = typename decltype(tag)::type;
    const T v = *static_cast<const T*>(t.data_ptr());
    if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) return C(float(v));
    else return C(v);
  });
}

// ---- operands --------------------------------------------------------------------
/// Input k is a pointer into device memory, or (bit k of `scalar`) the
/// by-value value[k].
template <class S0, class S, int N>
struct Inputs {
  const void* ptr[N];
  compute_t<S> value[N];
  compute_t<S0> value0;
  unsigned scalar = 0;
};

template <class S0, class S, int N, int K>
__device__ __forceinline__ auto input(const Inputs<S0, S, N>& a, int64_t off) {
  if constexpr (K == 0) {
    if (a.scalar & 1u) return a.value0;
    return to_compute(static_cast<const S0*>(a.ptr[0])[off]);
  } else {
    if (a.scalar & (1u << K)) return a.value[K];
    return to_compute(static_cast<const S*>(a.ptr[K])[off]);
  }
}

template <class Op, class R, class S0, class S, int N, class Index>
__device__ __forceinline__ void apply_at(R* out, const Inputs<S0, S, N>& a, const Index (&off)[N + 1]) {
  if constexpr (N == 1) out[off[0]] = to_storage<R>(Op{}(input<S0, S, N, 0>(a, off[1])));
  else if constexpr (N == 2)
    out[off[0]] = to_storage<R>(Op{}(input<S0, S, N, 0>(a, off[1]), input<S0, S, N, 1>(a, off[2])));
  else
    out[off[0]] = to_storage<R>(
        Op{}(input<S0, S, N, 0>(a, off[1]), input<S0, S, N, 1>(a, off[2]), input<S0, S, N, 2>(a, off[3])));
}

template <class Op, class R, class S0, class S, int N, class Index>
__global__ void __launch_bounds__(256) strided_kernel(OffsetCalc<N + 1, Index> oc, R* out, Inputs<S0, S, N> a, Index n) {
  for (Index i = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); i < n;
       i += Index(gridDim.x) * Index(blockDim.x)) {
    Index off[N + 1];
    oc.get(i, off);
    apply_at<Op>(out, a, off);
  }
}

template <class T, int V> struct alignas(sizeof(T) * V) Vec { T v[V]; };
inline constexpr int kVec = 4;

template <class Op, class R, class S0, class S, int N>
__global__ void __launch_bounds__(256) contiguous_kernel(R* out, Inputs<S0, S, N> a, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x * kVec;
  for (int64_t base = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kVec; base < n; base += step) {
    if (base + kVec <= n) {
      // One vector load per operand, kVec results, one vector store.
      Vec<S0, kVec> x0{};
      Vec<S, kVec> x1{}, x2{};
      if (!(a.scalar & 1u)) x0 = *reinterpret_cast<const Vec<S0, kVec>*>(static_cast<const S0*>(a.ptr[0]) + base);
      if constexpr (N > 1)
        if (!(a.scalar & 2u)) x1 = *reinterpret_cast<const Vec<S, kVec>*>(static_cast<const S*>(a.ptr[1]) + base);
      if constexpr (N > 2)
        if (!(a.scalar & 4u)) x2 = *reinterpret_cast<const Vec<S, kVec>*>(static_cast<const S*>(a.ptr[2]) + base);
      Vec<R, kVec> r;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const auto v0 = (a.scalar & 1u) ? a.value0 : to_compute(x0.v[j]);
        if constexpr (N == 1) {
          r.v[j] = to_storage<R>(Op{}(v0));
        } else {
          const auto v1 = (a.scalar & 2u) ? a.value[1] : to_compute(x1.v[j]);
          if constexpr (N == 2) {
            r.v[j] = to_storage<R>(Op{}(v0, v1));
          } else {
            const auto v2 = (a.scalar & 4u) ? a.value[2] : to_compute(x2.v[j]);
            r.v[j] = to_storage<R>(Op{}(v0, v1, v2));
          }
        }
      }
      *reinterpret_cast<Vec<R, kVec>*>(out + base) = r;
    } else {
      for (int64_t i = base; i < n; ++i) {  // the tail: every operand at element i
        int64_t o[N + 1];
        for (int k = 0; k <= N; ++k) o[k] = i;
        apply_at<Op>(out, a, o);
      }
    }
  }
}

// ---- host side ---------------------------------------------------------------------
/// Operand k's element strides broadcast to `shape` (0 where it broadcasts).
inline std::vector<int64_t> broadcast_strides(const Tensor& t, const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 0);
  const size_t lead = shape.size() - size_t(t.ndim());
  for (size_t j = 0; j < size_t(t.ndim()); ++j)
    s[lead + j] = t.shape()[j] == 1 ? 0 : t.strides()[j];
  return s;
}

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

/// Runs Op over `in` (N operands; a 0-d CPU tensor is a by-value scalar)
/// into `out`, on out's device and kiln's stream.
template <class Op, class R, class S0, class S, int N>
void launch_elementwise(std::span<const Tensor> in, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  use_device(dev);
  cudaStream_t st = stream(dev);
  const int64_t max_blocks = int64_t(properties(dev).multiProcessorCount) * 16;
  Inputs<S0, S, N> a{};
  bool contiguous = out.is_contiguous() && aligned(out.data_ptr(), sizeof(R) * kVec);
  for (int k = 0; k < N; ++k) {
    const Tensor& t = in[size_t(k)];
    if (t.device().is_cpu()) {  // a scalar operand, by value
      a.scalar |= 1u << k;
      if (k == 0) a.value0 = host_scalar<compute_t<S0>>(t);
      else a.value[k] = host_scalar<compute_t<S>>(t);
      a.ptr[k] = nullptr;
    } else {
      a.ptr[k] = t.data_ptr();
      contiguous = contiguous && t.is_contiguous() && t.shape() == out.shape() &&
                   aligned(a.ptr[k], (k == 0 ? sizeof(S0) : sizeof(S)) * kVec);
    }
  }
  R* o = static_cast<R*>(out.data_ptr());
  if (contiguous) {
    const Launch l = launch_for(n, kVec, max_blocks);
    contiguous_kernel<Op, R, S0, S, N><<<l.blocks, l.threads, 0, st>>>(o, a, n);
  } else {
    std::vector<std::vector<int64_t>> strides;
    strides.push_back(broadcast_strides(out, out.shape()));
    for (int k = 0; k < N; ++k) strides.push_back(broadcast_strides(in[size_t(k)], out.shape()));
    const Coalesced c = coalesce(out.shape(), strides);
    const Launch l = launch_for(n, 1, max_blocks);
    // 32-bit indices also for the grid-stride loop's last increment.
    if (fits_int32(c, n + int64_t(l.blocks) * l.threads)) {
      OffsetCalc<N + 1, int32_t> oc;
      if (!make_offset_calc(c, oc)) throw ShapeError("cuda: elementwise op on more than 12 non-mergeable dimensions");
      strided_kernel<Op, R, S0, S, N, int32_t><<<l.blocks, l.threads, 0, st>>>(oc, o, a, int32_t(n));
    } else {
      OffsetCalc<N + 1, int64_t> oc;
      if (!make_offset_calc(c, oc)) throw ShapeError("cuda: elementwise op on more than 12 non-mergeable dimensions");
      strided_kernel<Op, R, S0, S, N, int64_t><<<l.blocks, l.threads, 0, st>>>(oc, o, a, n);
    }
  }
  check(cudaGetLastError(), dev, "elementwise kernel launch");
}

/// Whether row (Op, Rule) takes storage type S (mirrors result_dtype).
template <class Op, DTypeRule Rule, class S> constexpr bool accepts() {
  constexpr bool is_bool = hd::is_bool_v<S>;
  switch (Rule) {
    case DTypeRule::Float:
    case DTypeRule::TrueDiv: return is_fp_storage<S>();
    case DTypeRule::Same: return !is_bool;
    case DTypeRule::Promote:
      return !is_bool || hd::same<Op, hd::Add>::value || hd::same<Op, hd::Mul>::value ||
             hd::same<Op, hd::Maximum>::value || hd::same<Op, hd::Minimum>::value || hd::same<Op, hd::Where>::value;
    default: return true;
  }
}

/// The registry kernel of an elementwise row with N inputs.
template <class Op, DTypeRule Rule, int N>
void row_kernel(const KernelArgs& k) {
  visit_storage(k.in[size_t(N - 1)].dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    if constexpr (accepts<Op, Rule, S>()) {
      using R = std::conditional_t<Rule == DTypeRule::ToBool || Rule == DTypeRule::Compare, bool, S>;
      using S0 = std::conditional_t<hd::same<Op, hd::Where>::value, bool, S>;
      launch_elementwise<Op, R, S0, S, N>(k.in, k.out);
    } else {
      throw DTypeError(detail::op_prefix(k.op) + "no CUDA kernel for dtype " + std::string(name(k.in[size_t(N - 1)].dtype())));
    }
  });
}

/// The dtypes row (Op, Rule) is registered for.
template <class Op, DTypeRule Rule> DTypeMask row_dtypes() {
  DTypeMask m = 0;
  for (DType d : kCudaDTypes)
    visit_storage(d, [&](auto tag) {
      if constexpr (accepts<Op, Rule, typename decltype(tag)::type>()) m |= dtype_bit(d);
    });
  return m;
}

}  // namespace kiln::cuda
