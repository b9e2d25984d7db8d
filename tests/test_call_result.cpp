// CallResult (jit/compiled_callable.h) used directly as the Tensor a compiled
// function returns: `run(x) + 1`, `run(x)[0]`; and errors of compiled index
// writes name index_put_.
#include <string>
#include <vector>

#include "test_util.h"

namespace {
using namespace kiln;
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
Tensor i64(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(std::move(v), {n});
}
}  // namespace

TEST_SUITE("call result") {
  TEST_CASE("a call's result in arithmetic, comparisons, logical ops and indexing acts as its tensor") {
    auto f = [](Tensor x) { return x * 2.0; };
    CompiledCallable run = compile(f)(TensorLayout(DType::float64, {2, 3}));
    const Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
    // want: 2x = {2, 4, 6, 8, 10, 12}
    CHECK(vals(run(x) + 1) == std::vector<double>{3, 5, 7, 9, 11, 13});
    CHECK(vals(1.0 + run(x)) == std::vector<double>{3, 5, 7, 9, 11, 13});
    CHECK(vals(run(x) - x) == std::vector<double>{1, 2, 3, 4, 5, 6});
    CHECK(vals(x * run(x)) == std::vector<double>{2, 8, 18, 32, 50, 72});
    CHECK(vals(run(x) / 2) == vals(x));
    CHECK(vals(run(x) % 5.0) == std::vector<double>{2, 4, 1, 3, 0, 2});
    CHECK(vals(run(x) - run(x)) == std::vector<double>(6, 0.0));
    CHECK(vals(-run(x)) == std::vector<double>{-2, -4, -6, -8, -10, -12});
    CHECK(vals(run(x) > 5.0) == std::vector<double>{0, 0, 1, 1, 1, 1});
    CHECK(vals(run(x) == x * 2.0) == std::vector<double>(6, 1.0));
    CHECK(vals((run(x) > 3.0) & (run(x) < 9.0)) == std::vector<double>{0, 1, 1, 1, 0, 0});
    CHECK(vals(!(run(x) > 5.0)) == std::vector<double>{1, 1, 0, 0, 0, 0});
    CHECK(vals(run(x)[0]) == std::vector<double>{2, 4, 6});
    CHECK(run(x)[1][2].item<double>() == 12.0);
    CHECK(vals(run(x)[-1]) == std::vector<double>{8, 10, 12});
    // an expression type, not a conversion: auto deduces Tensor
    auto y = run(x) + 1.0;
    static_assert(std::is_same_v<decltype(y), Tensor>);
  }

  TEST_CASE("a call returning several tensors cannot be used as one") {
    auto f = [](Tensor x) { return std::make_tuple(x + 1.0, x - 1.0); };
    CompiledCallable run = compile(f)(TensorLayout(DType::float64, {2}));
    const Tensor x = zeros({2}, DType::float64);
    CHECK_THROWS_WITH_AS(run(x) + 1.0, doctest::Contains("the call returned 2 tensors"), ValueError);
    CHECK_THROWS_AS(run(x)[0], ValueError);
  }

  TEST_CASE("an out-of-range index write names index_put_, eagerly and compiled, in the same words") {
    auto f = [](Tensor a, Tensor i) {
      Tensor y = a * 1.0;
      y.index_put_({Slice(), i}, -1.0);
      return y;
    };
    const Tensor a = zeros({2, 3}, DType::float64);
    // One wording eagerly and compiled (eagerly it was "out of bounds ... with size 3", without the range).
    const char* put_msg = "index_put_: index 3 is out of range for axis 1 with extent 3 (expected -3 <= index < 3)";
    CHECK_THROWS_WITH_AS(f(a, i64({0, 3})), put_msg, IndexError);
    CompiledCallable run = compile(f)(TensorLayout(DType::float64, {2, 3}), TensorLayout(DType::int64, {2}));
    CHECK(vals(run(a, i64({0, -1}))) == std::vector<double>{-1, 0, -1, -1, 0, -1});
    CHECK_THROWS_WITH_AS(run(a, i64({0, 3})), doctest::Contains(put_msg), IndexError);
    // a read names index, the op the user called, as eagerly (not the index_select it is traced as)
    auto g = [](Tensor a, Tensor i) { return a.index({Slice(), i}); };
    const char* read_msg = "index: index 3 is out of range for axis 1 with extent 3 (expected -3 <= index < 3)";
    CHECK_THROWS_WITH_AS(g(a, i64({0, 3})), read_msg, IndexError);
    CompiledCallable run_g = compile(g)(TensorLayout(DType::float64, {2, 3}), TensorLayout(DType::int64, {2}));
    CHECK_THROWS_WITH_AS(run_g(a, i64({0, 3})), read_msg, IndexError);
    CHECK_THROWS_WITH_AS(jit(g)(a, i64({0, 3})), read_msg, IndexError);
    // an integer index (no index tensor) out of range reads the same
    CHECK_THROWS_WITH_AS(a.index({Slice(), 3}), read_msg, IndexError);
    // a plain index_select keeps its own name
    auto h = [](Tensor a, Tensor i) { return index_select(a, 1, i); };
    CHECK_THROWS_WITH_AS(jit(h)(a, i64({0, 3})), doctest::Contains("index_select: index 3 is out of range for axis 1"),
                         IndexError);
  }
}
