// How a unit-test-style numerical script checks kiln's results: the compiled
// function against eager (CHECK_CLOSE, doctest), a float32 result against a
// float64 reference (assert_close with tolerances), and what a failure
// reports. The last test case fails on purpose (marked should_fail) to show
// the report; the program exits 0.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <kiln/doctest_close.h>
#include <kiln/kiln.h>

using namespace kiln;

namespace {
const auto mlp = [](Tensor x, Tensor w1, Tensor w2) { return softmax(matmul(gelu(matmul(x, w1)), w2), -1); };
}  // namespace

TEST_CASE("compiled mlp equals eager mlp") {
  random::Generator gen(7);
  Tensor x = random::normal({64, 32}, 0.0, 1.0, DType::float32, &gen);
  Tensor w1 = random::normal({32, 16}, 0.0, 0.2, DType::float32, &gen);
  Tensor w2 = random::normal({16, 10}, 0.0, 0.2, DType::float32, &gen);
  CompiledCallable run = compile(mlp)(x.layout(), w1.layout(), w2.layout());
  Tensor y = run(x, w1, w2);
  CHECK_CLOSE(y, mlp(x, w1, w2));  // float32 defaults: rtol 1.3e-6, atol 1e-5
  // float32 against a float64 reference, with the tolerance float32 earns here
  Tensor ref = mlp(x.to(DType::float64), w1.to(DType::float64), w2.to(DType::float64));
  CHECK_CLOSE(y.to(DType::float64), ref, 1e-5, 1e-6);
  assert_close(y.to(DType::float64), ref, 1e-5, 1e-6, false, "mlp float32 vs float64");  // throws on failure
}

TEST_CASE("gelu's tanh approximation is not its erf form (fails on purpose)" * doctest::should_fail()) {
  Tensor x = linspace(-3.0, 3.0, 13);
  CHECK_CLOSE(gelu(x, /*approximate_tanh=*/true), gelu(x));
}
