// engine::Model::execute_into with caller-given outputs that share memory
// with the inputs (or a bound weight): numpy's out= semantics. The result
// is the one separate memory gives, however the plan reads its inputs: an
// output the plan may compute in place (an elementwise step reading each
// element before writing it) is computed there, any other overlap is
// computed into memory of its own and then copied into the output given.
#include "test_util.h"

using namespace kiln;

namespace {

std::vector<float> vals(const Tensor& t) { return t.contiguous().to_vector<float>(); }

Tensor seq(const Shape& s, float start = 1.0f) {
  std::vector<float> v(static_cast<size_t>(checked_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + 0.25f * static_cast<float>(i) - 0.01f * float(i * i % 7);
  return Tensor::from_vector(v, s);
}

// Runs the one-input, one-output `f` compiled for x's layout with output 0
// given `out` (memory that overlaps x), and checks it against eager f on a
// copy of x (computed before the call: the call may overwrite x).
void check_into(const std::function<Tensor(Tensor)>& f, const Tensor& x, const Tensor& out, const std::string& what) {
  CAPTURE(what);
  CompiledCallable run = compile(f)(x.layout());
  const std::vector<float> want = vals(f(x.clone()));
  std::vector<Tensor> outs{out};
  const std::vector<Tensor> in{x};
  run.engine_model().execute_into(in, outs);
  REQUIRE(outs.size() == 1);
  CHECK(vals(outs[0]) == want);
  CHECK(vals(out) == want);  // written into the memory given, as numpy's out=
  CHECK(outs[0].data_ptr() == out.data_ptr());
}

}  // namespace

TEST_SUITE("execute_into overlap") {
  TEST_CASE("an output given an input's memory gets the answer separate memory gives") {
    // elementwise, element i reading only element i: computed in place
    { Tensor x = seq({4, 4}); check_into([](Tensor a) { return a * 2.0f + 1.0f; }, x, x, "x * 2 + 1 into x"); }
    // element i reads element j != i
    { Tensor x = seq({5, 5}); check_into([](Tensor a) { return a.transpose() * 1.0f; }, x, x, "transpose(x) into x"); }
    { Tensor x = seq({5, 5}); check_into([](Tensor a) { return a + a.transpose(); }, x, x, "x + x^T into x"); }
    { Tensor x = seq({16}); check_into([](Tensor a) { return flip(a) * 3.0f; }, x, x, "flip(x) into x"); }
    { Tensor x = seq({16}); check_into([](Tensor a) { return cumsum(a, 0); }, x, x, "cumsum into x"); }
    { Tensor x = seq({6, 6}); check_into([](Tensor a) { return matmul(a, a); }, x, x, "x @ x into x"); }
    { Tensor x = seq({3, 8}); check_into([](Tensor a) { return softmax(a, -1); }, x, x, "softmax rows into x"); }
    { Tensor x = seq({8, 3}); check_into([](Tensor a) { return softmax(a, 0); }, x, x, "softmax columns into x"); }
    // a broadcast read: every element reads row 0, which is written first
    { Tensor x = seq({4, 4}); check_into([](Tensor a) { return a - a.index({Slice(0, 1)}); }, x, x, "x - x[0:1] into x"); }
    // several steps: the input read again after the output's step
    {
      Tensor x = seq({6, 6});
      check_into([](Tensor a) { return matmul(exp(a * 0.1f), a) + a.transpose(); }, x, x, "multi-step into x");
    }
    // a reduction whose output is a row of the input
    {
      Tensor base = seq({4, 4});
      check_into([](Tensor a) { return sum(a, {0}) * 1.0f; }, base, base.index({0}), "sum(x, 0) into x[0]");
      Tensor b2 = seq({4, 4});
      check_into([](Tensor a) { return sum(a, {1}); }, b2, b2.index({3}), "sum(x, 1) into x[3]");
    }
  }

  TEST_CASE("an output partly overlapping an input (shifted views of one buffer)") {
    for (int64_t shift : {1, -1, 17, -17}) {
      CAPTURE(shift);
      Tensor big = seq({1100});
      const int64_t xs = shift > 0 ? 0 : 40, os = xs + shift;
      Tensor x = big.index({Slice(xs, xs + 1000)});
      Tensor out = big.index({Slice(os, os + 1000)});
      check_into([](Tensor a) { return a * 2.0f - 1.0f; }, x, out, "shifted elementwise");
    }
  }

  TEST_CASE("an output given a bound weight's memory") {
    nn::Linear lin(4, 4);
    auto f = [&](Tensor x) { return lin(x); };
    CompileOptions o;
    o.weights = lin.state_dict();
    CompiledCallable run = compile(f, o)(TensorLayout(DType::float32, {4, 4}));
    const Tensor x = seq({4, 4});
    const Tensor w = lin.state_dict().at("weight");
    const std::vector<float> want = vals(f(x));  // eager, before w is overwritten
    std::vector<Tensor> outs{w};
    const std::vector<Tensor> in{x};
    run.engine_model().execute_into(in, outs);
    CHECK(vals(outs[0]) == want);
    CHECK(vals(w) == want);
  }

  TEST_CASE("the in-place case costs no copy: the output is computed straight into the input") {
    // x * 2 + 1 reads element i only to write element i; the result tensor
    // handed back is the given one, and a second call reads the first's result
    CompiledCallable run = compile([](Tensor a) { return a * 2.0f + 1.0f; })(TensorLayout(DType::float32, {8}));
    Tensor x = zeros({8});
    std::vector<Tensor> outs{x};
    const std::vector<Tensor> in{x};
    run.engine_model().execute_into(in, outs);
    run.engine_model().execute_into(in, outs);
    CHECK(vals(x) == std::vector<float>(8, 3.0f));
    CHECK(outs[0].is_same(x));
  }
}
