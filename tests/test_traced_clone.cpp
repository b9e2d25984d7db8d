// clone() and contiguous() of a traced or lazy tensor: recorded as a copy (a
// same-dtype Cast) instead of realizing, which is impossible while a graph is
// being recorded. Reference values are literals worked out by hand.
#include "test_util.h"

using namespace kiln;

TEST_SUITE("traced_clone") {
  TEST_CASE("clone() inside jit is a copy: writes into it leave the argument alone") {
    auto f = [](Tensor y) {
      Tensor b = y.clone();
      b[0] = 100.0;                     // into the copy only
      b.index({Slice(), 1}) += 10.0f;  // a second write, advanced-free
      return std::make_tuple(b, y * 1);
    };
    Tensor x = tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
    auto jf = jit(f);
    auto [b, y] = jf(x).as<std::tuple<Tensor, Tensor>>();
    CHECK(array_equal(b, tensor({{100.0f, 110.0f}, {3.0f, 14.0f}})));
    CHECK(array_equal(y, tensor({{1.0f, 2.0f}, {3.0f, 4.0f}})));
    CHECK(array_equal(x, tensor({{1.0f, 2.0f}, {3.0f, 4.0f}})));  // the caller's tensor is not written
    auto [be, ye] = f(x);                                           // eager gives the same
    CHECK(array_equal(b, be));
    CHECK(array_equal(y, ye));
  }

  TEST_CASE("contiguous() inside jit: a transposed view becomes a copy of its values") {
    auto f = [](Tensor y) {
      Tensor t = y.transpose().contiguous();
      t[0] = -1.0;  // must not write through into y
      return std::make_tuple(t, y + 0.0f, y.contiguous() * 2.0f);
    };
    Tensor x = tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}});
    auto [t, y, y2] = jit(f)(x).as<std::tuple<Tensor, Tensor, Tensor>>();
    CHECK(array_equal(t, tensor({{-1.0f, -1.0f}, {2.0f, 5.0f}, {3.0f, 6.0f}})));
    CHECK(array_equal(y, tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}})));
    CHECK(array_equal(y2, tensor({{2.0f, 4.0f, 6.0f}, {8.0f, 10.0f, 12.0f}})));
  }

  TEST_CASE("compile() and stage() record the copy; the compiled call equals eager for other layouts") {
    auto f = [](Tensor y) { return y.clone() * 3.0f + y.transpose().contiguous().transpose(); };
    Tensor x = tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
    CompiledCallable run = compile(f)(x.layout());
    CHECK(array_equal(Tensor(run(x)), tensor({{4.0f, 8.0f}, {12.0f, 16.0f}})));
    StagedGraph s = stage(f)(x.layout());
    CHECK(s.ir().find("cast") != std::string::npos);
    auto jf = jit(f);
    Tensor xt = tensor({{1.0f, 3.0f}, {2.0f, 4.0f}}).transpose();  // the same values, transposed memory
    CHECK(array_equal(Tensor(jf(xt)), tensor({{4.0f, 8.0f}, {12.0f, 16.0f}})));
  }

  TEST_CASE("clone() inside a lazy scope is recorded, and realizes after the scope") {
    Tensor x = tensor({1.0f, 2.0f, 3.0f});
    Tensor r;
    {
      auto scope = kiln::lazy();
      Tensor c = (x * 2.0f).clone();
      c[1] = 0.0;
      r = c + 1.0f;
    }
    CHECK(array_equal(r, tensor({3.0f, 1.0f, 7.0f})));
  }
}
