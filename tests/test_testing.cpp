// Comparing results (tensor/testing.h, tensor/doctest_close.h): isclose
// against a float64 scalar loop of numpy's formula and against numpy's
// documented examples, ulp distances against nextafter chains and bit
// patterns counted by hand, and assert_close's report text pinned.
#include <cfloat>

#include "test_util.h"

#include <kiln/doctest_close.h>

namespace {

using namespace kiln;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();

std::vector<bool> bools(const Tensor& t) {
  CHECK(t.dtype() == DType::bool_);
  return t.to_vector<bool>();
}

std::string report_of(const Tensor& actual, const Tensor& expected, std::optional<double> rtol = std::nullopt,
                      std::optional<double> atol = std::nullopt, bool equal_nan = false, const std::string& msg = "") {
  try {
    assert_close(actual, expected, rtol, atol, equal_nan, msg);
  } catch (const AssertionError& e) {
    return e.what();
  }
  return "(no AssertionError)";
}

// numpy.isclose's definition, written out as numpy's source has it:
// (|x - y| <= atol + rtol * |y|) & isfinite(y) | (x == y), | isnan(x) & isnan(y) under equal_nan.
bool ref_isclose(double x, double y, double rtol, double atol, bool equal_nan) {
  bool r = (std::fabs(x - y) <= atol + rtol * std::fabs(y) && std::isfinite(y)) || x == y;
  if (equal_nan) r = r || (std::isnan(x) && std::isnan(y));
  return r;
}

// The element type's bits as an unsigned integer, and back.
template <class F, class U>
F from_bits(U u) {
  F f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

Tensor half_from_bits(std::vector<uint16_t> bits, DType dt) {
  return Tensor::from_data(bits.data(), dt, bits.size(), {static_cast<int64_t>(bits.size())});
}

}  // namespace

TEST_SUITE("testing") {
  TEST_CASE("isclose: numpy's documented examples") {
    // numpy.isclose docstring (numpy 2.4), default rtol=1e-5, atol=1e-8:
    // np.isclose([1e10, 1e-7], [1.00001e10, 1e-8]) -> [ True, False]
    CHECK(bools(isclose(tensor({1e10, 1e-7}), tensor({1.00001e10, 1e-8}))) == std::vector<bool>{true, false});
    // np.isclose([1e10, 1e-8], [1.00001e10, 1e-9]) -> [ True,  True]
    CHECK(bools(isclose(tensor({1e10, 1e-8}), tensor({1.00001e10, 1e-9}))) == std::vector<bool>{true, true});
    // np.isclose([1e10, 1e-8], [1.0001e10, 1e-9]) -> [False,  True]
    CHECK(bools(isclose(tensor({1e10, 1e-8}), tensor({1.0001e10, 1e-9}))) == std::vector<bool>{false, true});
    // np.isclose([1.0, np.nan], [1.0, np.nan]) -> [ True, False]; equal_nan=True -> [ True,  True]
    CHECK(bools(isclose(tensor({1.0, kNaN}), tensor({1.0, kNaN}))) == std::vector<bool>{true, false});
    CHECK(bools(isclose(tensor({1.0, kNaN}), tensor({1.0, kNaN}), 1e-5, 1e-8, true)) == std::vector<bool>{true, true});
    // np.isclose([1e-8, 1e-7], [0.0, 0.0]) -> [ True, False]
    CHECK(bools(isclose(tensor({1e-8, 1e-7}), tensor({0.0, 0.0}))) == std::vector<bool>{true, false});
    // np.isclose([1e-100, 1e-7], [0.0, 0.0], atol=0.0) -> [False, False]
    CHECK(bools(isclose(tensor({1e-100, 1e-7}), tensor({0.0, 0.0}), 1e-5, 0.0)) == std::vector<bool>{false, false});
    // np.isclose([1e-10, 1e-10], [1e-20, 0.0]) -> [ True,  True]
    CHECK(bools(isclose(tensor({1e-10, 1e-10}), tensor({1e-20, 0.0}))) == std::vector<bool>{true, true});
    // np.isclose([1e-10, 1e-10], [1e-20, 0.999999e-10], atol=0.0) -> [False,  True]
    CHECK(bools(isclose(tensor({1e-10, 1e-10}), tensor({1e-20, 0.999999e-10}), 1e-5, 0.0)) ==
          std::vector<bool>{false, true});
    // infinities (numpy): equal ones are close, nothing else is
    CHECK(bools(isclose(tensor({kInf, -kInf, kInf, 1.0, kInf}), tensor({kInf, -kInf, -kInf, kInf, 1e308}))) ==
          std::vector<bool>{true, true, false, false, false});
  }

  TEST_CASE("isclose matches a float64 scalar loop: random data with NaN/inf, dtypes, broadcasting, views") {
    struct Case {
      DType da, db;
      Shape sa, sb;
    };
    const Case cases[] = {
        {DType::float64, DType::float64, {7, 9}, {7, 9}}, {DType::float32, DType::float32, {5, 6}, {5, 6}},
        {DType::float32, DType::float64, {4, 1, 3}, {5, 3}}, {DType::float16, DType::float32, {6}, {3, 1}},
        {DType::bfloat16, DType::bfloat16, {8, 4}, {4}},  {DType::int32, DType::float32, {3, 4}, {3, 4}},
        {DType::int64, DType::int64, {10}, {10}},          {DType::bool_, DType::float64, {2, 3}, {1}},
        {DType::float64, DType::float64, {}, {3}},         {DType::float32, DType::float32, {0, 3}, {3}},
    };
    uint64_t seed = 1;
    for (const Case& c : cases) {
      for (bool equal_nan : {false, true}) {
        for (auto [rtol, atol] : {std::pair{1e-5, 1e-8}, std::pair{1e-2, 0.0}, std::pair{0.0, 0.5}}) {
          Tensor a = kt::random_tensor(c.sa, c.da, seed++, true);
          // b: a's values (broadcast-compatible copy) nudged by relative steps
          // of about the tolerance, plus independent values and specials.
          Tensor noise = kt::random_tensor(c.sb, DType::float64, seed++, true, 1.0);
          Tensor b0 = kt::random_tensor(c.sb, DType::float64, seed++, true);
          const Shape out = broadcast_shapes(c.sa, c.sb, "test");
          std::vector<double> av = broadcast_to(a.to(DType::float64), out).to_vector<double>();
          std::vector<double> nv = noise.to_vector<double>(), bv0 = b0.to_vector<double>();
          std::vector<double> bv(bv0.size());
          // where a and b have the same shape, half of b follows a closely
          for (size_t k = 0; k < bv.size(); ++k)
            bv[k] = (c.sa == c.sb && k % 2 == 0 && std::isfinite(nv[k])) ? av[k] * (1 + nv[k] * 1e-5) + nv[k] * 1e-8
                                                                          : bv0[k];
          Tensor b = Tensor::from_vector(bv, c.sb).to(c.db);
          std::vector<double> bb = broadcast_to(b.to(DType::float64), out).to_vector<double>();
          for (auto kind : {kt::ViewKind::contiguous, kt::ViewKind::negative, kt::ViewKind::strided}) {
            CAPTURE(name(c.da));
            CAPTURE(name(c.db));
            CAPTURE(shape_str(c.sa));
            CAPTURE(shape_str(c.sb));
            CAPTURE(equal_nan);
            CAPTURE(rtol);
            CAPTURE(kt::view_name(kind));
            Tensor got = isclose(kt::relayout(a, kind), kt::relayout(b, kind), rtol, atol, equal_nan);
            REQUIRE(got.shape() == out);
            std::vector<bool> g = bools(got);
            bool all = true;
            for (size_t k = 0; k < g.size(); ++k) {
              const bool want = ref_isclose(av[k], bb[k], rtol, atol, equal_nan);
              all = all && want;
              if (g[k] != want) {
                CAPTURE(k);
                CAPTURE(av[k]);
                CAPTURE(bb[k]);
                CHECK(g[k] == want);
              }
            }
            CHECK(allclose(kt::relayout(a, kind), kt::relayout(b, kind), rtol, atol, equal_nan) == all);
          }
        }
      }
    }
  }

  TEST_CASE("isclose: integers are compared exactly, errors name the argument") {
    // 2^53 + 1 and 2^53 are the same double, different int64 values
    const int64_t big = (int64_t{1} << 53) + 1;
    Tensor a = Tensor::from_vector(std::vector<int64_t>{big, -5}), b = Tensor::from_vector(std::vector<int64_t>{big - 1, -5});
    CHECK(bools(isclose(a, b, 0.0, 0.0)) == std::vector<bool>{false, true});
    CHECK(bools(isclose(a, b, 0.0, 1.0)) == std::vector<bool>{true, true});
    // INT64_MIN vs INT64_MAX: the difference does not overflow
    Tensor lo = Tensor::from_vector(std::vector<int64_t>{std::numeric_limits<int64_t>::min()});
    Tensor hi = Tensor::from_vector(std::vector<int64_t>{kMaxI64});
    CHECK_FALSE(allclose(lo, hi, 0.0, 1e18));
    CHECK(allclose(lo, hi, 0.0, 2e19));
    CHECK_THROWS_WITH_AS(isclose(tensor({1.0}), tensor({1.0}), 1e-5, -1.0),
                         "isclose: atol must be >= 0 (and not NaN), got -1", ValueError);
    CHECK_THROWS_WITH_AS(isclose(tensor({1.0, 2.0}), tensor({1.0, 2.0, 3.0})),
                         "isclose: cannot broadcast shapes [2] and [3]", ShapeError);
    CHECK_THROWS_WITH_AS(allclose(tensor({1.0}), tensor({1.0}), kNaN), "allclose: rtol must be >= 0 (and not NaN), got nan",
                         ValueError);
    CHECK_THROWS_WITH_AS(isclose(Tensor(), tensor({1.0})), "isclose: a is an undefined tensor", ValueError);
    CHECK(allclose(zeros({0, 4}), zeros({4})));
  }

  TEST_CASE("array_equal: shapes and values, dtypes may differ (numpy)") {
    // np.array_equal([1, 2], [1, 2]) -> True; np.array_equal([1, 2], [1, 2, 3]) -> False
    CHECK(array_equal(tensor({1, 2}), tensor({1, 2})));
    CHECK_FALSE(array_equal(tensor({1, 2}), tensor({1, 2, 3})));
    // np.array_equal(np.array([[1, 2]]), np.array([1, 2])) -> False: no broadcasting
    CHECK_FALSE(array_equal(tensor({{1, 2}}), tensor({1, 2})));
    // np.array_equal(np.array([1, 2], np.int32), np.array([1., 2.], np.float32)) -> True
    CHECK(array_equal(tensor({1, 2}), tensor({1.0f, 2.0f})));
    // np.array_equal([True, False], [1, 0]) -> True
    CHECK(array_equal(tensor({true, false}), tensor({1, 0})));
    // np.array_equal([1, np.nan], [1, np.nan]) -> False; equal_nan=True -> True
    CHECK_FALSE(array_equal(tensor({1.0, kNaN}), tensor({1.0, kNaN})));
    CHECK(array_equal(tensor({1.0, kNaN}), tensor({1.0, kNaN}), true));
    CHECK_FALSE(array_equal(tensor({1.0, kNaN}), tensor({kNaN, 1.0}), true));
    // np.array_equal([-0.0], [0.0]) -> True
    CHECK(array_equal(tensor({-0.0}), tensor({0.0})));
    // int64 compared exactly
    const int64_t big = (int64_t{1} << 53) + 1;
    CHECK_FALSE(array_equal(Tensor::from_vector(std::vector<int64_t>{big}), Tensor::from_vector(std::vector<int64_t>{big - 1})));
    // views and empty tensors
    Tensor r = kt::random_tensor({3, 4}, DType::float32, 5);
    CHECK(array_equal(kt::relayout(r, kt::ViewKind::negative), r));
    CHECK(array_equal(kt::relayout(r, kt::ViewKind::transposed), kt::relayout(r, kt::ViewKind::strided)));
    CHECK(array_equal(zeros({0, 2}), zeros({0, 2}, DType::int64)));
    CHECK_FALSE(array_equal(zeros({0, 2}), zeros({2, 0})));
  }

  TEST_CASE("integers compare by value: uint64 above 2^63 against int64, uint8 against int8") {
    constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();
    Tensor u = tensor({kMaxU64, uint64_t{1} << 63});
    Tensor s = tensor({int64_t{-1}, std::numeric_limits<int64_t>::min()});  // the same bits as u
    // numpy: np.array_equal(np.array([2**64-1, 2**63], np.uint64), [-1, -2**63]) -> False
    CHECK_FALSE(array_equal(u, s));
    CHECK_FALSE(allclose(u, s, 0.0, 0.0));
    CHECK(bools(isclose(u, s, 0.0, 0.0)) == std::vector<bool>{false, false});
    // |2^64 - 1 - (-1)| = 2^64 and |2^63 - (-2^63)| = 2^64: within atol 2^64 only
    CHECK(allclose(u, s, 0.0, 18446744073709551616.0));
    CHECK_FALSE(allclose(u, s, 0.0, 1.8e19));
    // the same values in other dtypes are equal
    CHECK(array_equal(u, tensor({kMaxU64, uint64_t{1} << 63})));
    CHECK(array_equal(tensor({uint64_t{5}, uint64_t{0}}), tensor({int64_t{5}, int64_t{0}})));
    // uint8 200 is not int8 -56 (the same byte)
    Tensor u8 = Tensor::from_vector(std::vector<uint8_t>{7, 200}), i8 = Tensor::from_vector(std::vector<int8_t>{7, -56});
    CHECK_FALSE(array_equal(u8, i8));
    CHECK(bools(isclose(u8, i8, 0.0, 0.0)) == std::vector<bool>{true, false});
    // the report prints uint64 values unsigned; relative difference 1 / (2^64 - 2)
    CHECK(report_of(tensor({kMaxU64, uint64_t{3}}), tensor({kMaxU64 - 1, uint64_t{3}})) ==
          "assert_close: tensors are not close (uint64, shape [2]; rtol=0, atol=0)\n"
          "Mismatched elements: 1 / 2 (50.0%)\n"
          "Greatest absolute difference: 1 at index [0] (up to 0 allowed)\n"
          "Greatest relative difference: 5.421010862427522e-20 at index [0] (up to 0 allowed)\n"
          "Mismatches (index: actual vs expected):\n"
          "  [0]: 18446744073709551615 vs 18446744073709551614");
  }

  TEST_CASE("max_ulp_diff: nextafter chains and hand-counted bit patterns") {
    // float32: k steps of nextafter from 1 are k ulps, downwards across the
    // exponent boundary (ulp halves below 1) too
    float up = 1.0f, down = 1.0f;
    for (int k = 0; k < 37; ++k) up = std::nextafter(up, 2.0f);
    for (int k = 0; k < 5; ++k) down = std::nextafter(down, 0.0f);
    CHECK(max_ulp_diff(tensor({1.0f}), tensor({up})) == 37);
    CHECK(max_ulp_diff(tensor({down}), tensor({1.0f})) == 5);
    CHECK(max_ulp_diff(tensor({down, 1.0f, 2.0f}), tensor({up, 1.0f, 2.0f})) == 42);  // the max over elements
    // zero: -0 and +0 are one point; across it the sides add up
    const float tiny = std::nextafter(0.0f, 1.0f);  // smallest subnormal
    CHECK(max_ulp_diff(tensor({-0.0f}), tensor({0.0f})) == 0);
    CHECK(max_ulp_diff(tensor({0.0f}), tensor({tiny})) == 1);
    CHECK(max_ulp_diff(tensor({-tiny}), tensor({tiny})) == 2);
    float neg = -1.0f;
    for (int k = 0; k < 3; ++k) neg = std::nextafter(neg, 0.0f);
    // from -(1 - 3 ulps) up to +1: both distances from zero, counted in bit patterns
    CHECK(max_ulp_diff(tensor({neg}), tensor({1.0f})) == int64_t{0x3f800000} - 3 + 0x3f800000);
    // infinity is one step past the largest finite value
    CHECK(max_ulp_diff(tensor({FLT_MAX}), tensor({float(kInf)})) == 1);
    CHECK(max_ulp_diff(tensor({-FLT_MAX}), tensor({float(kInf)})) == 2 * int64_t{0x7f800000} - 1);
    // NaN: against NaN 0, against anything else INT64_MAX
    CHECK(max_ulp_diff(tensor({float(kNaN), 1.0f}), tensor({float(kNaN), 1.0f})) == 0);
    CHECK(max_ulp_diff(tensor({float(kNaN), 1.0f}), tensor({1.0f, 1.0f})) == kMaxI64);
    CHECK(max_ulp_diff(tensor({float(kInf)}), tensor({float(kNaN)})) == kMaxI64);

    // float64
    double d = 1.0;
    for (int k = 0; k < 1000; ++k) d = std::nextafter(d, 2.0);
    CHECK(max_ulp_diff(tensor({1.0}), tensor({d})) == 1000);
    double below2 = 2.0;
    for (int k = 0; k < 3; ++k) below2 = std::nextafter(below2, 0.0);
    CHECK(max_ulp_diff(tensor({2.0}), tensor({below2})) == 3);
    CHECK(max_ulp_diff(tensor({-std::nextafter(0.0, 1.0)}), tensor({std::nextafter(0.0, 1.0)})) == 2);
    // beyond int64: -DBL_MAX to DBL_MAX is 2 * 0x7fefffffffffffff steps; saturates
    CHECK(max_ulp_diff(tensor({-DBL_MAX}), tensor({DBL_MAX})) == kMaxI64);
    CHECK(max_ulp_diff(tensor({0.0}), tensor({DBL_MAX})) == int64_t{0x7fefffffffffffff});

    // float16 and bfloat16: bit patterns (1.0 is 0x3c00 and 0x3f80)
    CHECK(max_ulp_diff(half_from_bits({0x3c00, 0x0001}, DType::float16),
                       half_from_bits({0x3c05, 0x8001}, DType::float16)) == 5);
    CHECK(max_ulp_diff(half_from_bits({0x8001}, DType::float16), half_from_bits({0x0001}, DType::float16)) == 2);
    CHECK(max_ulp_diff(half_from_bits({0x7bff}, DType::float16), half_from_bits({0x7c00}, DType::float16)) == 1);
    CHECK(max_ulp_diff(half_from_bits({0x7e00}, DType::float16), half_from_bits({0x3c00}, DType::float16)) == kMaxI64);
    CHECK(max_ulp_diff(tensor({1.0, 1.0009765625}, DType::float16), tensor({1.0009765625, 1.0}, DType::float16)) == 1);
    CHECK(max_ulp_diff(tensor({1.0, -2.0}, DType::bfloat16), tensor({1.0078125, -2.0}, DType::bfloat16)) == 1);
    CHECK(max_ulp_diff(half_from_bits({0x3f80}, DType::bfloat16), half_from_bits({0x3f80 + 300}, DType::bfloat16)) == 300);

    // broadcasting, views, empty
    Tensor r = kt::random_tensor({4, 5}, DType::float32, 9, true);
    CHECK(max_ulp_diff(kt::relayout(r, kt::ViewKind::negative), r) == 0);
    CHECK(max_ulp_diff(tensor({1.0f, up}).reshape({2, 1}), tensor({1.0f, 1.0f, 1.0f})) == 37);
    CHECK(max_ulp_diff(zeros({0}), zeros({0})) == 0);
    // errors
    CHECK_THROWS_WITH_AS(max_ulp_diff(tensor({1.0f}), tensor({1.0})),
                         "max_ulp_diff: expected two tensors of the same floating dtype (float16, bfloat16, float32, "
                         "float64), got float32 and float64",
                         DTypeError);
    CHECK_THROWS_AS(max_ulp_diff(tensor({1}), tensor({1})), DTypeError);
    CHECK_THROWS_AS(max_ulp_diff(tensor({1.0f, 2.0f}), tensor({1.0f, 2.0f, 3.0f})), ShapeError);
  }

  TEST_CASE("default tolerances are torch.testing's") {
    CHECK(default_tolerance(DType::float16).rtol == 1e-3);
    CHECK(default_tolerance(DType::float16).atol == 1e-5);
    CHECK(default_tolerance(DType::bfloat16).rtol == 1.6e-2);
    CHECK(default_tolerance(DType::bfloat16).atol == 1e-5);
    CHECK(default_tolerance(DType::float32).rtol == 1.3e-6);
    CHECK(default_tolerance(DType::float32).atol == 1e-5);
    CHECK(default_tolerance(DType::float64).rtol == 1e-7);
    CHECK(default_tolerance(DType::float64).atol == 1e-7);
    for (DType d : {DType::bool_, DType::uint8, DType::int8, DType::int32, DType::int64}) {
      CHECK(default_tolerance(d).rtol == 0);
      CHECK(default_tolerance(d).atol == 0);
    }
    // float32: within 1e-5 + 1.3e-6 * |expected| passes, just outside fails
    CHECK_NOTHROW(assert_close(tensor({100.0f + 1.3e-4f}), tensor({100.0f})));
    CHECK_THROWS_AS(assert_close(tensor({100.0f + 2e-4f}), tensor({100.0f})), AssertionError);
  }

  TEST_CASE("assert_close: the report, pinned") {
    // float32, default tolerances
    Tensor a = tensor({{1.0f, 2.0f, 3.001f}, {2.5f, 5.0f, 6.0f}});
    Tensor e = tensor({{1.0f, 2.0f, 3.0f}, {2.0f, 5.0f, 6.0f}});
    const std::string report_a =
        "assert_close: tensors are not close (float32, shape [2, 3]; rtol=1.3e-06, atol=1e-05)\n"
        "Mismatched elements: 2 / 6 (33.3%)\n"
        "Greatest absolute difference: 0.5 at index [1, 0] (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.25 at index [1, 0] (up to 1.3e-06 allowed)\n"
        "Mismatches (index: actual vs expected):\n"
        "  [0, 2]: 3.001 vs 3\n"
        "  [1, 0]: 2.5 vs 2";
    CHECK(report_of(a, e) == report_a);
    CHECK(close_report(a, e) == report_a);

    // more than 5 mismatches, NaN and infinities, equal_nan (float64)
    Tensor b = tensor({0.0, kNaN, kInf, 1.0, 2.0, 3.0, -kInf, 7.0, 5.0, 1.0});
    Tensor f = tensor({0.0, kNaN, kInf, 1.5, 2.0, 4.0, kInf, 8.0, kNaN, 0.0});
    CHECK(report_of(b, f, std::nullopt, std::nullopt, true) ==
          "assert_close: tensors are not close (float64, shape [10]; rtol=1e-07, atol=1e-07, equal_nan)\n"
          "Mismatched elements: 6 / 10 (60.0%)\n"
          "Greatest absolute difference: nan at index [8] (up to 1e-07 allowed)\n"
          "Greatest relative difference: nan at index [8] (up to 1e-07 allowed)\n"
          "First 5 of 6 mismatches (index: actual vs expected):\n"
          "  [3]: 1 vs 1.5\n"
          "  [5]: 3 vs 4\n"
          "  [6]: -inf vs inf\n"
          "  [7]: 7 vs 8\n"
          "  [8]: 5 vs nan");

    // given tolerances, an infinity, expected zero; the message last
    Tensor c = tensor({{1.0, 2.0}, {kInf, 0.5}});
    Tensor g = tensor({{1.0, 2.5}, {1.0, 0.0}});
    CHECK(report_of(c, g, 1e-3, 0.1, false, "after 3 steps") ==
          "assert_close: tensors are not close (float64, shape [2, 2]; rtol=0.001, atol=0.1)\n"
          "Mismatched elements: 3 / 4 (75.0%)\n"
          "Greatest absolute difference: inf at index [1, 0] (up to 0.1 allowed)\n"
          "Greatest relative difference: inf at index [1, 0] (up to 0.001 allowed)\n"
          "Mismatches (index: actual vs expected):\n"
          "  [0, 1]: 2 vs 2.5\n"
          "  [1, 0]: inf vs 1\n"
          "  [1, 1]: 0.5 vs 0\n"
          "after 3 steps");

    // integers: exact by default
    CHECK(report_of(tensor({1, 2, 3}), tensor({1, 5, 3})) ==
          "assert_close: tensors are not close (int32, shape [3]; rtol=0, atol=0)\n"
          "Mismatched elements: 1 / 3 (33.3%)\n"
          "Greatest absolute difference: 3 at index [1] (up to 0 allowed)\n"
          "Greatest relative difference: 0.6 at index [1] (up to 0 allowed)\n"
          "Mismatches (index: actual vs expected):\n"
          "  [1]: 2 vs 5");

    // float16: values with float16's shortest digits; differences with float32's
    // (0.1 and 0.2 in float16 are 0.0999755859375 and 0.199951171875)
    CHECK(report_of(tensor({0.1}, DType::float16), tensor({0.2}, DType::float16)) ==
          "assert_close: tensors are not close (float16, shape [1]; rtol=0.001, atol=1e-05)\n"
          "Mismatched elements: 1 / 1 (100.0%)\n"
          "Greatest absolute difference: 0.099975586 at index [0] (up to 1e-05 allowed)\n"
          "Greatest relative difference: 0.5 at index [0] (up to 0.001 allowed)\n"
          "Mismatches (index: actual vs expected):\n"
          "  [0]: 0.1 vs 0.2");

    // bool and 0-d
    CHECK(report_of(tensor({true, false}), tensor({true, true})) ==
          "assert_close: tensors are not close (bool, shape [2]; rtol=0, atol=0)\n"
          "Mismatched elements: 1 / 2 (50.0%)\n"
          "Greatest absolute difference: 1 at index [1] (up to 0 allowed)\n"
          "Greatest relative difference: 1 at index [1] (up to 0 allowed)\n"
          "Mismatches (index: actual vs expected):\n"
          "  [1]: False vs True");
    CHECK(report_of(scalar(1.0, DType::float64), scalar(2.0, DType::float64)) ==
          "assert_close: tensors are not close (float64, shape []; rtol=1e-07, atol=1e-07)\n"
          "Mismatched elements: 1 / 1 (100.0%)\n"
          "Greatest absolute difference: 1 at index [] (up to 1e-07 allowed)\n"
          "Greatest relative difference: 0.5 at index [] (up to 1e-07 allowed)\n"
          "Mismatches (index: actual vs expected):\n"
          "  []: 1 vs 2");
  }

  TEST_CASE("large operands are read in chunks: mismatches at chunk edges, any view") {
    // 3 x 3001 = 9003 elements: three chunks of the reader (4096 each);
    // mismatches at flat positions 4095, 4096 (either side of the first edge) and the last
    std::vector<float> ev = kt::random_tensor({3, 3001}, DType::float32, 31).to_vector<float>(), av = ev;
    ev[4095] = 0.5f, av[4095] = 1.5f;
    ev[4096] = 1.0f, av[4096] = 4.0f;
    ev[9002] = 2.0f, av[9002] = 4.0f;
    Tensor a = Tensor::from_vector(av, {3, 3001}), e = Tensor::from_vector(ev, {3, 3001});
    const std::string want =
        "assert_close: tensors are not close (float32, shape [3, 3001]; rtol=1.3e-06, atol=1e-05)\n"
        "Mismatched elements: 3 / 9003 (0.0%)\n"
        "Greatest absolute difference: 3 at index [1, 1095] (up to 1e-05 allowed)\n"
        "Greatest relative difference: 3 at index [1, 1095] (up to 1.3e-06 allowed)\n"
        "Mismatches (index: actual vs expected):\n"
        "  [1, 1094]: 1.5 vs 0.5\n"
        "  [1, 1095]: 4 vs 1\n"
        "  [2, 3000]: 4 vs 2";
    for (auto k : {kt::ViewKind::contiguous, kt::ViewKind::negative, kt::ViewKind::transposed}) {
      CAPTURE(kt::view_name(k));
      Tensor ak = kt::relayout(a, k), ek = kt::relayout(e, k);
      CHECK(close_report(ak, ek) == want);
      std::vector<bool> c = bools(isclose(ak, ek, 1.3e-6, 1e-5));
      for (size_t i = 0; i < c.size(); ++i) {
        const bool ref = ref_isclose(av[i], ev[i], 1.3e-6, 1e-5, false);
        if (c[i] != ref) {
          CAPTURE(i);
          CHECK(c[i] == ref);
        }
      }
      CHECK(std::count(c.begin(), c.end(), false) == 3);
      CHECK_FALSE(allclose(ak, ek, 1.3e-6, 1e-5));
      CHECK_FALSE(array_equal(ak, ek));
      CHECK(array_equal(ak, a));
      CHECK(max_ulp_diff(ak, ek) > 0);
    }
    // the last element alone differs by one ulp
    std::vector<float> bv = ev;
    bv[9002] = std::nextafter(bv[9002], 10.0f);
    CHECK(max_ulp_diff(kt::relayout(Tensor::from_vector(bv, {3, 3001}), kt::ViewKind::negative), e) == 1);
  }

  TEST_CASE("assert_close: shape and dtype mismatches are their own message") {
    CHECK(report_of(zeros({2, 3}), zeros({3, 2})) == "assert_close: shapes differ: actual [2, 3], expected [3, 2]");
    CHECK(report_of(zeros({3}), zeros({3}, DType::float64)) ==
          "assert_close: dtypes differ: actual float32, expected float64 (convert one with .to(dtype) to compare the "
          "values)");
    CHECK(report_of(zeros({3}), zeros({1})) == "assert_close: shapes differ: actual [3], expected [1]");  // no broadcasting
    CHECK(report_of(zeros({2}), zeros({2, 1}), std::nullopt, std::nullopt, false, "layer 4") ==
          "assert_close: shapes differ: actual [2], expected [2, 1]\nlayer 4");
  }

  TEST_CASE("assert_close: passing cases, views, lazy tensors, errors") {
    Tensor x = kt::random_tensor({5, 7}, DType::float32, 21, true);
    CHECK_NOTHROW(assert_close(x.clone(), x, std::nullopt, std::nullopt, true));
    CHECK_THROWS_AS(assert_close(x.clone(), x), AssertionError);  // x holds NaN
    CHECK_NOTHROW(assert_close(zeros({0, 3}), zeros({0, 3})));
    // any strides: the same report as for the contiguous tensors
    Tensor a = tensor({{1.0f, 2.0f, 3.001f}, {2.5f, 5.0f, 6.0f}});
    Tensor e = tensor({{1.0f, 2.0f, 3.0f}, {2.0f, 5.0f, 6.0f}});
    const std::string want = close_report(a, e);
    REQUIRE_FALSE(want.empty());
    for (auto k : {kt::ViewKind::transposed, kt::ViewKind::strided, kt::ViewKind::negative}) {
      CAPTURE(kt::view_name(k));
      CHECK(close_report(kt::relayout(a, k), kt::relayout(e, k)) == want);
    }
    // a broadcast view as actual
    CHECK_NOTHROW(assert_close(broadcast_to(tensor({1.0f, 2.0f}), {3, 2}), tensor({{1.0f, 2.0f}, {1.0f, 2.0f}, {1.0f, 2.0f}})));
    // lazy (unrealized) tensors are realized first
    Tensor la, le;
    {
      auto scope = lazy();
      la = a * 1.0f;
      le = e + 0.0f;
    }
    REQUIRE_FALSE(la.is_realized());
    CHECK(close_report(la, le) == want);
    CHECK(allclose(la, la));
    // an unrealized graph value cannot be compared
    Graph gr("g", {TensorType(DType::float32, {3}, Device::cpu())});
    {
      GraphRealizationContext ctx(gr);
      Tensor v = Tensor::from_graph_value(gr.inputs()[0]);
      CHECK_THROWS_AS(assert_close(v, v), RealizationError);
      CHECK_THROWS_AS(isclose(v, v), RealizationError);
    }
    // argument errors
    CHECK_THROWS_WITH_AS(assert_close(Tensor(), e), "assert_close: actual is an undefined tensor", ValueError);
    CHECK_THROWS_WITH_AS(assert_close(e, e, -1.0), "assert_close: rtol must be >= 0 (and not NaN), got -1",
                         ValueError);
    // AssertionError is a kiln::Error
    CHECK_THROWS_AS(assert_close(a, e), Error);
  }

  TEST_CASE("CHECK_CLOSE / REQUIRE_CLOSE pass, with and without tolerances") {
    Tensor a = tensor({1.0f, 2.0f, 3.0f});
    CHECK_CLOSE(a, a * 1.0f);
    CHECK_CLOSE(a + 1e-3f, a, 1e-3, 1e-3);
    REQUIRE_CLOSE(tensor({kNaN}), tensor({kNaN}), 0.0, 0.0, true);
    KILN_CHECK_CLOSE(a, a);
    // what a failure prints: the expression, then assert_close's report
    Tensor b = tensor({1.0f, 2.5f, 3.0f});
    CHECK(kiln::doctest_detail::close_failure("CHECK_CLOSE( b, a )", b, a) ==
          "CHECK_CLOSE( b, a ) failed:\n" + close_report(b, a));
    CHECK(kiln::doctest_detail::close_failure("CHECK_CLOSE( b, a )", b, a, 0.5, 0.0).empty());
    CHECK(kiln::doctest_detail::close_failure("CHECK_CLOSE( b, a )", Tensor(), a) ==
          "CHECK_CLOSE( b, a ) threw assert_close: actual is an undefined tensor");
  }

  // These two print one (expected) failure each.
  TEST_CASE("CHECK_CLOSE reports a mismatch as one failed check and goes on" * doctest::expected_failures(1)) {
    int after = 0;
    CHECK_CLOSE(tensor({1.0f, 2.5f}), tensor({1.0f, 2.0f}));
    ++after;
    CHECK(after == 1);
  }

  TEST_CASE("REQUIRE_CLOSE ends the test case" * doctest::expected_failures(1)) {
    REQUIRE_CLOSE(tensor({1.0f, 2.5f}), tensor({1.0f, 2.0f}));
    CHECK(false);  // not reached: would be a second failure
  }
}
