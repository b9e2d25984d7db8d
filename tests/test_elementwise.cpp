// Elementwise rows (Unary incl. Cast, Binary, Ternary): the table-driven
// checkers called by the op-table walk, and focused tests of the policies
// (weak scalars, promotion, Python division, NaN propagation, errors).
#include <algorithm>
#include <array>
#include <optional>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../tensor/ref_ops.h"
#include "op_table_checks.h"
#include "test_util.h"

namespace {

using namespace kiln;
using kt::ViewKind;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- inputs -----------------------------------------------------------------

/// A tensor of dtype d holding `v` (converted with cast semantics) in shape s.
Tensor make(const std::vector<double>& v, const Shape& s, DType d) {
  return Tensor::from_data(v.data(), DType::float64, v.size(), s).to(d);
}
Tensor make(const std::vector<double>& v, DType d) { return make(v, Shape{int64_t(v.size())}, d); }

/// The same tensor with every zero replaced by 7 (integer divisors).
Tensor nonzero_divisor(const Tensor& t) {
  std::vector<double> v = kt::values(t);
  for (double& x : v)
    if (x == 0.0) x = 7.0;
  return make(v, t.shape(), t.dtype());
}

bool is_divide(OpId op) { return op == OpId::FloorDivide || op == OpId::Remainder || op == OpId::Fmod; }

/// Random input `arg` of `op`: floats are normal(0, 2) with NaN, +-inf and -0
/// mixed in; integers in [-20, 20]; integer divisors nonzero and integer
/// exponents in [0, 5] (the ops raise otherwise); atanh mostly inside (-1, 1).
Tensor gen(OpId op, int arg, const Shape& s, DType d, uint64_t seed) {
  const bool ints = !is_floating(d);
  if (op == OpId::Pow && arg == 1 && ints) return kt::random_tensor(s, d, seed, false, 2.0, 0, 5);
  if (op == OpId::Atanh) return kt::random_tensor(s, d, seed, true, 0.7);
  Tensor t = kt::random_tensor(s, d, seed, true);
  if (is_divide(op) && arg == 1 && ints) t = nonzero_divisor(t);
  return t;
}

/// Values that exercise special cases of the float kernels: IEEE specials,
/// subnormals, the edges of the vectorised exp/log ranges, rounding ties.
const std::vector<double>& float_edges() {
  static const std::vector<double> v = {kNaN, kInf,  -kInf, -0.0, 0.0,   1e-40, -1e-40, 3e-39, -90.0, -87.5, 88.5,
                                        89.0, 100.0, -100,  710,  -710,  0.5,   1.5,    2.5,   -0.5,  -1.5,  -2.5,
                                        1.0,  -1.0,  0.999, -7.0, -6.5,  -9.5,  -20.0,  20.0,  1e6,   -1e6,  3.0};
  return v;
}

/// Integer edge values for dtype d: its minimum and maximum and neighbours.
std::vector<int64_t> int_edges(DType d) {
  int64_t lo = 0, hi = 1;
  switch (d) {
    case DType::uint8: hi = 255; break;
    case DType::int8: lo = -128; hi = 127; break;
    case DType::int16: lo = INT16_MIN; hi = INT16_MAX; break;
    case DType::uint16: hi = UINT16_MAX; break;
    case DType::uint32: hi = UINT32_MAX; break;
    case DType::uint64:  // as int64 bits: 0, UINT64_MAX, 1, UINT64_MAX - 1, 2^63 - 1, 2^63, ...
      return {0, -1, 1, -2, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 7, 0, -1};
    case DType::int32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); break;
    case DType::int64: lo = std::numeric_limits<int64_t>::min(); hi = std::numeric_limits<int64_t>::max(); break;
    default: break;
  }
  return {lo, hi, lo + 1, hi - 1, 0, 1, 7, lo, hi};
}

/// cast's rule for float -> uint64 exactly, as int64 bits (ref_cast's double
/// cannot hold every uint64): the truncation modulo 2^64 in (-2^63, 2^64), 2^63 outside.
int64_t u64_cast_bits(double x) {
  const double t = std::trunc(x);
  if (t >= 0 && t < 18446744073709551616.0) return static_cast<int64_t>(static_cast<uint64_t>(t));
  if (t < 0 && t > -9223372036854775808.0) return static_cast<int64_t>(t);
  return std::numeric_limits<int64_t>::min();
}

Tensor make_int(const std::vector<int64_t>& v, DType d) { return Tensor::from_vector(v).to(d); }

// ---- the reference side -----------------------------------------------------

/// Flat index into a tensor of shape s for each element of the broadcast
/// shape `out` (row-major).
std::vector<int64_t> broadcast_index(const Shape& s, const Shape& out) {
  const int64_t n = checked_numel(out);
  const size_t nd = out.size(), lead = nd - s.size();
  Strides cs = contiguous_strides(s);
  std::vector<int64_t> st(nd, 0), idx(nd, 0), r(n);
  for (size_t i = 0; i < s.size(); ++i) st[lead + i] = s[i] == 1 ? 0 : cs[i];
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (size_t i = 0; i < nd; ++i) off += idx[i] * st[i];
    r[e] = off;
    for (size_t i = nd; i-- > 0;) {
      if (++idx[i] < out[i]) break;
      idx[i] = 0;
    }
  }
  return r;
}

/// The dtype the values of input `arg` are computed in (the spec of each
/// dtype rule, see tensor/ops.def), or nullopt when the row reads raw
/// truth values (logical rows, where's condition).
std::optional<DType> compute_dtype(OpId op, int arg, const std::vector<DType>& ds, DType od) {
  const OpInfo& r = op_info(op);
  switch (r.category) {
    case OpCategory::Unary: return r.dtype_rule == DTypeRule::Float ? od : ds[0];
    case OpCategory::Binary:
      if (r.dtype_rule == DTypeRule::TrueDiv) return od;
      if (r.dtype_rule == DTypeRule::ToBool) return std::nullopt;
      return promote_types(ds[0], ds[1]);
    default:
      if (op == OpId::Where && arg == 0) return std::nullopt;
      return od;
  }
}

/// Smallest normal magnitude of d's results: below it the kernels promise
/// only absolute accuracy (see tensor/ref_ops.h). float16: its subnormal step.
double tiny(DType d) {
  switch (d) {
    case DType::float16: return 6e-8;
    case DType::float64: return 2.3e-308;
    default: return 1.2e-38;
  }
}

/// Runs `op` on `in` through apply (what the front-end functions call) and
/// compares every element with the float64 reference. Returns 1.
int compare(OpId op, const std::vector<Tensor>& in, const std::string& what, const Attrs& attrs = {}) {
  CAPTURE(what);
  std::vector<DType> ds;
  Shape shape = in[0].shape();
  for (const Tensor& t : in) {
    ds.push_back(t.dtype());
    shape = broadcast_shapes(shape, t.shape(), "test");
  }
  const DType od = result_dtype(op, ds, attrs);
  Tensor got = apply(op, std::span<const Tensor>(in), attrs);
  REQUIRE(got.dtype() == od);
  REQUIRE(got.shape() == shape);
  const int64_t n = checked_numel(shape);

  // Operand values converted to their compute dtype with the reference
  // conversion: doubles for the float path, exact int64 for the integer path
  // (integer compute dtypes only ever widen integers, so no conversion).
  const size_t k = in.size();
  std::vector<std::vector<double>> dv(k);
  std::vector<std::vector<int64_t>> iv(k);
  std::vector<std::vector<int64_t>> idx(k);
  bool int_path = op != OpId::Cast && op_info(op).category != OpCategory::Ternary;
  for (size_t j = 0; j < k; ++j) {
    // Cast reads its source raw (exactly, as int64, for integer sources).
    auto cd = op == OpId::Cast ? std::nullopt : compute_dtype(op, int(j), ds, od);
    dv[j] = kt::values(in[j]);
    if (cd)
      for (double& x : dv[j]) x = ref_cast(x, *cd);
    if (cd ? !is_floating(*cd) : !is_floating(ds[j])) iv[j] = in[j].to_vector<int64_t>();
    if (!cd || is_floating(*cd)) int_path = false;
    idx[j] = broadcast_index(in[j].shape(), shape);
  }

  const OpCategory cat = op_info(op).category;
  std::vector<double> want(n);
  std::vector<int64_t> want_int(n);
  for (int64_t e = 0; e < n; ++e) {
    auto d = [&](size_t j) { return dv[j][idx[j][e]]; };
    auto i = [&](size_t j) { return iv[j][idx[j][e]]; };
    double r;
    if (op == OpId::Cast) {
      r = ref_cast(d(0), attrs.dtype);
      if (!is_floating(od) && od != DType::bool_)
        want_int[e] = !is_floating(ds[0]) ? ref_cast_int(i(0), od)
                      : od == DType::uint64   ? u64_cast_bits(d(0))
                                              : static_cast<int64_t>(r);
    } else if (cat == OpCategory::Unary) {
      r = int_path ? double(ref_unary_int(op, i(0), ds[0])) : ref_unary(op, d(0));
      if (int_path && !is_floating(od) && od != DType::bool_) want_int[e] = ref_unary_int(op, i(0), ds[0]);
    } else if (cat == OpCategory::Binary) {
      const DType cd = promote_types(ds[0], ds[1]);
      r = int_path ? double(ref_binary_int(op, i(0), i(1), cd)) : ref_binary(op, d(0), d(1));
      if (int_path && !is_floating(od) && od != DType::bool_) want_int[e] = ref_binary_int(op, i(0), i(1), cd);
    } else {
      r = ref_ternary(op, d(0), d(1), d(2));
      if (!is_floating(od) && od != DType::bool_) want_int[e] = static_cast<int64_t>(r);
    }
    want[e] = ref_cast(r, od);
  }
  if (!is_floating(od) && od != DType::bool_) {
    // Integer results: exact, compared as int64 (doubles lose int64's low bits).
    std::vector<int64_t> g = got.to_vector<int64_t>();
    int bad = 0;
    for (int64_t e = 0; e < n && bad < 5; ++e)
      if (g[e] != want_int[e]) {
        ++bad;
        FAIL_CHECK(what << ": element " << e << " got " << g[e] << " want " << want_int[e]);
      }
  } else {
    kt::check_all_close(got, want, kt::rtol_for(od), ref_atol(op, od) + (is_floating(od) ? tiny(od) : 0.0), what);
  }
  return 1;
}

/// True when result_dtype accepts these input dtypes; refusals must make the
/// op itself throw DTypeError too (checked on `in`).
bool accepted(OpId op, const std::vector<Tensor>& in, const Attrs& attrs = {}) {
  std::vector<DType> ds;
  for (const Tensor& t : in) ds.push_back(t.dtype());
  try {
    (void)result_dtype(op, ds, attrs);
    return true;
  } catch (const DTypeError&) {
    CHECK_THROWS_AS(apply(op, std::span<const Tensor>(in), attrs), DTypeError);
    return false;
  }
}

std::string label(OpId op, const std::vector<Tensor>& in, const char* view) {
  std::string s(op_name(op));
  for (const Tensor& t : in) {
    s += ' ';  // appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on " " + std::string&&
    s += name(t.dtype());
    s += shape_str(t.shape());
  }
  return s + " " + view;
}

const std::vector<Shape>& unary_shapes() {
  static const std::vector<Shape> v = {{}, {0}, {1}, {5}, {3, 1, 4}, {2, 0, 3}, {4, 7}, {2, 3, 5}, {600}};
  return v;
}

const std::vector<std::pair<Shape, Shape>>& binary_shapes() {
  static const std::vector<std::pair<Shape, Shape>> v = {
      {{}, {}},       {{5}, {5}},        {{0}, {0}},          {{1}, {1}},          {{3, 1}, {1, 4}},
      {{4}, {2, 3, 4}}, {{}, {3}},       {{3}, {}},           {{2, 0, 3}, {3}},    {{3, 1, 4}, {3, 5, 1}},
      {{2, 3}, {2, 3}}, {{2, 1, 3}, {2, 4, 3}}, {{600}, {600}}, {{7, 300}, {300}}, {{600}, {}}};
  return v;
}

/// Layout pairs for the operands: every ViewKind appears on each side.
const std::vector<std::pair<ViewKind, ViewKind>>& view_pairs() {
  static const std::vector<std::pair<ViewKind, ViewKind>> v = {
      {ViewKind::contiguous, ViewKind::contiguous}, {ViewKind::transposed, ViewKind::contiguous},
      {ViewKind::contiguous, ViewKind::strided},    {ViewKind::negative, ViewKind::negative},
      {ViewKind::strided, ViewKind::transposed}};
  return v;
}

/// Large operands take the loop engine's multi-threaded path.
bool big_dtype(DType d) { return d == DType::float32 || d == DType::int32; }

}  // namespace

namespace kt {

int check_unary_op(OpId op) {
  int cases = 0;
  uint64_t seed = 1000 + static_cast<uint64_t>(op) * 101;
  const bool is_cast = op == OpId::Cast;
  for (DType d : all_dtypes()) {
    // Cast: every source dtype to every target dtype.
    std::vector<DType> targets = is_cast ? all_dtypes() : std::vector<DType>{d};
    for (DType to : targets) {
      Attrs attrs;
      attrs.dtype = to;
      if (!accepted(op, {gen(op, 0, {2}, d, 1)}, attrs)) continue;
      for (const Shape& s : unary_shapes()) {
        Tensor x = gen(op, 0, s, d, ++seed);
        for (ViewKind k : {ViewKind::contiguous, ViewKind::transposed, ViewKind::strided, ViewKind::negative})
          cases += compare(op, {relayout(x, k)}, label(op, {x}, view_name(k)), attrs);
      }
      if (is_floating(d)) {
        Tensor e = make(float_edges(), d);
        cases += compare(op, {e}, label(op, {e}, "edges"), attrs);
        cases += compare(op, {relayout(e, ViewKind::negative)}, label(op, {e}, "edges negative"), attrs);
      } else if (d != DType::bool_) {
        Tensor e = make_int(int_edges(d), d);
        cases += compare(op, {e}, label(op, {e}, "int edges"), attrs);
      }
      if (big_dtype(d) && !is_cast) {
        Tensor big = gen(op, 0, {40000}, d, ++seed);
        cases += compare(op, {big}, label(op, {big}, "big"), attrs);
        Tensor mat = gen(op, 0, {200, 180}, d, ++seed);
        cases += compare(op, {relayout(mat, ViewKind::transposed)}, label(op, {mat}, "big transposed"), attrs);
      }
    }
  }
  return cases;
}

int check_binary_op(OpId op) {
  int cases = 0;
  uint64_t seed = 5000 + static_cast<uint64_t>(op) * 131;
  // Same-dtype operands: every shape pair and layout pair.
  for (DType d : all_dtypes()) {
    if (!accepted(op, {gen(op, 0, {2}, d, 1), gen(op, 1, {2}, d, 2)})) continue;
    for (const auto& [sa, sb] : binary_shapes()) {
      Tensor a = gen(op, 0, sa, d, ++seed), b = gen(op, 1, sb, d, ++seed);
      for (const auto& [ka, kb] : view_pairs())
        cases += compare(op, {relayout(a, ka), relayout(b, kb)},
                         label(op, {a, b}, (std::string(view_name(ka)) + "/" + view_name(kb)).c_str()));
    }
    if (is_floating(d)) {
      // Every pair of special values.
      std::vector<double> ea, eb;
      for (double x : float_edges())
        for (double y : float_edges()) {
          ea.push_back(x);
          eb.push_back(y);
        }
      Tensor a = make(ea, d), b = make(eb, d);
      cases += compare(op, {a, b}, label(op, {a, b}, "edge pairs"));
    } else if (d != DType::bool_) {
      // Overflow and INT_MIN // -1 (divisors nonzero, exponents >= 0).
      std::vector<int64_t> ea = int_edges(d), eb = int_edges(d);
      std::reverse(eb.begin(), eb.end());
      if (is_signed(d)) eb[0] = -1;
      for (int64_t& y : eb) {
        if (is_divide(op) && y == 0) y = -1;
        if (op == OpId::Pow) y = y < 0 || y > 70 ? 3 : y;
        if (!is_signed(d) && y < 0) y = 1;
      }
      for (int64_t& y : eb)
        if (!is_signed(d) && y == -1) y = 1;
      Tensor a = make_int(ea, d), b = make_int(eb, d);
      cases += compare(op, {a, b}, label(op, {a, b}, "int edges"));
    }
    if (big_dtype(d)) {
      Tensor a = gen(op, 0, {40000}, d, ++seed), b = gen(op, 1, {40000}, d, ++seed);
      cases += compare(op, {a, b}, label(op, {a, b}, "big"));
      Tensor s = gen(op, 1, {}, d, ++seed);
      cases += compare(op, {a, s}, label(op, {a, s}, "big scalar"));
      Tensor m = gen(op, 0, {200, 180}, d, ++seed), r = gen(op, 1, {180}, d, ++seed);
      cases += compare(op, {relayout(m, ViewKind::transposed), r}, label(op, {m, r}, "big transposed"));
    }
  }
  // Mixed dtypes: promotion (checked against promote_types through
  // result_dtype) and conversion to the compute dtype.
  for (DType da : all_dtypes())
    for (DType db : all_dtypes()) {
      if (da == db) continue;
      Tensor a = gen(op, 0, {3, 1}, da, ++seed), b = gen(op, 1, {1, 4}, db, ++seed);
      if (!accepted(op, {a, b})) continue;
      cases += compare(op, {a, b}, label(op, {a, b}, "mixed"));
      cases += compare(op, {relayout(a, ViewKind::negative), relayout(b, ViewKind::strided)},
                       label(op, {a, b}, "mixed views"));
    }
  return cases;
}

int check_ternary_op(OpId op) {
  int cases = 0;
  uint64_t seed = 9000 + static_cast<uint64_t>(op) * 71;
  const std::vector<std::array<Shape, 3>> shapes = {
      {Shape{}, Shape{}, Shape{}},          {Shape{5}, Shape{5}, Shape{5}},          {Shape{0}, Shape{0}, Shape{}},
      {Shape{3, 1, 1}, Shape{1, 4, 1}, Shape{1, 1, 5}}, {Shape{}, Shape{3}, Shape{2, 3}}, {Shape{2, 0, 3}, Shape{3}, Shape{1}},
      {Shape{1}, Shape{4, 1}, Shape{4, 6}}, {Shape{600}, Shape{600}, Shape{}}, {Shape{7, 300}, Shape{300}, Shape{7, 1}}};
  const std::vector<std::array<ViewKind, 3>> views = {
      {ViewKind::contiguous, ViewKind::contiguous, ViewKind::contiguous},
      {ViewKind::transposed, ViewKind::strided, ViewKind::negative},
      {ViewKind::negative, ViewKind::contiguous, ViewKind::transposed},
      {ViewKind::strided, ViewKind::negative, ViewKind::strided}};
  for (DType d : all_dtypes()) {
    // where: the condition in another dtype than the values (any dtype works).
    DType d0 = op == OpId::Where ? all_dtypes()[(static_cast<size_t>(d) + 3) % all_dtypes().size()] : d;
    if (!accepted(op, {gen(op, 0, {2}, d0, 1), gen(op, 1, {2}, d, 2), gen(op, 2, {2}, d, 3)})) continue;
    for (const auto& s : shapes) {
      Tensor x0 = gen(op, 0, s[0], d0, ++seed), x1 = gen(op, 1, s[1], d, ++seed), x2 = gen(op, 2, s[2], d, ++seed);
      for (const auto& v : views)
        cases += compare(op, {relayout(x0, v[0]), relayout(x1, v[1]), relayout(x2, v[2])},
                         label(op, {x0, x1, x2}, view_name(v[0])));
    }
    if (big_dtype(d)) {
      Tensor x0 = gen(op, 0, {40000}, d0, ++seed), x1 = gen(op, 1, {40000}, d, ++seed), x2 = gen(op, 2, {}, d, ++seed);
      cases += compare(op, {x0, x1, x2}, label(op, {x0, x1, x2}, "big"));
    }
  }
  // Mixed value dtypes are promoted (where: also the condition's dtype varies).
  for (DType da : all_dtypes())
    for (DType db : {DType::bool_, DType::int8, DType::int32, DType::float16, DType::float32}) {
      Tensor c = gen(op, 0, {2, 3}, op == OpId::Where ? DType::float32 : da, ++seed);
      Tensor a = gen(op, 1, {3}, da, ++seed), b = gen(op, 2, {2, 1}, db, ++seed);
      if (!accepted(op, {c, a, b})) continue;
      cases += compare(op, {c, a, b}, label(op, {c, a, b}, "mixed"));
    }
  return cases;
}

}  // namespace kt

// ---- focused tests ------------------------------------------------------------

namespace {

std::vector<double> vals(const Tensor& t) { return kt::values(t); }

void check_values(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  kt::check_all_close(got, want, 0.0, 0.0, what);
}

}  // namespace

TEST_SUITE("elementwise") {
  TEST_CASE("weak scalars keep the tensor's dtype within its kind") {
    Tensor f = make({1.5, -2.0}, DType::float32);
    CHECK((f * 2.0).dtype() == DType::float32);
    CHECK((2.0 * f).dtype() == DType::float32);
    check_values(f * 2.0, {3.0, -4.0}, "float32 * 2.0");
    Tensor h = make({1.5, -2.0}, DType::float16);
    CHECK((h + 1.0).dtype() == DType::float16);
    Tensor i = make({3, -4}, DType::int32);
    CHECK((i + 1).dtype() == DType::int32);
    check_values(i + 1, {4, -3}, "int32 + 1");
    CHECK((i * 0.5).dtype() == DType::float32);
    check_values(i * 0.5, {1.5, -2.0}, "int32 * 0.5");
    Tensor b = make({1, 0}, DType::bool_);
    CHECK((b + 1).dtype() == DType::int64);
    check_values(b + 1, {2, 1}, "bool + 1");
    CHECK((b * 2.5).dtype() == DType::float32);
    CHECK((i / 2).dtype() == DType::float32);  // true division
    check_values(i / 2, {1.5, -2.0}, "int32 / 2");
    check_values(1 - i, {-2, 5}, "1 - int32");
    check_values(12 / make({3, -4}, DType::float64), {4.0, -3.0}, "12 / float64");
    CHECK((i < 0.5).dtype() == DType::bool_);
    CHECK(scalar_tensor(2.5, DType::int32).dtype() == DType::float32);
    CHECK(scalar_tensor(2, DType::uint8).dtype() == DType::uint8);
    CHECK(scalar_tensor(true, DType::int8).dtype() == DType::int8);
    check_values(pow(i, 2), {9, 16}, "int32 ** 2");
    CHECK(pow(i, 2).dtype() == DType::int32);
    check_values(maximum(i, 0), {3, 0}, "maximum(int32, 0)");
    check_values(minimum(f, 0.0), {0.0, -2.0}, "minimum(float32, 0.0)");
    check_values(sub(f, 1), {0.5, -3.0}, "sub(float32, 1)");
    check_values(div(f, 2), {0.75, -1.0}, "div(float32, 2)");
    check_values(add(i, 1), {4, -3}, "add(int32, 1)");
    check_values(mul(i, -1), {-3, 4}, "mul(int32, -1)");
  }

  TEST_CASE("numpy promotion between tensors") {
    auto dt = [](DType a, DType b) {
      return add(make({1}, a), make({1}, b)).dtype();
    };
    // numpy.promote_types
    CHECK(dt(DType::int32, DType::float32) == DType::float64);
    CHECK(dt(DType::uint8, DType::int8) == DType::int16);  // numpy 2
    CHECK(dt(DType::int8, DType::float16) == DType::float16);
    CHECK(dt(DType::int64, DType::float16) == DType::float64);
    CHECK(dt(DType::float16, DType::bfloat16) == DType::float32);
    CHECK(dt(DType::bool_, DType::int8) == DType::int8);
    CHECK(dt(DType::uint8, DType::float16) == DType::float16);
    CHECK(dt(DType::int32, DType::int64) == DType::int64);
    check_values(add(make({1.5}, DType::float32), make({2}, DType::int32)), {3.5}, "float32 + int32");
    CHECK(div(make({1}, DType::int64), make({2}, DType::int64)).dtype() == DType::float32);
    CHECK(atan2(make({1}, DType::int32), make({1}, DType::int32)).dtype() == DType::float32);
    CHECK(exp(make({1}, DType::int64)).dtype() == DType::float32);
    CHECK(exp(make({1}, DType::float16)).dtype() == DType::float16);
    CHECK(abs(make({-1}, DType::int8)).dtype() == DType::int8);
  }

  TEST_CASE("Python floor_divide and remainder signs, C fmod") {
    for (DType d : {DType::int32, DType::int64, DType::float32, DType::float64}) {
      CAPTURE(d);
      Tensor a = make({7, -7, 7, -7, 6, -6}, d), b = make({2, 2, -2, -2, -3, 3}, d);
      // Python: 7 // 2, -7 // 2, 7 // -2, -7 // -2, 6 // -3, -6 // 3
      check_values(floor_divide(a, b), {3, -4, -4, 3, -2, -2}, "floor_divide");
      check_values(remainder(a, b), {1, 1, -1, -1, 0, 0}, "remainder");
      check_values(fmod(a, b), {1, -1, 1, -1, 0, 0}, "fmod");
    }
    // Zero results take the divisor's sign (numpy: remainder(3.0, -3.0) = -0.0,
    // remainder(-3.0, 3.0) = 0.0, floor_divide(0.0, -3.0) = -0.0,
    // fmod(-3.0, 3.0) = -0.0).
    Tensor a = make({3.0, -3.0, 0.0, -0.0}, DType::float64), b = make({-3.0, 3.0, -3.0, 3.0}, DType::float64);
    std::vector<double> r = vals(remainder(a, b)), q = vals(floor_divide(a, b)), f = vals(fmod(a, b));
    CHECK((r[0] == 0.0 && std::signbit(r[0])));
    CHECK((r[1] == 0.0 && !std::signbit(r[1])));
    CHECK((r[2] == 0.0 && std::signbit(r[2])));
    CHECK((r[3] == 0.0 && !std::signbit(r[3])));
    CHECK(q == std::vector<double>{-1.0, -1.0, -0.0, -0.0});
    CHECK(std::signbit(q[2]));
    CHECK(std::signbit(q[3]));
    CHECK(std::signbit(f[1]));
    // Python: 5.0 // inf == 0.0, -5.0 // inf == -1.0, -5.0 % inf == inf,
    // 1.0 // 0.0 -> inf (numpy), 1.0 % 0.0 -> nan (numpy).
    Tensor x = make({5.0, -5.0, 1.0, -1.0, 0.0}, DType::float32);
    Tensor y = make({kInf, kInf, 0.0, 0.0, 0.0}, DType::float32);
    std::vector<double> fq = vals(floor_divide(x, y)), fr = vals(remainder(x, y));
    CHECK(fq[0] == 0.0);
    CHECK(fq[1] == -1.0);
    CHECK(fr[0] == 5.0);
    CHECK(fr[1] == kInf);
    CHECK(fq[2] == kInf);
    CHECK(fq[3] == -kInf);
    CHECK(std::isnan(fq[4]));
    CHECK(std::isnan(fr[2]));
  }

  TEST_CASE("integer division by zero raises ValueError; true division does not") {
    for (DType d : {DType::uint8, DType::int8, DType::int32, DType::int64}) {
      CAPTURE(d);
      Tensor a = make({1, 2, 3}, d), b = make({1, 0, 2}, d);
      CHECK_THROWS_AS(floor_divide(a, b), ValueError);
      CHECK_THROWS_AS(remainder(a, b), ValueError);
      CHECK_THROWS_AS(fmod(a, b), ValueError);
      CHECK_THROWS_AS(floor_divide(a, make({0}, Shape{}, d)), ValueError);
      // Strided divisor: the check reads views too.
      CHECK_THROWS_AS(floor_divide(a, kt::relayout(b, ViewKind::negative)), ValueError);
    }
    CHECK_THROWS_WITH(floor_divide(make({1}, DType::int32), make({0}, DType::int32)),
                      doctest::Contains("floor_divide: integer division by zero"));
    // A zero divisor that meets no element (empty result) is not an error.
    CHECK(floor_divide(make({}, Shape{0}, DType::int32), make({0}, Shape{}, DType::int32)).numel() == 0);
    // Mixed int/float compute in float: x / 0 is inf or nan.
    std::vector<double> q = vals(floor_divide(make({1, 0}, DType::int32), make({0, 0}, DType::float32)));
    CHECK(q[0] == kInf);
    CHECK(std::isnan(q[1]));
    std::vector<double> d = vals(div(make({1, -1, 0}, DType::int32), make({0, 0, 0}, DType::int32)));
    CHECK(d[0] == kInf);
    CHECK(d[1] == -kInf);
    CHECK(std::isnan(d[2]));
  }

  TEST_CASE("INT_MIN // -1 wraps; integer abs/neg/add wrap") {
    const int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
    Tensor a = Tensor::from_vector<int32_t>({mn, mn, mx});
    Tensor m1 = Tensor::from_vector<int32_t>({-1, -1, 1});
    CHECK(floor_divide(a, m1).to_vector<int32_t>() == std::vector<int32_t>{mn, mn, mx});
    CHECK(remainder(a, m1).to_vector<int32_t>() == std::vector<int32_t>{0, 0, 0});
    CHECK(fmod(a, m1).to_vector<int32_t>() == std::vector<int32_t>{0, 0, 0});
    const int64_t mn64 = std::numeric_limits<int64_t>::min();
    CHECK(floor_divide(Tensor::from_vector<int64_t>({mn64}), Tensor::from_vector<int64_t>({-1})).to_vector<int64_t>() ==
          std::vector<int64_t>{mn64});
    CHECK(floor_divide(make({-128}, DType::int8), make({-1}, DType::int8)).to_vector<int32_t>() ==
          std::vector<int32_t>{-128});
    CHECK(abs(a).to_vector<int32_t>() == std::vector<int32_t>{mn, mn, mx});  // numpy: abs(INT_MIN) == INT_MIN
    CHECK(neg(a).to_vector<int32_t>() == std::vector<int32_t>{mn, mn, -mx});
    CHECK((a + Tensor::from_vector<int32_t>({-1, 0, 1})).to_vector<int32_t>() == std::vector<int32_t>{mx, mn, mn});
    CHECK(neg(make({1, 0}, DType::uint8)).to_vector<int32_t>() == std::vector<int32_t>{255, 0});
    CHECK(square(make({16}, DType::uint8)).to_vector<int32_t>() == std::vector<int32_t>{0});
  }

  TEST_CASE("integer pow: exact, wrapping, negative exponents raise") {
    Tensor b = make({2, -3, 0, 5, 2}, DType::int32), e = make({10, 3, 0, 0, 31}, DType::int32);
    CHECK(pow(b, e).to_vector<int32_t>() == std::vector<int32_t>{1024, -27, 1, 1, std::numeric_limits<int32_t>::min()});
    CHECK(pow(make({2}, DType::int8), make({7}, DType::int8)).to_vector<int32_t>() == std::vector<int32_t>{-128});
    CHECK_THROWS_AS(pow(make({2}, DType::int32), make({-1}, DType::int32)), ValueError);
    CHECK_THROWS_AS(pow(make({2}, DType::int64), -1), ValueError);
    CHECK_THROWS_WITH(pow(make({2}, DType::int32), make({-1}, DType::int32)),
                      doctest::Contains("pow: integers to negative integer powers are not allowed"));
    // Float exponents make it a float pow.
    check_values(pow(make({4}, DType::int32), 0.5), {2.0}, "int32 ** 0.5");
    CHECK(pow(make({4}, DType::int32), 0.5).dtype() == DType::float32);
  }

  TEST_CASE("round is half to even") {
    for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64}) {
      CAPTURE(d);
      // numpy.round: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0, -1.5 -> -2, -2.5 -> -2, 3.5 -> 4
      Tensor x = make({0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.25}, d);
      std::vector<double> r = vals(round(x));
      CHECK(r == std::vector<double>{0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 4.0, 0.0});
      CHECK(std::signbit(r[3]));
    }
    // 0.49999997f is below one half: rounds to 0 (a floor(x + 0.5) would give 1).
    CHECK(round(Tensor::from_vector<float>({0.49999997f})).item<float>() == 0.0f);
    CHECK(round(make({7}, DType::int32)).to_vector<int32_t>() == std::vector<int32_t>{7});
  }

  TEST_CASE("maximum, minimum, relu, clamp and sign propagate NaN") {
    for (DType d : {DType::float16, DType::float32, DType::float64}) {
      CAPTURE(d);
      Tensor a = make({kNaN, 1.0, kNaN, 2.0}, d), b = make({1.0, kNaN, kNaN, 3.0}, d);
      std::vector<double> mx = vals(maximum(a, b)), mn = vals(minimum(a, b));
      for (int i = 0; i < 3; ++i) {
        CHECK(std::isnan(mx[i]));
        CHECK(std::isnan(mn[i]));
      }
      CHECK(mx[3] == 3.0);
      CHECK(mn[3] == 2.0);
      std::vector<double> r = vals(relu(make({kNaN, -1.0, 2.0}, d)));
      CHECK(std::isnan(r[0]));
      CHECK(r[1] == 0.0);
      CHECK(r[2] == 2.0);
      std::vector<double> s = vals(sign(make({kNaN, -3.0, 0.0, 2.0}, d)));
      CHECK(std::isnan(s[0]));
      CHECK(std::vector<double>(s.begin() + 1, s.end()) == std::vector<double>{-1.0, 0.0, 1.0});
      std::vector<double> c = vals(clamp(make({kNaN, -2.0, 0.5, 9.0}, d), 0.0, 1.0));
      CHECK(std::isnan(c[0]));
      CHECK(std::vector<double>(c.begin() + 1, c.end()) == std::vector<double>{0.0, 0.5, 1.0});
      // A NaN bound gives NaN (numpy.clip).
      std::vector<double> cb = vals(clamp(make({0.5}, d), make({kNaN}, d), make({1.0}, d)));
      CHECK(std::isnan(cb[0]));
    }
  }

  TEST_CASE("clamp bounds: optional, tensors, dtypes") {
    Tensor x = make({-5, 0, 5}, DType::int32);
    check_values(clamp(x, std::nullopt, 2), {-5, 0, 2}, "clamp hi only");
    check_values(clamp(x, -1, std::nullopt), {-1, 0, 5}, "clamp lo only");
    CHECK(clamp(x, -1, 2).dtype() == DType::int32);
    CHECK(clamp(x, -0.5, 2).dtype() == DType::float32);  // weak float scalar with an int tensor
    check_values(clamp(x, -0.5, 2), {-0.5, 0, 2}, "clamp float bound");
    check_values(clamp(make({-kInf, 3.0}, DType::float32), std::nullopt, 1.0), {-kInf, 1.0}, "float no lo");
    CHECK_THROWS_AS(clamp(x, std::nullopt, std::nullopt), ValueError);
    check_values(clamp(x, make({0, -9, 0}, DType::int32), make({1}, DType::int32)), {0, 0, 1}, "tensor bounds");
    CHECK_THROWS_AS(clamp(make({1}, DType::bool_), false, true), DTypeError);
  }

  TEST_CASE("where and masked_fill") {
    Tensor c = make({1, 0, 1}, DType::bool_);
    check_values(where(c, make({1, 2, 3}, DType::int32), make({-1, -2, -3}, DType::int32)), {1, -2, 3}, "where");
    // Condition of any dtype: nonzero and NaN are true.
    check_values(where(make({kNaN, 0.0, -0.0}, DType::float32), 1.0 * make({1, 1, 1}, DType::float32), 0.0),
                 {1, 0, 0}, "where float condition");
    Tensor w = where(c, make({1, 2, 3}, DType::int32), 0.5);
    CHECK(w.dtype() == DType::float32);
    check_values(w, {1, 0.5, 3}, "where scalar b");
    check_values(where(c, 7, make({1, 2, 3}, DType::int8)), {7, 2, 7}, "where scalar a");
    CHECK(where(c, 7, make({1, 2, 3}, DType::int8)).dtype() == DType::int8);
    CHECK(where(c, make({1}, DType::int32), make({1.0}, DType::float32)).dtype() == DType::float64);
    // masked_fill keeps x's dtype and broadcasts the mask.
    Tensor x = make({1, 2, 3, 4, 5, 6}, Shape{2, 3}, DType::int32);
    Tensor m = masked_fill(x, make({1, 0, 1}, DType::bool_), 0.5);
    CHECK(m.dtype() == DType::int32);
    check_values(m, {0, 2, 0, 0, 5, 0}, "masked_fill");
    check_values(masked_fill(x, make({0, 1}, Shape{2, 1}, DType::bool_), -1), {1, 2, 3, -1, -1, -1},
                 "masked_fill rows");
    CHECK_THROWS_AS(masked_fill(x, make({1, 0}, DType::bool_), 0), ShapeError);
    // The mask must be bool (as PyTorch's): a float or integer mask used to be
    // read as where's condition (0.5 and NaN filled) without a word.
    CHECK_THROWS_WITH_AS(masked_fill(x, make({0.5, 0, 1}, DType::float32), 9),
                         "masked_fill: mask must have dtype bool, got float32 (make one with a comparison, e.g. mask != 0)",
                         DTypeError);
    CHECK_THROWS_WITH_AS(masked_fill(x, make({1, 0, 1}, DType::uint8), 9), doctest::Contains("got uint8"), DTypeError);
    CHECK_THROWS_WITH_AS(x.clone().masked_fill_(make({1, 0, 1}, DType::int64), 9), doctest::Contains("masked_fill"),
                         DTypeError);
    check_values(masked_fill(x, make({0.5, 0, 1}, DType::float32) != 0, 9), {9, 2, 9, 9, 5, 9}, "masked_fill mask != 0");
    CHECK_THROWS_AS(masked_fill(make({1, 2}, DType::int32), make({1, 0, 1, 0}, Shape{2, 2}, DType::bool_), 0),
                    ShapeError);
    CHECK_THROWS_WITH(where(c, make({1, 2}, DType::int32), make({1, 2, 3}, DType::int32)),
                      doctest::Contains("where: cannot broadcast shapes"));
  }

  TEST_CASE("comparisons and logical ops give bool tensors") {
    Tensor a = make({1, 2, 3}, DType::int32), b = make({3, 2, 1}, DType::float32);
    CHECK((a < b).dtype() == DType::bool_);
    check_values(a < b, {1, 0, 0}, "<");
    check_values(a <= b, {1, 1, 0}, "<=");
    check_values(a > b, {0, 0, 1}, ">");
    check_values(a >= b, {0, 1, 1}, ">=");
    check_values(a == b, {0, 1, 0}, "==");
    check_values(a != b, {1, 0, 1}, "!=");
    check_values(a == 2, {0, 1, 0}, "== scalar");
    check_values(2 < a, {0, 0, 1}, "scalar <");
    check_values(a > 1.5, {0, 1, 1}, "> float scalar");
    CHECK((a != 2).dtype() == DType::bool_);
    // Comparisons compute in the promoted dtype (numpy): int32 vs float32 in float64.
    check_values(make({16777217}, DType::int32) == make({16777216}, DType::float32), {0}, "int32 vs float32");
    Tensor nan = make({kNaN, 1.0}, DType::float32);
    check_values(nan == nan, {0, 1}, "NaN == NaN");
    check_values(nan != nan, {1, 0}, "NaN != NaN");
    check_values(logical_and(make({kNaN, 0.0, 2.0}, DType::float32), make({1, 1, 0}, DType::int8)), {1, 0, 0},
                 "logical_and");
    check_values(logical_or(make({0, 0, 3}, DType::int32), make({0.0, 0.5, 0.0}, DType::float64)), {0, 1, 1},
                 "logical_or");
    check_values(logical_xor(make({1, 1, 0}, DType::bool_), make({1, 0, 0}, DType::uint8)), {0, 1, 0},
                 "logical_xor");
    check_values(logical_not(make({kNaN, 0.0, -0.0, 3.0}, DType::float16)), {0, 1, 1, 0}, "logical_not");
    CHECK(logical_and(make({1}, DType::float16), make({1}, DType::bfloat16)).dtype() == DType::bool_);
    check_values(isnan(make({kNaN, kInf, 1.0}, DType::bfloat16)), {1, 0, 0}, "isnan");
    check_values(isinf(make({kNaN, -kInf, 1.0}, DType::float64)), {0, 1, 0}, "isinf");
    check_values(isfinite(make({kNaN, kInf, 1.0}, DType::float32)), {0, 0, 1}, "isfinite");
    check_values(isfinite(make({1, 2}, DType::int32)), {1, 1}, "isfinite int");
  }

  TEST_CASE("errors name the op, what was expected and what came") {
    Tensor a = zeros({3, 4}), b = zeros({5});
    CHECK_THROWS_AS(add(a, b), ShapeError);
    CHECK_THROWS_WITH(add(a, b), "add: cannot broadcast shapes [3, 4] and [5]");
    CHECK_THROWS_WITH(a * b, "mul: cannot broadcast shapes [3, 4] and [5]");
    Tensor t = make({1, 0}, DType::bool_);
    CHECK_THROWS_AS(sub(t, t), DTypeError);
    CHECK_THROWS_WITH(sub(t, t), doctest::Contains("sub: bool tensors are not supported"));
    CHECK_THROWS_AS(neg(t), DTypeError);
    CHECK_THROWS_AS(-t, DTypeError);
    CHECK_THROWS_AS(floor_divide(t, t), DTypeError);
    CHECK_THROWS_AS(clamp(t, t, t), DTypeError);
    CHECK_NOTHROW(t + t);  // bool + bool is logical or
    check_values(t + t, {1, 0}, "bool + bool");
    check_values(t * make({1, 1}, DType::bool_), {1, 0}, "bool * bool");
    CHECK_THROWS_AS(add(Tensor(), a), ValueError);
    CHECK_THROWS_AS(exp(Tensor()), ValueError);
  }

  TEST_CASE("cast follows numpy's conversions") {
    Tensor f = make({-3.7, 3.7, 0.0, 1e10, kNaN}, DType::float64);
    // numpy (x86): trunc toward zero; out of range and NaN give the minimum.
    CHECK(cast(f, DType::int32).to_vector<int64_t>() ==
          std::vector<int64_t>{-3, 3, 0, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::min()});
    CHECK(cast(make({-3.7, 300.0}, DType::float32), DType::uint8).to_vector<int64_t>() ==
          std::vector<int64_t>{253, 44});
    check_values(cast(f, DType::bool_), {1, 1, 0, 1, 1}, "to bool");
    // numpy: np.float16(0.1) == 0.0999755859375; np.float16(65520) == inf
    check_values(cast(make({0.1, 65520.0, 65519.0}, DType::float64), DType::float16), {0.0999755859375, kInf, 65504.0},
                 "to float16");
    // ml_dtypes: bfloat16(1/3) == 0.333984375
    check_values(cast(make({1.0 / 3.0}, DType::float64), DType::bfloat16), {0.333984375}, "to bfloat16");
    Tensor c = cast(f, DType::float64);
    CHECK(!c.is_same(f));  // a cast is a new tensor even to the same dtype
    CHECK(f.to(DType::float32).dtype() == DType::float32);
  }

  TEST_CASE("reference: casts and integer semantics") {
    CHECK(ref_cast(0.1, DType::float16) == 0.0999755859375);
    CHECK(ref_cast(65520.0, DType::float16) == kInf);
    CHECK(ref_cast(-65520.0, DType::float16) == -kInf);
    CHECK(ref_cast(5.960464477539063e-08, DType::float16) == 5.960464477539063e-08);  // smallest subnormal
    CHECK(ref_cast(2.9e-08, DType::float16) == 0.0);   // below half the smallest subnormal
    CHECK(ref_cast(1.0 / 3.0, DType::bfloat16) == 0.333984375);
    CHECK(ref_cast(-3.7, DType::uint8) == 253.0);
    CHECK(ref_cast(2.5, DType::int8) == 2.0);
    CHECK(ref_cast(-128.9, DType::int8) == -128.0);
    CHECK(ref_cast(kNaN, DType::int64) == -9223372036854775808.0);
    CHECK(ref_binary_int(OpId::FloorDivide, -7, 2, DType::int32) == -4);
    CHECK(ref_binary_int(OpId::Remainder, -7, 2, DType::int32) == 1);
    CHECK(ref_binary_int(OpId::Fmod, -7, 2, DType::int32) == -1);
    CHECK(ref_binary_int(OpId::Add, 127, 1, DType::int8) == -128);
    CHECK(ref_binary_int(OpId::Mul, 1LL << 62, 4, DType::int64) == 0);
    CHECK(ref_unary_int(OpId::Abs, -128, DType::int8) == -128);
    CHECK_THROWS_AS(ref_binary_int(OpId::Remainder, 1, 0, DType::int32), ValueError);
    CHECK_THROWS_AS(ref_binary_int(OpId::Div, 1, 1, DType::int32), DTypeError);
    CHECK_THROWS_AS(ref_unary(OpId::Add, 1.0), ValueError);
    CHECK(ref_unary(OpId::Round, -0.5) == 0.0);
    CHECK(std::signbit(ref_unary(OpId::Round, -0.5)));
    CHECK(ref_unary(OpId::Round, 2.5) == 2.0);
    // scipy/numpy: x * norm.cdf(x) at x = 1 and -10.
    CHECK(ref_unary(OpId::Gelu, 1.0) == doctest::Approx(0.8413447460685429).epsilon(1e-15));
    CHECK(ref_unary(OpId::Gelu, -10.0) == doctest::Approx(-7.619853024160527e-23).epsilon(1e-12));
  }

  TEST_CASE("activations at their limits") {
    for (DType d : {DType::float32, DType::float64}) {
      CAPTURE(d);
      Tensor x = make({-kInf, kInf, kNaN}, d);
      for (Tensor r : {silu(x), gelu(x), gelu(x, true)}) {
        std::vector<double> v = vals(r);
        CHECK(v[0] == 0.0);
        CHECK(v[1] == kInf);
        CHECK(std::isnan(v[2]));
      }
      std::vector<double> s = vals(sigmoid(x));
      CHECK(s[0] == 0.0);
      CHECK(s[1] == 1.0);
    }
    // Inputs at the edges of the vectorised exp and log ranges (float32);
    // Python math.exp(88.5), math.exp(-90), math.log(1e-40).
    Tensor e = exp(Tensor::from_vector<float>({88.5f, -90.0f, -103.0f}));
    std::vector<float> ev = e.to_vector<float>();
    CHECK(ev[0] == doctest::Approx(2.7230878250681117e38).epsilon(1e-6));
    CHECK(ev[1] == doctest::Approx(8.1940126e-40).epsilon(1e-4));  // subnormal
    CHECK(ev[2] > 0.0f);
    CHECK(log(Tensor::from_vector<float>({1e-40f})).item<float>() == doctest::Approx(-92.10340).epsilon(1e-6));
    CHECK(sigmoid(Tensor::from_vector<float>({-100.0f})).item<float>() > 0.0f);
  }

  TEST_CASE("eager fast paths agree with the strided path") {
    // 1-element tensors, scalar broadcast, contiguous same-shape, and a
    // staged (transposed) operand all give the same result.
    Tensor a = kt::random_tensor({64, 33}, DType::float32, 7), b = kt::random_tensor({64, 33}, DType::float32, 8);
    std::vector<double> ref = vals(add(a, b));
    std::vector<double> via = vals(add(kt::relayout(a, ViewKind::transposed), kt::relayout(b, ViewKind::negative)));
    CHECK(ref == via);
    Tensor one = make({1.5}, Shape{}, DType::float32);
    CHECK(add(one, one).item<float>() == 3.0f);
    CHECK(add(make({1.5}, DType::float32), make({2.0}, DType::float32)).item<float>() == 3.5f);
    std::vector<double> e1 = vals(exp(a)), e2 = vals(exp(kt::relayout(a, ViewKind::strided)));
    CHECK(e1 == e2);
    std::vector<double> h1 = vals(tanh(a.to(DType::float16))),
                        h2 = vals(tanh(kt::relayout(a.to(DType::float16), ViewKind::negative)));
    CHECK(h1 == h2);
  }
}

TEST_SUITE("elementwise") {
  TEST_CASE("gelu and gelu_tanh keep relative accuracy in the negative tail (eager)") {
    // 1 + erf(x / sqrt 2) cancels for negative x in float32; eager must not.
    std::vector<float> xs;
    for (int i = -3000; i <= 3000; ++i) xs.push_back(static_cast<float>(i) * 0.01f);
    kiln::Tensor x = kiln::Tensor::from_vector(xs, {static_cast<int64_t>(xs.size())});
    for (kiln::OpId op : {kiln::OpId::Gelu, kiln::OpId::GeluTanh}) {
      const std::vector<float> y = kiln::apply(op, x).to_vector<float>();
      double worst = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const double want = kiln::ref_unary(op, xs[i]);
        if (std::fabs(want) < 1.2e-38) continue;  // subnormal results: absolute 2^-126 only
        worst = std::max(worst, std::fabs(y[i] - want) / std::fabs(want));
      }
      INFO(kiln::op_name(op) << ": worst relative error " << worst);
      CHECK(worst <= 2e-6);
    }
  }
}

TEST_SUITE("elementwise") {
  TEST_CASE("an integer scalar out of the tensor's integer range is an error, never wrapped") {
    using namespace kiln;
    const Tensor u8 = full({2}, 5, DType::uint8);
    CHECK_THROWS_WITH_AS(u8 == 256, doctest::Contains("integer scalar 256 is out of range for uint8"), ValueError);
    CHECK_THROWS_AS(u8 > -1, ValueError);
    // clamp: an out-of-range bound bounds nothing on its side (numpy 2's clip).
    CHECK(clamp(u8, -1, 300).to_vector<int64_t>() == std::vector<int64_t>{5, 5});
    CHECK(clamp(u8, -1, 3).to_vector<int64_t>() == std::vector<int64_t>{3, 3});
    CHECK_THROWS_AS(full({1}, 3, DType::int8) * 1000, ValueError);
    CHECK_THROWS_AS(Tensor::from_vector(std::vector<int32_t>{1}) + (int64_t{1} << 40), ValueError);
    CHECK_THROWS_WITH_AS(full({1}, 300, DType::uint8), doctest::Contains("full"), ValueError);
    // In range, and float scalars (which promote to float), work as before.
    CHECK((u8 + 250).to_vector<int64_t>() == std::vector<int64_t>{255, 255});
    CHECK((u8 == 5).to_vector<bool>() == std::vector<bool>{true, true});
    CHECK((u8 * 0.5).dtype() == DType::float32);
    CHECK((full({1}, 1, DType::int64) + (int64_t{1} << 40)).item<int64_t>() == (int64_t{1} << 40) + 1);
  }
}

TEST_SUITE("elementwise") {
  TEST_CASE("eager unary results do not depend on the layout (packet vs scalar evaluation)") {
    using namespace kiln;
    // A transposed view runs in short strided runs, its contiguous copy in
    // long ones with a remainder: every element must get the same bits.
    Tensor x = random::normal({7, 37}, 5) * 3.0f;
    Tensor xt = transpose(x);
    Tensor xc = xt.contiguous();
    for (OpId op : {OpId::Exp, OpId::Log1p, OpId::Tanh, OpId::Sin, OpId::Sigmoid, OpId::Erf, OpId::Exp2}) {
      CAPTURE(op_name(op));
      const std::vector<float> a = apply(op, xt).contiguous().to_vector<float>();
      const std::vector<float> b = apply(op, xc).to_vector<float>();
      CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
      // and an output that starts mid-row (slice of a larger result) agrees too
      const std::vector<float> c = apply(op, slice(xc, 1, 1, 7)).to_vector<float>();
      const std::vector<float> d = slice(apply(op, xc), 1, 1, 7).contiguous().to_vector<float>();
      CHECK(std::memcmp(c.data(), d.data(), c.size() * sizeof(float)) == 0);
    }
  }
}
