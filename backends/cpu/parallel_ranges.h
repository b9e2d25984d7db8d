// kiln (internal): deterministic work splitting for kernels whose items are
// not plain elementwise runs (reductions, scans, row normalisations, batched
// GEMM). Every item is computed by exactly one call, start to end, so a
// result never depends on how many threads share the items.
#pragma once
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "strided_loop.h"

namespace kiln::cpu {

/// Calls fn(i0, i1) on a split of the items [0, n) among OpenMP threads, or
/// once on [0, n) when `work` (elements touched in all) is below
/// kParallelGrain, when one thread is allowed, or when already inside a
/// parallel region. fn must not throw.
template <class F>
void parallel_ranges(int64_t n, int64_t work, F&& fn) {
  if (n <= 0) return;
  const int max_t = omp_get_max_threads();
  if (work < kParallelGrain || max_t == 1 || n == 1 || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
  const int nt = static_cast<int>(std::min<int64_t>(max_t, n));
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
    const int64_t chunk = (n + T - 1) / T;
    const int64_t i0 = std::min(n, t * chunk), i1 = std::min(n, i0 + chunk);
    if (i0 < i1) fn(i0, i1);
  }
}

/// One axis of an iteration space: its extent and S strides (one per operand;
/// their unit is the caller's: bytes or elements).
template <int S>
struct WalkDim {
  int64_t n = 1;
  std::array<int64_t, S> s{};
};

/// Row-major walk over a list of axes (outermost first) that tracks, for each
/// of S operands, the offset of the current multi-index. seek() jumps to a
/// linear index, next() steps by one. Up to 8 axes live inline (no heap).
template <int S>
class Odometer {
 public:
  Odometer(const WalkDim<S>* dims, int nd) : dims_(dims), nd_(nd) {
    if (nd_ > kInline) heap_.resize(nd_);
    idx_ = nd_ > kInline ? heap_.data() : inline_;
    seek(0);
  }
  Odometer(const Odometer&) = delete;  // idx_ may point into this object
  Odometer& operator=(const Odometer&) = delete;
  void seek(int64_t lin) {
    off.fill(0);
    for (int d = nd_ - 1; d >= 0; --d) {
      const int64_t n = dims_[d].n;
      idx_[d] = lin % n;
      lin /= n;
      for (int k = 0; k < S; ++k) off[k] += idx_[d] * dims_[d].s[k];
    }
  }
  void next() {
    for (int d = nd_ - 1; d >= 0; --d) {
      for (int k = 0; k < S; ++k) off[k] += dims_[d].s[k];
      if (++idx_[d] < dims_[d].n) return;
      for (int k = 0; k < S; ++k) off[k] -= dims_[d].n * dims_[d].s[k];
      idx_[d] = 0;
    }
  }
  std::array<int64_t, S> off{};

 private:
  static constexpr int kInline = 8;
  const WalkDim<S>* dims_;
  int nd_;
  int64_t inline_[kInline] = {};
  std::vector<int64_t> heap_;
  int64_t* idx_;
};

/// Calls f(base, step, len) for every line of `shape` along `axis`: base[k]
/// points at operand k's first element of the line and step[k] is its byte
/// stride along the axis. Operands must all have shape `shape`. Lines are
/// split over threads (each line handled whole by one thread).
template <int N, class F>
void for_each_line(const Shape& shape, int64_t axis, const std::array<const Tensor*, N>& ts, F&& f) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const int64_t len = shape[axis];
  if (numel == 0) return;
  std::vector<WalkDim<N>> dims;
  std::array<char*, N> base{};
  std::array<int64_t, N> step{};
  for (int k = 0; k < N; ++k) {
    base[k] = static_cast<char*>(ts[k]->data_ptr());
    step[k] = ts[k]->strides()[axis] * static_cast<int64_t>(ts[k]->itemsize());
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int64_t>(d) == axis || shape[d] == 1) continue;
    WalkDim<N> w;
    w.n = shape[d];
    for (int k = 0; k < N; ++k) w.s[k] = ts[k]->strides()[d] * static_cast<int64_t>(ts[k]->itemsize());
    dims.push_back(w);
  }
  const int64_t lines = numel / len;
  parallel_ranges(lines, numel, [&](int64_t i0, int64_t i1) {
    Odometer<N> od(dims.data(), static_cast<int>(dims.size()));
    od.seek(i0);
    std::array<char*, N> p;
    for (int64_t i = i0; i < i1; ++i, od.next()) {
      for (int k = 0; k < N; ++k) p[k] = base[k] + od.off[k];
      f(p, step, len);
    }
  });
}

}  // namespace kiln::cpu
