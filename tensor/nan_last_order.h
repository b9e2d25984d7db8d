// kiln (internal): the order of the sorting and selection kernels, numpy's
// sort order with NaN last, as one rule for every backend. The CPU kernels
// (backends/cpu/select_kernels.cpp: topk, searchsorted; scan_kernels.cpp:
// sort) and the CUDA ones (backends/cuda/select_plan.h, run by select.cu and
// by a host test against the CPU kernels) include this header: the backends
// may not include each other, and the device must rank exactly as the CPU.
//
// Plain C++ on compute values (float, double, integers, bool: a float16 or
// bfloat16 element compared as float), callable from host code and, when
// compiled by nvcc, from device code. Not part of <kiln/kiln.h>.
#pragma once
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define KILN_ORDER_FN __host__ __device__ __forceinline__
#else
#define KILN_ORDER_FN inline
#endif

namespace kiln::sort_order {

/// True for a NaN compute value (v != v); false for integers and bool, with
/// no self-comparison there.
template <class C> KILN_ORDER_FN bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}

/// numpy's sort order: a strict weak order with NaN above everything (and
/// equivalent to NaN), so ascending puts NaNs last; -0 and +0 equivalent.
template <class C> KILN_ORDER_FN bool less_nan_last(C a, C b) {
  if (is_nan(a)) return false;
  if (is_nan(b)) return true;
  return a < b;
}

/// (key ka at position a) ranks before (kb at b) in topk's order:
/// descending (Largest) or ascending, NaN largest either way; equal keys
/// (-0/+0 too) by lower position. A strict total order over a line's (key,
/// position) pairs, so the first k are those of a stable sort.
template <bool Largest, class C> KILN_ORDER_FN bool ranks_before(C ka, int64_t a, C kb, int64_t b) {
  const bool na = is_nan(ka), nb = is_nan(kb);
  if (na || nb) {
    if (na && nb) return a < b;
    return Largest ? na : nb;
  }
  if (Largest ? kb < ka : ka < kb) return true;
  if (Largest ? ka < kb : kb < ka) return false;
  return a < b;
}

/// searchsorted's insertion position of v in at(0 .. n-1), a sequence
/// sorted in the NaN-last order, by bisection: the first i with
/// !less_nan_last(at(i), v) (left), or with less_nan_last(v, at(i)) (right).
/// at(i) gives the compute value of element i < n.
template <class C, class At> KILN_ORDER_FN int64_t sorted_position(At at, int64_t n, C v, bool right) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const C s = at(mid);
    const bool after = right ? !less_nan_last(v, s) : less_nan_last(s, v);
    if (after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

}  // namespace kiln::sort_order

#undef KILN_ORDER_FN
