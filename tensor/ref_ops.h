// kiln: the float64 scalar reference of the elementwise rows of the op table
// (categories Unary, Binary, Ternary in tensor/ops.def). It is the oracle of
// the table-driven tests and can fold constants. It is written from the
// definitions (numpy, Python, C) in plain double / int64 arithmetic,
// independently of the CPU kernels (backends/cpu/elementwise_functors.h).
//
// Accuracy of the eager CPU kernels against this reference, for results
// stored in dtype d (rounded to d, see ref_cast), is
//     |got - want| <= rtol(d) * |want| + ref_atol(op, d)
// with rtol(float64) = 1e-12 (the C library's double functions),
// rtol(float32) = 2e-6 (at most 16 ulp; measured on |x| in [0.01, 100]:
// the vectorised exp, expm1, tanh, sigmoid, silu, erf <= 6 ulp, log, log2,
// log1p, sin, cos <= 2.2 ulp, the others (exp2 evaluates in double)
// <= 1.5 ulp),
// rtol(float16) = 2e-3 and rtol(bfloat16) = 1.6e-2 (computed in float32,
// then rounded once). Integer and bool results are exact. Where the relative
// bound alone does not hold, ref_atol says so (no row at present), and
// results below the smallest normal number (subnormals) are only accurate to
// an absolute 2^-126 (float32) / 2^-1022 (float64).
//
// Special values follow IEEE and numpy: NaN propagates (also through
// maximum, minimum, relu and clamp), sign(NaN) = NaN, x / 0.0 = +-inf or
// NaN, floor_divide(x, 0.0) = x / 0.0, remainder(x, 0.0) = NaN, and
// gelu/gelu_tanh/silu(-inf) = -0 (the limit).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "dtype.h"
#include "op_table.h"

namespace kiln {

/// Float64 reference of Unary row `op` at x (every Unary row except Cast,
/// which is ref_cast). Bool-valued rows (logical_not, isnan, isinf,
/// isfinite) return 0 or 1. Throws ValueError for a row of another category.
double ref_unary(OpId op, double x);

/// Float64 reference of Binary row `op` at (a, b): true division for div,
/// Python floor division and remainder (CPython's float divmod), C fmod,
/// numpy's NaN-propagating maximum/minimum; comparisons and logical rows
/// return 0 or 1 (logical rows: nonzero and NaN are true). Throws ValueError
/// for a row of another category.
double ref_binary(OpId op, double a, double b);

/// Float64 reference of Ternary row `op`: where(a, b, c) = a != 0 ? b : c
/// (NaN counts as true); clamp(a, b, c) = min(max(a, b), c), NaN if any
/// operand is NaN. Throws ValueError for a row of another category.
double ref_ternary(OpId op, double a, double b, double c);

/// Integer semantics of Unary row `op` on x of integer or bool dtype d (a
/// uint64 element, and result, is passed as its int64 bits): results wrap to d's range (neg/abs of the minimum wrap to the minimum,
/// square wraps); floor/ceil/round/trunc are the identity; isnan/isinf give
/// 0 and isfinite 1. Throws DTypeError for rows that have no integer form
/// (the Float rows, which convert integers to float32 first).
int64_t ref_unary_int(OpId op, int64_t x, DType d);

/// Integer semantics of Binary row `op` on a, b of integer or bool dtype d
/// (uint64 values as their int64 bits, compared as unsigned): add/sub/mul/pow wrap modulo 2^bits (bool: add = or, mul = and);
/// floor_divide and remainder follow Python (INT_MIN // -1 wraps to
/// INT_MIN); fmod follows C. Throws ValueError for integer division by zero
/// (floor_divide, remainder, fmod) and for a negative pow exponent, and
/// DTypeError for the true-division rows (div, atan2).
int64_t ref_binary_int(OpId op, int64_t a, int64_t b, DType d);

/// x converted to dtype d, returned as a double: floats round to nearest
/// even (float16 and bfloat16 by their own formats, overflowing to +-inf);
/// integers truncate toward zero, and NaN, +-inf or out-of-range values give
/// the minimum of a signed type, for uint8/16/32 the low bits of the value
/// truncated to int64 (0 when that is not finite or not in int64's range),
/// for uint64 the truncation modulo 2^64 when in (-2^63, 2^64), else 2^63;
/// bool is x != 0 (NaN is true).
double ref_cast(double x, DType d);

/// Integer x converted to integer or bool dtype d, exactly: two's-complement
/// wrap to d's width (numpy's integer casts); bool is x != 0. Throws
/// DTypeError for a floating d (use ref_cast).
int64_t ref_cast_int(int64_t x, DType d);

/// Absolute error the eager kernels may add to the relative bound for row
/// `op` with results in dtype d (see the header comment); 0 for most rows.
double ref_atol(OpId op, DType d);

/// A dense row-major float64 array: an operand or result of ref_select_row.
struct RefArray {
  Shape shape;
  std::vector<double> v;
};

/// Float64 reference of the selection, window and matrix-structure rows,
/// written from their definitions (torch/numpy) with plain loops, for
/// operands whose values are given as doubles (integers exactly, so below
/// 2^53) and the row's compute dtype `d` (the result dtype; for TopK and
/// SearchSorted the operands' dtype). Shapes and attributes are those the
/// row's shape rule accepted (not checked again):
///   TopK          positions (as doubles) of the first k of a stable sort
///                 along attrs.axis, descending when attrs.flag; NaN largest
///   SearchSorted  the first i with !(s[i] < v) (right: v < s[i]) in the
///                 order where NaN sorts last, n when none
///   MaxPool2d     start at -inf (integers: d's minimum, bool 0), take a tap
///                 when it is greater or NaN, taps outside x skipped
///   AvgPool2d     float64 sum of the taps inside x in row-major order over
///                 the divisor (window clipped to the padded input, or the
///                 taps inside x), rounded to d
///   Tril/Triu/Diag  element positions; zeros elsewhere
///   NanToNum      NaN/+inf/-inf replaced by the attributes rounded to d
///   Cross         a and b broadcast; x1*y2 - x2*y1 with each product and
///                 the difference rounded to the compute dtype (float32 for
///                 float16/bfloat16, then rounded to d), integers wrapping
///                 to d's width (ref_binary_int)
/// Throws ValueError for a row outside this group.
RefArray ref_select_row(OpId op, std::span<const RefArray> in, const Attrs& a, DType d);

}  // namespace kiln
