// A tensor captured by an as_subgraph body, or by a compiled callable that is
// inlined into an outer trace, is a captured constant of the outer compiled
// call too: changing it afterwards makes the outer call throw (as it does for
// a tensor the outer function captures itself) instead of returning a result
// computed from the old, baked-in values.
#include "test_util.h"

using namespace kiln;

TEST_SUITE("nested_capture_checks") {
  TEST_CASE("a tensor captured inside an as_subgraph body is checked by the compiled call") {
    Tensor w = tensor({1.0f, 2.0f, 3.0f});
    auto blk = as_subgraph([&](Tensor a) { return a * w; }, "blk");
    auto f = [&](Tensor a) { return blk(a) + 1.0f; };
    Tensor x = ones({3});
    CompiledCallable c = compile(f)(x.layout());
    CHECK(c.staged().graph->to_text().find("call @blk") != std::string::npos);  // a real subgraph call
    CHECK(array_equal(Tensor(c(x)), tensor({2.0f, 3.0f, 4.0f})));
    w.mul_(10.0f);  // eager f(x) is now [11, 21, 31]; the compiled code still holds [1, 2, 3]
    CHECK_THROWS_WITH_AS(c(x), doctest::Contains("changed since the function was traced"), ValueError);
  }

  TEST_CASE("a compiled callable inlined into a jit function: its captured tensor is checked by the outer call") {
    Tensor w = tensor({1.0f, 2.0f, 3.0f});
    Tensor x = ones({3});
    CompiledCallable inner = compile([&](Tensor a) { return a * w; })(x.layout());
    auto outer = jit([&](Tensor a) { return Tensor(inner(a)) + 1.0f; });
    CHECK(array_equal(Tensor(outer(x)), tensor({2.0f, 3.0f, 4.0f})));
    w.mul_(10.0f);
    CHECK_THROWS_AS(inner(x), ValueError);                                  // as before
    CHECK_THROWS_WITH_AS(outer(x), doctest::Contains("changed since the function was traced"), ValueError);
  }

  TEST_CASE("unchanged captures inside bodies and inlined callables keep working, and writing one later in the trace is refused") {
    Tensor w = tensor({2.0f, 4.0f});
    auto blk = as_subgraph([&](Tensor a) { return a * w; }, "blk");
    auto f = [&](Tensor a) { return blk(a) + blk(a * 2.0f); };
    Tensor x = tensor({1.0f, 1.0f});
    CompiledCallable c = compile(f)(x.layout());
    CHECK(array_equal(Tensor(c(x)), tensor({6.0f, 12.0f})));  // 2 + 4, 4 + 8
    CHECK(array_equal(Tensor(c(x)), tensor({6.0f, 12.0f})));
    // The body read w's value as a constant: a write to w after it in the same
    // trace cannot reach the body, so it is refused rather than ignored.
    auto g = [&](Tensor a) { Tensor r = blk(a); w.add_(1.0f); return r + w; };
    CHECK_THROWS_AS(compile(g)(x.layout()), RealizationError);
    CHECK(array_equal(w, tensor({2.0f, 4.0f})));
  }
}
