// kiln (internal): CPU kernels of the Data category (concat, pad, tile,
// gather/index_select, one_hot, scatter/scatter_add/index_add). Shapes, dtypes and attributes are checked
// by tensor/ops_data.cpp before these run; `out` is a freshly allocated
// contiguous tensor of the result's shape and dtype. Inputs may have any
// strides; copies go through copy_into (which converts dtypes).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "../../tensor/tensor.h"

namespace kiln::cpu {

/// Every element of `dst` (any strides) set to `value` converted to its dtype.
void fill(const Tensor& dst, double value);

/// Writes xs one after another along `axis` of `out`, converting dtypes.
void concat_into(const Tensor& out, std::span<const Tensor> xs, int64_t axis);

/// out = value everywhere, then x copied at offset pads[2i] on each axis i
/// (pads = {before0, after0, before1, after1, ...}, all axes, non-negative).
void pad_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& pads, double value);

/// numpy.tile: `reps` already padded to out.ndim() (x has leading 1s implied).
void tile_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& reps);

/// The first value of the int32/int64 tensor `index` (row-major order) that
/// lies outside [lo, hi), if any.
std::optional<int64_t> first_index_outside(const Tensor& index, int64_t lo, int64_t hi);

/// out[i] = x[i with axis coordinate replaced by index[i]] (take_along_axis).
/// `index` (int32/int64) and x broadcast to out's shape except along `axis`,
/// where x keeps its extent n and index has out's extent. Indices must be in
/// [-n, n) (checked before); negative ones count from the end.
void gather_into(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index);

/// out (contiguous, shape index.shape + [classes]) = 1 where the last
/// coordinate equals the index, else 0. Indices must be in [0, classes).
void one_hot_into(const Tensor& out, const Tensor& index, int64_t classes);

/// out = x, then for every position p of `index` in row-major order:
/// out[p with axis coordinate index[p]] = src[p] (or += src[p] when `add`:
/// floats in their compute type rounded to the dtype at every step, integers
/// wrapping, bool or). Sequential, so a repeated target accumulates in index
/// order and the result never depends on the thread count. Indices must be
/// in [-n, n) (checked before); negative ones count from the end.
void scatter_into(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, bool add);

/// out [N, O, OH, OW] = conv2d(x [N, C, H, W], w [O, C / groups, KH, KW])
/// (cross-correlation; p = {stride h, w, padding h, w, dilation h, w},
/// checked before). float32 with stride 1: one generated GEMM per kernel tap
/// on a padded slab of each band of output rows, the taps summed in tap
/// order (each output element a fixed sequence of fused chains over the
/// input channels); other float32/float64: per band a column matrix, then
/// one GEMM (float32 generated, float64 the BLAS); other dtypes: one column
/// matrix per sample and group, then matmul()'s exact kernels
/// (conv_kernels.cpp). Where the code generator runs (AVX2 and up) float32
/// results do not depend on the thread count; without it float32 takes the
/// BLAS as float64 does.
/// Operands of another dtype than out's are converted first.
void conv2d_into(const Tensor& out, const Tensor& x, const Tensor& w, const std::vector<int64_t>& p, int64_t groups);

}  // namespace kiln::cpu
