// The unchecked fast paths stay cheap but never read a wrong input out of
// bounds or reinterpret it (issue 11, item 5): execute_raw / Model::execute
// check each input's dtype, device and byte size; DType codes outside the
// enum raise instead of indexing past a table.
#include <sstream>

#include "test_util.h"

using namespace kiln;

TEST_SUITE("fast path checks") {
  TEST_CASE("execute_raw and Model::execute check dtype and byte size of each input") {
    auto f = [](Tensor x, Tensor y) { return x * y + 1.0f; };
    const TensorLayout l(DType::float32, {4});
    CompiledCallable run = compile(f)(l, l);
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
    const Tensor in[2] = {x, x};
    // right inputs: the result, against a float64 reference
    const std::vector<float> y = run.execute_raw(std::span<const Tensor>(in, 2))[0].to_vector<float>();
    CHECK(y == std::vector<float>{2, 5, 10, 17});
    // wrong dtype (same byte size: would be reinterpreted)
    const Tensor xi = Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4});
    const Tensor bad_dtype[2] = {x, xi};
    CHECK_THROWS_WITH_AS(run.execute_raw(std::span<const Tensor>(bad_dtype, 2)),
                         "execute: input 1: expected dtype float32, got int32", DTypeError);
    // too small
    const Tensor small = Tensor::from_vector(std::vector<float>{1, 2});
    const Tensor bad_size[2] = {small, x};
    CHECK_THROWS_WITH_AS(run.execute_raw(std::span<const Tensor>(bad_size, 2)),
                         "execute: input 0: expected shape [4], got [2]", ShapeError);
    // bigger, or the same count in another shape: also refused (never reinterpreted)
    const Tensor big = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6});
    const Tensor bad_big[2] = {big, x};
    CHECK_THROWS_AS(run.execute_raw(std::span<const Tensor>(bad_big, 2)), ShapeError);
    const Tensor bad_shape[2] = {x.reshape({2, 2}), x};
    CHECK_THROWS_AS(run.execute_raw(std::span<const Tensor>(bad_shape, 2)), ShapeError);
    // undefined, and the count (as before)
    const Tensor undef[2] = {x, Tensor()};
    CHECK_THROWS_AS(run.execute_raw(std::span<const Tensor>(undef, 2)), ValueError);
    CHECK_THROWS_AS(run.execute_raw(std::span<const Tensor>(in, 1)), ValueError);
    // the engine model directly
    CHECK_THROWS_AS(run.engine_model().execute(std::span<const Tensor>(bad_dtype, 2)), DTypeError);
    // the Buffer overload: a too-small buffer raises too
    CHECK_THROWS_AS(run.execute_raw(std::vector<Buffer>{small.buffer(), x.buffer()}), Error);
  }

  TEST_CASE("a DType code outside the enum raises DTypeError when named, printed or sized") {
    const DType bad = static_cast<DType>(200);
    CHECK_THROWS_WITH_AS(name(bad), "dtype name: invalid dtype code 200 (expected 0 <= code < 13)", DTypeError);
    std::ostringstream os;
    CHECK_THROWS_AS(os << bad, DTypeError);
    CHECK_THROWS_AS(size_of(static_cast<DType>(kNumDTypes)), DTypeError);
    CHECK(name(DType::float64) == "float64");
    CHECK(size_of(DType::bfloat16) == 2);
  }
}
