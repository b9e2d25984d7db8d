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

  TEST_CASE("Model::execute_into checks each defined output (tester t17 F1)") {
    CompiledCallable cc = compile([](Tensor x) { return x * 2.0f + 1.0f; })(TensorLayout(DType::float32, {2, 3}));
    const std::vector<Tensor> in{arange(6).to(DType::float32).reshape({2, 3})};
    const std::vector<float> want{1, 3, 5, 7, 9, 11};  // 2 * i + 1, i = 0..5
    const engine::Model& m = cc.engine_model();
    // an int32[5] view inside a sentinel buffer: refused, the buffer untouched
    const Tensor sentinel = full({12}, -7, DType::int32);
    std::vector<Tensor> o1{sentinel.index({Slice(4, 9)})};
    CHECK_THROWS_WITH_AS(m.execute_into(in, o1),
                         "engine::Model::execute_into: output 0: expected float32[2, 3] cpu contiguous (or an undefined "
                         "tensor), got int32[5] cpu contiguous",
                         DTypeError);
    CHECK(sentinel.to_vector<int32_t>() == std::vector<int32_t>(12, -7));
    // right dtype, wrong shape (a 1-element buffer for 6 results)
    std::vector<Tensor> o2{zeros({1})};
    CHECK_THROWS_AS(m.execute_into(in, o2), ShapeError);
    CHECK(o2[0].item<float>() == 0.0f);
    std::vector<Tensor> o2b{zeros({3, 2})};  // same count, other shape
    CHECK_THROWS_AS(m.execute_into(in, o2b), ShapeError);
    // transposed and flipped views of the right type: not contiguous
    std::vector<Tensor> o3{zeros({3, 2}).transpose()};
    CHECK_THROWS_WITH_AS(m.execute_into(in, o3),
                         "engine::Model::execute_into: output 0: expected float32[2, 3] cpu contiguous (or an undefined "
                         "tensor), got float32[2, 3] cpu with strides [1, 2] (not contiguous); the result is written in "
                         "memory order, so pass a contiguous tensor (a strided view would get its elements in the wrong "
                         "places)",
                         ValueError);
    const Tensor s2 = full({12}, -7.0f);
    std::vector<Tensor> o4{flip(s2.index({Slice(3, 9)}).reshape({2, 3}), {1})};
    CHECK_THROWS_AS(m.execute_into(in, o4), ValueError);
    CHECK(s2.to_vector<float>() == std::vector<float>(12, -7.0f));
    // more tensors than outputs
    std::vector<Tensor> o5{Tensor(), zeros({2, 3})};
    CHECK_THROWS_AS(m.execute_into(in, o5), ValueError);
    // a right output is computed into (same buffer), an undefined one made
    const Tensor dst = zeros({2, 3});
    std::vector<Tensor> o6{dst};
    m.execute_into(in, o6);
    CHECK(dst.to_vector<float>() == want);
    CHECK(o6[0].to_vector<float>() == want);
    std::vector<Tensor> o7{Tensor()};
    m.execute_into(in, o7);
    CHECK(o7[0].to_vector<float>() == want);
    // reusing the last call's outputs (as a loop would) still works
    m.execute_into(in, o7);
    CHECK(o7[0].to_vector<float>() == want);
  }

  TEST_CASE("Model::execute_into refuses two outputs in one memory (tester t18 N3)") {
    // x.add_(1); return x * 2: output 0 the result, output 1 the write-back (x + 1)
    CompiledCallable wc = compile([](Tensor x) {
      x.add_(1.0f);
      return x * 2.0f;
    })(TensorLayout(DType::float32, {4}));
    const engine::Model& m = wc.engine_model();
    const std::vector<Tensor> in{zeros({4})};
    const Tensor b = full({4}, -3.0f), big = full({8}, -3.0f);
    for (std::vector<Tensor> out : {std::vector<Tensor>{b, b}, std::vector<Tensor>{big.index({Slice(0, 4)}),
                                                                               big.index({Slice(2, 6)})}}) {
      CHECK_THROWS_WITH_AS(m.execute_into(in, out), doctest::Contains("outputs 0 and 1 share memory"), ValueError);
      CHECK(b.to_vector<float>() == std::vector<float>(4, -3.0f));  // nothing ran
      CHECK(big.to_vector<float>() == std::vector<float>(8, -3.0f));
    }
    // separate memory: 2 and 1, as eagerly ((0 + 1) * 2, 0 + 1)
    std::vector<Tensor> ok{zeros({4}), zeros({4})};
    m.execute_into(in, ok);
    CHECK(ok[0].to_vector<float>() == std::vector<float>(4, 2.0f));
    CHECK(ok[1].to_vector<float>() == std::vector<float>(4, 1.0f));
    // one graph value returned twice, given one tensor for both: harmless, allowed
    CompiledCallable twice = compile([](Tensor x) {
      Tensor y = x * 3.0f;
      return std::make_tuple(y, y);
    })(TensorLayout(DType::float32, {4}));
    std::vector<Tensor> same{zeros({4}), Tensor()};
    same[1] = same[0];
    const std::vector<Tensor> ones4{ones({4})};
    twice.engine_model().execute_into(ones4, same);
    CHECK(same[0].to_vector<float>() == std::vector<float>(4, 3.0f));
    CHECK(same[1].to_vector<float>() == std::vector<float>(4, 3.0f));
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
