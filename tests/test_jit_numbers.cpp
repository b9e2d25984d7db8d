// A C++ number passed for a Tensor parameter of a jit function is a runtime
// input that is weak in type promotion, as the same number written in the
// function eagerly (`x * 0.1`, numpy's Python scalar): with a float64 tensor
// it computes in float64 with the number's double value; with a float32
// tensor the result is float32 (the number rounded to float32 first, as
// eagerly); a new number reuses the compiled code.
#include "test_util.h"

using namespace kiln;

TEST_SUITE("jit numbers") {
  TEST_CASE("a number for a Tensor parameter keeps float64 precision with a float64 tensor, as eager x * 0.1") {
    auto jf = jit([](Tensor x, Tensor s) { return x * s; });
    const std::vector<double> xs{1, 3, 10, -7.5};
    const Tensor x64 = Tensor::from_vector(xs);
    int calls = 0;
    for (double s : {0.1, 0.7, 1e-3, 1.0 / 3}) {
      CAPTURE(s);
      const Tensor r = jf(x64, s).tensor();
      ++calls;
      CHECK(r.dtype() == DType::float64);
      const std::vector<double> got = r.to_vector<double>();
      for (size_t i = 0; i < xs.size(); ++i) CHECK(got[i] == xs[i] * s);  // the product in double (reference)
      CHECK(got == (x64 * s).to_vector<double>());                        // eager, the number written in
    }
    // one compile: the number is a runtime input, not a baked constant
    CHECK(jf.stats().compiles == 1);
    CHECK(jf.stats().hits == calls - 1);
  }

  TEST_CASE("with a float32 tensor the result is float32 and equals eager's; float16 stays float16") {
    auto jf = jit([](Tensor x, Tensor s) { return x * s; });
    const std::vector<float> xs{1, 3, 10, -7.5f};
    const Tensor x32 = Tensor::from_vector(xs);
    for (double s : {0.1, 0.7, 1e-3}) {
      CAPTURE(s);
      const Tensor r = jf(x32, s).tensor();
      CHECK(r.dtype() == DType::float32);
      const std::vector<float> got = r.to_vector<float>();
      for (size_t i = 0; i < xs.size(); ++i) CHECK(got[i] == xs[i] * static_cast<float>(s));
      CHECK(got == (x32 * s).to_vector<float>());
    }
    CHECK(jf.stats().compiles == 1);
    const Tensor x16 = cast(x32, DType::float16);
    const Tensor r16 = jf(x16, 0.5).tensor();
    CHECK(r16.dtype() == DType::float16);  // as eager x16 * 0.5 (a float32 0-d tensor made it float32)
    CHECK(cast(r16, DType::float32).to_vector<float>() == cast(x16 * 0.5, DType::float32).to_vector<float>());
  }

  TEST_CASE("integer tensors: a float number gives float32, an integer number keeps the tensor's dtype") {
    auto jf = jit([](Tensor x, Tensor s) { return x * s; });
    const Tensor i32 = Tensor::from_vector(std::vector<int32_t>{1, 2, 3});
    const Tensor rf = jf(i32, 0.5).tensor();
    CHECK(rf.dtype() == (i32 * 0.5).dtype());
    CHECK(rf.to_vector<float>() == std::vector<float>{0.5f, 1.0f, 1.5f});
    const Tensor ri = jf(i32, 3).tensor();
    CHECK(ri.dtype() == DType::int32);  // as eager i32 * 3 (an int64 0-d tensor made it int64)
    CHECK(ri.to_vector<int32_t>() == std::vector<int32_t>{3, 6, 9});
  }

  TEST_CASE("numbers combined with each other and with C++ constants stay weak; several ops") {
    auto jg = jit([](Tensor x, Tensor s) { return x * (s * 2.0) + s * s - exp(s); });
    const std::vector<double> xs{1, 3, 10};
    const Tensor x64 = Tensor::from_vector(xs);
    for (double s : {0.1, 0.3}) {
      const std::vector<double> got = jg(x64, s).tensor().to_vector<double>();
      for (size_t i = 0; i < xs.size(); ++i)
        CHECK(got[i] == doctest::Approx(xs[i] * (s * 2.0) + s * s - std::exp(s)).epsilon(1e-15));
    }
    const Tensor x32 = Tensor::from_vector(std::vector<float>{1, 3, 10});
    const Tensor r32 = jg(x32, 0.1).tensor();
    CHECK(r32.dtype() == DType::float32);  // eager: x * 0.2 + 0.01 - 1.105...: float32
    const std::vector<float> e32 = (x32 * (0.1 * 2.0) + 0.1 * 0.1 - std::exp(0.1)).to_vector<float>();
    const std::vector<float> g32 = r32.to_vector<float>();
    for (size_t i = 0; i < e32.size(); ++i) CHECK(g32[i] == doctest::Approx(e32[i]).epsilon(1e-6));
    // where and maximum with the number on either side
    auto jw = jit([](Tensor x, Tensor s) { return where(x > s, maximum(s, x), s - x); });
    const Tensor y64 = Tensor::from_vector(std::vector<double>{0.05, 0.2});
    const std::vector<double> w = jw(y64, 0.1).tensor().to_vector<double>();
    CHECK(w == std::vector<double>{0.1 - 0.05, 0.2});
  }

  TEST_CASE("a 0-d tensor argument stays a tensor (NEP 50: not weak), cached apart from numbers") {
    auto jf = jit([](Tensor x, Tensor s) { return x * s; });
    const Tensor x32 = Tensor::from_vector(std::vector<float>{1, 2});
    CHECK(jf(x32, 0.25).tensor().dtype() == DType::float32);
    const Tensor r = jf(x32, full({}, 0.25, DType::float64)).tensor();
    CHECK(r.dtype() == DType::float64);  // float32 * float64 0-d tensor, as eagerly
    CHECK(r.dtype() == (x32 * full({}, 0.25, DType::float64)).dtype());
    CHECK(jf(x32, 0.5).tensor().dtype() == DType::float32);
    CHECK(jf.stats().compiles == 2);
    // returned as it is, a number is the default float dtype's 0-d tensor (as full({}, 0.5))
    auto id = jit([](Tensor x, Tensor s) { return std::make_tuple(x + 1.0f, s); });
    CHECK(std::get<1>(id(x32, 0.5).as<std::tuple<Tensor, Tensor>>()).dtype() == DType::float32);
  }
}
