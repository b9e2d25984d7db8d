// kiln: isclose, allclose, array_equal, max_ulp_diff and assert_close.
// They read the operands' memory directly (strides as they are, broadcast
// axes as stride 0) instead of composing ops, so a comparison is exact
// (float64 or int64 arithmetic, not the operands' dtype), records nothing
// into a graph and does not depend on which realization context is current.
#include "testing.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "dispatch.h"
#include "num_str.h"

namespace kiln {
namespace {

using detail::shortest_str;

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

/// Every element of `t` broadcast to `shape`, in row-major order, converted to T.
template <class T>
std::vector<T> gather(const Tensor& t, const Shape& shape) {
  const int64_t n = checked_numel(shape);
  std::vector<T> out(static_cast<size_t>(n));
  if (n == 0) return out;
  const Strides st = broadcast_strides(t, shape);
  const size_t nd = shape.size();
  detail::visit_dtype(t.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* base = static_cast<const S*>(t.data_ptr());
    std::vector<int64_t> idx(nd, 0);
    int64_t off = 0;
    for (int64_t k = 0; k < n; ++k) {
      out[static_cast<size_t>(k)] = detail::convert<T>(base[off]);
      // odometer step over the last axes
      for (size_t d = nd; d-- > 0;) {
        if (++idx[d] < shape[d]) {
          off += st[d];
          break;
        }
        off -= st[d] * (shape[d] - 1);
        idx[d] = 0;
      }
    }
  });
  return out;
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

// |x - y| of two int64 values, exactly, then rounded to double.
double abs_diff_i(int64_t x, int64_t y) {
  const __int128 d = static_cast<__int128>(x) - y;
  return static_cast<double>(d < 0 ? -d : d);
}

bool close_i(int64_t x, int64_t y, double rtol, double atol) {
  return x == y || abs_diff_i(x, y) <= atol + rtol * std::fabs(static_cast<double>(y));
}

/// Both operands' elements, broadcast to one shape, as int64 when neither is
/// floating (exact) and as float64 otherwise.
struct Operands {
  Shape shape;
  bool integral = false;
  std::vector<double> fa, fb;
  std::vector<int64_t> ia, ib;

  Operands(const Tensor& a, const Tensor& b, const Shape& s) : shape(s) {
    integral = !is_floating(a.dtype()) && !is_floating(b.dtype());
    if (integral) {
      ia = gather<int64_t>(a, shape);
      ib = gather<int64_t>(b, shape);
    } else {
      fa = gather<double>(a, shape);
      fb = gather<double>(b, shape);
    }
  }
  size_t size() const { return integral ? ia.size() : fa.size(); }
  bool close(size_t k, double rtol, double atol, bool equal_nan) const {
    return integral ? close_i(ia[k], ib[k], rtol, atol) : close_f(fa[k], fb[k], rtol, atol, equal_nan);
  }
};

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

std::string value_str(const Operands& o, bool actual, size_t k, DType dt) {
  if (o.integral) {
    const int64_t v = actual ? o.ia[k] : o.ib[k];
    if (dt == DType::bool_) return v ? "True" : "False";
    return std::to_string(v);
  }
  return shortest_str(actual ? o.fa[k] : o.fb[k], dt);
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
  const Operands o(a, b, broadcast_shapes(a.shape(), b.shape(), "isclose"));
  std::vector<uint8_t> r(o.size());
  for (size_t k = 0; k < r.size(); ++k) r[k] = o.close(k, rtol, atol, equal_nan);
  return Tensor::from_data(r.data(), DType::bool_, r.size(), o.shape);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  readable(a, "allclose", "a");
  readable(b, "allclose", "b");
  check_tolerance("allclose", "rtol", rtol);
  check_tolerance("allclose", "atol", atol);
  const Operands o(a, b, broadcast_shapes(a.shape(), b.shape(), "allclose"));
  for (size_t k = 0; k < o.size(); ++k)
    if (!o.close(k, rtol, atol, equal_nan)) return false;
  return true;
}

bool array_equal(const Tensor& a, const Tensor& b, bool equal_nan) {
  readable(a, "array_equal", "a");
  readable(b, "array_equal", "b");
  if (a.shape() != b.shape()) return false;
  const Operands o(a, b, a.shape());
  for (size_t k = 0; k < o.size(); ++k) {
    const bool eq = o.integral ? o.ia[k] == o.ib[k]
                               : o.fa[k] == o.fb[k] || (equal_nan && std::isnan(o.fa[k]) && std::isnan(o.fb[k]));
    if (!eq) return false;
  }
  return true;
}

int64_t max_ulp_diff(const Tensor& a, const Tensor& b) {
  readable(a, "max_ulp_diff", "a");
  readable(b, "max_ulp_diff", "b");
  if (!is_floating(a.dtype()) || a.dtype() != b.dtype())
    throw DTypeError("max_ulp_diff: expected two tensors of the same floating dtype (float16, bfloat16, float32, "
                     "float64), got " + std::string(name(a.dtype())) + " and " + std::string(name(b.dtype())));
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "max_ulp_diff");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return detail::visit_dtype(a.dtype(), [&](auto tag) -> int64_t {
    using S = typename decltype(tag)::type;
    if constexpr (std::is_same_v<S, float16_t> || std::is_same_v<S, bfloat16_t> || std::is_same_v<S, float> ||
                  std::is_same_v<S, double>) {
      const std::vector<S> va = gather<S>(a, shape), vb = gather<S>(b, shape);
      int64_t worst = 0;
      for (size_t k = 0; k < va.size(); ++k) {
        const bool na = is_nan_value(va[k]), nb = is_nan_value(vb[k]);
        if (na || nb) {
          if (na != nb) return kMax;
          continue;
        }
        __int128 d = static_cast<__int128>(ulp_key(va[k])) - ulp_key(vb[k]);
        if (d < 0) d = -d;
        if (d >= kMax) return kMax;
        worst = std::max(worst, static_cast<int64_t>(d));
      }
      return worst;
    } else {
      return 0;  // unreachable: checked above
    }
  });
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

  const Operands o(actual, expected, expected.shape());
  // Differences print with float32's digits for 16-bit and 32-bit floats
  // (a 16-bit type may not hold a difference or a ratio), float64's otherwise.
  const DType diff_dt = dt == DType::float64 || !is_floating(dt) ? DType::float64 : DType::float32;
  constexpr size_t kListed = 5;
  std::vector<size_t> listed;
  int64_t mismatches = 0;
  double worst_abs = 0, worst_rel = 0;
  size_t worst_abs_at = 0, worst_rel_at = 0;
  for (size_t k = 0; k < o.size(); ++k) {
    if (o.close(k, rtol, atol, equal_nan)) continue;
    double abs_d, rel_d;
    if (o.integral) {
      abs_d = abs_diff_i(o.ia[k], o.ib[k]);
      rel_d = o.ib[k] == 0 ? std::numeric_limits<double>::infinity() : abs_d / std::fabs(static_cast<double>(o.ib[k]));
    } else {
      const double x = o.fa[k], y = o.fb[k];
      abs_d = std::fabs(x - y);  // NaN when either is NaN; inf against an infinity
      rel_d = std::isnan(abs_d) ? abs_d
              : y == 0 || std::isinf(y) ? std::numeric_limits<double>::infinity()
                                        : abs_d / std::fabs(y);
    }
    if (mismatches == 0 || worse(abs_d, worst_abs)) worst_abs = abs_d, worst_abs_at = k;
    if (mismatches == 0 || worse(rel_d, worst_rel)) worst_rel = rel_d, worst_rel_at = k;
    if (listed.size() < kListed) listed.push_back(k);
    ++mismatches;
  }
  if (mismatches == 0) return "";

  const Shape& shape = expected.shape();
  const int64_t n = static_cast<int64_t>(o.size());
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
  for (size_t k : listed)
    r += "\n  " + index_str(static_cast<int64_t>(k), shape) + ": " + value_str(o, true, k, dt) + " vs " +
         value_str(o, false, k, dt);
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
