// Print options (set_print_options, PrintOptionsGuard) against literals from
// numpy 2.4: `with np.printoptions(...): np.array2string(a, separator=', ')`.
// numpy has no option that forces scientific notation; the SciMode::on
// literals are numpy 2.4's output with its exponent cutoff forced to 0
// (numpy._core.arrayprint.np.finfo patched to report precision -400), i.e.
// what numpy prints when its own rule picks scientific for the same values.
#include <sstream>
#include <thread>

#include "test_util.h"

namespace {

using namespace kiln;

std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

std::string str(const Tensor& t, const PrintOptions& o) {
  PrintOptionsGuard g(o);
  return str(t);
}

Tensor iota(int64_t n, Shape shape = {}) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return Tensor::from_vector(v, shape);
}

Tensor iota_f(int64_t n) { return iota(n).to(DType::float64); }

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_SUITE("print_options") {
  TEST_CASE("defaults are numpy's and get/set round-trip") {
    const PrintOptions d = get_print_options();
    CHECK(d.precision == 8);
    CHECK(d.threshold == 1000);
    CHECK(d.edgeitems == 3);
    CHECK(d.linewidth == 75);
    CHECK(d.sci_mode == SciMode::auto_);
    PrintOptions o;
    o.precision = 3;
    set_print_options(o);
    CHECK(get_print_options() == o);
    // numpy: np.array([1/3, 2/3]) with precision=3
    CHECK(str(tensor({1.0 / 3, 2.0 / 3})) == "[0.333, 0.667]");
    set_print_options(PrintOptions{});
    CHECK(str(tensor({1.0 / 3, 2.0 / 3})) == "[0.33333333, 0.66666667]");
  }

  TEST_CASE("precision") {
    // numpy: np.array([0.5, 1.5, 2.5, -0.4]), precision=0: half to even on the exact value
    CHECK(str(tensor({0.5, 1.5, 2.5, -0.4}), {.precision = 0}) == "[ 0.,  2.,  2., -0.]");
    // numpy: np.array([0.1, 1/3, 2], dtype=np.float32), precision=4
    CHECK(str(tensor({0.1f, 1.0f / 3, 2.0f}), {.precision = 4}) == "[0.1   , 0.3333, 2.    ]");
    // numpy: np.array([0.1, 1/3], dtype=np.float16), precision=3
    CHECK(str(tensor({0.1, 1.0 / 3}, DType::float16), {.precision = 3}) == "[0.1  , 0.333]");
    // numpy: np.array([1/3, 1.]), precision=12; np.array([0.1, 1.]), precision=20 (shortest digits win)
    CHECK(str(tensor({1.0 / 3, 1.0}), {.precision = 12}) == "[0.333333333333, 1.            ]");
    CHECK(str(tensor({0.1, 1.0}), {.precision = 20}) == "[0.1, 1. ]");
    // scientific digits are capped by precision too
    // numpy: np.array([1e-5, 1/3]), precision=3; np.array([123.456, 0.001]), precision=2
    CHECK(str(tensor({1e-5, 1.0 / 3}), {.precision = 3}) == "[1.000e-05, 3.333e-01]");
    CHECK(str(tensor({123.456, 0.001}), {.precision = 2}) == "[1.23e+02, 1.00e-03]");
  }

  TEST_CASE("threshold and edgeitems") {
    // numpy: np.arange(10), threshold=5 / threshold=10 (summarised when size > threshold)
    CHECK(str(iota(10), {.threshold = 5}) == "[0, 1, 2, ..., 7, 8, 9]");
    CHECK(str(iota(10), {.threshold = 10}) == "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]");
    // numpy: np.arange(7) / np.arange(6), threshold=0: an axis is cut only when longer than 2 * edgeitems
    CHECK(str(iota(7), {.threshold = 0}) == "[0, 1, 2, ..., 4, 5, 6]");
    CHECK(str(iota(6), {.threshold = 0}) == "[0, 1, 2, 3, 4, 5]");
    // numpy: np.arange(20), threshold=10, edgeitems=2
    CHECK(str(iota(20), {.threshold = 10, .edgeitems = 2}) == "[ 0,  1, ..., 18, 19]");
    // numpy: np.arange(12).reshape(3, 4), threshold=4, edgeitems=1
    CHECK(str(iota(12, {3, 4}), {.threshold = 4, .edgeitems = 1}) == "[[ 0, ...,  3],\n ...,\n [ 8, ..., 11]]");
    // numpy: np.arange(1001), edgeitems=5
    CHECK(str(iota(1001), {.edgeitems = 5}) == "[   0,    1,    2,    3,    4, ...,  996,  997,  998,  999, 1000]");
    // a huge edgeitems never summarises (no overflow in 2 * edgeitems)
    CHECK(str(iota(7), {.threshold = 0, .edgeitems = INT64_MAX}) == "[0, 1, 2, 3, 4, 5, 6]");
  }

  TEST_CASE("linewidth") {
    // numpy: np.arange(10.), linewidth=20
    CHECK(str(iota_f(10), {.linewidth = 20}) == "[0., 1., 2., 3., 4.,\n 5., 6., 7., 8., 9.]");
    // numpy: np.arange(12).reshape(2, 6) * 1000, linewidth=30
    std::vector<int64_t> v(12);
    for (int i = 0; i < 12; ++i) v[static_cast<size_t>(i)] = 1000 * i;
    CHECK(str(Tensor::from_vector(v, {2, 6}), {.linewidth = 30}) ==
          "[[    0,  1000,  2000,  3000,\n   4000,  5000],\n [ 6000,  7000,  8000,  9000,\n  10000, 11000]]");
    // numpy: np.array([1, 2, 3]) and np.array([[1, 2], [3, 4]]), linewidth=1: one element per line
    CHECK(str(iota(3) + 1, {.linewidth = 1}) == "[1,\n 2,\n 3]");
    CHECK(str(iota(4, {2, 2}) + 1, {.linewidth = 1}) == "[[1,\n  2],\n [3,\n  4]]");
    // numpy: np.arange(30.), linewidth=200: one line
    CHECK(str(iota_f(30), {.linewidth = 200}) ==
          "[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13., 14., 15., 16., 17., 18., "
          "19., 20., 21., 22., 23., 24., 25., 26., 27., 28., 29.]");
  }

  TEST_CASE("sci_mode off: positional (numpy's suppress=True below its large-value cutoff)") {
    const PrintOptions off{.sci_mode = SciMode::off};
    // numpy: np.array([1e-5, 1.0]), suppress=True
    CHECK(str(tensor({1e-5, 1.0}), off) == "[0.00001, 1.     ]");
    // numpy: np.array([1e-10, 1.0, -1e-10]), suppress=True: below 10^-precision prints as zero
    CHECK(str(tensor({1e-10, 1.0, -1e-10}), off) == "[ 0.,  1., -0.]");
    // numpy: np.array([100000.5, 1.0]), suppress=True
    CHECK(str(tensor({100000.5, 1.0}), off) == "[100000.5,      1. ]");
    // numpy: np.array([1e-9, 1, nan, -inf], dtype=np.float32), suppress=True
    CHECK(str(tensor({1e-9f, 1.0f, float(kNaN), -float(kInf)}), off) == "[  0.,   1.,  nan, -inf]");
    // numpy: np.array([1.5e-4, 0.5]), suppress=True, precision=3
    CHECK(str(tensor({1.5e-4, 0.5}), {.precision = 3, .sci_mode = SciMode::off}) == "[0. , 0.5]");
    // kiln's rule (torch's sci_mode=False), where numpy's suppress still goes
    // scientific (>= 1e8): each value is numpy's
    // np.format_float_positional(x, unique=True, trim='.'), aligned as numpy aligns.
    CHECK(str(tensor({1e20, 1.0}), off) == "[100000000000000000000.,                     1.]");
  }

  TEST_CASE("sci_mode on: scientific for every float") {
    const PrintOptions on{.sci_mode = SciMode::on};
    // numpy (cutoff forced): np.array([1.5, 2.25])
    CHECK(str(tensor({1.5, 2.25}), on) == "[1.50e+00, 2.25e+00]");
    // numpy (cutoff forced): np.array([0., 1., -3.])
    CHECK(str(tensor({0.0, 1.0, -3.0}), on) == "[ 0.e+00,  1.e+00, -3.e+00]");
    // numpy (cutoff forced): np.array([1/3, 100.]), default precision and precision=3
    CHECK(str(tensor({1.0 / 3, 100.0}), on) == "[3.33333333e-01, 1.00000000e+02]");
    CHECK(str(tensor({1.0 / 3, 100.0}), {.precision = 3, .sci_mode = SciMode::on}) == "[3.333e-01, 1.000e+02]");
    // numpy (cutoff forced): np.array([0.1, nan, inf], dtype=np.float32); np.array(2.5)
    CHECK(str(tensor({0.1f, float(kNaN), float(kInf)}), on) == "[1.e-01,    nan,    inf]");
    CHECK(str(scalar(2.5, DType::float64), on) == "2.5e+00");
    // numpy (cutoff forced): np.arange(3): integers are not floats
    CHECK(str(iota(3), on) == "[0, 1, 2]");
    // kiln's rule where numpy never goes scientific (no nonzero value):
    // zeros as numpy's np.format_float_scientific(0.0, unique=True, trim='.') = '0.e+00'
    CHECK(str(zeros({2}, DType::float64), on) == "[0.e+00, 0.e+00]");
  }

  TEST_CASE("PrintOptionsGuard restores, nests, and leaves other threads alone") {
    Tensor x = tensor({1.0 / 3, 2.0 / 3});
    const std::string dflt = "[0.33333333, 0.66666667]";
    {
      PrintOptionsGuard g({.precision = 2});
      CHECK(str(x) == "[0.33, 0.67]");
      CHECK(g.previous() == PrintOptions{});
      {
        PrintOptionsGuard inner({.precision = 4});
        CHECK(str(x) == "[0.3333, 0.6667]");
        std::string other;
        std::thread([&] { other = str(x); }).join();  // a new thread starts with the defaults
        CHECK(other == dflt);
      }
      CHECK(str(x) == "[0.33, 0.67]");
    }
    CHECK(str(x) == dflt);
    // a guard that throws changes nothing
    CHECK_THROWS_AS(PrintOptionsGuard({.precision = -1}), ValueError);
    CHECK(get_print_options() == PrintOptions{});
  }

  TEST_CASE("out-of-range options throw ValueError naming the field") {
    CHECK_THROWS_WITH_AS(set_print_options({.precision = 101}),
                         "set_print_options: precision must be in [0, 100], got 101", ValueError);
    CHECK_THROWS_WITH_AS(set_print_options({.threshold = -1}), "set_print_options: threshold must be >= 0, got -1",
                         ValueError);
    CHECK_THROWS_WITH_AS(set_print_options({.edgeitems = 0}), "set_print_options: edgeitems must be >= 1, got 0",
                         ValueError);
    CHECK_THROWS_WITH_AS(set_print_options({.linewidth = 0}), "set_print_options: linewidth must be >= 1, got 0",
                         ValueError);
    CHECK_THROWS_WITH_AS(set_print_options({.sci_mode = static_cast<SciMode>(7)}),
                         "set_print_options: sci_mode must be SciMode::auto_, on or off, got 7", ValueError);
    CHECK(get_print_options() == PrintOptions{});
  }
}
