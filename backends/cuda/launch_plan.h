// kiln (internal): host-side geometry of the CUDA reduction, scan and row
// kernels (reduce.cu, rows.cu). Plain C++ (no CUDA headers; LineGeometry's
// accessors are KILN_HD, the kernels use them too), so the tests check it
// on the CPU (tests/test_cuda_launch_plan.cpp).
//
// Determinism: every number here is a function of the tensor's extents
// only (never of the device, its SM count or occupancy), and each kernel's
// combination order is fixed by these numbers, so a result depends on the
// shape alone.
#pragma once
#include <cstdint>
#include <vector>

#include "kernel_templates.h"  // KILN_HD

namespace kiln::cuda {

/// A reduction as a row-major [nout, nred] problem: `perm` lists the kept
/// axes, then the reduced ones, each in logical order. Reading x permuted
/// by `perm` (made contiguous) gives output o's elements at
/// [o * nred, (o + 1) * nred), in the row-major order of the reduced axes,
/// so argmax/argmin's flat position is the one the CPU reports.
struct ReduceGeometry {
  std::vector<int64_t> perm;
  int64_t nout = 1, nred = 1;
  bool identity = true;  ///< perm is 0, 1, ..., ndim-1 (no transpose needed)
};
inline ReduceGeometry reduce_geometry(const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
  ReduceGeometry g;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d]) {
      g.perm.push_back(int64_t(d));
      g.nout *= shape[d];
    }
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d]) {
      g.perm.push_back(int64_t(d));
      g.nred *= shape[d];
    }
  for (size_t d = 0; d < g.perm.size(); ++d) g.identity = g.identity && g.perm[d] == int64_t(d);
  return g;
}

/// Two-pass block reduction of [nout, nred]: pass 1 runs one block of
/// `threads` per (output, chunk of `chunk` elements); thread t folds the
/// chunk's elements t, t + threads, ... in order, then the block combines
/// its threads as a fixed binary tree (t with t + w, w halving). Pass 2 runs
/// one block per output over its `chunks` partials the same way. `threads`
/// is a power of two in [32, 256], the smallest covering nred.
struct ReduceLaunch {
  int threads = 256;
  int64_t chunk = 0;   ///< elements per pass-1 block
  int64_t chunks = 1;  ///< pass-1 blocks (partials) per output
};
inline constexpr int64_t kReduceChunk = 16384;  // 64 elements per thread of a 256-thread block
inline ReduceLaunch reduce_launch(int64_t nred) {
  ReduceLaunch l;
  l.threads = 32;
  while (l.threads < 256 && l.threads < nred) l.threads *= 2;
  l.chunk = nred < kReduceChunk ? (nred < 1 ? 1 : nred) : kReduceChunk;
  l.chunks = nred <= 0 ? 1 : (nred + l.chunk - 1) / l.chunk;
  return l;
}

/// A scan or a row op along `axis` of a contiguous tensor as [outer, len,
/// inner]: line (o, i) is elements o * len * inner + j * inner + i, j < len.
struct LineGeometry {
  int64_t outer = 1, len = 1, inner = 1;
  KILN_HD int64_t lines() const { return outer * inner; }
  /// Offset of element 0 of line `line` (line = o * inner + i).
  KILN_HD int64_t base(int64_t line) const { return (line / inner) * len * inner + line % inner; }
};
inline LineGeometry line_geometry(const std::vector<int64_t>& shape, int64_t axis) {
  LineGeometry g;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d < axis) g.outer *= shape[size_t(d)];
    else if (d == axis) g.len = shape[size_t(d)];
    else g.inner *= shape[size_t(d)];
  }
  return g;
}

/// Threads of the one block that normalises a row of `len` elements: a
/// power of two in [32, 1024], the smallest covering len (long rows loop).
inline int row_threads(int64_t len) {
  int t = 32;
  while (t < 1024 && t < len) t *= 2;
  return t;
}

/// Blocks for `n` independent items of `threads` each, capped at the 2^31-1
/// of a grid's x extent (kernels loop over the rest).
inline unsigned grid_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 0x7fffffff) b = 0x7fffffff;
  return unsigned(b);
}

}  // namespace kiln::cuda
