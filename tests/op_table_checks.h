// kiln tests: the table-driven check. test_op_table.cpp walks every row of
// the op table and calls its category's checker, which runs the op on random
// inputs of every dtype it accepts (empty and size-1 dims, broadcasting,
// transposed/strided/negative-stride views, NaN and +-inf) and compares with
// a float64 reference. A checker returns how many cases it compared; a row
// whose checker compares nothing fails the walk.
#pragma once
#include <kiln/kiln.h>

#include <optional>
#include <vector>

#include "test_util.h"

namespace kt {
int check_unary_op(kiln::OpId op);
int check_binary_op(kiln::OpId op);
int check_ternary_op(kiln::OpId op);
int check_reduce_op(kiln::OpId op);
/// The Scan rows other than cumsum (cumprod, sort, argsort).
int check_order_op(kiln::OpId op);
int check_scan_op(kiln::OpId op);
int check_rownorm_op(kiln::OpId op);
int check_matmul_op(kiln::OpId op);
int check_view_op(kiln::OpId op);
int check_data_op(kiln::OpId op);
/// The Conv2d row on x of shape s (made 4-d) laid out as k (tests/test_einsum_conv.cpp).
int check_conv2d_row(kiln::DType d, const kiln::Shape& s, ViewKind k, uint64_t seed);
/// The selection, window and matrix-structure rows (TopK ... Cross) on
/// inputs derived from shape s laid out as k (tests/test_select_rows.cpp).
int check_select_row(kiln::OpId op, kiln::DType d, const kiln::Shape& s, ViewKind k, uint64_t seed);
/// The Linalg rows by reconstruction (tests/test_linalg_decomp.cpp).
int check_linalg_op(kiln::OpId op);

/// v (row-major values of `shape`) grouped by output element of a reduction
/// over the axes where `red` is true: one group per output element
/// (row-major over the kept axes), each in row-major order of the reduced axes.
inline std::vector<std::vector<double>> group_reduced(const std::vector<double>& v, const kiln::Shape& shape,
                                                      const std::vector<bool>& red) {
  int64_t nout = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!red[d]) nout *= shape[d];
  std::vector<std::vector<double>> g(static_cast<size_t>(nout));
  std::vector<int64_t> idx(shape.size(), 0);
  for (double x : v) {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!red[d]) o = o * shape[d] + idx[d];
    g[size_t(o)].push_back(x);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return g;
}

/// v rounded to what dtype d holds (a float16 overflow is inf); other
/// dtypes (float64, integers) as they are.
inline double round_to(kiln::DType d, double v) {
  switch (d) {
    case DType::float16: return static_cast<double>(static_cast<float>(float16_t(static_cast<float>(v))));
    case DType::bfloat16: return static_cast<double>(static_cast<float>(bfloat16_t(static_cast<float>(v))));
    case DType::float32: return static_cast<double>(static_cast<float>(v));
    default: return v;
  }
}

/// The reduction row `op` of the op table through its front-end function
/// (argmax and argmin reduce the first of `axes`, or all when it is empty).
inline kiln::Tensor run_reduce(kiln::OpId op, const kiln::Tensor& x, const kiln::Axes& axes, bool keepdim,
                               double correction) {
  switch (op) {
    case OpId::Sum: return sum(x, axes, keepdim);
    case OpId::Mean: return mean(x, axes, keepdim);
    case OpId::Prod: return prod(x, axes, keepdim);
    case OpId::Max: return max(x, axes, keepdim);
    case OpId::Min: return min(x, axes, keepdim);
    case OpId::ArgMax: return argmax(x, axes.empty() ? std::nullopt : std::optional<int64_t>(axes[0]), keepdim);
    case OpId::ArgMin: return argmin(x, axes.empty() ? std::nullopt : std::optional<int64_t>(axes[0]), keepdim);
    case OpId::Var: return var(x, axes, correction, keepdim);
    case OpId::Std: return kiln::std(x, axes, correction, keepdim);
    case OpId::LogSumExp: return logsumexp(x, axes, keepdim);
    case OpId::Any: return any(x, axes, keepdim);
    case OpId::All: return all(x, axes, keepdim);
    default: FAIL("not a reduction"); return {};
  }
}

}  // namespace kt
