// kiln: operator<< for tensors, in numpy's format. This follows numpy's
// arrayprint.py (numpy 2.x) as `numpy.array2string(a, separator=', ')`:
// repr without the "array(" wrapper, under this thread's PrintOptions
// (print_options.h; numpy's defaults unless changed):
// - linewidth 75, threshold 1000 elements, 3 edge items, precision 8,
//   floatmode "maxprec" (shortest round-trip digits, at most 8 decimals);
// - a format is fitted to the elements that are shown (all, or the edge
//   items of a summarised tensor) so that columns align;
// - floats switch to scientific notation when the largest nonzero magnitude
//   is >= 10^min(8, decimal precision of the dtype) (numpy >= 2.3), the
//   smallest is < 1e-4, or their ratio is > 1000 (compared in the dtype);
//   SciMode::on / off force it either way.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "dispatch.h"
#include "num_str.h"
#include "print_options.h"
#include "realize_hook.h"
#include "tensor.h"

namespace kiln {

namespace {

// ---- shortest round-trip decimal digits -----------------------------------------

/// value = -1^neg * d1.d2d3... * 10^exp; digits has no trailing zeros (except "0").
struct Decimal {
  bool neg = false;
  std::string digits;
  int exp = 0;
};

void strip_zeros(std::string& s, size_t keep = 0) {
  while (s.size() > keep && s.back() == '0') s.pop_back();
}

// Parses "[-]d[.ddd]e[+-]x" as printed by to_chars/printf.
Decimal parse_sci(const char* s) {
  Decimal d;
  if (*s == '-') { d.neg = true; ++s; }
  for (; *s && *s != 'e'; ++s)
    if (*s != '.') d.digits += *s;
  if (*s == 'e') d.exp = std::atoi(s + 1);
  strip_zeros(d.digits, 1);
  return d;
}

// 16-bit float helpers: neighbours of a positive finite value by bit pattern.
template <class H>
double h_to_double(uint16_t bits) {
  H h;
  h.bits = bits;
  return static_cast<double>(static_cast<float>(h));
}

// Shortest digits that read back (round to nearest even) as `a` (> 0,
// finite) in the 16-bit type H: the candidates nearest to `a` at 1, 2, ...
// significant digits, accepted when inside a's rounding interval.
template <class H>
Decimal shortest_16(double a, uint16_t inf_bits) {
  const uint16_t bits = H(static_cast<float>(a)).bits;
  const double prev = bits > 1 ? h_to_double<H>(bits - 1) : 0.0;
  const double next = uint16_t(bits + 1) >= inf_bits ? a + (a - prev) : h_to_double<H>(bits + 1);
  const double lo = (a + prev) / 2, hi = (a + next) / 2;
  // A bound itself reads back as `a` when a's last mantissa bit is even (ties to even).
  const bool even = (bits & 1u) == 0;
  char buf[64];
  for (int k = 1; k <= 17; ++k) {
    std::snprintf(buf, sizeof buf, "%.*e", k - 1, a);
    Decimal near = parse_sci(buf);
    // the k digits as an integer, and the exponent of its last digit
    std::string dig = near.digits + std::string(k - static_cast<int>(near.digits.size()), '0');
    const long long D = std::atoll(dig.c_str());
    const int e_last = near.exp - (k - 1);
    long long best = -1;
    double best_err = 0;
    for (long long C : {D, D - 1, D + 1}) {  // D first: printf rounds ties to even, as numpy
      if (C <= 0) continue;
      std::snprintf(buf, sizeof buf, "%llde%d", C, e_last);
      const double x = std::strtod(buf, nullptr);
      const bool inside = even ? (x >= lo && x <= hi) : (x > lo && x < hi);
      if (inside && (best < 0 || std::fabs(x - a) < best_err)) {
        best = C;
        best_err = std::fabs(x - a);
      }
    }
    if (best > 0) {
      Decimal d;
      d.digits = std::to_string(best);
      d.exp = e_last + static_cast<int>(d.digits.size()) - 1;
      strip_zeros(d.digits, 1);
      return d;
    }
  }
  return parse_sci("0e0");  // unreachable for finite a
}

Decimal shortest(double v, DType dt) {
  Decimal d;
  if (v == 0) {
    d.neg = std::signbit(v);
    d.digits = "0";
    return d;
  }
  char buf[64];
  const double a = std::fabs(v);
  switch (dt) {
    case DType::float64: {
      auto r = std::to_chars(buf, buf + sizeof buf - 1, a, std::chars_format::scientific);
      *r.ptr = 0;
      d = parse_sci(buf);
      break;
    }
    case DType::float16: d = shortest_16<float16_t>(a, 0x7c00); break;
    case DType::bfloat16: d = shortest_16<bfloat16_t>(a, 0x7f80); break;
    default: {
      auto r = std::to_chars(buf, buf + sizeof buf - 1, static_cast<float>(a), std::chars_format::scientific);
      *r.ptr = 0;
      d = parse_sci(buf);
    }
  }
  d.neg = std::signbit(v);
  return d;
}

// ---- numpy's FloatingFormat ----------------------------------------------------------

struct Positional {
  std::string ip, fp;  // integer part (with sign) and fraction digits
};
struct Scientific {
  std::string ip, fp;  // leading digit (with sign), fraction digits
  int exp = 0;
};

// dragon4_positional(unique=True, precision, trim='.'): the shortest digits,
// or the exact value rounded half-even to `precision` decimals when they need more.
Positional positional(double v, DType dt, int precision) {
  const Decimal d = shortest(v, dt);
  const int nd = static_cast<int>(d.digits.size());
  Positional p;
  if (d.exp >= 0) {
    p.ip = d.digits.substr(0, std::min(nd, d.exp + 1));
    p.ip += std::string(std::max(0, d.exp + 1 - nd), '0');
    if (nd > d.exp + 1) p.fp = d.digits.substr(d.exp + 1);
  } else {
    p.ip = "0";
    p.fp = std::string(-d.exp - 1, '0') + d.digits;
  }
  strip_zeros(p.fp);
  if (static_cast<int>(p.fp.size()) > precision) {
    // up to 309 integer digits, the point and 100 decimals
    char buf[420];
    std::snprintf(buf, sizeof buf, "%.*f", precision, std::fabs(v));
    std::string s = buf;
    const size_t dot = s.find('.');  // none at precision 0
    p.ip = s.substr(0, dot);
    p.fp = dot == std::string::npos ? std::string() : s.substr(dot + 1);
    strip_zeros(p.fp);
  }
  if (d.neg) p.ip = "-" + p.ip;
  return p;
}

// dragon4_scientific(unique=True, precision, trim='.').
Scientific scientific(double v, DType dt, int precision) {
  Decimal d = shortest(v, dt);
  if (static_cast<int>(d.digits.size()) - 1 > precision) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%.*e", precision, std::fabs(v));
    const bool neg = d.neg;
    d = parse_sci(buf);
    d.neg = neg;
  }
  Scientific s;
  s.ip = (d.neg ? "-" : "") + d.digits.substr(0, 1);
  s.fp = d.digits.substr(1);
  s.exp = d.exp;
  return s;
}

std::string exp_str(int e, int min_digits) {
  std::string digits = std::to_string(e < 0 ? -e : e);
  if (static_cast<int>(digits.size()) < min_digits) digits = std::string(min_digits - digits.size(), '0') + digits;
  return std::string(e < 0 ? "-" : "+") + digits;
}

// Rounds a double to the dtype's precision (values already are; quotients
// and thresholds are computed in the dtype, as numpy does).
double in_dtype(double x, DType dt) {
  switch (dt) {
    case DType::float64: return x;
    case DType::float32: return static_cast<float>(x);
    case DType::float16: return static_cast<float>(float16_t(static_cast<float>(x)));
    default: return static_cast<float>(bfloat16_t(static_cast<float>(x)));
  }
}

class FloatFormat {
 public:
  FloatFormat(const std::vector<double>& vals, DType dt, int precision, SciMode mode)
      : dt_(dt), max_precision_(precision) {
    std::vector<double> finite;
    bool nonfinite = false, neginf = false;
    for (double v : vals) {
      if (std::isfinite(v)) finite.push_back(v);
      else {
        nonfinite = true;
        if (std::isinf(v) && v < 0) neginf = true;
      }
    }
    double mx = -1, mn = -1;
    for (double v : finite) {
      const double a = std::fabs(v);
      if (a == 0) continue;
      mx = std::max(mx, a);
      mn = mn < 0 ? a : std::min(mn, a);
    }
    if (mode == SciMode::on) {
      exp_ = !finite.empty();
    } else if (mx > 0 && mode == SciMode::auto_) {
      // numpy: 10 ** min(8, finfo(dtype).precision); bfloat16 (ml_dtypes) has precision 2.
      const int prec = dt == DType::float64 ? 15 : dt == DType::float32 ? 6 : dt == DType::float16 ? 3 : 2;
      const double cutoff = std::pow(10.0, std::min(8, prec));
      exp_ = mx >= cutoff || mn < in_dtype(1e-4, dt) || in_dtype(mx / mn, dt) > 1000.0;
    }
    if (finite.empty()) {
      pad_left_ = pad_right_ = 0;
    } else if (exp_) {
      for (double v : finite) {
        Scientific s = scientific(v, dt, max_precision_);
        exp_size_ = std::max(exp_size_, static_cast<int>(exp_str(s.exp, 2).size()) - 1);
        precision_ = std::max(precision_, static_cast<int>(s.fp.size()));
        pad_left_ = std::max(pad_left_, static_cast<int>(s.ip.size()));
      }
      pad_right_ = exp_size_ + 2 + precision_;
    } else {
      for (double v : finite) {
        Positional p = positional(v, dt, max_precision_);
        pad_left_ = std::max(pad_left_, static_cast<int>(p.ip.size()));
        pad_right_ = std::max(pad_right_, static_cast<int>(p.fp.size()));
      }
    }
    if (nonfinite) {
      const int offset = pad_right_ + 1;
      pad_left_ = std::max({pad_left_, 3 - offset, 3 + (neginf ? 1 : 0) - offset});
    }
  }

  std::string operator()(double v) const {
    if (!std::isfinite(v)) {
      std::string r = std::isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
      return pad(pad_left_ + pad_right_ + 1 - static_cast<int>(r.size())) + r;
    }
    if (exp_) {
      // numpy pads to `precision` digits with further digits of the exact
      // value (Dragon4's min_digits), i.e. the exact value rounded there.
      char buf[160];
      std::snprintf(buf, sizeof buf, "%.*e", precision_, std::fabs(v));
      const char* e = std::strchr(buf, 'e');
      std::string ip = (std::signbit(v) ? "-" : "") + std::string(buf, 1);
      std::string fp = precision_ > 0 ? std::string(buf + 2, static_cast<size_t>(e - buf - 2)) : std::string();
      return pad(pad_left_ - static_cast<int>(ip.size())) + ip + "." + fp + "e" + exp_str(std::atoi(e + 1), exp_size_);
    }
    Positional p = positional(v, dt_, max_precision_);
    return pad(pad_left_ - static_cast<int>(p.ip.size())) + p.ip + "." + p.fp +
           pad(pad_right_ - static_cast<int>(p.fp.size()));
  }

 private:
  static std::string pad(int n) { return std::string(n > 0 ? n : 0, ' '); }
  DType dt_;
  int max_precision_;  // the print option; precision_ is the fitted digit count
  bool exp_ = false;
  int pad_left_ = 0, pad_right_ = 0, precision_ = 0, exp_size_ = 0;
};

// ---- numpy's _formatArray --------------------------------------------------------

class Printer {
 public:
  Printer(const Tensor& t, const PrintOptions& opt)
      : shape_(t.shape()), strides_(t.strides()), base_(static_cast<const char*>(t.data_ptr())),
        item_(static_cast<int64_t>(t.itemsize())), opt_(opt), edge_(opt.edgeitems),
        summarise_(t.numel() > opt.threshold) {
    detail::visit_dtype(t.dtype(), [&](auto tag) { fit<typename decltype(tag)::type>(t.dtype()); });
  }

  std::string str() { return rec(0, 0, " ", opt_.linewidth); }

 private:
  template <class T>
  T read(int64_t off) const {
    T v;
    std::memcpy(&v, base_ + off * item_, sizeof(T));
    return v;
  }

  // Calls f(element offset) for each shown element, in order.
  template <class F>
  void for_shown(size_t axis, int64_t off, F&& f) const {
    if (axis == shape_.size()) return f(off);
    const int64_t n = shape_[axis];
    const bool sum = summarise_ && edge_ < n - edge_;  // n > 2 * edge, without overflow
    for (int64_t i = 0; i < n; ++i) {
      if (sum && i == edge_) i = n - edge_;
      for_shown(axis + 1, off + i * strides_[axis], f);
    }
  }

  template <class T>
  void fit(DType dt) {
    if constexpr (std::is_same_v<T, bool>) {
      const std::string t = shape_.empty() ? "True" : " True";
      fmt_ = [this, t](int64_t off) { return read<bool>(off) ? t : std::string("False"); };
    } else if constexpr (std::is_integral_v<T>) {
      // numpy's IntegerFormat: right-aligned to the widest of str(max), str(min).
      // In T itself (uint64 above INT64_MAX has no int64); `+` prints 8-bit types as numbers.
      T mx{}, mn{};
      bool first = true;
      for_shown(0, 0, [&](int64_t off) {
        const T v = read<T>(off);
        mx = first ? v : std::max(mx, v);
        mn = first ? v : std::min(mn, v);
        first = false;
      });
      const size_t w = std::max(std::to_string(+mx).size(), std::to_string(+mn).size());
      fmt_ = [this, w](int64_t off) {
        std::string s = std::to_string(+read<T>(off));
        return std::string(w > s.size() ? w - s.size() : 0, ' ') + s;
      };
    } else {
      std::vector<double> vals;
      for_shown(0, 0, [&](int64_t off) { vals.push_back(static_cast<double>(static_cast<detail::compute_t<T>>(read<T>(off)))); });
      auto ff = std::make_shared<FloatFormat>(vals, dt, opt_.precision, opt_.sci_mode);
      fmt_ = [this, ff](int64_t off) {
        return (*ff)(static_cast<double>(static_cast<detail::compute_t<T>>(read<T>(off))));
      };
    }
  }

  // numpy's _extendLine: wrap before `word` when the line would pass `width`,
  // unless the line holds nothing but the indent.
  // `width` may be negative (a small linewidth, deep nesting): then every word wraps.
  static void extend(std::string& s, std::string& line, const std::string& word, int64_t width,
                     const std::string& indent) {
    if (static_cast<int64_t>(line.size() + word.size()) > width && line.size() > indent.size()) {
      size_t end = line.find_last_not_of(' ');
      s += line.substr(0, end == std::string::npos ? 0 : end + 1) + "\n";
      line = indent;
    }
    line += word;
  }

  std::string rec(size_t axis, int64_t off, const std::string& indent, int width) const {
    if (axis == shape_.size()) return fmt_(off);
    const std::string next_indent = indent + " ";
    const int next_width = width - 1;  // room for the closing ']'
    const int64_t n = shape_[axis];
    const bool sum = summarise_ && edge_ < n - edge_;
    const int64_t lead = sum ? edge_ : 0, trail = sum ? edge_ : n;
    auto at = [&](int64_t i) { return off + i * strides_[axis]; };
    const size_t axes_left = shape_.size() - axis;
    std::string s;
    if (axes_left == 1) {
      const int64_t elem_width = int64_t{width} - 1;  // max(len(","), len("]"))
      std::string line = indent;
      for (int64_t i = 0; i < lead; ++i) {
        extend(s, line, rec(axis + 1, at(i), next_indent, next_width), elem_width, indent);
        line += ", ";
      }
      if (sum) {
        extend(s, line, "...", elem_width, indent);
        line += ", ";
      }
      for (int64_t i = trail; i > 1; --i) {
        extend(s, line, rec(axis + 1, at(n - i), next_indent, next_width), elem_width, indent);
        line += ", ";
      }
      extend(s, line, rec(axis + 1, at(n - 1), next_indent, next_width), elem_width, indent);
      s += line;
    } else {
      // rows end with ",", and blocks of 3-d and more with blank lines
      const std::string sep = "," + std::string(axes_left - 1, '\n');
      for (int64_t i = 0; i < lead; ++i) s += indent + rec(axis + 1, at(i), next_indent, next_width) + sep;
      if (sum) s += indent + "..." + sep;
      for (int64_t i = trail; i > 1; --i) s += indent + rec(axis + 1, at(n - i), next_indent, next_width) + sep;
      s += indent + rec(axis + 1, at(n - 1), next_indent, next_width);
    }
    return "[" + s.substr(indent.size()) + "]";
  }

  Shape shape_;
  Strides strides_;
  const char* base_;
  int64_t item_;
  PrintOptions opt_;
  int64_t edge_;
  bool summarise_;
  std::function<std::string(int64_t)> fmt_;
};

}  // namespace

std::string detail::shortest_str(double v, DType dt) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  if (dt == DType::float32 || dt == DType::float64) {
    auto r = dt == DType::float32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                                  : std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }
  // 16-bit: the digits shortest() found, read as a double and written by
  // to_chars (which keeps those digits and picks fixed or scientific).
  const Decimal d = shortest(v, dt);
  std::string s = (d.neg ? "-" : "") + d.digits.substr(0, 1) + "." + d.digits.substr(1) + "e" + std::to_string(d.exp);
  auto r = std::to_chars(buf, buf + sizeof buf, std::strtod(s.c_str(), nullptr));
  return std::string(buf, r.ptr);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  if (!t.is_realized()) detail::realize_for(t, "print");
  if (!t.device().is_cpu()) return os << t.cpu();  // waits for the device
  if (t.numel() == 0) return os << "[]";  // numpy prints every empty array as []
  Printer p(t, get_print_options());
  return os << p.str();
}

}  // namespace kiln
