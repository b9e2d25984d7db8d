// kiln (internal): CPU kernels of the Reduce and Scan categories.
#pragma once
#include <functional>
#include <vector>

#include "../../tensor/op_table.h"

namespace kiln::cpu {

/// Reduction `op` (a Reduce row of the op table) of `x` over the axes where
/// `reduced[d]` is true, written into `out`: contiguous, of the row's result
/// dtype, holding x's kept extents in order (keepdim's extra 1s allowed).
/// `correction` is var/std's. Float sums use a fixed blocking (lanes inside
/// fixed-size blocks, blocks combined pairwise), so results depend on the
/// shape and strides only, never on the thread count. The caller has checked
/// axes and empty extents (max/min/argmax/argmin of nothing).
void reduce(OpId op, const Tensor& x, const std::vector<bool>& reduced, double correction, const Tensor& out);

/// Writes flat elements [first, first + n) of a reduction's input to dst.
using ReduceProducer = std::function<void(int64_t first, int64_t n, void* dst)>;

/// Whether reduce_produced handles `op` (sum, prod, mean, max, min).
bool can_reduce_produced(OpId op);

/// `op` of an input that is never stored (a fused elementwise group's value):
/// the row-major [nout, nred] input of dtype `in` is reduced over its last
/// axis, `produce` writing it block by block (n <= 8192 elements, from any
/// thread) into per-thread scratch. Blocks, lanes and their combination are
/// reduce()'s on that input stored contiguously, so the result is bitwise
/// what reduce() gives (and so never depends on the thread count).
void reduce_produced(OpId op, DType in, int64_t nout, int64_t nred, const ReduceProducer& produce, const Tensor& out);

/// Sum over axis 0 of a contiguous row-major [rows, cols] float32 (or
/// float64 when f64) matrix into out[cols]: out[j] = (((0 + x[0][j]) +
/// x[1][j]) + ...), vectorised across columns. For rows <=
/// kColumnSumMaxRows that is reduce(Sum)'s own order (one block of rows), so
/// the result is bitwise reduce()'s; a compiled plan runs it without
/// reduce()'s planning.
inline constexpr int64_t kColumnSumMaxRows = 128;
void column_sum(bool f64, const void* x, int64_t rows, int64_t cols, void* out);

/// Inclusive prefix sum of `x` along `axis` into `out` (x's shape; int64 for
/// integer/bool x, accumulated with wrap-around; float16/bfloat16 accumulate
/// in float32). Sequential along the axis.
void cumsum(const Tensor& x, int64_t axis, const Tensor& out);
/// Inclusive prefix product, with cumsum's dtype and accumulation rules.
void cumprod(const Tensor& x, int64_t axis, const Tensor& out);
/// Stable sort of each line along `axis` (NaN above +inf): the values into
/// `out` (x's dtype), or with `indices` their int64 positions along the axis.
void sort(const Tensor& x, int64_t axis, bool descending, bool indices, const Tensor& out);

}  // namespace kiln::cpu
