// A compiled result that the optimiser reduced to an argument or a weight
// (x * 1, x - 0, x / 1, -(-x)) is a new tensor, as it is eagerly: writing into
// it leaves the caller's tensor alone. A result returned as the argument
// itself (or a view of it) aliases it, as eagerly.
#include <functional>

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

  TEST_CASE("a view of an argument written in place is that view of the caller's tensor, any layout") {
    // Eagerly `x.mul_(2); return x[1];` returns a view of x, and so does
    // `v = x[0]; x.add_(1); return v;`: writing into the result changes x.
    // Compiled (jit and compile), the result is the same view of the
    // caller's x after the write-back (it used to be a copy).
    auto row_after = [](Tensor x) {
      x.mul_(2.0f);
      return Tensor(x[1]);
    };
    auto row_before = [](Tensor x) {
      Tensor v = x[0];
      x.add_(1.0f);
      return v;
    };
    // x's three layouts: contiguous [3, 4], transposed (a [4, 3] buffer read as [3, 4]), strided (every other column).
    auto make = [](int layout) {
      Tensor base = arange(24).to(DType::float32);
      if (layout == 0) return slice(base, 0, 0, 12).reshape({3, 4}).contiguous();
      if (layout == 1) return slice(base, 0, 0, 12).reshape({4, 3}).contiguous().transpose(0, 1);
      return slice(base.reshape({3, 8}), 1, 0, 8, 2);
    };
    for (int layout = 0; layout < 3; ++layout)
      for (int which = 0; which < 2; ++which)
        for (int path = 0; path < 2; ++path) {
          CAPTURE(layout);
          CAPTURE(which);
          CAPTURE(path);
          auto f = which == 0 ? std::function<Tensor(Tensor)>(row_after) : std::function<Tensor(Tensor)>(row_before);
          Tensor xe = make(layout), xc = make(layout);
          const std::vector<float> x0 = xe.to_vector<float>();
          Tensor re = f(xe);
          Tensor rc;
          if (path == 0) {
            rc = jit(f)(xc);
          } else {
            CompiledCallable run = compile(f)(TensorLayout(DType::float32, {3, 4}, Device::cpu(), xc.stride_class()));
            rc = run(xc);
          }
          // values: x written (2x or x+1), the result its row (1 or 0), as a float64-free explicit reference
          std::vector<float> want_x(12);
          for (size_t k = 0; k < 12; ++k) want_x[k] = which == 0 ? 2 * x0[k] : x0[k] + 1;
          CHECK(xc.to_vector<float>() == want_x);
          CHECK(xe.to_vector<float>() == want_x);
          const size_t row = which == 0 ? 1 : 0;
          const std::vector<float> want_r(want_x.begin() + 4 * row, want_x.begin() + 4 * row + 4);
          CHECK(rc.to_vector<float>() == want_r);
          CHECK(re.to_vector<float>() == want_r);
          // aliasing, as eagerly: the result is a view of x with x's strides along the row
          CHECK(may_share_memory(re, xe));
          CHECK(may_share_memory(rc, xc));
          CHECK(rc.strides() == re.strides());
          CHECK(rc.data_ptr() == static_cast<const char*>(xc.data_ptr()) + (static_cast<const char*>(re.data_ptr()) -
                                                                            static_cast<const char*>(xe.data_ptr())));
          rc.fill_(-1.0f);
          re.fill_(-1.0f);
          CHECK(array_equal(xc, xe));
        }
  }
}
