// Random draws (tensor/random.h) refuse to be traced: drawn while a graph
// records, the sample would be baked in as a constant and every compiled
// call would return the same numbers. Eager and lazy draws are unchanged.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "same_bits.h"
#include "test_util.h"

namespace {

using namespace kiln;

// One random op applied to an input (so the traced function has an argument).
struct RandomOp {
  const char* name;
  std::function<Tensor(const Tensor&)> apply;
};

const std::vector<RandomOp>& random_ops() {
  static const std::vector<RandomOp> ops = {
      {"uniform", [](const Tensor& x) { return x + random::uniform({4}, 0.0, 1.0, DType::float32); }},
      {"normal", [](const Tensor& x) { return x + random::normal({4}, 0.0, 1.0, DType::float32); }},
      {"randint", [](const Tensor& x) { return x + cast(random::randint(0, 10, {4}), DType::float32); }},
      {"bernoulli", [](const Tensor& x) { return x + cast(random::bernoulli(0.5, {4}), DType::float32); }},
      {"permutation", [](const Tensor& x) { return x + cast(random::permutation(4), DType::float32); }},
  };
  return ops;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const RealizationError& e) {
    return e.what();
  }
  return "";
}

TensorLayout f32_4() { return TensorLayout(DType::float32, {4}); }

}  // namespace

TEST_SUITE("random ops under tracing") {
  TEST_CASE("each random op raises RealizationError naming it under compile, jit and stage") {
    for (const RandomOp& op : random_ops()) {
      CAPTURE(op.name);
      auto f = [&](Tensor x) { return op.apply(x); };
      const std::string want = std::string(op.name) + ": random ops cannot be traced";
      const std::string c = message_of([&] { (void)compile(f)(f32_4()); });
      CHECK_MESSAGE(c.find(want) != std::string::npos, "compile: got '" << c << "'");
      CHECK(c.find("pass the tensor in") != std::string::npos);
      const std::string s = message_of([&] { (void)stage(f)(f32_4()); });
      CHECK_MESSAGE(s.find(want) != std::string::npos, "stage: got '" << s << "'");
      auto jf = jit(f);
      const std::string j = message_of([&] { (void)jf(zeros({4})); });
      CHECK_MESSAGE(j.find(want) != std::string::npos, "jit: got '" << j << "'");
    }
  }

  TEST_CASE("a refused draw does not advance the generator; eager draws are unchanged") {
    for (const RandomOp& op : random_ops()) {
      CAPTURE(op.name);
      random::seed(1234);
      const Tensor want = op.apply(zeros({4}));  // the first draw after seeding
      random::seed(1234);
      auto f = [&](Tensor x) { return op.apply(x); };
      CHECK_THROWS_AS(compile(f)(f32_4()), RealizationError);
      const Tensor got = op.apply(zeros({4}));  // still the first draw
      CHECK(kt::same_bits(got, want));
      // and the next eager draw differs from the first one (the offset moves)
      const Tensor next = op.apply(zeros({4}));
      const std::string n = op.name;
      if (n == "uniform" || n == "normal")  // continuous draws (4 coins or a permutation of 4 may repeat)
        CHECK_FALSE(kt::same_bits(next, want));
    }
  }

  TEST_CASE("a draw inside a lazy scope runs as eagerly (not refused)") {
    random::seed(7);
    const Tensor want = random::uniform({5}, -1.0, 1.0, DType::float64) * 2.0;
    random::seed(7);
    Tensor got;
    {
      auto scope = lazy();
      got = random::uniform({5}, -1.0, 1.0, DType::float64) * 2.0;
    }
    CHECK(kt::same_bits(got, want));
  }

  TEST_CASE("sampled outside and passed in, a compiled function sees fresh numbers on every call") {
    auto f = [](Tensor x, Tensor noise) { return x + noise; };
    CompiledCallable run = compile(f)(f32_4(), f32_4());
    random::seed(99);
    const Tensor x = zeros({4});
    const Tensor n1 = random::normal({4}), n2 = random::normal({4});
    const Tensor a = run(x, n1).tensor(), b = run(x, n2).tensor();
    CHECK(kt::same_bits(a, n1));
    CHECK(kt::same_bits(b, n2));
    CHECK_FALSE(kt::same_bits(a, b));
  }
}
