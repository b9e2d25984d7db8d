// A compiled result that the optimiser reduced to an argument or a weight
// (x * 1, x - 0, x / 1, -(-x)) is a new tensor, as it is eagerly: writing into
// it leaves the caller's tensor alone. A result returned as the argument
// itself (or a view of it) aliases it, as eagerly.
#include "test_util.h"

using namespace kiln;

TEST_SUITE("compiled_result_alias") {
  TEST_CASE("results simplified to an argument do not alias it") {
    const auto mul1 = [](Tensor x) { return x * 1; };
    const auto sub0 = [](Tensor x) { return x - 0.0f; };
    const auto div1 = [](Tensor x) { return x / 1.0f; };
    const auto negneg = [](Tensor x) { return -(-x); };
    auto check = [](auto f) {
      Tensor x = tensor({1.0f, 2.0f});
      Tensor y = jit(f)(x);
      CHECK(array_equal(y, tensor({1.0f, 2.0f})));
      CHECK_FALSE(may_share_memory(y, x));
      CHECK_FALSE(may_share_memory(f(x), x));  // eager: a new tensor too
      y.fill_(7.0);
      CHECK(array_equal(x, tensor({1.0f, 2.0f})));
    };
    check(mul1);
    check(sub0);
    check(div1);
    check(negneg);
  }

  TEST_CASE("a result simplified to a weight does not alias the weight") {
    nn::Linear lin(2, 2);
    Tensor w = lin.state_dict().at("weight");
    const Tensor before = w.clone();
    auto f = jit([&](Tensor x) { return std::make_tuple(lin(x), lin.state_dict().at("weight") * 1); });
    auto [y, wr] = f(ones({1, 2})).as<std::tuple<Tensor, Tensor>>();
    CHECK(array_equal(wr, before));
    wr.fill_(0.0);
    CHECK(array_equal(w, before));
  }

  TEST_CASE("returning the argument itself or a view of it aliases it, as eagerly") {
    Tensor x = tensor({1.0f, 2.0f, 3.0f, 4.0f});
    Tensor y = jit([](Tensor a) { return a; })(x);
    CHECK(may_share_memory(y, x));
    Tensor v = jit([](Tensor a) { return a.reshape({2, 2}); })(x);
    CHECK(may_share_memory(v, x));
    // an argument written in place and returned: the result is its new value
    Tensor z = tensor({1.0f, 2.0f});
    Tensor r = jit([](Tensor a) { a.add_(1.0f); return a; })(z);
    CHECK(array_equal(z, tensor({2.0f, 3.0f})));
    CHECK(array_equal(r, tensor({2.0f, 3.0f})));
  }
}
