// 0-d tensors in axis ops (issue 11, item 6): cumsum and flip return the
// value (numpy), and an axis named for a 0-d tensor says it has none.
#include "test_util.h"

using namespace kiln;

TEST_SUITE("zero-d") {
  TEST_CASE("cumsum and flip of a 0-d tensor return its value, eager and compiled") {
    const Tensor f = full({}, 2.5f);
    const Tensor i = full({}, int32_t{7}, DType::int32);
    for (int64_t axis : {0, -1}) {
      const Tensor c = cumsum(f, axis);
      CHECK(c.shape().empty());
      CHECK(c.dtype() == DType::float32);
      CHECK(c.item<float>() == 2.5f);
      const Tensor ci = cumsum(i, axis);  // integers accumulate in int64, as for any rank
      CHECK(ci.shape().empty());
      CHECK(ci.dtype() == DType::int64);
      CHECK(ci.item<int64_t>() == 7);
    }
    const Tensor fl = flip(f);
    CHECK(fl.shape().empty());
    CHECK(fl.item<float>() == 2.5f);
    auto g = [](Tensor x) { return cumsum(x, 0) + flip(x); };
    CompiledCallable run = compile(g)(TensorLayout(DType::float32, {}));
    const Tensor y = run(f).tensor();
    CHECK(y.shape().empty());
    CHECK(y.item<float>() == 5.0f);
  }

  TEST_CASE("an axis of a 0-d tensor: '0-d tensor has no axis'") {
    const Tensor s = full({}, 1.0f);
    CHECK_THROWS_WITH_AS(cumsum(s, 1), doctest::Contains("cumsum: a 0-d tensor has no axis 1"), IndexError);
    CHECK_THROWS_WITH_AS(flip(s, {0}), doctest::Contains("flip: a 0-d tensor has no axis 0"), IndexError);
    CHECK_THROWS_WITH_AS(softmax(s, 0), doctest::Contains("a 0-d tensor has no axis 0"), IndexError);
    // 1-d and up keep the range message
    CHECK_THROWS_WITH_AS(cumsum(full({2}, 1.0f), 1),
                         doctest::Contains("axis 1 is out of range for a 1-d tensor (expected -1 <= axis < 1)"),
                         IndexError);
  }
}

TEST_SUITE("zero-d") {
  TEST_CASE("initializer lists: the nesting depth is the rank") {
    const Tensor m = tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
    CHECK(m.shape() == Shape{2, 2});
    CHECK(m.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
    const Tensor col = tensor({{1.0f}, {2.0f}});
    CHECK(col.shape() == Shape{2, 1});
    CHECK(col.to_vector<float>() == std::vector<float>{1, 2});
    const Tensor cube = tensor({{{1.0f}}});
    CHECK(cube.shape() == Shape{1, 1, 1});
    const Tensor t3 = tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 10}, {11, 12}}});
    CHECK(t3.shape() == Shape{3, 2, 2});
    CHECK(t3.dtype() == DType::int32);
    CHECK(t3.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    CHECK(tensor({{{true}, {false}}}).shape() == Shape{1, 2, 1});
    CHECK(tensor({{1.0, 2.0}}, DType::float32).dtype() == DType::float32);
    CHECK(tensor({{int64_t{1} << 60}}).item<int64_t>() == int64_t{1} << 60);
    CHECK_THROWS_WITH_AS(tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7}}}), doctest::Contains("row 1 has 1 (nesting depth 2)"),
                         ShapeError);
  }
}
