// A C++ number passed for a Tensor parameter of a jit function is a runtime
// input that is weak in type promotion, as the same number written in the
// function eagerly (`x * 0.1`, numpy's Python scalar): with a float64 tensor
// it computes in float64 with the number's double value; with a float32
// tensor the result is float32 (the number rounded to float32 first, as
// eagerly); a new number reuses the compiled code.
#include "same_bits.h"
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

  TEST_CASE("an integer number out of a narrower integer tensor's range raises as eager does, per call") {
    auto jf = jit([](Tensor x, Tensor s) { return x + s; });
    const Tensor i8 = Tensor::from_vector(std::vector<int8_t>{1, -2, 100});
    CHECK_THROWS_AS(i8 + 300, ValueError);  // eager: the scalar operand does not fit int8
    const Tensor r = jf(i8, 27).tensor();
    CHECK(r.dtype() == DType::int8);
    CHECK(r.to_vector<int8_t>() == std::vector<int8_t>{28, 25, 127});  // int reference
    CHECK(kt::same_bits(r, i8 + 27));
    // the cached entry, a number out of int8's range: no wrap (300 would add 44)
    CHECK_THROWS_WITH_AS(jf(i8, 300),
                         doctest::Contains("jit: add: the number 300 (argument 1) is out of range for int8"),
                         ValueError);
    CHECK_THROWS_AS(jf(i8, -129), ValueError);
    CHECK(jf(i8, -128).tensor().to_vector<int8_t>() == std::vector<int8_t>{-127, 126, -28});
    CHECK(jf.stats().compiles == 1);
    // a negative number with an unsigned tensor; a comparison raises too (as eagerly)
    const Tensor u8 = Tensor::from_vector(std::vector<uint8_t>{1, 2});
    CHECK_THROWS_AS(u8 + (-1), ValueError);
    CHECK_THROWS_WITH_AS(jf(u8, -1), doctest::Contains("the number -1 (argument 1) is out of range for uint8"),
                         ValueError);
    auto jeq = jit([](Tensor x, Tensor s) { return x == s; });
    CHECK(jeq(i8, 100).tensor().to_vector<bool>() == std::vector<bool>{false, false, true});
    CHECK_THROWS_WITH_AS(jeq(i8, 1000), doctest::Contains("jit: equal: the number 1000"), ValueError);
    // the number as int64 tensor's operand needs no check; int64 stays exact
    const Tensor i64 = Tensor::from_vector(std::vector<int64_t>{1});
    CHECK(jf(i64, int64_t{1} << 40).tensor().to_vector<int64_t>() == std::vector<int64_t>{(int64_t{1} << 40) + 1});
  }

  TEST_CASE("an int or bool number combined with a float or int C++ constant stays weak, computed exactly") {
    auto jf = jit([](Tensor x, Tensor s) { return x * (s * 0.1); });
    const std::vector<double> xs{1, 3, 10};
    const Tensor x64 = Tensor::from_vector(xs);
    for (int s : {3, 7}) {
      CAPTURE(s);
      const Tensor r = jf(x64, s).tensor();
      CHECK(r.dtype() == DType::float64);
      const std::vector<double> got = r.to_vector<double>();
      for (size_t i = 0; i < xs.size(); ++i) CHECK(got[i] == xs[i] * (s * 0.1));  // double reference
      CHECK(kt::same_bits(r, x64 * (s * 0.1)));                                     // eager, written in
    }
    const Tensor x32 = Tensor::from_vector(std::vector<float>{1, 3, 10});
    const Tensor r32 = jf(x32, 3).tensor();
    CHECK(r32.dtype() == DType::float32);
    CHECK(kt::same_bits(r32, x32 * (3 * 0.1)));
    auto jf2 = jit([](Tensor x, Tensor s) { return x * (s * 2.5f); });
    CHECK(kt::same_bits(jf2(x64, 3).tensor(), x64 * (3 * 2.5f)));
    // an int number with an int tensor: an int8 result (bool constant, bool number with an int constant)
    const Tensor i8 = Tensor::from_vector(std::vector<int8_t>{1, 2});
    auto jb = jit([](Tensor x, Tensor s) { return x + (s + true); });
    CHECK(kt::same_bits(jb(i8, 3).tensor(), i8 + (3 + true)));
    auto jbi = jit([](Tensor x, Tensor b) { return x + (b + 2); });
    const Tensor rb = jbi(i8, true).tensor();
    CHECK(rb.dtype() == DType::int8);
    CHECK(rb.to_vector<int8_t>() == std::vector<int8_t>{4, 5});
    CHECK(kt::same_bits(rb, i8 + (true + 2)));
    auto jbf = jit([](Tensor x, Tensor b) { return x * (b * 0.1); });
    CHECK(kt::same_bits(jbf(x64, true).tensor(), x64 * (true * 0.1)));
    // read by a reduction or returned: the default float dtype (float32), as documented
    auto jr = jit([](Tensor x, Tensor s) { return std::make_tuple(x + 1.0, s * 0.1, sum(s * 0.1)); });
    auto [a, b, c] = jr(x64, 3).as<std::tuple<Tensor, Tensor, Tensor>>();
    CHECK(b.dtype() == DType::float32);
    CHECK(c.dtype() == DType::float32);
    CHECK(b.item<float>() == static_cast<float>(3 * 0.1));
    CHECK(c.item<float>() == static_cast<float>(3 * 0.1));
  }

  TEST_CASE("a number passed on to a subgraph or a compiled call inside a trace stays exact and weak") {
    auto g = as_subgraph([](Tensor x, Tensor s) { return x * s; }, "scale");
    // (results apart: the compiled x * s + s may contract to one fma)
    auto jf = jit([&](Tensor x, Tensor s) { return std::make_tuple(g(x, s), s + x); });
    const std::vector<double> xs{1, 3, 10};
    const Tensor x64 = Tensor::from_vector(xs);
    const Tensor x32 = Tensor::from_vector(std::vector<float>{1, 3, 10});
    for (double s : {0.1, 0.7}) {
      CAPTURE(s);
      auto [r, r2] = jf(x64, s).as<std::tuple<Tensor, Tensor>>();
      CHECK(r.dtype() == DType::float64);
      const std::vector<double> got = r.to_vector<double>();
      for (size_t i = 0; i < xs.size(); ++i) CHECK(got[i] == xs[i] * s);  // double reference
      CHECK(kt::same_bits(r, x64 * s));
      CHECK(kt::same_bits(r2, s + x64));
      auto [q, q2] = jf(x32, s).as<std::tuple<Tensor, Tensor>>();
      CHECK(kt::same_bits(q, x32 * s));
      CHECK(kt::same_bits(q2, s + x32));
    }
    CHECK(jf.stats().compiles == 2);
    // a subgraph body called with a 0-d tensor is not the body called with a number
    auto jt = jit([&](Tensor x, Tensor s) { return g(x, s); });
    CHECK(jt(x32, full({}, 0.5, DType::float64)).tensor().dtype() == DType::float64);
    CHECK(jt(x32, 0.5).tensor().dtype() == DType::float32);
    // a jit function calling another with the number, or with a number of its own
    auto inner = jit([](Tensor x, Tensor s) { return x * s; });
    auto outer = jit([&](Tensor x, Tensor s) { return std::make_tuple(inner(x, s).tensor(), inner(x, 0.1).tensor()); });
    auto [o1, o2] = outer(x64, 0.7).as<std::tuple<Tensor, Tensor>>();
    CHECK(kt::same_bits(o1, x64 * 0.7));
    CHECK(kt::same_bits(o2, x64 * 0.1));
    // a CompiledCallable with a 0-d float64 parameter: the number exactly, as run(x, 0.1) at the top level
    CompiledCallable run = compile([](Tensor x, Tensor s) { return x * s; })(x64.layout(),
                                                                            TensorLayout(DType::float64, {}));
    auto jc = jit([&](Tensor x, Tensor s) { return run(x, s).tensor(); });
    CHECK(kt::same_bits(jc(x64, 0.1).tensor(), run(x64, 0.1).tensor()));
    CHECK(jc(x64, 0.1).tensor().to_vector<double>() == std::vector<double>{0.1, 3 * 0.1, 10 * 0.1});
  }

  TEST_CASE("the aliasing guard's eager run treats the number as the C++ number it was") {
    // part is a view of whole, which the function writes: an eager call
    auto body = [](Tensor whole, Tensor part, Tensor other, Tensor s) {
      whole.mul_(2.0f);
      return std::make_tuple(part * s, other + 1.0, s);
    };
    auto jf = jit(body);
    const Tensor w = Tensor::from_vector(std::vector<float>{0, 1, 2, 3});
    const Tensor other = Tensor::from_vector(std::vector<double>{1});
    auto [r, o, sr] = jf(w, w.slice(0, 1, 3), other, 0.1).as<std::tuple<Tensor, Tensor, Tensor>>();
    CHECK(jf.stats().eager_calls == 1);
    const Tensor we = Tensor::from_vector(std::vector<float>{0, 1, 2, 3});
    we.mul_(2.0f);
    const Tensor re = we.slice(0, 1, 3) * 0.1;  // eager, written in: float32
    CHECK(r.dtype() == DType::float32);
    CHECK(kt::same_bits(r, re));
    CHECK(r.to_vector<float>() == std::vector<float>{2 * 0.1f, 4 * 0.1f});
    CHECK(sr.dtype() == DType::float32);  // returned: the default float dtype, as compiled
    // an integer number out of the tensor's range raises there too
    auto ji = jit([](Tensor whole, Tensor part, Tensor s) {
      whole.add_(1);
      return part + s;
    });
    const Tensor w8 = Tensor::from_vector(std::vector<int8_t>{0, 1, 2});
    CHECK_THROWS_WITH_AS(ji(w8, w8.slice(0, 1, 3), 300), doctest::Contains("the number 300"), ValueError);
    const Tensor v8 = Tensor::from_vector(std::vector<int8_t>{0, 1, 2});
    CHECK(ji(v8, v8.slice(0, 1, 3), 5).tensor().to_vector<int8_t>() == std::vector<int8_t>{7, 8});
    CHECK(ji.stats().eager_calls == 1);
  }
}
