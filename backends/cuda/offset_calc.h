// kiln (internal): the offset calculator of the CUDA elementwise kernels.
// Built once per call on the host from the result's shape and every
// operand's element strides (0 where it broadcasts): dimensions that are
// contiguous for all operands are merged and size-1 dimensions dropped, so a
// contiguous or simply broadcast call has one or two dimensions. The kernel
// turns a linear index into one element offset per operand. Index is
// int32_t when every offset and the element count fit (cheaper division),
// else int64_t. Header-only, KILN_HD: tested on the host.
#pragma once
#include <cstdint>
#include <vector>

#include "kernel_templates.h"

namespace kiln::cuda {

inline constexpr int kMaxDims = 12;

template <int N, class Index>
struct OffsetCalc {
  int ndim = 0;
  Index sizes[kMaxDims];       // innermost first
  Index strides[kMaxDims][N];  // operand k's element stride of dimension d

  /// Element offsets of linear (row-major) index `i` for the N operands.
  KILN_HD void get(Index i, Index (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      const Index q = i / sizes[d];
      const Index r = i - q * sizes[d];
      i = q;
      for (int k = 0; k < N; ++k) off[k] += r * strides[d][k];
    }
  }
};

/// Dimensions after merging, innermost first: sizes and N strides each.
struct Coalesced {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;  // [dim][operand]
};

/// Merges the dimensions of `shape` (outermost first) that are contiguous
/// for every operand (stride_outer == stride_inner * size_inner) and drops
/// size-1 dimensions. strides[k] has shape.size() entries for operand k.
inline Coalesced coalesce(const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& strides) {
  Coalesced c;
  const size_t n = strides.size();
  for (size_t j = shape.size(); j-- > 0;) {  // innermost first
    if (shape[j] == 1) continue;
    std::vector<int64_t> st(n);
    for (size_t k = 0; k < n; ++k) st[k] = strides[k][j];
    if (!c.sizes.empty()) {
      bool merge = true;
      for (size_t k = 0; k < n && merge; ++k) merge = st[k] == c.strides.back()[k] * c.sizes.back();
      if (merge) {
        c.sizes.back() *= shape[j];
        continue;
      }
    }
    c.sizes.push_back(shape[j]);
    c.strides.push_back(std::move(st));
  }
  return c;
}

/// True when a 32-bit Index reaches every element and offset of `c` (the
/// element count and each operand's largest |offset| below 2^31).
inline bool fits_int32(const Coalesced& c, int64_t numel) {
  if (numel >= (int64_t(1) << 31)) return false;
  const size_t n = c.strides.empty() ? 0 : c.strides[0].size();
  for (size_t k = 0; k < n; ++k) {
    int64_t reach = 0;
    for (size_t d = 0; d < c.sizes.size(); ++d) {
      const int64_t s = c.strides[d][k] < 0 ? -c.strides[d][k] : c.strides[d][k];
      reach += (c.sizes[d] - 1) * s;
    }
    if (reach >= (int64_t(1) << 31)) return false;
  }
  return true;
}

/// The calculator of `c` (false when it has more than kMaxDims dimensions).
template <int N, class Index>
bool make_offset_calc(const Coalesced& c, OffsetCalc<N, Index>& oc) {
  if (c.sizes.size() > size_t(kMaxDims)) return false;
  oc.ndim = int(c.sizes.size());
  for (int d = 0; d < oc.ndim; ++d) {
    oc.sizes[d] = Index(c.sizes[size_t(d)]);
    for (int k = 0; k < N; ++k) oc.strides[d][k] = Index(c.strides[size_t(d)][size_t(k)]);
  }
  return true;
}

/// Launch configuration of an elementwise call of `n` elements, each thread
/// taking `vec` consecutive elements per step: 256 threads a block, enough
/// blocks for every element or `max_blocks` (a grid-stride loop covers the
/// rest). Each element's result does not depend on it.
struct Launch {
  unsigned blocks = 0;
  unsigned threads = 256;
};
inline Launch launch_for(int64_t n, int vec, int64_t max_blocks) {
  Launch l;
  const int64_t per_block = int64_t(l.threads) * vec;
  int64_t b = (n + per_block - 1) / per_block;
  if (b > max_blocks) b = max_blocks;
  l.blocks = unsigned(b < 1 ? 1 : b);
  return l;
}

}  // namespace kiln::cuda
