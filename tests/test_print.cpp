// operator<< against literals from numpy 2.4:
// numpy.array2string(a, separator=', ') (numpy's repr without "array(").
#include <sstream>

#include "test_util.h"

namespace {

using namespace kiln;

std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

template <class T>
Tensor vec(std::vector<T> v, Shape shape = {}) {
  return Tensor::from_vector(v, shape);
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_SUITE("print") {
  TEST_CASE("floats: positional, aligned decimals") {
    // numpy: np.array([[1., 2.], [3., 4.]])
    CHECK(str(vec<double>({1, 2, 3, 4}, {2, 2})) == "[[1., 2.],\n [3., 4.]]");
    // numpy: np.array([1., 2.5])
    CHECK(str(tensor({1.0, 2.5})) == "[1. , 2.5]");
    // numpy: np.array([1/3, 2/3])
    CHECK(str(tensor({1.0 / 3, 2.0 / 3})) == "[0.33333333, 0.66666667]");
    // numpy: np.array([-0.0, 0.0])
    CHECK(str(tensor({-0.0, 0.0})) == "[-0.,  0.]");
    // numpy: np.linspace(0, 1, 5)
    CHECK(str(tensor({0.0, 0.25, 0.5, 0.75, 1.0})) == "[0.  , 0.25, 0.5 , 0.75, 1.  ]");
    // numpy: np.array([1e6, 1e4]) (float64 cutoff is 1e8)
    CHECK(str(tensor({1e6, 1e4})) == "[1000000.,   10000.]");
  }

  TEST_CASE("floats: shortest digits per dtype") {
    // numpy: np.array([0.1, 0.2], dtype=np.float32)
    CHECK(str(tensor({0.1f, 0.2f})) == "[0.1, 0.2]");
    // numpy: np.array([0.1, 1/3, 2.0], dtype=np.float16)
    CHECK(str(tensor({0.1, 1.0 / 3, 2.0}, DType::float16)) == "[0.1   , 0.3333, 2.    ]");
    // numpy: np.array([1.5, 2.0], dtype=np.float16)
    CHECK(str(tensor({1.5, 2.0}, DType::float16)) == "[1.5, 2. ]");
    // numpy: np.array([4.0625, 1.0, 4.1875, 4.3125], dtype=np.float16): ties to even digit
    CHECK(str(tensor({4.0625, 1.0, 4.1875, 4.3125}, DType::float16)) == "[4.062, 1.   , 4.188, 4.312]");
    // numpy: np.array([1e-4], dtype=np.float32): the 1e-4 threshold is compared in float32
    CHECK(str(tensor({1e-4f})) == "[0.0001]");
    // numpy: np.array(4112, dtype=np.float16): 4110 reads back as 4112 (tie to even)
    CHECK(str(scalar(4112, DType::float16)) == "4.11e+03");
    // numpy: np.array([0.1, 0.2], dtype=np.float32).astype(np.float64): the values
    // 0.10000000149011612... are rounded to 8 decimals, then trailing zeros trimmed
    CHECK(str(tensor({0.1f, 0.2f}, DType::float64)) == "[0.1, 0.2]");
    // bfloat16 uses the same rules (1.5 and 2 are exact)
    CHECK(str(tensor({1.5, 2.0}, DType::bfloat16)) == "[1.5, 2. ]");
  }

  TEST_CASE("floats: scientific notation") {
    // numpy: np.array([1e-5, 1.0])
    CHECK(str(tensor({1e-5, 1.0})) == "[1.e-05, 1.e+00]");
    // numpy: np.array([1e8, 1.0])
    CHECK(str(tensor({1e8, 1.0})) == "[1.e+08, 1.e+00]");
    // numpy: np.array([1e16, -2.5, 1e-300]): exponents padded to a common width
    CHECK(str(tensor({1e16, -2.5, 1e-300})) == "[ 1.0e+016, -2.5e+000,  1.0e-300]");
    // numpy: np.array([100000.5, 1.0]): ratio > 1000, extra digits of the exact value
    CHECK(str(tensor({100000.5, 1.0})) == "[1.000005e+05, 1.000000e+00]");
    // numpy: np.array([2**-13, 1.0, 2.0]): rounded half-even at 8 digits
    CHECK(str(tensor({std::ldexp(1.0, -13), 1.0, 2.0})) == "[1.22070312e-04, 1.00000000e+00, 2.00000000e+00]");
    // numpy 2.x: the cutoff depends on the dtype (10^min(8, finfo.precision))
    // numpy: np.array([1e6, 1e4], dtype=np.float32)
    CHECK(str(tensor({1e6f, 1e4f})) == "[1.e+06, 1.e+04]");
    // numpy: np.array([1000., 2.], dtype=np.float16)
    CHECK(str(tensor({1000.0, 2.0}, DType::float16)) == "[1.e+03, 2.e+00]");
    // numpy: np.array([65504, 6e-8], dtype=np.float16)
    CHECK(str(tensor({65504.0, 6e-8}, DType::float16)) == "[6.55e+04, 5.96e-08]");
  }

  TEST_CASE("floats: nan and inf") {
    // numpy: np.array([np.nan, -np.inf, 1.5])
    CHECK(str(tensor({kNaN, -kInf, 1.5})) == "[ nan, -inf,  1.5]");
    // numpy: np.array([np.nan, np.inf])
    CHECK(str(tensor({kNaN, kInf})) == "[nan, inf]");
    // numpy: np.array([[1e-9, 1.0], [np.nan, -np.inf]], dtype=np.float32)
    CHECK(str(tensor({{1e-9f, 1.0f}, {float(kNaN), -float(kInf)}})) == "[[1.e-09, 1.e+00],\n [   nan,   -inf]]");
  }

  TEST_CASE("integers and bools") {
    // numpy: np.array([1, -20, 300], dtype=np.int32)
    CHECK(str(tensor({1, -20, 300})) == "[  1, -20, 300]");
    // numpy: np.array([-128, 127], dtype=np.int8)
    CHECK(str(tensor({-128, 127}, DType::int8)) == "[-128,  127]");
    // numpy: np.array([0, 255], dtype=np.uint8)
    CHECK(str(tensor({0, 255}, DType::uint8)) == "[  0, 255]");
    // numpy: np.array([np.iinfo(np.int64).min, 5])
    CHECK(str(vec<int64_t>({std::numeric_limits<int64_t>::min(), 5})) == "[-9223372036854775808,                    5]");
    // numpy: np.array([True, False]); np.array([True, True])
    CHECK(str(tensor({true, false})) == "[ True, False]");
    CHECK(str(tensor({true, true})) == "[ True,  True]");
    // numpy: np.array([[True, False, True], [False, False, False]])
    const bool b[] = {true, false, true, false, false, false};
    CHECK(str(Tensor::from_data(b, DType::bool_, 6, {2, 3})) ==
          "[[ True, False,  True],\n [False, False, False]]");
  }

  TEST_CASE("0-d and empty tensors") {
    // numpy: np.array(1.5), np.array(3, dtype=np.int32), np.array(True), np.array(1e-5), np.array(np.nan)
    CHECK(str(scalar(1.5, DType::float64)) == "1.5");
    CHECK(str(scalar(3, DType::int32)) == "3");
    CHECK(str(scalar(true, DType::bool_)) == "True");
    CHECK(str(scalar(false, DType::bool_)) == "False");
    CHECK(str(scalar(1e-5, DType::float64)) == "1.e-05");
    CHECK(str(scalar(kNaN, DType::float64)) == "nan");
    // numpy: every empty array prints as [] (np.zeros((2, 0)))
    CHECK(str(zeros({0})) == "[]");
    CHECK(str(zeros({2, 0})) == "[]");
    CHECK(str(zeros({0, 3, 4}, DType::int64)) == "[]");
    CHECK(str(Tensor()) == "Tensor(undefined)");
  }

  TEST_CASE("line wrapping at 75 columns") {
    // numpy: np.arange(30.)
    std::vector<double> v(30);
    for (int i = 0; i < 30; ++i) v[i] = i;
    CHECK(str(vec(v)) ==
          "[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13., 14.,\n"
          " 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27., 28., 29.]");
  }

  TEST_CASE("3-d blocks are separated by blank lines") {
    // numpy: np.arange(8).reshape(2, 2, 2)
    CHECK(str(vec(iota(8), {2, 2, 2})) == "[[[0, 1],\n  [2, 3]],\n\n [[4, 5],\n  [6, 7]]]");
  }

  TEST_CASE("summarised with ... above 1000 elements") {
    // numpy: np.arange(1001)
    CHECK(str(vec(iota(1001))) == "[   0,    1,    2, ...,  998,  999, 1000]");
    // numpy: np.arange(1000) is not summarised (threshold is size > 1000)
    CHECK(str(vec(iota(1000))).find("...") == std::string::npos);
    // numpy: np.arange(2000).reshape(100, 20)
    CHECK(str(vec(iota(2000), {100, 20})) ==
          "[[   0,    1,    2, ...,   17,   18,   19],\n"
          " [  20,   21,   22, ...,   37,   38,   39],\n"
          " [  40,   41,   42, ...,   57,   58,   59],\n"
          " ...,\n"
          " [1940, 1941, 1942, ..., 1957, 1958, 1959],\n"
          " [1960, 1961, 1962, ..., 1977, 1978, 1979],\n"
          " [1980, 1981, 1982, ..., 1997, 1998, 1999]]");
    // numpy: np.arange(1100, dtype=np.float32).reshape(10, 10, 11): the format
    // is fitted to the shown elements only; blocks summarised with "...,\n\n".
    std::vector<float> f(1100);
    for (int i = 0; i < 1100; ++i) f[i] = static_cast<float>(i);
    const std::string s = str(vec(f, {10, 10, 11}));
    CHECK(s.substr(0, s.find('\n')) == "[[[0.000e+00, 1.000e+00, 2.000e+00, ..., 8.000e+00, 9.000e+00, 1.000e+01],");
    CHECK(s.find("\n\n ...,\n\n [[7.700e+02, 7.710e+02,") != std::string::npos);
    CHECK(s.substr(s.size() - 76) ==
          "\n  [1.089e+03, 1.090e+03, 1.091e+03, ..., 1.097e+03, 1.098e+03, 1.099e+03]]]");
  }

  TEST_CASE("non-contiguous tensors print their logical values") {
    // numpy: np.array([[1, 2, 3], [4, 5, 6]]).T
    Tensor a = vec<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor at(a.buffer(), DType::int64, {3, 2}, {1, 3});
    CHECK(str(at) == "[[1, 4],\n [2, 5],\n [3, 6]]");
    // numpy: np.arange(24.).reshape(2, 3, 4)[:, ::-1, ::2]
    std::vector<double> v(24);
    for (int i = 0; i < 24; ++i) v[i] = i;
    Tensor b = vec(v, {2, 3, 4});
    Tensor bv(b.buffer(), DType::float64, {2, 3, 2}, {12, -4, 2}, 8);
    CHECK(str(bv) == "[[[ 8., 10.],\n  [ 4.,  6.],\n  [ 0.,  2.]],\n\n [[20., 22.],\n  [16., 18.],\n  [12., 14.]]]");
    // the relayout helpers give the same text as the contiguous tensor
    Tensor r = kt::random_tensor({4, 5}, DType::float64, 3, true);
    for (auto k : {kt::ViewKind::transposed, kt::ViewKind::strided, kt::ViewKind::negative}) {
      CAPTURE(kt::view_name(k));
      CHECK(str(kt::relayout(r, k)) == str(r));
    }
  }
}
