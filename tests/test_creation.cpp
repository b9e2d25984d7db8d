// Creation functions (creation.h) and the Eigen interop (<kiln/eigen.h>).
#include <kiln/eigen.h>

#include "test_util.h"

namespace {

using namespace kiln;

void check_values(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  kt::check_all_close(t, want, 0.0, 0.0, what);
}

}  // namespace

TEST_SUITE("creation") {
  TEST_CASE("zeros, ones, full and empty for every dtype") {
    for (DType d : kt::all_dtypes()) {
      CAPTURE(d);
      Tensor z = zeros({2, 3}, d);
      CHECK(z.dtype() == d);
      CHECK(z.shape() == Shape{2, 3});
      CHECK(z.is_contiguous());
      check_values(z, std::vector<double>(6, 0.0), "zeros");
      check_values(ones({4}, d), std::vector<double>(4, 1.0), "ones");
      Tensor e = empty({3, 0, 2}, d);
      CHECK(e.numel() == 0);
      CHECK(e.shape() == Shape{3, 0, 2});
      // full converts with numpy's cast rules: 2.75 -> 2 for integers, true for bool
      const double want = d == DType::bool_ ? 1.0 : is_floating(d) ? 2.75 : 2.0;
      check_values(full({2, 2}, 2.75, d), std::vector<double>(4, want), "full");
    }
    CHECK(zeros({}).ndim() == 0);
    CHECK(zeros({}).item<double>() == 0.0);
    CHECK(full({3}, -7, DType::int8).to_vector<int8_t>() == std::vector<int8_t>{-7, -7, -7});
    CHECK(std::isnan(full({1}, std::nan(""), DType::float32).item<float>()));
  }

  TEST_CASE("from_data: a null pointer with values to copy is a ValueError; with none it makes an empty tensor") {
    CHECK_THROWS_WITH_AS(Tensor::from_data(nullptr, DType::float32, 4, {4}),
                         "from_data: data is a null pointer but 4 float32 value(s) were to be copied from it "
                         "(shape [4])",
                         ValueError);
    // n == 0: nothing is read, so null is fine (what an empty std::vector's data() may give).
    Tensor e = Tensor::from_data(nullptr, DType::int64, 0, {2, 0});
    CHECK(e.shape() == Shape{2, 0});
    CHECK(e.dtype() == DType::int64);
    CHECK(Tensor::from_vector(std::vector<float>{}).numel() == 0);
    // The count check still comes first for a non-null pointer.
    const float v[3] = {1.f, 2.f, 3.f};
    CHECK_THROWS_AS(Tensor::from_data(v, DType::float32, 3, {4}), ShapeError);
    check_values(Tensor::from_data(v, DType::float32, 3, {3}), {1.0, 2.0, 3.0}, "from_data");
  }

  TEST_CASE("large fills take the parallel path and fill every element") {
    const int64_t n = (int64_t(1) << 20) + 37;
    Tensor z = zeros({n}, DType::float64);
    std::vector<double> zv = z.to_vector<double>();
    CHECK(std::all_of(zv.begin(), zv.end(), [](double v) { return v == 0.0 && !std::signbit(v); }));
    Tensor f = full({n}, 3.5, DType::float32);
    std::vector<float> fv = f.to_vector<float>();
    CHECK(std::all_of(fv.begin(), fv.end(), [](float v) { return v == 3.5f; }));
    Tensor a = arange(0.0, double(n), 1.0, DType::float64);
    std::vector<double> av = a.to_vector<double>();
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok = ok && av[i] == double(i);
    CHECK(ok);
  }

  TEST_CASE("*_like keep shape, dtype and device") {
    Tensor x = full({2, 5}, 4, DType::int64);
    for (const Tensor& t : {empty_like(x), zeros_like(x), ones_like(x), full_like(x, 9)}) {
      CHECK(t.shape() == x.shape());
      CHECK(t.dtype() == DType::int64);
      CHECK(t.device() == Device::cpu());
      CHECK_FALSE(t.buffer() == x.buffer());
    }
    CHECK(full_like(x, 9).to_vector<int64_t>() == std::vector<int64_t>(10, 9));
    CHECK(ones_like(x).to_vector<int64_t>() == std::vector<int64_t>(10, 1));
  }

  TEST_CASE("bad shapes and devices") {
    CHECK_THROWS_AS(zeros({2, -1}), ShapeError);
    CHECK_THROWS_AS(ones({-3}), ShapeError);
    CHECK_THROWS_AS(full({int64_t(1) << 40, int64_t(1) << 40}, 1.0), ShapeError);
    CHECK_THROWS_AS(empty({int64_t(1) << 62, 4}), ShapeError);
    CHECK_THROWS_WITH_AS(zeros({2, -1}), doctest::Contains("zeros"), ShapeError);
    if (!cuda::is_built()) CHECK_THROWS_AS(zeros({2}, DType::float32, Device::cuda(0)), NotBuiltError);
    else if (cuda::device_count() == 0) CHECK_THROWS_AS(zeros({2}, DType::float32, Device::cuda(0)), DeviceError);
  }

  TEST_CASE("arange follows numpy") {
    // numpy: np.arange(0, 1, 0.1).tolist()
    check_values(arange(0, 1, 0.1, DType::float64),
                 {0.0, 0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001, 0.7000000000000001, 0.8, 0.9},
                 "arange(0, 1, 0.1)");
    // numpy: np.arange(-1, 2.5, 0.7).tolist()
    check_values(arange(-1, 2.5, 0.7, DType::float64),
                 {-1.0, -0.30000000000000004, 0.3999999999999999, 1.0999999999999996, 1.7999999999999998},
                 "arange(-1, 2.5, 0.7)");
    // numpy: np.arange(0, 1, 0.1, dtype=np.float32).tolist()
    check_values(arange(0, 1, 0.1),
                 {0.0, 0.10000000149011612, 0.20000000298023224, 0.30000001192092896, 0.4000000059604645, 0.5,
                  0.6000000238418579, 0.699999988079071, 0.800000011920929, 0.9000000357627869},
                 "arange float32");
    // numpy: np.arange(1, 0, -0.25), np.arange(0.5, 3, 1.0), np.arange(0, 10, 3, dtype=int)
    check_values(arange(1, 0, -0.25, DType::float64), {1.0, 0.75, 0.5, 0.25}, "negative step");
    check_values(arange(0.5, 3, 1.0, DType::float64), {0.5, 1.5, 2.5}, "arange(0.5, 3)");
    CHECK(arange(0, 10, 3, DType::int32).to_vector<int32_t>() == std::vector<int32_t>{0, 3, 6, 9});
    // numpy: np.arange(-1, 2.5, 0.7, dtype=np.float32).tolist(): computed in float32
    check_values(arange(-1, 2.5, 0.7, DType::float32),
                 {-1.0, -0.30000001192092896, 0.3999999761581421, 1.0999999046325684, 1.7999999523162842},
                 "arange float32 negative start");
    // numpy: np.arange(0, 1, 0.1, dtype=np.float16).tolist()
    check_values(arange(0, 1, 0.1, DType::float16),
                 {0.0, 0.0999755859375, 0.199951171875, 0.2998046875, 0.39990234375, 0.5, 0.599609375,
                  0.69970703125, 0.7998046875, 0.89990234375},
                 "arange float16");
    // numpy: integer dtypes step by int(start + step) - int(start):
    // np.arange(0.5, 3, 0.7, dtype=int), np.arange(2.5, -3, -1.5, dtype=np.int8)
    CHECK(arange(0.5, 3, 0.7, DType::int64).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3});
    CHECK(arange(2.5, -3, -1.5, DType::int8).to_vector<int64_t>() == std::vector<int64_t>{2, 1, 0, -1});
    // numpy: np.arange(0, 2, dtype=bool) is [False, True]; longer bool ranges are refused
    CHECK(arange(0, 2, 1, DType::bool_).to_vector<bool>() == std::vector<bool>{false, true});
    CHECK_THROWS_AS(arange(0, 3, 1, DType::bool_), DTypeError);
    // empty ranges
    CHECK(arange(5, 1).numel() == 0);
    CHECK(arange(0, 1, -1).numel() == 0);
    CHECK(arange(2, 2).numel() == 0);
    // arange(stop): int64 by default, exact
    Tensor a = arange(5);
    CHECK(a.dtype() == DType::int64);
    CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
    CHECK(arange(-3).numel() == 0);
    CHECK(arange(4, DType::float16).to_vector<double>() == std::vector<double>{0, 1, 2, 3});
    // errors
    CHECK_THROWS_AS(arange(0, 1, 0), ValueError);
    CHECK_THROWS_AS(arange(0, std::nan(""), 1), ValueError);
    CHECK_THROWS_AS(arange(0, INFINITY, 1), ValueError);
    CHECK_THROWS_AS(arange(-INFINITY, 0, 1), ValueError);
    CHECK_THROWS_AS(arange(0, 1e300, 1), ShapeError);
    CHECK_THROWS_AS(arange(0, 1, 1e-300), ShapeError);
    CHECK_THROWS_WITH_AS(arange(0, 1, 0), doctest::Contains("arange"), ValueError);
    CHECK_THROWS_WITH_AS(arange(int64_t(1) << 62), doctest::Contains("arange"), ShapeError);
  }

  TEST_CASE("linspace follows numpy") {
    // numpy: np.linspace(0, 1, 5), np.linspace(0, 0.3, 4).tolist() (last element exactly stop)
    check_values(linspace(0, 1, 5, DType::float64), {0, 0.25, 0.5, 0.75, 1}, "linspace(0, 1, 5)");
    check_values(linspace(0, 0.3, 4, DType::float64), {0.0, 0.09999999999999999, 0.19999999999999998, 0.3},
                 "linspace(0, 0.3, 4)");
    // numpy: np.linspace(1, 0, 4).tolist(), np.linspace(0, 1, 7).tolist()
    check_values(linspace(1, 0, 4, DType::float64), {1.0, 0.6666666666666667, 0.33333333333333337, 0.0},
                 "decreasing");
    check_values(linspace(0, 1, 7, DType::float64),
                 {0.0, 0.16666666666666666, 0.3333333333333333, 0.5, 0.6666666666666666, 0.8333333333333333, 1.0},
                 "linspace(0, 1, 7)");
    // numpy: np.linspace(5, 7, 1) == [5.]; num = 0 is empty
    check_values(linspace(5, 7, 1, DType::float64), {5.0}, "num=1");
    CHECK(linspace(5, 7, 0).numel() == 0);
    // numpy: np.linspace(2, 3, 4, dtype=int), np.linspace(-1, 0, 4, dtype=int): floor
    CHECK(linspace(2, 3, 4, DType::int64).to_vector<int64_t>() == std::vector<int64_t>{2, 2, 2, 3});
    CHECK(linspace(-1, 0, 4, DType::int32).to_vector<int32_t>() == std::vector<int32_t>{-1, -1, -1, 0});
    CHECK(linspace(0, 1, 3).dtype() == DType::float32);
    CHECK_THROWS_AS(linspace(0, 1, -1), ValueError);
    CHECK_THROWS_WITH_AS(linspace(0, 1, int64_t(1) << 62, DType::float64), doctest::Contains("linspace"), ShapeError);
  }

  TEST_CASE("eye") {
    check_values(eye(3), {1, 0, 0, 0, 1, 0, 0, 0, 1}, "eye(3)");
    Tensor e = eye(2, 3, DType::int32);
    CHECK(e.shape() == Shape{2, 3});
    CHECK(e.to_vector<int32_t>() == std::vector<int32_t>{1, 0, 0, 0, 1, 0});
    check_values(eye(3, 2, DType::bool_), {1, 0, 0, 1, 0, 0}, "eye(3, 2)");
    CHECK(eye(0).shape() == Shape{0, 0});
    CHECK(eye(2, 0).numel() == 0);
    CHECK_THROWS_AS(eye(-1), ValueError);
    CHECK_THROWS_AS(eye(2, -2), ValueError);
    CHECK_THROWS_WITH_AS(eye(int64_t(1) << 40), doctest::Contains("eye"), ShapeError);
  }

  TEST_CASE("tensor(...) from initializer lists") {
    CHECK(tensor({1.0f, 2.0f}).dtype() == DType::float32);
    CHECK(tensor({1.0, 2.0}).dtype() == DType::float64);
    CHECK(tensor({1, 2}).dtype() == DType::int32);
    CHECK(tensor({int64_t(1), int64_t(2)}).dtype() == DType::int64);
    CHECK(tensor({true, false}).dtype() == DType::bool_);
    CHECK(tensor({true, false, true}).to_vector<bool>() == std::vector<bool>{true, false, true});
    Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
    CHECK(m.shape() == Shape{2, 3});
    CHECK(m.dtype() == DType::int32);
    CHECK(m.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
    CHECK(tensor({{1.5, 2.5}}).shape() == Shape{1, 2});
    CHECK(tensor({{1.5f, 2.5f}, {3.5f, 4.5f}, {5.5f, 6.5f}}).shape() == Shape{3, 2});
    // dtype converts with numpy's cast rules
    Tensor c = tensor({1.7, -1.7, 0.0}, DType::int32);
    CHECK(c.dtype() == DType::int32);
    CHECK(c.to_vector<int32_t>() == std::vector<int32_t>{1, -1, 0});
    check_values(tensor({1, 0, 3}, DType::bool_), {1, 0, 1}, "int -> bool");
    check_values(tensor({{1, 2}, {3, 4}}, DType::float16), {1, 2, 3, 4}, "nested int -> float16");
    // ragged nested lists
    CHECK_THROWS_AS(tensor({{1, 2}, {3}}), ShapeError);
    CHECK_THROWS_WITH_AS(tensor({{1.0, 2.0, 3.0}, {4.0, 5.0}}), doctest::Contains("row 1 has 2"), ShapeError);
  }

  TEST_CASE("scalar gives a 0-d tensor") {
    Tensor s = scalar(2.5);
    CHECK(s.ndim() == 0);
    CHECK(s.numel() == 1);
    CHECK(s.dtype() == DType::float32);
    CHECK(s.item<double>() == 2.5);
    CHECK(scalar(7, DType::int64).item<int64_t>() == 7);
    CHECK(scalar(-2.5, DType::int32).item<int32_t>() == -2);
  }

  TEST_CASE("from_eigen copies into a row-major tensor") {
    Eigen::MatrixXd m(2, 3);  // column-major storage
    m << 1, 2, 3, 4, 5, 6;
    Tensor t = from_eigen(m);
    CHECK(t.dtype() == DType::float64);
    CHECK(t.shape() == Shape{2, 3});
    CHECK(t.is_contiguous());
    CHECK(t.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6});
    m(0, 0) = 100;  // a copy: the tensor does not change
    CHECK(t.to_vector<double>()[0] == 1.0);
    // expressions, blocks and other scalar types
    CHECK(from_eigen(m.transpose()).shape() == Shape{3, 2});
    CHECK(from_eigen(m.transpose()).to_vector<double>() == std::vector<double>{100, 4, 2, 5, 3, 6});
    CHECK(from_eigen(m.block(0, 1, 2, 2)).to_vector<double>() == std::vector<double>{2, 3, 5, 6});
    Eigen::Matrix<float, 2, 2, Eigen::RowMajor> f;
    f << 1.5f, 2.5f, 3.5f, 4.5f;
    CHECK(from_eigen(f).dtype() == DType::float32);
    CHECK(from_eigen(f).to_vector<float>() == std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f});
    Eigen::VectorXi v(3);
    v << 7, 8, 9;
    Tensor tv = from_eigen(v);
    CHECK(tv.dtype() == DType::int32);
    CHECK(tv.shape() == Shape{3, 1});
    CHECK(from_eigen(Eigen::Matrix<int64_t, 1, 2>(5, 6)).to_vector<int64_t>() == std::vector<int64_t>{5, 6});
    CHECK(from_eigen(Eigen::MatrixXf(0, 4)).shape() == Shape{0, 4});
  }

  TEST_CASE("as_eigen_map views a contiguous tensor without copying") {
    Tensor t = tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}});
    auto map = as_eigen_map<float>(t);
    CHECK(map.rows() == 2);
    CHECK(map.cols() == 3);
    CHECK(map(1, 0) == 4.0f);
    CHECK(map.data() == t.data<float>());
    map(0, 2) = 30.0f;  // writes go to the tensor
    CHECK(t.to_vector<float>()[2] == 30.0f);
    // Eigen arithmetic on the map matches the tensor's values
    Eigen::MatrixXf prod = map * map.transpose();
    CHECK(prod(0, 0) == doctest::Approx(1 + 4 + 900));
    // 1-d maps as a column, 0-d as 1 x 1
    Tensor v = tensor({int64_t(1), int64_t(2), int64_t(3)});
    auto mv = as_eigen_map<int64_t>(v);
    CHECK(mv.rows() == 3);
    CHECK(mv.cols() == 1);
    CHECK(as_eigen_map<double>(scalar(2.0, DType::float64))(0, 0) == 2.0);
    // errors
    CHECK_THROWS_AS(as_eigen_map<double>(t), DTypeError);
    CHECK_THROWS_WITH_AS(as_eigen_map<int32_t>(t), doctest::Contains("float32"), DTypeError);
    CHECK_THROWS_AS(as_eigen_map<float>(zeros({2, 2, 2})), ShapeError);
    Tensor tt(t.buffer(), DType::float32, {3, 2}, {1, 3});  // transposed view
    CHECK_THROWS_WITH_AS(as_eigen_map<float>(tt), doctest::Contains("contiguous"), ShapeError);
    // round trip through Eigen
    CHECK(from_eigen(as_eigen_map<float>(t)).to_vector<float>() == t.to_vector<float>());
  }
}
