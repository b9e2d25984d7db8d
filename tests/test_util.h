// kiln tests: shared helpers for making inputs of every kind and comparing
// against a float64 reference.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kt {

using namespace kiln;

/// A multi-index, one entry per axis.
using Index = std::vector<int64_t>;
/// The row-major multi-index of flat position i in shape s, and back.
inline Index unravel(int64_t i, const Shape& s) {
  Index ix(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    ix[d] = i % s[d];
    i /= s[d];
  }
  return ix;
}
inline int64_t ravel(const Index& ix, const Shape& s) {
  int64_t r = 0;
  for (size_t d = 0; d < s.size(); ++d) r = r * s[d] + ix[d];
  return r;
}

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::bool_,   DType::uint8,  DType::int8,   DType::int16,    DType::uint16,
                                       DType::int32,   DType::uint32, DType::int64,  DType::uint64,   DType::float16,
                                       DType::bfloat16, DType::float32, DType::float64};
  return v;
}

/// Random values for `dtype`, written through the dtype's own conversion.
/// Floats: normal(0, scale) with NaN, +inf, -inf, -0 sprinkled in when
/// `specials`; ints: in [lo, hi]; bool: 0/1.
inline Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, bool specials = false,
                            double scale = 2.0, int64_t lo = -20, int64_t hi = 20) {
  std::mt19937_64 rng(seed * 7919 + 17);
  int64_t n = checked_numel(shape);
  std::vector<double> v(n);
  std::normal_distribution<double> nd(0.0, scale);
  std::uniform_int_distribution<int64_t> id(lo, hi);
  for (int64_t i = 0; i < n; ++i) {
    if (is_floating(dtype)) {
      v[i] = nd(rng);
      if (specials) {
        int r = static_cast<int>(rng() % 16);
        if (r == 0) v[i] = std::numeric_limits<double>::quiet_NaN();
        if (r == 1) v[i] = std::numeric_limits<double>::infinity();
        if (r == 2) v[i] = -std::numeric_limits<double>::infinity();
        if (r == 3) v[i] = -0.0;
      }
    } else if (dtype == DType::bool_) {
      v[i] = static_cast<double>(rng() & 1);
    } else {
      int64_t a = id(rng);
      if (is_unsigned(dtype)) a = a < 0 ? -a : a;
      v[i] = static_cast<double>(a);
    }
  }
  Tensor d = Tensor::from_vector(v, shape);
  return d.to(dtype);
}

/// How an operand is laid out in memory.
enum class ViewKind { contiguous, transposed, strided, negative };
inline const char* view_name(ViewKind k) {
  static const char* n[] = {"contiguous", "transposed", "strided", "negative"};
  return n[static_cast<int>(k)];
}

/// A tensor equal in value to `x` but laid out as `kind`, built with the raw
/// view constructor (independent of the view ops under test):
/// transposed: storage in reversed axis order; strided: every other element
/// of a twice-as-large buffer; negative: reversed along every axis.
inline Tensor relayout(const Tensor& x, ViewKind kind) {
  if (kind == ViewKind::contiguous) return x.contiguous();
  const Shape& s = x.shape();
  const int64_t nd = static_cast<int64_t>(s.size());
  const size_t item = size_of(x.dtype());
  Tensor c = x.contiguous();
  std::vector<int64_t> idx(nd, 0);
  auto src_index = [&](const std::vector<int64_t>& ix) {
    int64_t off = 0, acc = 1;
    for (int64_t d = nd - 1; d >= 0; --d) { off += ix[d] * acc; acc *= s[d]; }
    return off;
  };
  int64_t n = x.numel();
  Strides st(nd);
  int64_t offset = 0, cap = std::max<int64_t>(n, 1);
  if (kind == ViewKind::transposed) {
    int64_t acc = 1;
    for (int64_t d = 0; d < nd; ++d) { st[d] = acc; acc *= std::max<int64_t>(s[d], 1); }
  } else if (kind == ViewKind::strided) {
    Strides cs = contiguous_strides(s);
    for (int64_t d = 0; d < nd; ++d) st[d] = cs[d] * 2;
    cap = std::max<int64_t>(2 * n, 1);
  } else {
    Strides cs = contiguous_strides(s);
    for (int64_t d = 0; d < nd; ++d) {
      st[d] = -cs[d];
      if (s[d] > 0) offset += (s[d] - 1) * cs[d];
    }
  }
  Buffer b = Buffer::allocate(cap * item);
  std::memset(b.data(), 0x5a, cap * item);  // garbage between strided elements
  if (n > 0) {
    const char* src = static_cast<const char*>(c.data_ptr());
    char* dst = static_cast<char*>(b.data());
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = offset;
      for (int64_t d = 0; d < nd; ++d) off += idx[d] * st[d];
      std::memcpy(dst + off * item, src + src_index(idx) * item, item);
      for (int64_t d = nd - 1; d >= 0; --d) {
        if (++idx[d] < s[d]) break;
        idx[d] = 0;
      }
    }
  } else {
    offset = 0;
  }
  return Tensor(b, x.dtype(), s, st, n > 0 ? offset : 0);
}

/// Element values as double (bool -> 0/1).
inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

/// True when got and want agree: both NaN, equal (incl. infinities), or
/// |got - want| <= atol + rtol * |want|.
inline bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

/// Relative tolerance appropriate for results stored in `d`.
inline double rtol_for(DType d) {
  switch (d) {
    case DType::float16: return 2e-3;
    case DType::bfloat16: return 1.6e-2;
    case DType::float32: return 2e-6;
    case DType::float64: return 1e-12;
    default: return 0.0;
  }
}

/// Checks every element; reports the first few mismatches with their index.
inline void check_all_close(const Tensor& got, const std::vector<double>& want, double rtol, double atol,
                            const std::string& what) {
  std::vector<double> g = values(got);
  REQUIRE_MESSAGE(g.size() == want.size(), what << ": got " << g.size() << " elements, want " << want.size());
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    if (!close(g[i], want[i], rtol, atol)) {
      ++bad;
      FAIL_CHECK(what << ": element " << i << " got " << g[i] << " want " << want[i]);
    }
  }
}

/// Sets kiln's thread count (set_num_threads) for a scope when given one,
/// and restores the count it found when the scope ends (a test that changes
/// it leaves the next test as it found it).
struct ThreadGuard {
  int saved = get_num_threads();
  ThreadGuard() = default;
  explicit ThreadGuard(int n) { set_num_threads(n); }
  ThreadGuard(const ThreadGuard&) = delete;
  ThreadGuard& operator=(const ThreadGuard&) = delete;
  ~ThreadGuard() { set_num_threads(saved); }
};

}  // namespace kt
