#include "ref_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "error.h"

namespace kiln {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

[[noreturn]] void not_in_category(OpId op, const char* what) {
  throw ValueError(std::string("ref_") + what + ": '" + std::string(op_name(op)) + "' is not a " + what + " row");
}

// Round half to even, written out: floor, then compare the fraction with 1/2.
double round_half_even(double x) {
  if (!std::isfinite(x)) return x;
  double fl = std::floor(x);
  double frac = x - fl;  // exact for doubles
  if (frac > 0.5 || (frac == 0.5 && std::fmod(fl, 2.0) != 0.0)) fl += 1.0;
  return std::copysign(fl, x);  // keeps -0 for -0.4
}

// Rounds x to a binary format with p significand bits, minimum normal
// exponent emin and largest finite value max_finite (round to nearest even).
double round_to_format(double x, int p, int emin, double max_finite) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e;
  std::frexp(std::fabs(x), &e);                // |x| = m 2^e, m in [0.5, 1)
  int lead = std::max(e - 1, emin);            // subnormals share emin's quantum
  double quantum = std::ldexp(1.0, lead - (p - 1));
  double r = round_half_even(x / quantum) * quantum;  // scaling by 2^k is exact
  if (std::fabs(r) > max_finite) return std::copysign(kInf, x);
  return r;
}

// exp of a non-positive argument only, so tiny results keep their accuracy.
double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

// CPython's float divmod (Objects/floatobject.c), the definition of Python's
// // and % on floats; numpy follows it.
void py_divmod(double a, double b, double* floordiv, double* mod) {
  double m = std::fmod(a, b);
  double div = (a - m) / b;
  if (m != 0.0) {
    if ((b < 0.0) != (m < 0.0)) {
      m += b;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, b);
  }
  double fd;
  if (div != 0.0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, a / b);
  }
  *floordiv = fd;
  *mod = m;
}

// Wraps v to the range of integer dtype d (two's complement), or to 0/1 for bool.
int64_t wrap(__int128 v, DType d) {
  uint64_t u = static_cast<uint64_t>(static_cast<unsigned __int128>(v));
  switch (d) {
    case DType::bool_: return v != 0;
    case DType::uint8: return static_cast<int64_t>(u & 0xffu);
    case DType::int8: return static_cast<int64_t>((u & 0xffu) ^ 0x80u) - 0x80;
    case DType::int16: return static_cast<int64_t>((u & 0xffffu) ^ 0x8000u) - 0x8000;
    case DType::uint16: return static_cast<int64_t>(u & 0xffffu);
    case DType::int32: return static_cast<int64_t>((u & 0xffffffffu) ^ 0x80000000u) - 0x80000000ll;
    case DType::uint32: return static_cast<int64_t>(u & 0xffffffffu);
    default: return static_cast<int64_t>(u);  // int64, uint64 (its bits): modulo 2^64 (two's complement since C++20)
  }
}

[[noreturn]] void no_int_form(OpId op, DType d) {
  throw DTypeError(std::string(op_name(op)) + ": no integer form for dtype " + std::string(name(d)) +
                   " (the kernels compute it in floating point)");
}

void check_int_dtype(OpId op, DType d) {
  if (is_floating(d))
    throw DTypeError(std::string("ref_") + std::string(op_name(op)) + ": expected an integer or bool dtype, got " +
                     std::string(name(d)));
}

// The value of an element passed as int64: uint64 elements arrive as their bits.
__int128 int_value(int64_t x, DType d) {
  return d == DType::uint64 ? static_cast<__int128>(static_cast<uint64_t>(x)) : static_cast<__int128>(x);
}

// x * y keeping the low 128 bits (uint64 operands can overflow a signed
// __int128 product; only the low bits matter to wrap()).
__int128 mul_low(__int128 x, __int128 y) {
  return static_cast<__int128>(static_cast<unsigned __int128>(x) * static_cast<unsigned __int128>(y));
}

// Python floor division of integers (exact in 128 bits).
__int128 py_floor_div(__int128 a, __int128 b) {
  __int128 q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

double ref_unary(OpId op, double x) {
  switch (op) {
    case OpId::Neg: return -x;
    case OpId::Abs: return std::fabs(x);
    case OpId::Sign: return std::isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case OpId::Exp: return std::exp(x);
    case OpId::Exp2: return std::pow(2.0, x);
    case OpId::Log: return std::log(x);
    case OpId::Log2: return std::log2(x);
    case OpId::Log1p: return std::log1p(x);
    case OpId::Expm1: return std::expm1(x);
    case OpId::Sqrt: return std::sqrt(x);
    case OpId::Rsqrt: return 1.0 / std::sqrt(x);
    case OpId::Square: return x * x;
    case OpId::Reciprocal: return 1.0 / x;
    case OpId::Sin: return std::sin(x);
    case OpId::Cos: return std::cos(x);
    case OpId::Tan: return std::tan(x);
    case OpId::Tanh: return std::tanh(x);
    case OpId::Atanh: return std::atanh(x);
    case OpId::Sigmoid: return sigmoid(x);
    case OpId::Relu: return std::isnan(x) ? x : x > 0 ? x : 0.0;
    case OpId::Gelu:
      // x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2 (no cancellation for x < 0).
      return x == -kInf ? -0.0 : 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case OpId::GeluTanh: {
      // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), exact identity without cancellation.
      if (x == -kInf) return -0.0;
      double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
      return x * sigmoid(2.0 * u);
    }
    case OpId::Silu: return x == -kInf ? -0.0 : x * sigmoid(x);
    case OpId::Erf: return std::erf(x);
    case OpId::Floor: return std::floor(x);
    case OpId::Ceil: return std::ceil(x);
    case OpId::Round: return round_half_even(x);
    case OpId::Trunc: return std::trunc(x);
    case OpId::LogicalNot: return x == 0.0 ? 1.0 : 0.0;
    case OpId::IsNan: return std::isnan(x) ? 1.0 : 0.0;
    case OpId::IsInf: return std::isinf(x) ? 1.0 : 0.0;
    case OpId::IsFinite: return std::isfinite(x) ? 1.0 : 0.0;
    default: not_in_category(op, "unary");
  }
}

double ref_binary(OpId op, double a, double b) {
  switch (op) {
    case OpId::Add: return a + b;
    case OpId::Sub: return a - b;
    case OpId::Mul: return a * b;
    case OpId::Div: return a / b;
    case OpId::Pow: return std::pow(a, b);
    case OpId::Maximum: return std::isnan(a) || std::isnan(b) ? kNaN : a > b ? a : b;
    case OpId::Minimum: return std::isnan(a) || std::isnan(b) ? kNaN : a < b ? a : b;
    case OpId::FloorDivide: {
      if (b == 0.0) return a / b;
      double q, m;
      py_divmod(a, b, &q, &m);
      return q;
    }
    case OpId::Remainder: {
      if (b == 0.0) return kNaN;
      double q, m;
      py_divmod(a, b, &q, &m);
      return m;
    }
    case OpId::Fmod: return std::fmod(a, b);
    case OpId::Atan2: return std::atan2(a, b);
    case OpId::Equal: return a == b;
    case OpId::NotEqual: return a != b;
    case OpId::Less: return a < b;
    case OpId::LessEqual: return a <= b;
    case OpId::Greater: return a > b;
    case OpId::GreaterEqual: return a >= b;
    case OpId::LogicalAnd: return (a != 0.0) && (b != 0.0);
    case OpId::LogicalOr: return (a != 0.0) || (b != 0.0);
    case OpId::LogicalXor: return (a != 0.0) != (b != 0.0);
    default: not_in_category(op, "binary");
  }
}

double ref_ternary(OpId op, double a, double b, double c) {
  switch (op) {
    case OpId::Where: return a != 0.0 ? b : c;
    case OpId::Clamp:
      if (std::isnan(a) || std::isnan(b) || std::isnan(c)) return kNaN;
      return std::min(std::max(a, b), c);
    default: not_in_category(op, "ternary");
  }
}

int64_t ref_unary_int(OpId op, int64_t x, DType d) {
  check_int_dtype(op, d);
  const __int128 v = int_value(x, d);
  switch (op) {
    case OpId::Neg: return wrap(-v, d);
    case OpId::Abs: return wrap(v < 0 ? -v : v, d);
    case OpId::Sign: return (v > 0) - (v < 0);
    case OpId::Square: return wrap(mul_low(v, v), d);
    case OpId::Relu: return v > 0 ? x : 0;
    case OpId::Floor:
    case OpId::Ceil:
    case OpId::Round:
    case OpId::Trunc: return x;
    case OpId::LogicalNot: return x == 0;
    case OpId::IsNan:
    case OpId::IsInf: return 0;
    case OpId::IsFinite: return 1;
    default:
      if (op_info(op).category != OpCategory::Unary) not_in_category(op, "unary");
      no_int_form(op, d);
  }
}

int64_t ref_binary_int(OpId op, int64_t a, int64_t b, DType d) {
  check_int_dtype(op, d);
  const __int128 x = int_value(a, d), y = int_value(b, d);
  auto nonzero_divisor = [&] {
    if (b == 0) throw ValueError(std::string(op_name(op)) + ": integer division by zero");
  };
  switch (op) {
    case OpId::Add: return wrap(x + y, d);
    case OpId::Sub: return wrap(x - y, d);
    case OpId::Mul: return wrap(mul_low(x, y), d);
    case OpId::Pow: {
      if (b < 0) throw ValueError("pow: integers to negative integer powers are not allowed");
      // Square and multiply modulo 2^64 (unsigned), then wrap to d.
      uint64_t r = 1, base = static_cast<uint64_t>(a);
      for (uint64_t e = static_cast<uint64_t>(b); e; e >>= 1) {
        if (e & 1u) r *= base;
        base *= base;
      }
      return wrap(static_cast<int64_t>(r), d);
    }
    case OpId::Maximum: return wrap(x > y ? x : y, d);
    case OpId::Minimum: return wrap(x < y ? x : y, d);
    case OpId::FloorDivide: nonzero_divisor(); return wrap(py_floor_div(x, y), d);
    case OpId::Remainder: nonzero_divisor(); return wrap(x - y * py_floor_div(x, y), d);
    case OpId::Fmod: nonzero_divisor(); return wrap(x - y * (x / y), d);  // C: quotient truncated
    case OpId::Equal: return x == y;
    case OpId::NotEqual: return x != y;
    case OpId::Less: return x < y;
    case OpId::LessEqual: return x <= y;
    case OpId::Greater: return x > y;
    case OpId::GreaterEqual: return x >= y;
    case OpId::LogicalAnd: return (a != 0) && (b != 0);
    case OpId::LogicalOr: return (a != 0) || (b != 0);
    case OpId::LogicalXor: return (a != 0) != (b != 0);
    default:
      if (op_info(op).category != OpCategory::Binary) not_in_category(op, "binary");
      no_int_form(op, d);
  }
}

double ref_cast(double x, DType d) {
  switch (d) {
    case DType::float64: return x;
    case DType::float32: return static_cast<double>(static_cast<float>(x));
    case DType::float16: return round_to_format(x, 11, -14, 65504.0);
    case DType::bfloat16: return round_to_format(x, 8, -126, std::ldexp(255.0, 120));  // (2 - 2^-7) 2^127
    case DType::bool_: return x != 0.0 ? 1.0 : 0.0;
    case DType::uint8:
    case DType::uint16:
    case DType::uint32: {
      if (!(std::fabs(x) < 9223372036854775808.0)) return 0.0;  // NaN, inf, |x| >= 2^63: no int64 truncation
      const double t = std::trunc(x), k = std::ldexp(1.0, 8 * static_cast<int>(size_of(d)));
      const double m = std::fmod(t, k);  // the low bits of the two's-complement value
      return m < 0 ? m + k : m;
    }
    case DType::uint64: {
      const double t = std::trunc(x);
      if (t >= 0 && t < 18446744073709551616.0) return t;
      if (t < 0 && t > -9223372036854775808.0) return t + 18446744073709551616.0;  // modulo 2^64 (rounded)
      return 9223372036854775808.0;  // NaN, infinities and out of range: 2^63
    }
    default: {
      const double lo = -std::ldexp(1.0, 8 * static_cast<int>(size_of(d)) - 1);
      const double hi = -lo;  // exclusive
      if (!(x > lo - 1.0 && x < hi)) return lo;  // NaN, infinities and out of range
      double t = std::trunc(x);
      return t < lo ? lo : t;
    }
  }
}

int64_t ref_cast_int(int64_t x, DType d) {
  if (is_floating(d))
    throw DTypeError("ref_cast_int: expected an integer or bool target dtype, got " + std::string(name(d)));
  return wrap(x, d);
}

double ref_atol(OpId, DType) {
  // No row needs an absolute allowance beyond the relative bound: gelu (erf
  // form) below -1 and gelu_tanh below -3 are evaluated in double by the
  // eager kernels, where float forms cancel (backends/cpu/unary_kernels.cpp).
  return 0.0;
}

// ---- the selection, window and matrix-structure rows -------------------------------

namespace {

std::vector<int64_t> unravel_ix(int64_t i, const Shape& s) {
  std::vector<int64_t> ix(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    ix[d] = i % s[d];
    i /= s[d];
  }
  return ix;
}

int64_t ravel_ix(const std::vector<int64_t>& ix, const Shape& s) {
  int64_t r = 0;
  for (size_t d = 0; d < s.size(); ++d) r = r * s[d] + ix[d];
  return r;
}

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t e : s) n *= e;
  return n;
}

int64_t norm_axis(int64_t axis, int64_t nd) { return axis < 0 ? axis + nd : axis; }

// NaN above everything: numpy's sort order.
bool lt_nan_last(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}

// The smallest value of dtype d (-inf for floats).
double lowest_value(DType d) {
  if (is_floating(d)) return -kInf;
  switch (d) {
    case DType::bool_:
    case DType::uint8:
    case DType::uint16:
    case DType::uint32:
    case DType::uint64: return 0.0;
    default: return -std::ldexp(1.0, 8 * static_cast<int>(size_of(d)) - 1);
  }
}

// The element of `a` (broadcast, right-aligned) at result index ix.
double at_broadcast(const RefArray& a, const std::vector<int64_t>& ix) {
  const size_t off = ix.size() - a.shape.size();
  int64_t r = 0;
  for (size_t d = 0; d < a.shape.size(); ++d) r = r * a.shape[d] + (a.shape[d] == 1 ? 0 : ix[off + d]);
  return a.v[static_cast<size_t>(r)];
}

double cross_term(double x1, double y2, double x2, double y1, DType d) {
  if (is_floating(d)) {
    const DType c = d == DType::float16 || d == DType::bfloat16 ? DType::float32 : d;
    const double p = ref_cast(x1 * y2, c), q = ref_cast(x2 * y1, c);
    return ref_cast(ref_cast(p - q, c), d);
  }
  auto i = [](double v) { return static_cast<int64_t>(v); };
  const int64_t p = ref_binary_int(OpId::Mul, i(x1), i(y2), d), q = ref_binary_int(OpId::Mul, i(x2), i(y1), d);
  const int64_t r = ref_binary_int(OpId::Sub, p, q, d);
  return d == DType::uint64 ? static_cast<double>(static_cast<uint64_t>(r)) : static_cast<double>(r);
}

RefArray ref_pool(OpId op, const RefArray& x, const Attrs& a, DType d) {
  const Shape& s = x.shape;
  const bool mx = op == OpId::MaxPool2d;
  const int64_t kh = a.ints[0], kw = a.ints[1], sh = a.ints[2], sw = a.ints[3], ph = a.ints[4], pw = a.ints[5];
  const int64_t dh = mx ? a.ints[6] : 1, dw = mx ? a.ints[7] : 1;
  const int64_t oh = (s[2] + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (s[3] + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  RefArray r{{s[0], s[1], oh, ow}, {}};
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          const int64_t y0 = y * sh - ph, z0 = z * sw - pw;
          double m = lowest_value(d), sum = 0.0;
          int64_t inside = 0;
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t yy = y0 + i * dh, zz = z0 + j * dw;
              if (yy < 0 || yy >= s[2] || zz < 0 || zz >= s[3]) continue;
              const double v = x.v[static_cast<size_t>(((n * s[1] + c) * s[2] + yy) * s[3] + zz)];
              if (v > m || std::isnan(v)) m = v;
              sum += v;
              ++inside;
            }
          if (mx) {
            r.v.push_back(m);
          } else {
            // torch: the window clipped to the padded input, or the taps inside x
            const int64_t hh = std::min(y0 + kh, s[2] + ph) - y0, ww = std::min(z0 + kw, s[3] + pw) - z0;
            const double div = a.flag ? static_cast<double>(hh * ww) : static_cast<double>(inside);
            r.v.push_back(ref_cast(sum / div, d));
          }
        }
  return r;
}

}  // namespace

RefArray ref_select_row(OpId op, std::span<const RefArray> in, const Attrs& a, DType d) {
  const RefArray& x = in[0];
  const Shape& s = x.shape;
  const int64_t nd = static_cast<int64_t>(s.size());
  switch (op) {
    case OpId::TopK: {
      const int64_t ax = norm_axis(a.axis, nd), n = s[ax], k = a.ints[0];
      Shape rs = s;
      rs[ax] = k;
      RefArray r{rs, std::vector<double>(static_cast<size_t>(numel_of(rs)))};
      for (int64_t o = 0; o < numel_of(rs); ++o) {
        std::vector<int64_t> ix = unravel_ix(o, rs);
        const int64_t rank = ix[ax];
        std::vector<int64_t> pos(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) pos[i] = i;
        auto key = [&](int64_t i) {
          ix[ax] = i;
          return x.v[static_cast<size_t>(ravel_ix(ix, s))];
        };
        std::stable_sort(pos.begin(), pos.end(), [&](int64_t p, int64_t q) {
          const double kp = key(p), kq = key(q);
          return a.flag ? lt_nan_last(kq, kp) : lt_nan_last(kp, kq);
        });
        r.v[static_cast<size_t>(o)] = static_cast<double>(pos[rank]);
      }
      return r;
    }
    case OpId::SearchSorted: {
      const RefArray& v = in[1];
      const int64_t n = s.back(), m = v.shape.empty() ? 1 : v.shape.back();
      RefArray r{v.shape, std::vector<double>(v.v.size())};
      for (size_t e = 0; e < v.v.size(); ++e) {
        const int64_t row = nd > 1 ? static_cast<int64_t>(e) / m : 0;  // the sequence this value searches
        int64_t i = 0;
        for (; i < n; ++i) {
          const double q = x.v[static_cast<size_t>(row * n + i)];
          if (a.flag ? lt_nan_last(v.v[e], q) : !lt_nan_last(q, v.v[e])) break;
        }
        r.v[e] = static_cast<double>(i);
      }
      return r;
    }
    case OpId::MaxPool2d:
    case OpId::AvgPool2d: return ref_pool(op, x, a, d);
    case OpId::Tril:
    case OpId::Triu: {
      RefArray r{s, x.v};
      for (int64_t e = 0; e < numel_of(s); ++e) {
        const std::vector<int64_t> ix = unravel_ix(e, s);
        const int64_t diff = ix[nd - 1] - ix[nd - 2];
        if (op == OpId::Tril ? diff > a.axis : diff < a.axis) r.v[static_cast<size_t>(e)] = 0.0;
      }
      return r;
    }
    case OpId::Diag: {
      const int64_t k = a.axis;
      if (nd == 1) {
        const int64_t n = s[0] + (k >= 0 ? k : -k);
        RefArray r{{n, n}, std::vector<double>(static_cast<size_t>(n * n), 0.0)};
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j)
            if (j - i == k) r.v[static_cast<size_t>(i * n + j)] = x.v[static_cast<size_t>(k >= 0 ? i : j)];
        return r;
      }
      RefArray r{{0}, {}};
      for (int64_t i = 0; i < s[0]; ++i)
        for (int64_t j = 0; j < s[1]; ++j)
          if (j - i == k) r.v.push_back(x.v[static_cast<size_t>(i * s[1] + j)]);
      r.shape[0] = static_cast<int64_t>(r.v.size());
      return r;
    }
    case OpId::NanToNum: {
      RefArray r{s, x.v};
      if (!is_floating(d)) return r;
      for (double& e : r.v) {
        if (std::isnan(e)) e = ref_cast(a.scalar, d);
        else if (e == kInf) e = ref_cast(std::bit_cast<double>(a.ints[0]), d);
        else if (e == -kInf) e = ref_cast(std::bit_cast<double>(a.ints[1]), d);
      }
      return r;
    }
    case OpId::Cross: {
      const RefArray& b = in[1];
      Shape rs(std::max(s.size(), b.shape.size()), 1);
      for (size_t i = 0; i < rs.size(); ++i) {
        const size_t ia = i + s.size(), ib = i + b.shape.size();
        const int64_t ea = ia >= rs.size() ? s[ia - rs.size()] : 1, eb = ib >= rs.size() ? b.shape[ib - rs.size()] : 1;
        rs[i] = ea == 1 ? eb : ea;
      }
      const int64_t ax = norm_axis(a.axis, static_cast<int64_t>(rs.size()));
      RefArray r{rs, std::vector<double>(static_cast<size_t>(numel_of(rs)))};
      for (int64_t e = 0; e < numel_of(rs); ++e) {
        std::vector<int64_t> ix = unravel_ix(e, rs);
        const int64_t c = ix[ax];
        auto ea = [&](int64_t i) { ix[ax] = i; return at_broadcast(x, ix); };
        auto eb = [&](int64_t i) { ix[ax] = i; return at_broadcast(b, ix); };
        const int64_t i1 = (c + 1) % 3, i2 = (c + 2) % 3;  // component c = a[i1] b[i2] - a[i2] b[i1]
        const double x1 = ea(i1), y2 = eb(i2), x2 = ea(i2), y1 = eb(i1);
        r.v[static_cast<size_t>(e)] = cross_term(x1, y2, x2, y1, d);
      }
      return r;
    }
    default: throw ValueError("ref_select_row: '" + std::string(op_name(op)) + "' is not a selection row");
  }
}

}  // namespace kiln
