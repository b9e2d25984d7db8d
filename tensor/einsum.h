// kiln: einsum and convolutions, composed from op-table rows (permute,
// reshape, matmul, sum, slice, concat, pad), so they trace and compile as
// any op does.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tensor.h"

namespace kiln {

/// numpy.einsum in explicit ("ij,jk->ik") or implicit ("ij,jk": the output
/// holds the letters that appear once, in alphabetical order) form, with
/// "..." for broadcast leading axes. A letter repeated within one operand
/// takes its diagonal ("ii->i"). Operands are contracted pairwise in the
/// order a greedy cost model picks (the pair whose result is smallest
/// first); each pair becomes one batched matmul. Dtypes promote as matmul.
/// Throws ValueError for a malformed subscript string (naming the position),
/// a letter count that does not match an operand's rank, or an output letter
/// that no input has; ShapeError for extents that disagree.
Tensor einsum(std::string_view subscripts, const std::vector<Tensor>& operands);

/// 1-d convolution (cross-correlation, as torch.nn.functional.conv1d):
/// x [N, C_in, L], weight [C_out, C_in / groups, K], optional bias [C_out];
/// result [N, C_out, L_out], L_out = (L + 2 padding - dilation (K - 1) - 1) / stride + 1.
/// Throws (errors naming conv1d) ShapeError for non-3-d x or weight,
/// mismatched channels or bias, groups that do not divide them, or a kernel
/// span dilation (K - 1) + 1 larger than the padded input (also when it or
/// L + 2 padding exceeds 2^63 - 1); ValueError for non-positive stride,
/// dilation or groups and negative padding.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
/// 2-d convolution: x [N, C_in, H, W], weight [C_out, C_in / groups, KH, KW],
/// bias [C_out] or undefined; stride, padding and dilation as {h, w} (or one
/// value for both). On the CPU this is the op table's Conv2d row (float32
/// with stride 1: one GEMM per kernel tap on a padded slab of each band of
/// output rows; otherwise per band a column matrix written in one pass,
/// padding in place, then one GEMM); other devices compose strided slices
/// and a batched matmul. Throws
/// ShapeError for mismatched channels, groups that do not divide them, or a
/// kernel larger than the padded input (also when the dilated kernel's span
/// or the padded input's extent exceeds 2^63 - 1: the arithmetic is
/// overflow-checked); ValueError for non-positive stride, dilation or groups
/// and negative padding.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, std::vector<int64_t> stride = {1, 1},
              std::vector<int64_t> padding = {0, 0}, std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
/// Max / average pooling of x [N, C, H, W] over windows of `kernel` {kh, kw}
/// (or one value for both; stride defaults to the kernel; padding {h, w} at
/// most half the kernel), result [N, C, OH, OW] with OH = floor((H + 2 ph -
/// dh (kh - 1) - 1) / sh) + 1 (floor mode), likewise OW. The op table's
/// MaxPool2d / AvgPool2d rows: one pass over each window, no im2col.
/// max_pool2d: every dtype, x's dtype; padding never wins (torch's -inf
/// padding), a NaN in the window gives NaN; `dilation` spaces the window's
/// taps. avg_pool2d: float dtypes only (DTypeError otherwise), the window
/// summed in float64 in row-major order and divided by kh * kw
/// (`count_include_pad`, torch's default) or by the number of taps inside x.
/// Throws ShapeError unless x is 4-d or when the (dilated) kernel is larger
/// than the padded input (also when its span or the padded extent exceeds
/// 2^63 - 1); ValueError for a non-positive kernel, stride or
/// dilation, negative padding or padding above half the kernel, or a
/// kernel/stride/padding/dilation list of another length than 1 or 2.
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, std::vector<int64_t> dilation = {1, 1});
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, bool count_include_pad = true);

}  // namespace kiln
