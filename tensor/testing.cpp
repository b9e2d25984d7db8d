// kiln: isclose, allclose, array_equal, max_ulp_diff and assert_close.
// They read the operands' memory directly, a chunk at a time (strides as
// they are, broadcast axes as stride 0), instead of composing ops, so a
// comparison needs no copy of the operands, is exact
// (float64 or 128-bit integer arithmetic, not the operands' dtype: every
// int8..int64 and uint8..uint64 value is held by value, so uint64 2^64 - 1
// and int64 -1 differ, as in numpy), records nothing
// into a graph and does not depend on which realization context is current.
#include "testing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch.h"
#include "num_str.h"

namespace kiln {
namespace {

using detail::shortest_str;

/// Integers are compared as this: it holds every value of every integer
/// dtype (uint64 included), so mixed signed/unsigned pairs compare by value.
using wide_int = __int128;

/// `t` realized and readable here, or a clear error naming `op` and `arg`.
const Tensor& readable(const Tensor& t, const char* op, const char* arg) {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + arg + " is an undefined tensor");
  t.realize();
  if (!t.device().is_cpu())
    throw DeviceError(std::string(op) + ": " + arg + " is on " + t.device().str() +
                      "; only CPU tensors can be compared");
  return t;
}

void check_tolerance(const char* op, const char* name, double v) {
  if (!(v >= 0))
    throw ValueError(std::string(op) + ": " + name + " must be >= 0 (and not NaN), got " + detail::num_str(v));
}

/// The strides of `t` seen as a tensor of `shape` (numpy broadcasting:
/// missing leading axes and extent-1 axes read with stride 0).
Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides out(shape.size(), 0);
  const Shape& s = t.shape();
  const Strides& st = t.strides();
  const size_t lead = shape.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) out[lead + i] = s[i] == 1 ? 0 : st[i];
  return out;
}

/// Reads the elements of `t` broadcast to `shape`, in row-major order and
/// converted to T, a chunk at a time (so a comparison needs no copy of
/// whole operands).
template <class T>
class Reader {
 public:
  Reader(const Tensor& t, const Shape& shape)
      : t_(t), shape_(shape), strides_(broadcast_strides(t, shape)), idx_(shape.size(), 0) {}

  /// Writes the next n elements to out.
  void next(T* out, size_t n) {
    detail::visit_dtype(t_.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* base = static_cast<const S*>(t_.data_ptr());
      for (size_t k = 0; k < n; ++k) {
        if constexpr (std::is_same_v<T, wide_int>) {
          // integer operands only (for_each_chunk_auto): by value, no wrap
          if constexpr (std::is_integral_v<S>) out[k] = static_cast<wide_int>(base[off_]);
          else out[k] = static_cast<wide_int>(detail::convert<int64_t>(base[off_]));
        } else {
          out[k] = detail::convert<T>(base[off_]);
        }
        // odometer step, last axis fastest
        for (size_t d = shape_.size(); d-- > 0;) {
          if (++idx_[d] < shape_[d]) {
            off_ += strides_[d];
            break;
          }
          off_ -= strides_[d] * (shape_[d] - 1);
          idx_[d] = 0;
        }
      }
    });
  }

 private:
  const Tensor& t_;
  const Shape& shape_;
  Strides strides_;
  std::vector<int64_t> idx_;
  int64_t off_ = 0;
};

/// Calls f(k0, n, a_values, b_values) for consecutive chunks of the
/// elements of a and b broadcast to `shape`; stops early when f returns false.
template <class T, class F>
void for_each_chunk(const Tensor& a, const Tensor& b, const Shape& shape, F&& f) {
  constexpr size_t kChunk = 4096;
  const auto n = static_cast<size_t>(checked_numel(shape));
  Reader<T> ra(a, shape), rb(b, shape);
  std::vector<T> va(std::min(n, kChunk)), vb(va.size());
  for (size_t k0 = 0; k0 < n; k0 += kChunk) {
    const size_t m = std::min(kChunk, n - k0);
    ra.next(va.data(), m);
    rb.next(vb.data(), m);
    if (!f(k0, m, va.data(), vb.data())) return;
  }
}

/// for_each_chunk with 128-bit integer values when neither operand is
/// floating (exact comparison by value, uint64 included), float64
/// otherwise; f is generic in the value type.
template <class F>
void for_each_chunk_auto(const Tensor& a, const Tensor& b, const Shape& shape, F&& f) {
  if (!is_floating(a.dtype()) && !is_floating(b.dtype()))
    for_each_chunk<wide_int>(a, b, shape, f);
  else
    for_each_chunk<double>(a, b, shape, f);
}

/// The multi-dimensional index of row-major position `k` in `shape`, as "[i, j]".
std::string index_str(int64_t k, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = k % shape[d];
    k /= shape[d];
  }
  return shape_str(idx);
}

// numpy.isclose's formula, |x - y| <= atol + rtol * |y|, with its special
// cases: equal values (infinities too) are close, an infinite y is close to
// itself only, NaN to NaN only under equal_nan.
bool close_f(double x, double y, double rtol, double atol, bool equal_nan) {
  if (x == y) return true;
  if (std::isnan(x) && std::isnan(y)) return equal_nan;
  return std::isfinite(y) && std::fabs(x - y) <= atol + rtol * std::fabs(y);
}

// |x - y| of two integer values (each within [-2^63, 2^64)), exactly, then rounded to double.
double abs_diff_i(wide_int x, wide_int y) {
  const wide_int d = x - y;
  return static_cast<double>(d < 0 ? -d : d);
}

double abs_i(wide_int y) { return static_cast<double>(y < 0 ? -y : y); }

bool close_i(wide_int x, wide_int y, double rtol, double atol) {
  return x == y || abs_diff_i(x, y) <= atol + rtol * abs_i(y);
}

bool close(double x, double y, double rtol, double atol, bool equal_nan) {
  return close_f(x, y, rtol, atol, equal_nan);
}
bool close(wide_int x, wide_int y, double rtol, double atol, bool /*equal_nan*/) { return close_i(x, y, rtol, atol); }

// ---- units in the last place ------------------------------------------------------

/// The position of a float's bit pattern on the dtype's number line: the
/// magnitude bits, negated for a negative sign (-0 and +0 both map to 0).
template <class S>
int64_t ulp_key(S v) {
  if constexpr (std::is_same_v<S, double>) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    const auto mag = static_cast<int64_t>(u & 0x7fffffffffffffffull);
    return (u >> 63) ? -mag : mag;
  } else if constexpr (std::is_same_v<S, float>) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    const auto mag = static_cast<int64_t>(u & 0x7fffffffu);
    return (u >> 31) ? -mag : mag;
  } else {
    const auto mag = static_cast<int64_t>(v.bits & 0x7fffu);
    return (v.bits >> 15) ? -mag : mag;
  }
}

template <class S>
bool is_nan_value(S v) {
  return std::isnan(static_cast<double>(static_cast<detail::compute_t<S>>(v)));
}

// ---- the report --------------------------------------------------------------------

std::string value_str(wide_int v, DType dt) {
  if (dt == DType::bool_) return v ? "True" : "False";
  if (v >= 0) return std::to_string(static_cast<unsigned long long>(v));  // uint64 values above 2^63 too
  return std::to_string(static_cast<long long>(v));
}
std::string value_str(double v, DType dt) { return shortest_str(v, dt); }

/// |x - y| and |x - y| / |y| of a mismatched pair (see assert_close).
std::pair<double, double> differences(wide_int x, wide_int y) {
  const double abs_d = abs_diff_i(x, y);
  return {abs_d, y == 0 ? std::numeric_limits<double>::infinity() : abs_d / abs_i(y)};
}
std::pair<double, double> differences(double x, double y) {
  const double abs_d = std::fabs(x - y);  // NaN when either is NaN; inf against an infinity
  const double rel_d = std::isnan(abs_d)                  ? abs_d
                       : y == 0 || std::isinf(y) ? std::numeric_limits<double>::infinity()
                                                 : abs_d / std::fabs(y);
  return {abs_d, rel_d};
}

// Ranks differences for "greatest": NaN above +inf above every finite value.
bool worse(double d, double than) {
  if (std::isnan(than)) return false;
  if (std::isnan(d)) return true;
  return d > than;
}

std::string percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

}  // namespace

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  readable(a, "isclose", "a");
  readable(b, "isclose", "b");
  check_tolerance("isclose", "rtol", rtol);
  check_tolerance("isclose", "atol", atol);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "isclose");
  Tensor out = Tensor::empty(shape, DType::bool_);
  bool* r = out.numel() ? static_cast<bool*>(out.data_ptr()) : nullptr;
  for_each_chunk_auto(a, b, shape, [&](size_t k0, size_t m, const auto* x, const auto* y) {
    for (size_t k = 0; k < m; ++k) r[k0 + k] = close(x[k], y[k], rtol, atol, equal_nan);
    return true;
  });
  return out;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  readable(a, "allclose", "a");
  readable(b, "allclose", "b");
  check_tolerance("allclose", "rtol", rtol);
  check_tolerance("allclose", "atol", atol);
  bool all = true;
  for_each_chunk_auto(a, b, broadcast_shapes(a.shape(), b.shape(), "allclose"),
                      [&](size_t, size_t m, const auto* x, const auto* y) {
                        for (size_t k = 0; k < m && all; ++k) all = close(x[k], y[k], rtol, atol, equal_nan);
                        return all;
                      });
  return all;
}

bool array_equal(const Tensor& a, const Tensor& b, bool equal_nan) {
  readable(a, "array_equal", "a");
  readable(b, "array_equal", "b");
  if (a.shape() != b.shape()) return false;
  bool eq = true;
  for_each_chunk_auto(a, b, a.shape(), [&](size_t, size_t m, const auto* x, const auto* y) {
    for (size_t k = 0; k < m && eq; ++k) {
      eq = x[k] == y[k];
      if constexpr (std::is_same_v<std::decay_t<decltype(*x)>, double>)
        eq = eq || (equal_nan && std::isnan(x[k]) && std::isnan(y[k]));
    }
    return eq;
  });
  return eq;
}

int64_t max_ulp_diff(const Tensor& a, const Tensor& b) {
  readable(a, "max_ulp_diff", "a");
  readable(b, "max_ulp_diff", "b");
  if (!is_floating(a.dtype()) || a.dtype() != b.dtype())
    throw DTypeError("max_ulp_diff: expected two tensors of the same floating dtype (float16, bfloat16, float32, "
                     "float64), got " + std::string(name(a.dtype())) + " and " + std::string(name(b.dtype())));
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "max_ulp_diff");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t worst = 0;
  detail::visit_dtype(a.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    if constexpr (std::is_same_v<S, float16_t> || std::is_same_v<S, bfloat16_t> || std::is_same_v<S, float> ||
                  std::is_same_v<S, double>) {
      for_each_chunk<S>(a, b, shape, [&](size_t, size_t m, const S* x, const S* y) {
        for (size_t k = 0; k < m; ++k) {
          const bool nx = is_nan_value(x[k]), ny = is_nan_value(y[k]);
          if (nx || ny) {
            if (nx != ny) {
              worst = kMax;
              return false;
            }
            continue;
          }
          __int128 d = static_cast<__int128>(ulp_key(x[k])) - ulp_key(y[k]);
          if (d < 0) d = -d;
          if (d >= kMax) {
            worst = kMax;
            return false;
          }
          worst = std::max(worst, static_cast<int64_t>(d));
        }
        return true;
      });
    }
  });
  return worst;
}

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::float16: return {1e-3, 1e-5};
    case DType::bfloat16: return {1.6e-2, 1e-5};
    case DType::float32: return {1.3e-6, 1e-5};
    case DType::float64: return {1e-7, 1e-7};
    default: return {0, 0};
  }
}

std::string close_report(const Tensor& actual, const Tensor& expected, std::optional<double> rtol_opt,
                         std::optional<double> atol_opt, bool equal_nan) {
  constexpr const char* kOp = "assert_close";
  readable(actual, kOp, "actual");
  readable(expected, kOp, "expected");
  const Tolerance def = default_tolerance(expected.dtype());
  const double rtol = rtol_opt.value_or(def.rtol), atol = atol_opt.value_or(def.atol);
  check_tolerance(kOp, "rtol", rtol);
  check_tolerance(kOp, "atol", atol);
  if (actual.shape() != expected.shape())
    return std::string(kOp) + ": shapes differ: actual " + shape_str(actual.shape()) + ", expected " +
           shape_str(expected.shape());
  const DType dt = expected.dtype();
  if (actual.dtype() != dt)
    return std::string(kOp) + ": dtypes differ: actual " + std::string(name(actual.dtype())) + ", expected " +
           std::string(name(dt)) + " (convert one with .to(dtype) to compare the values)";

  const Shape& shape = expected.shape();
  // Differences print with float32's digits for 16-bit and 32-bit floats
  // (a 16-bit type may not hold a difference or a ratio), float64's otherwise.
  const DType diff_dt = dt == DType::float64 || !is_floating(dt) ? DType::float64 : DType::float32;
  constexpr size_t kListed = 5;
  std::vector<std::string> listed;  // "[i, j]: actual vs expected"
  int64_t mismatches = 0;
  double worst_abs = 0, worst_rel = 0;
  size_t worst_abs_at = 0, worst_rel_at = 0;
  for_each_chunk_auto(actual, expected, shape, [&](size_t k0, size_t m, const auto* x, const auto* y) {
    for (size_t k = 0; k < m; ++k) {
      if (close(x[k], y[k], rtol, atol, equal_nan)) continue;
      const auto [abs_d, rel_d] = differences(x[k], y[k]);
      if (mismatches == 0 || worse(abs_d, worst_abs)) worst_abs = abs_d, worst_abs_at = k0 + k;
      if (mismatches == 0 || worse(rel_d, worst_rel)) worst_rel = rel_d, worst_rel_at = k0 + k;
      if (listed.size() < kListed)
        listed.push_back(index_str(static_cast<int64_t>(k0 + k), shape) + ": " + value_str(x[k], dt) + " vs " +
                         value_str(y[k], dt));
      ++mismatches;
    }
    return true;
  });
  if (mismatches == 0) return "";

  const int64_t n = checked_numel(shape);
  std::string r = std::string(kOp) + ": tensors are not close (" + std::string(name(dt)) + ", shape " +
                  shape_str(shape) + "; rtol=" + shortest_str(rtol, DType::float64) +
                  ", atol=" + shortest_str(atol, DType::float64) + (equal_nan ? ", equal_nan" : "") + ")\n";
  r += "Mismatched elements: " + std::to_string(mismatches) + " / " + std::to_string(n) + " (" +
       percent(mismatches, n) + ")\n";
  r += "Greatest absolute difference: " + shortest_str(worst_abs, diff_dt) + " at index " +
       index_str(static_cast<int64_t>(worst_abs_at), shape) + " (up to " + shortest_str(atol, DType::float64) +
       " allowed)\n";
  r += "Greatest relative difference: " + shortest_str(worst_rel, diff_dt) + " at index " +
       index_str(static_cast<int64_t>(worst_rel_at), shape) + " (up to " + shortest_str(rtol, DType::float64) +
       " allowed)\n";
  r += static_cast<int64_t>(listed.size()) == mismatches
           ? std::string("Mismatches (index: actual vs expected):")
           : "First " + std::to_string(listed.size()) + " of " + std::to_string(mismatches) +
                 " mismatches (index: actual vs expected):";
  for (const std::string& line : listed) r += "\n  " + line;
  return r;
}

void assert_close(const Tensor& actual, const Tensor& expected, std::optional<double> rtol,
                  std::optional<double> atol, bool equal_nan, const std::string& msg) {
  std::string r = close_report(actual, expected, rtol, atol, equal_nan);
  if (r.empty()) return;
  if (!msg.empty()) r += "\n" + msg;
  throw AssertionError(r);
}

}  // namespace kiln
