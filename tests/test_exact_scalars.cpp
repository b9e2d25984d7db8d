// Exact integer scalars over the whole int64 range (eager, compiled, jit,
// MEF), and the one rule for float values that have no integer (issue 11,
// item 3). References are plain C++ int64 arithmetic.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "test_util.h"

using namespace kiln;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t k2p53p1 = (int64_t{1} << 53) + 1;  // the first integer a double cannot hold

using V = std::vector<int64_t>;
using B = std::vector<bool>;

Tensor i64(const V& v) { return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}); }
TensorLayout i64_layout(int64_t n) { return TensorLayout(DType::int64, {n}); }

// The range cases: each value, its neighbours and the extremes.
const V& range_values() {
  static const V v = {0, 1, -1, k2p53p1 - 1, k2p53p1, k2p53p1 + 1, -k2p53p1, kMax, kMax - 1, kMin, kMin + 1};
  return v;
}

// One function of (x, scalar) per op; ref is the int64 reference per element.
struct Case {
  const char* name;
  std::function<Tensor(const Tensor&, int64_t)> fn;
  std::function<int64_t(int64_t, int64_t)> ref;  // int64 result (bools as 0/1)
  bool boolean;
};

// Wrapping int64 arithmetic without UB (numpy's int64 + wraps too; these
// cases only wrap where the inputs make them).
int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }

std::vector<Case> cases() {
  return {
      {"x + s", [](const Tensor& x, int64_t s) { return x + s; }, wrap_add, false},
      {"x - s", [](const Tensor& x, int64_t s) { return x - s; }, wrap_sub, false},
      {"s - x", [](const Tensor& x, int64_t s) { return s - x; }, [](int64_t a, int64_t s) { return wrap_sub(s, a); }, false},
      {"x * s", [](const Tensor& x, int64_t s) { return x * s; },
       [](int64_t a, int64_t s) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(s)); }, false},
      {"maximum", [](const Tensor& x, int64_t s) { return maximum(x, s); }, [](int64_t a, int64_t s) { return std::max(a, s); }, false},
      {"minimum", [](const Tensor& x, int64_t s) { return minimum(x, s); }, [](int64_t a, int64_t s) { return std::min(a, s); }, false},
      {"x == s", [](const Tensor& x, int64_t s) { return x == s; }, [](int64_t a, int64_t s) -> int64_t { return a == s; }, true},
      {"x != s", [](const Tensor& x, int64_t s) { return x != s; }, [](int64_t a, int64_t s) -> int64_t { return a != s; }, true},
      {"x < s", [](const Tensor& x, int64_t s) { return x < s; }, [](int64_t a, int64_t s) -> int64_t { return a < s; }, true},
      {"x <= s", [](const Tensor& x, int64_t s) { return x <= s; }, [](int64_t a, int64_t s) -> int64_t { return a <= s; }, true},
      {"x > s", [](const Tensor& x, int64_t s) { return x > s; }, [](int64_t a, int64_t s) -> int64_t { return a > s; }, true},
      {"x >= s", [](const Tensor& x, int64_t s) { return x >= s; }, [](int64_t a, int64_t s) -> int64_t { return a >= s; }, true},
      {"clamp(x, s, -)", [](const Tensor& x, int64_t s) { return clamp(x, s, std::nullopt); },
       [](int64_t a, int64_t s) { return std::max(a, s); }, false},
      {"clamp(x, -, s)", [](const Tensor& x, int64_t s) { return clamp(x, std::nullopt, s); },
       [](int64_t a, int64_t s) { return std::min(a, s); }, false},
      {"where(x > 0, x, s)", [](const Tensor& x, int64_t s) { return where(x > 0, x, s); },
       [](int64_t a, int64_t s) { return a > 0 ? a : s; }, false},
      {"where(x > 0, s, x)", [](const Tensor& x, int64_t s) { return where(x > 0, s, x); },
       [](int64_t a, int64_t s) { return a > 0 ? s : a; }, false},
      {"masked_fill(x, x < 0, s)", [](const Tensor& x, int64_t s) { return masked_fill(x, x < 0, s); },
       [](int64_t a, int64_t s) { return a < 0 ? s : a; }, false},
      {"full_like(x, s)", [](const Tensor& x, int64_t s) { return full_like(x, s); }, [](int64_t, int64_t s) { return s; }, false},
  };
}

V expected(const Case& c, int64_t s) {
  V r;
  for (int64_t a : range_values()) r.push_back(c.ref(a, s));
  return r;
}

V as_int64(const Tensor& t) {
  if (t.dtype() == DType::bool_) {
    V r;
    for (bool b : t.to_vector<bool>()) r.push_back(b);
    return r;
  }
  REQUIRE(t.dtype() == DType::int64);
  return t.to_vector<int64_t>();
}

}  // namespace

TEST_SUITE("exact scalars") {
  TEST_CASE("Scalar keeps int64 and uint64 values exactly") {
    CHECK(Scalar(kMax).int_value == kMax);
    CHECK(Scalar(kMin).int_value == kMin);
    CHECK(Scalar(k2p53p1).int_value == k2p53p1);
    CHECK(Scalar(k2p53p1).str() == "9007199254740993");
    const Scalar big(std::numeric_limits<uint64_t>::max());
    CHECK(big.above_int64);
    CHECK(big.str() == "18446744073709551615");
    CHECK_FALSE(Scalar(uint64_t{5}).above_int64);
    CHECK(Scalar(true).int_value == 1);
    CHECK(Scalar(0.5).str() == "0.5");
  }

  TEST_CASE("the issue's two examples") {
    CHECK((Tensor::from_vector(V{0}) + kMax).item<int64_t>() == kMax);
    const Tensor ids = i64({k2p53p1 - 1, k2p53p1, k2p53p1 + 1});
    CHECK((ids == 9007199254740993).to_vector<bool>() == B{false, true, false});
  }

  TEST_CASE("ops with int64 scalars are exact over the whole range (eager)") {
    const Tensor x = i64(range_values());
    for (const Case& c : cases()) {
      for (int64_t s : {k2p53p1, kMax, kMin, -k2p53p1, int64_t{0}}) {
        CAPTURE(c.name);
        CAPTURE(s);
        const Tensor y = c.fn(x, s);
        CHECK(y.dtype() == (c.boolean ? DType::bool_ : DType::int64));
        CHECK(as_int64(y) == expected(c, s));
      }
    }
  }

  TEST_CASE("ops with int64 scalars are exact compiled (constants) and under jit (runtime scalars)") {
    const Tensor x = i64(range_values());
    const int64_t n = x.numel();
    for (const Case& c : cases()) {
      for (int64_t s : {k2p53p1, kMax, kMin}) {
        CAPTURE(c.name);
        CAPTURE(s);
        // A captured C++ integer is a graph constant.
        auto f = [&c, s](Tensor t) { return c.fn(t, s); };
        CompiledCallable run = compile(f)(i64_layout(n));
        CHECK(as_int64(run(x).tensor()) == expected(c, s));
        // Strict and unfused sessions (op steps run the eager kernels) too.
        for (bool fuse : {true, false}) {
          CompileOptions o;
          o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = true, .fuse = fuse});
          CHECK(as_int64(compile(f, o)(i64_layout(n))(x).tensor()) == expected(c, s));
        }
      }
    }
    // A C++ integer argument is a runtime int64 input: exact, one compile.
    auto jf = jit([](Tensor t, Tensor s) { return where(t == s, t + s, t - s); });
    for (int64_t s : {k2p53p1, kMax, kMin}) {
      V want;
      for (int64_t a : range_values()) want.push_back(a == s ? wrap_add(a, s) : wrap_sub(a, s));
      CHECK(jf(x, s).tensor().to_vector<int64_t>() == want);
    }
  }

  TEST_CASE("int64 scalar constants survive MEF export and reading") {
    const auto path = (std::filesystem::temp_directory_path() /
                       ("kiln_exact_scalars_" + std::to_string(getpid()) + ".mef")).string();
    auto f = [](Tensor t) { return where(t == k2p53p1, t + kMax, clamp(t, kMin + 1, k2p53p1)); };
    CompiledCallable run = compile(f)(i64_layout(static_cast<int64_t>(range_values().size())));
    run.export_mef(path);
    CompiledCallable back = CompiledCallable::from_mef(path);
    std::filesystem::remove(path);
    const Tensor x = i64(range_values());
    V want;
    for (int64_t a : range_values()) want.push_back(a == k2p53p1 ? wrap_add(a, kMax) : std::clamp(a, kMin + 1, k2p53p1));
    CHECK(back(x).tensor().to_vector<int64_t>() == want);
    CHECK(run(x).tensor().to_vector<int64_t>() == want);
  }

  TEST_CASE("full, clamp and masked_fill store integers exactly, into every dtype") {
    CHECK(full({2}, kMax, DType::int64).to_vector<int64_t>() == V{kMax, kMax});
    CHECK(full({1}, kMin, DType::int64).item<int64_t>() == kMin);
    CHECK(full({1}, k2p53p1, DType::int64).item<int64_t>() == k2p53p1);
    // into floats: rounded once, to nearest even (2^53 + 1 -> 2^53)
    CHECK(full({1}, k2p53p1, DType::float64).item<double>() == 9007199254740992.0);
    CHECK(full({1}, kMax, DType::float32).item<float>() == 9223372036854775808.0f);
    CHECK(full({1}, std::numeric_limits<uint64_t>::max(), DType::float64).item<double>() == 18446744073709551616.0);
    // out of range: an error naming the op and the exact value
    CHECK_THROWS_WITH_AS(full({1}, std::numeric_limits<uint64_t>::max(), DType::int64),
                         doctest::Contains("full: the integer scalar 18446744073709551615 is out of range for int64"),
                         ValueError);
    CHECK_THROWS_WITH_AS(full({1}, int64_t{1} << 31, DType::int32),
                         doctest::Contains("integer scalar 2147483648 is out of range for int32"), ValueError);
    CHECK_THROWS_AS(masked_fill(full({2}, 1, DType::int32), full({2}, true, DType::bool_), kMax), ValueError);
    // clamp: a bound beyond the dtype bounds nothing on its side, exactly
    const Tensor x = i64({kMin, -1, kMax});
    CHECK(clamp(x, kMin + 1, kMax - 1).to_vector<int64_t>() == V{kMin + 1, -1, kMax - 1});
    CHECK(clamp(x, std::numeric_limits<uint64_t>::max(), std::nullopt).to_vector<int64_t>() == V{kMax, kMax, kMax});
    const Tensor i32 = full({2}, 7, DType::int32);
    CHECK(clamp(i32, kMin, kMax).to_vector<int32_t>() == std::vector<int32_t>{7, 7});
    CHECK(clamp(i32, std::nullopt, kMin).to_vector<int32_t>() == std::vector<int32_t>{INT32_MIN, INT32_MIN});
  }

  TEST_CASE("a float with no integer value is an error when stored as a scalar (numpy 2)") {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    for (DType d : {DType::uint8, DType::int8, DType::int32, DType::int64, DType::int16, DType::uint16, DType::uint32,
                    DType::uint64}) {
      CAPTURE(d);
      CHECK_THROWS_WITH_AS(full({2}, nan, d), doctest::Contains("full: cannot convert the float scalar nan"), ValueError);
      CHECK_THROWS_WITH_AS(full({2}, inf, d), doctest::Contains("infinity has no integer value"), ValueError);
      CHECK_THROWS_AS(full({2}, -inf, d), ValueError);
      CHECK_THROWS_WITH_AS(full({2}, 1e30, d), doctest::Contains("out of range"), ValueError);
      CHECK_THROWS_AS(full({0}, nan, d), ValueError);  // checked even with no element, as numpy
      const Tensor x = full({2}, 1, d);
      CHECK_THROWS_WITH_AS(masked_fill(x, x > 0, nan), doctest::Contains("masked_fill"), ValueError);
      CHECK_THROWS_AS(masked_fill(x, x > 0, inf), ValueError);
    }
    // In range: truncation toward zero (numpy: np.full(1, 2.9, np.int8) is 2).
    CHECK(full({1}, 2.9, DType::int8).item<int32_t>() == 2);
    CHECK(full({1}, -2.9, DType::int8).item<int32_t>() == -2);
    CHECK(full({1}, 127.9, DType::int8).item<int32_t>() == 127);
    CHECK(full({1}, -128.9, DType::int8).item<int32_t>() == -128);
    CHECK_THROWS_AS(full({1}, 128.0, DType::int8), ValueError);
    CHECK(full({1}, 255.5, DType::uint8).item<int32_t>() == 255);
    CHECK(full({1}, -0.9, DType::uint8).item<int32_t>() == 0);
    CHECK_THROWS_AS(full({1}, -1.0, DType::uint8), ValueError);
    CHECK(full({1}, -9223372036854775808.0, DType::int64).item<int64_t>() == kMin);
    CHECK_THROWS_AS(full({1}, 9223372036854775808.0, DType::int64), ValueError);
    // bool and float dtypes take any float (NaN is true, as cast gives)
    CHECK(full({1}, nan, DType::bool_).item<bool>());
    CHECK(std::isnan(full({1}, nan, DType::float16).item<float>()));
    // arithmetic with a float scalar promotes an integer tensor to float32: no error
    CHECK(std::isnan((full({1}, 1, DType::int32) + nan).item<float>()));
  }
}

namespace {

// cast's documented rule (ops.h), written out independently of
// detail::convert: truncation when it fits; otherwise the integer minimum
// for signed dtypes, for uint8/16/32 the low bits of the int64 truncation
// (0 where that has none), for uint64 the truncation modulo 2^64 in
// (-2^63, 2^64) and 2^63 outside. Returned as int64 (uint64 as its bits).
int64_t cast_ref(double v, DType d) {
  const double t = std::trunc(v);
  const int bits = 8 * static_cast<int>(size_of(d));
  if (d == DType::uint64) {  // modulo 2^64 in (-2^63, 2^64), else 2^63; as int64 bits
    if (t >= 0 && t < 18446744073709551616.0) return static_cast<int64_t>(static_cast<uint64_t>(t));
    if (t < 0 && t > -9223372036854775808.0) return static_cast<int64_t>(t);
    return kMin;
  }
  if (is_unsigned(d)) {  // the low bits of the int64 truncation, 0 without one
    if (!(t > -9223372036854775808.0 && t < 9223372036854775808.0)) return 0;
    return static_cast<int64_t>(static_cast<uint64_t>(static_cast<int64_t>(t)) & ((uint64_t(1) << bits) - 1));
  }
  const double hi_excl = std::ldexp(1.0, bits - 1);
  const int64_t lo = bits == 64 ? kMin : -(int64_t(1) << (bits - 1));
  if (!(t >= -hi_excl && t < hi_excl)) return lo;  // NaN, inf, out of range: the minimum
  return static_cast<int64_t>(t);
}

}  // namespace

TEST_SUITE("exact scalars") {
  TEST_CASE("cast of unrepresentable floats follows one rule eagerly and compiled, bit for bit") {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    const std::vector<double> vals = {nan, inf, -inf, 1e30, -1e30, 2147483648.0, -2147483649.0, 2147483520.0,
                                      9223372036854775808.0, -9223372036854775808.0, 9.2e18, 300.7, -300.7, 255.9,
                                      -0.9, 128.0, -129.0, 127.5, 0.0, -0.0, 1e10};
    const int64_t n = static_cast<int64_t>(vals.size());
    for (DType from : {DType::float32, DType::float64, DType::float16}) {
      const Tensor x = Tensor::from_vector(vals, {n}).to(from);
      const std::vector<double> xs = x.to(DType::float64).to_vector<double>();  // values as stored in `from`
      for (DType to : {DType::uint8, DType::int8, DType::int32, DType::int64, DType::int16, DType::uint16,
                       DType::uint32, DType::uint64}) {
        CAPTURE(from);
        CAPTURE(to);
        V want;
        for (double v : xs) want.push_back(cast_ref(v, to));
        const V eager = cast(x, to).to(DType::int64).to_vector<int64_t>();
        CHECK(eager == want);
        // compiled: alone, and fused after an op (the generated conversion)
        auto f = [to](Tensor t) { return cast(t, to); };
        auto g = [to](Tensor t) { return cast(t * 1.0f, to) + 0; };
        for (bool fuse : {true, false}) {
          CompileOptions o;
          o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = false, .fuse = fuse});
          const TensorLayout l(from, {n});
          CHECK(compile(f, o)(l)(x).tensor().to(DType::int64).to_vector<int64_t>() == want);
          CHECK(compile(g, o)(l)(x).tensor().to(DType::int64).to_vector<int64_t>() ==
                cast(x * 1.0f, to).to(DType::int64).to_vector<int64_t>());
        }
      }
    }
  }
}

TEST_SUITE("exact scalars") {
  TEST_CASE("pad fills with an exact int64 value, eager and compiled") {
    const Tensor x = i64({5, 6});
    for (int64_t v : {k2p53p1, kMax, kMin, int64_t{-3}}) {
      CAPTURE(v);
      const V want = {v, 5, 6, v, v};
      CHECK(pad(x, {{1, 2}}, v).to_vector<int64_t>() == want);
      auto f = [v](Tensor t) { return pad(t, {{1, 2}}, v); };
      CHECK(compile(f)(i64_layout(2))(x).tensor().to_vector<int64_t>() == want);
    }
    CHECK_THROWS_WITH_AS(pad(full({2}, 1, DType::int8), {{1, 1}}, 300), doctest::Contains("pad: the integer scalar 300"),
                         ValueError);
    CHECK_THROWS_AS(pad(full({2}, 1, DType::int32), {{1, 1}}, std::numeric_limits<double>::quiet_NaN()), ValueError);
  }
}
