// kiln (internal): run_loop's body, kept out of the declaration header.
#pragma once
#include <omp.h>

namespace kiln::cpu {

template <int N, class Inner>
void run_loop(const StridedLoop<N>& L, Inner&& inner) {
  run_loop_at<N>(L, L.base, std::forward<Inner>(inner));
}

template <int N, class Inner>
void run_loop_at(const StridedLoop<N>& L, const std::array<char*, N>& base, Inner&& inner) {
  if (L.numel == 0) return;
  const int nd = static_cast<int>(L.shape.size());
  const int64_t inner_n = L.shape[nd - 1];
  const int64_t outer = L.numel / inner_n;
  std::array<int64_t, N> in_st;
  for (int k = 0; k < N; ++k) in_st[k] = L.stride[k][nd - 1];

  // Runs rows [r0, r1) of the outer index, splitting a long single row into
  // chunks so a 1-d loop also uses every thread.
  auto rows = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    std::array<char*, N> p;
    for (int64_t r = r0; r < r1; ++r) {
      int64_t rem = r;
      p = base;
      for (int d = nd - 2; d >= 0; --d) {
        int64_t i = rem % L.shape[d];
        rem /= L.shape[d];
        for (int k = 0; k < N; ++k) p[k] += i * L.stride[k][d];
      }
      for (int k = 0; k < N; ++k) p[k] += c0 * in_st[k];
      inner(p.data(), in_st.data(), c1 - c0);
    }
  };

  if (L.numel < kParallelGrain || omp_get_max_threads() == 1) {
    rows(0, outer, 0, inner_n);
    return;
  }
  if (outer == 1) {
    // Split the single row into cache-friendly chunks (multiple of 64 elements).
    const int64_t chunk = std::max<int64_t>(kParallelGrain / 2, 64);
    const int64_t nchunks = (inner_n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunks; ++c) rows(0, 1, c * chunk, std::min(inner_n, (c + 1) * chunk));
    return;
  }
  const int64_t rows_per = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner_n, 1));
  const int64_t nblocks = (outer + rows_per - 1) / rows_per;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nblocks; ++b) rows(b * rows_per, std::min(outer, (b + 1) * rows_per), 0, inner_n);
}

}  // namespace kiln::cpu
