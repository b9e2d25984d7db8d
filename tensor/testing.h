// kiln: comparing results in tests and scripts (numpy's isclose / allclose /
// array_equal, torch.testing.assert_close).
//
// Every function here reads realized CPU tensors directly (any strides,
// broadcast or negative views included); an unrealized (lazy) tensor is
// realized first. They record nothing into a graph: inside a graph
// realization context an unrealized argument throws RealizationError. A
// tensor on another device throws DeviceError; an undefined one ValueError.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "error.h"
#include "tensor.h"

namespace kiln {

/// Elementwise |a - b| <= atol + rtol * |b| (numpy.isclose's formula, not
/// symmetric in a and b), as a bool tensor of the broadcast shape (ShapeError
/// when the shapes do not broadcast). Any dtypes (bool counts as 0/1). Two
/// integer (or bool) operands compare by value, exactly, signed and unsigned
/// mixed (uint64 2^64 - 1 is not int64 -1); with a floating operand the
/// test is computed in float64, so integers beyond 2^53 are rounded.
/// (numpy computes it in the operands' dtype, so for float32 inputs a pair
/// within a float32 rounding of the bound may come out differently.)
/// Equal values are always close, equal infinities included; an infinity is
/// close to nothing else. NaN is close to NaN only when `equal_nan`.
/// Throws ValueError for a negative or NaN rtol or atol.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);

/// True when every element of isclose(a, b, ...) is (true for empty tensors).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);

/// numpy.array_equal: the same shape (no broadcasting; different shapes give
/// false) and equal values. Dtypes may differ: values are compared as
/// numbers (integers exactly, by value: uint64 2^64 - 1 differs from int64
/// -1, as in numpy; float with anything as float64).
/// NaN equals NaN only when `equal_nan`. -0.0 equals 0.0.
bool array_equal(const Tensor& a, const Tensor& b, bool equal_nan = false);

/// The largest distance in units in the last place between corresponding
/// elements: how many representable values of the dtype lie between them
/// (adjacent floats: 1). Both tensors must have the same floating dtype
/// (float16, bfloat16, float32, float64; DTypeError otherwise); shapes
/// broadcast (ShapeError). Counted on the number line of the dtype:
/// -0.0 and 0.0 are the same point (distance 0); across zero the distance
/// is the sum of both sides' distances from zero (the smallest positive and
/// negative subnormals are 2 apart); infinity is one step past the largest
/// finite value. NaN against NaN counts 0; NaN against a number (or an
/// infinity) gives INT64_MAX, as does a distance too large for int64 (only
/// float64 values of opposite signs and large magnitudes). Empty tensors give 0.
int64_t max_ulp_diff(const Tensor& a, const Tensor& b);

/// Default tolerances of assert_close for a dtype (torch.testing's):
/// float16 rtol 1e-3 atol 1e-5; bfloat16 1.6e-2, 1e-5; float32 1.3e-6, 1e-5;
/// float64 1e-7, 1e-7; integers and bool 0, 0 (exact).
struct Tolerance {
  double rtol = 0, atol = 0;
};
Tolerance default_tolerance(DType dtype);

/// Checks that `actual` and `expected` have the same shape, the same dtype
/// and values that are isclose(actual, expected, rtol, atol, equal_nan)
/// everywhere (`expected` is the reference: the relative tolerance scales
/// with |expected|). A missing rtol or atol takes the dtype's default
/// (default_tolerance). Throws AssertionError whose message is a report:
///
///     assert_close: tensors are not close (float32, shape [2, 3]; rtol=1.3e-06, atol=1e-05)
///     Mismatched elements: 2 / 6 (33.3%)
///     Greatest absolute difference: 0.5 at index [1, 0] (up to 1e-05 allowed)
///     Greatest relative difference: 0.25 at index [1, 0] (up to 1.3e-06 allowed)
///     Mismatches (index: actual vs expected):
///       [0, 2]: 3.001 vs 3
///       [1, 0]: 2.5 vs 2
///
/// "Greatest" ranks the mismatched elements only (as numpy and torch do),
/// NaN above infinity above finite values, the first index winning ties;
/// a relative difference against expected 0 or an infinity is inf. At most
/// 5 mismatches are listed, in row-major order (headed "First 5 of N
/// mismatches" when there are more). Values print with the digits that
/// read back in their dtype (bool as True/False); differences with float32's
/// digits for 16- and 32-bit floats, float64's otherwise. Indices count
/// from 0; a 0-d tensor's is []. A shape or dtype mismatch is reported on its own
/// ("assert_close: shapes differ: actual [2, 3], expected [3, 2]"). A
/// non-empty `msg` is appended as a last line. Throws ValueError for a
/// negative or NaN tolerance.
void assert_close(const Tensor& actual, const Tensor& expected, std::optional<double> rtol = std::nullopt,
                  std::optional<double> atol = std::nullopt, bool equal_nan = false, const std::string& msg = "");

/// The report assert_close would throw, or an empty string when the tensors
/// are close (same arguments and rules; for test-framework integrations).
std::string close_report(const Tensor& actual, const Tensor& expected, std::optional<double> rtol = std::nullopt,
                         std::optional<double> atol = std::nullopt, bool equal_nan = false);

}  // namespace kiln
