// kiln (internal): the structure of a CPU strided loop (StridedLoop) and how
// one is built from byte strides, without the loop runner. Code that only
// keeps or builds loops (the execution plan, jit/plan.h) includes this; code
// that runs them includes strided_loop.h, whose runner is OpenMP-parallel and
// so needs the OpenMP flags the kiln library is compiled with.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "../../tensor/shape.h"

namespace kiln::cpu {

/// Up to N operands over a common iteration shape.
template <int N>
struct StridedLoop {
  Shape shape;                                 // coalesced iteration shape
  std::array<std::vector<int64_t>, N> stride;  // byte strides per operand, per axis
  std::array<char*, N> base{};
  int64_t numel = 0;
};

/// Builds a loop over `shape` from per-operand byte strides (already
/// broadcast to `shape`): drops extent-1 axes and merges neighbouring axes
/// where every operand is contiguous across the pair. Bases are left null.
template <int N>
StridedLoop<N> make_loop_from_strides(const Shape& shape, const std::array<std::vector<int64_t>, N>& st) {
  StridedLoop<N> L;
  L.numel = 1;
  for (int64_t d : shape) L.numel *= d;
  Shape sh;
  std::array<std::vector<int64_t>, N> cs;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = !sh.empty();
    for (int k = 0; merge && k < N; ++k) merge = cs[k].back() == st[k][i] * shape[i];
    if (merge) {
      sh.back() *= shape[i];
      for (int k = 0; k < N; ++k) cs[k].back() = st[k][i];
    } else {
      sh.push_back(shape[i]);
      for (int k = 0; k < N; ++k) cs[k].push_back(st[k][i]);
    }
  }
  if (sh.empty()) {
    sh.push_back(1);
    for (int k = 0; k < N; ++k) cs[k].push_back(0);
  }
  L.shape = std::move(sh);
  L.stride = std::move(cs);
  return L;
}

}  // namespace kiln::cpu
