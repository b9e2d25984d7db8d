// kiln: the eager front end. Every function here is a row of the op table
// (tensor/ops.def) or a composition of rows, so it runs eagerly by default
// and is recorded when a graph realization context is current.
//
// Common rules (numpy's):
// - Elementwise ops broadcast their operands (numpy broadcasting) and promote
//   dtypes with numpy's table (promote_types); C++ scalars are weak (Scalar).
// - Axes may be negative (counted from the end); an axis out of range throws
//   IndexError; shapes that do not broadcast throw ShapeError; an unsupported
//   dtype throws DTypeError. Messages start with the op's name.
// - Inputs may have any strides (non-contiguous, broadcast, negative).
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "scalar.h"
#include "tensor.h"

namespace kiln {

using Axes = std::vector<int64_t>;

// ---- unary elementwise ------------------------------------------------------
// "Float" ops (exp ... erf) return float32 for integer/bool inputs and keep
// floating dtypes; float16/bfloat16 compute in float32. The others keep the
// dtype and refuse bool (DTypeError) unless noted.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
/// -1, 0 or 1 (NaN for NaN).
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sqrt(const Tensor& x);
/// 1 / sqrt(x).
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor atanh(const Tensor& x);
/// 1 / (1 + exp(-x)).
Tensor sigmoid(const Tensor& x);
/// max(x, 0); NaN stays NaN.
Tensor relu(const Tensor& x);
/// Gaussian error linear unit (Hendrycks & Gimpel 2016): x * Phi(x) with the
/// erf form, or 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) when
/// `approximate_tanh`.
Tensor gelu(const Tensor& x, bool approximate_tanh = false);
/// x * sigmoid(x).
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
/// Rounds half to even (numpy.round, IEEE roundTiesToEven).
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
/// Bool result for every input dtype.
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
/// Converts to `dtype` with numpy's cast semantics: float -> int truncates
/// toward zero; a float whose truncation does not fit (NaN, +-inf, out of
/// range) never raises and becomes, for int8/int16/int32/int64, the dtype's
/// minimum (what numpy gives on x86 for int32/int64: the CPU's "integer
/// indefinite"), for uint8/uint16/uint32 the low bits of its int64 truncation
/// (0 for NaN, inf and |x| >= 2^63), and for uint64 the truncation modulo
/// 2^64 when it lies in (-2^63, 2^64) (so -1.0 -> 2^64 - 1, as numpy), 2^63
/// otherwise. Integer -> integer wraps modulo 2^bits (numpy's astype); uint64
/// -> float rounds to nearest. Any nonzero (and NaN) -> true. Eager kernels and compiled
/// code give the same bits (tests/test_exact_scalars.cpp). Scalars stored by
/// full/masked_fill raise instead (Scalar).
Tensor cast(const Tensor& x, DType dtype);

// ---- binary elementwise -----------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
/// True division: integer/bool operands give float32.
Tensor div(const Tensor& a, const Tensor& b);
/// a ** b. Integer pow with a negative exponent throws ValueError.
Tensor pow(const Tensor& a, const Tensor& b);
/// Elementwise max/min; NaN propagates.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
/// Python semantics: floor(a / b); remainder has the sign of the divisor
/// (also for zero results). Integer division by zero throws ValueError;
/// INT_MIN // -1 wraps.
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);
/// C semantics (std::fmod): result has the sign of the dividend.
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& y, const Tensor& x);
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);

/// A 0-d tensor holding `s`, typed as it would combine with a tensor of
/// dtype `like` (weak-scalar rule).
Tensor scalar_tensor(Scalar s, DType like);
/// `add(x, 2.0)`, `remainder(x, 3)`, `fmod(7, x)`, ...: every binary row with
/// a weak scalar on either side (generated from tensor/ops.def); the same
/// dtype rule and errors as the operators (`x + 2.0`, `7 % x`).
#define KILN_SCALAR_UNARY_NONE(id, name)
#define KILN_SCALAR_BINARY(id, name)      \
  Tensor name(const Tensor& a, Scalar b); \
  Tensor name(Scalar a, const Tensor& b);
#define KILN_OP(id, name, arity, cat, rule) \
  KILN_FOR_ELEMENTWISE_ROW(KILN_SCALAR_UNARY_NONE, KILN_SCALAR_BINARY, id, name, cat, rule)
#include "ops.def"
#undef KILN_OP
#undef KILN_SCALAR_UNARY_NONE
#undef KILN_SCALAR_BINARY

/// cond ? a : b elementwise (cond any dtype, nonzero = true); a and b promoted.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
namespace detail {
Tensor where_scalars(const Tensor& cond, Scalar a, Scalar b);
}
/// Two C++ numbers (torch.where(cond, 1.0, 0.0)): the result has cond's
/// shape and the dtype of the numbers' kinds, as PyTorch: float32 (the
/// default float dtype) when either is floating, else int64 when either is
/// an integer, else bool. (A template on arithmetic types, so that a value
/// converting to both Tensor and Scalar, such as a compiled call's result,
/// still picks a tensor overload.)
template <class A, class B>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
Tensor where(const Tensor& cond, A a, B b) {
  return detail::where_scalars(cond, Scalar(a), Scalar(b));
}
/// min(max(x, lo), hi); NaN in x propagates. A missing bound is no bound.
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi);
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi);
/// x where !mask, value where mask. `mask` must have dtype bool (as in
/// PyTorch; DTypeError naming its dtype otherwise: compare first, `m != 0`)
/// and broadcast to x's shape (ShapeError otherwise); x may have any dtype,
/// and the result has x's dtype and shape. The value takes x's dtype by
/// Scalar's rules (ValueError for an integer out of range or a
/// NaN/inf/out-of-range float into an integer x).
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);

// ---- C++ operators ------------------------------------------------------------
Tensor operator-(const Tensor& x);
#define KILN_BINARY_OPERATOR(sym, fn)                                       \
  inline Tensor operator sym(const Tensor& a, const Tensor& b) { return fn(a, b); } \
  Tensor operator sym(const Tensor& a, Scalar b);                          \
  Tensor operator sym(Scalar a, const Tensor& b);
KILN_BINARY_OPERATOR(+, add)
KILN_BINARY_OPERATOR(-, sub)
KILN_BINARY_OPERATOR(*, mul)
KILN_BINARY_OPERATOR(/, div)
/// Python's %: remainder (the result has the divisor's sign), not C's fmod.
KILN_BINARY_OPERATOR(%, remainder)
KILN_BINARY_OPERATOR(==, equal)
KILN_BINARY_OPERATOR(!=, not_equal)
KILN_BINARY_OPERATOR(<, less)
KILN_BINARY_OPERATOR(<=, less_equal)
KILN_BINARY_OPERATOR(>, greater)
KILN_BINARY_OPERATOR(>=, greater_equal)
#undef KILN_BINARY_OPERATOR
/// Logical operators on bool tensors, elementwise and broadcasting: `a & b`
/// is logical_and, `a | b` logical_or, `a ^ b` logical_xor, `!a` and `~a`
/// logical_not (numpy's operators on bool arrays; C++ cannot overload `&&`
/// and `||` without losing short-circuiting, so kiln does not). Operands of
/// any other dtype throw DTypeError naming the operator: numpy's `&` on
/// integers is bitwise, which kiln does not offer; call logical_and & co.
/// for truthiness of other dtypes.
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator!(const Tensor& x);
Tensor operator~(const Tensor& x);

// ---- reductions ---------------------------------------------------------------
// `axes` empty means all axes; duplicates or out-of-range axes throw
// IndexError. `keepdim` keeps reduced axes with extent 1. Signed integer/bool
// sums/products accumulate and return int64, unsigned ones uint64 (numpy);
// float16/bfloat16 in float32. Empty: sum 0, prod 1, mean/var NaN, logsumexp -inf,
// any false, all true; max/min/argmax/argmin throw ValueError when an empty
// extent would have to fill a non-empty result (numpy: no identity). NaN
// propagates through max, min, argmax and argmin (first NaN wins). Integer
// sums/products wrap around (int64/uint64) as numpy's do. Mean/var/std/logsumexp
// of integer or bool tensors compute in float64 and return float32.
// Results do not depend on the thread count: float sums add fixed-size
// blocks (lanes inside, blocks combined pairwise), never per-thread partials.
Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
/// Index (int64) of the first maximum along `axis`, or into the flattened
/// tensor when no axis is given.
Tensor argmax(const Tensor& x, std::optional<int64_t> axis = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> axis = std::nullopt, bool keepdim = false);
/// Variance with `correction` subtracted from the count (1 = Bessel, as
/// PyTorch's default; numpy's ddof). Two-pass (mean, then squared
/// deviations), divided by max(count - correction, 0) as numpy does: a
/// count not above the correction gives inf (or NaN when the deviations are 0).
Tensor var(const Tensor& x, const Axes& axes = {}, double correction = 1.0, bool keepdim = false);
/// sqrt(var(x, axes, correction, keepdim)). Named as numpy's and PyTorch's
/// std; under `using namespace kiln` an unqualified call `std(x)` does not
/// compile ("reference to 'std' is ambiguous": C++ finds the namespace std
/// and this function together and cannot choose). Write `kiln::std(x)` or
/// `x.std()` (tests/compile_checks/std_name.cpp).
Tensor std(const Tensor& x, const Axes& axes = {}, double correction = 1.0, bool keepdim = false);
/// log(sum(exp(x))) computed as m + log(sum(exp(x - m))), m = max (m = 0
/// where the max is not finite: all -inf gives -inf, any +inf gives +inf).
Tensor logsumexp(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor any(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor all(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
/// Inclusive prefix sum along `axis` (signed integer/bool accumulate in and return
/// int64, unsigned uint64; float16/bfloat16 accumulate in float32). Sequential along
/// the axis. A 0-d x with axis 0 or -1 gives its value (0-d, the same dtype
/// rule); any other axis of a 0-d x is an IndexError ("0-d tensor has no axis").
Tensor cumsum(const Tensor& x, int64_t axis);
/// Inclusive prefix product along `axis` (cumsum's dtype rules; integers
/// wrap as int64/uint64 do).
Tensor cumprod(const Tensor& x, int64_t axis);
/// exp(x - max) / sum(exp(x - max)) along `axis`. Integer/bool inputs give float32. A line holding
/// NaN or +inf, or only -inf, is NaN throughout (as torch.softmax). A 0-d x has no axis (IndexError).
/// float32: the sum is float32 over 32-128 partial sums (about 1e-6 relative at 1k, 3e-5 at 1M).
Tensor softmax(const Tensor& x, int64_t axis = -1);
/// x - max - log(sum(exp(x - max))) along `axis` (same special cases).
Tensor log_softmax(const Tensor& x, int64_t axis = -1);

// ---- linear algebra and norms ------------------------------------------------
/// numpy.matmul: 1-d operands are promoted to matrices and the added axis
/// removed; leading (batch) axes broadcast. Dtypes promote (numpy's table;
/// bool @ bool is bool, the OR of ANDs; integers accumulate in int64 and wrap
/// to the result dtype). float32/float64 call a BLAS (OpenBLAS when found,
/// else Eigen's GEMM) on the operands' memory, transposed layouts included;
/// 16-bit floats compute in float32. K = 0 gives zeros. Throws ShapeError for
/// a 0-d operand, differing inner extents or batch axes that do not broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
/// Layer normalisation over the last axis (Ba, Kiros & Hinton 2016):
/// (x - mean) / sqrt(var + eps) * weight + bias, biased variance. weight and
/// bias are optional (undefined Tensor), of shape [x.shape[-1]] (ShapeError
/// otherwise); the result dtype is the promotion of all inputs, float32 for
/// integer/bool. float32 rows run a generated kernel whose statistics are
/// float32, two-pass with the Chan-Golub-LeVeque correction (error about 1.1 * 2^-23 * (|y| + 1) up to
/// ~8k per row, also for rows whose mean is far from 0; longer rows more: 1.4x at 262k, 5x at 1M; |x|
/// past ~1e19 overflows float32 squares); other dtypes accumulate in float64. A 0-d x is a ShapeError.
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);
/// RMS normalisation over the last axis (Zhang & Sennrich 2019):
/// x / sqrt(mean(x^2) + eps) * weight (same rules as layer_norm).
Tensor rms_norm(const Tensor& x, const Tensor& weight = {}, double eps = 1e-6);

// ---- shape and indexing ---------------------------------------------------------
/// A view when the strides allow it (numpy's rule), else a copy. One extent
/// may be -1 (inferred).
Tensor reshape(const Tensor& x, const Shape& shape);
/// Merges axes start..end (inclusive) into one.
Tensor flatten(const Tensor& x, int64_t start = 0, int64_t end = -1);
Tensor permute(const Tensor& x, const Axes& axes);
Tensor transpose(const Tensor& x, int64_t a = -2, int64_t b = -1);
/// Removes the given size-1 axes (all size-1 axes when empty); naming an axis
/// whose extent is not 1 throws ShapeError.
Tensor squeeze(const Tensor& x, const Axes& axes = {});
/// Inserts a size-1 axis at `axis` (in [-ndim-1, ndim]).
Tensor unsqueeze(const Tensor& x, int64_t axis);
/// A broadcast view (stride 0 on new/expanded axes).
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// Python slicing x[start:stop:step] along `axis` (a view). Bounds are
/// clamped as Python does; step may be negative, not zero.
Tensor slice(const Tensor& x, int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop,
             int64_t step = 1);
/// x[..., index, ...] along `axis` (removes the axis; a view).
Tensor select(const Tensor& x, int64_t axis, int64_t index);
/// Joins along an existing axis; dtypes are promoted.
Tensor concat(const std::vector<Tensor>& xs, int64_t axis = 0);
/// Joins along a new axis.
Tensor stack(const std::vector<Tensor>& xs, int64_t axis = 0);
/// Splits into pieces of the given sizes (they must sum to the extent).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis = 0);
/// Splits into pieces of `size` (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t axis = 0);
/// `chunks` pieces of ceil(n / chunks) (torch.chunk).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis = 0);
/// numpy.tile.
Tensor tile(const Tensor& x, const Axes& reps);
/// Constant padding: pads[i] = {before, after} for axis i (leading axes may
/// be omitted: pads apply to the last pads.size() axes).
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pads, Scalar value = 0.0);
/// Reverses the order along `axes` (all when empty); a view with negative
/// strides. A 0-d x with no axes named is returned as is (numpy).
Tensor flip(const Tensor& x, const Axes& axes = {});
/// numpy.take_along_axis: out[..i..] = x[..index[..i..]..] along `axis`;
/// index is int32/int64 of the same rank; negative indices count from the end.
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);
/// Picks entries of a 1-d int32/int64 `indices` along `axis`; negative
/// indices count from the end (numpy.take); out of [-n, n) throws IndexError.
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& indices);
/// weight[ids]: result shape ids.shape + [weight.shape[1]]. ids int32/int64
/// (DTypeError otherwise) in [0, num_embeddings): as PyTorch's embedding, a
/// negative id is refused (it would silently pick a row from the end, as
/// index_select's negative indices do); an id outside the range throws
/// IndexError naming embedding and the id, eagerly and when a compiled
/// function runs.
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// indices.shape + [num_classes], 1 where the class matches.
Tensor one_hot(const Tensor& indices, int64_t num_classes, DType dtype = DType::int64);
/// torch.scatter: a copy of x with out[..., index[p], ...] = src[p] along
/// `axis` for every position p of `index` (same rank as x and src;
/// index.shape <= src.shape in every dimension and <= x.shape off `axis`,
/// else ShapeError). index is int32/int64 (DTypeError otherwise), negative
/// values count from the end; one outside [-n, n) throws IndexError naming
/// the value and its position. src must have x's dtype (DTypeError). Writes
/// go in row-major order of index: with a repeated target the last wins.
Tensor scatter(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src);
/// torch.scatter_add: as scatter, but adds src[p] into the target. Repeated
/// targets accumulate in row-major order of index (sequentially, rounding to
/// x's dtype at each step), so eager and compiled results are bitwise equal.
/// Integers wrap; bool accumulates as or.
Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src);
/// torch.index_add: a copy of x with x[..., index[i], ...] += alpha * src[..., i, ...]
/// along `axis`; index is 1-d int32/int64 (negative from the end, IndexError
/// out of range), src is x's shape with index's length along `axis`
/// (ShapeError otherwise) and x's dtype (DTypeError). Repeated indices
/// accumulate in index order (as scatter_add).
Tensor index_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, Scalar alpha = 1);

}  // namespace kiln
