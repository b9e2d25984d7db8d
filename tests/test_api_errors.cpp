// Errors a user meets at the API's edges (found by a new-user test): each is
// a kiln::Error naming the function or argument, what was expected and what
// came, never a crash or a silent acceptance.
#include <sstream>

#include "test_util.h"

namespace {
using namespace kiln;
}  // namespace

TEST_SUITE("errors") {
  TEST_CASE("cast to a dtype code outside DType is a DTypeError naming cast") {
    CHECK_THROWS_WITH_AS(cast(ones({4, 3}), static_cast<DType>(99)), doctest::Contains("cast: unknown dtype code 99"),
                         DTypeError);
  }

  TEST_CASE("matmul whose result needs more bytes than memory can address names matmul") {
    Tensor t = ones({1, 1});
    const int64_t big = int64_t{1} << 31;
    CHECK_THROWS_WITH_AS(matmul(broadcast_to(t, {big, 1}), broadcast_to(t, {1, big})),
                         doctest::Contains("matmul: the result [2147483648, 2147483648]"), ShapeError);
  }

  TEST_CASE("stage/compile: a spec whose element or byte count overflows int64 is refused") {
    auto f = [](Tensor a) { return a * 2.0f; };
    const int64_t big = int64_t{1} << 40;
    CHECK_THROWS_WITH_AS(compile(f)(TensorLayout(DType::float32, {big, big})),
                         doctest::Contains("more elements than int64 can count"), ShapeError);
    CHECK_THROWS_WITH_AS(compile(f)(TensorLayout(DType::float64, {int64_t{1} << 61, 2})),
                         doctest::Contains("needs more bytes than memory can address"), ShapeError);
    // an empty extent makes any other extent fine
    CompiledCallable ok = compile(f)(TensorLayout(DType::float32, {0, big}));
    CHECK(ok(Tensor::empty({0, big}, DType::float32)).as<Tensor>().shape() == Shape{0, big});
  }

  TEST_CASE("a compiled result converts to tensor types only; it prints") {
    auto f = [](Tensor a) { return a + 1.0f; };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {2}));
    Tensor x = ones({2});
    CHECK_THROWS_WITH_AS(static_cast<void>(run(x).as<int>()),
                         doctest::Contains("a tensor cannot convert to this non-tensor type"), ValueError);
    std::ostringstream a, b;
    a << run(x);
    b << f(x);
    CHECK(a.str() == b.str());
    auto g = [](Tensor a) { return std::make_tuple(a, a * 2.0f); };
    CompiledCallable two = compile(g)(TensorLayout(DType::float32, {2}));
    std::ostringstream c, d;
    c << two(x);
    d << "(" << x << ", " << x * 2.0f << ")";
    CHECK(c.str() == d.str());
  }

  TEST_CASE("JitOptions::max_entries = 0 and a negative session thread count are refused") {
    JitOptions o;
    o.max_entries = 0;
    CHECK_THROWS_WITH_AS(jit([](Tensor a) { return a; }, o), doctest::Contains("max_entries must be at least 1"),
                         ValueError);
    CHECK_THROWS_WITH_AS(InferenceSession(KernelOptions{}, -5), doctest::Contains("num_threads must be in [0, 1024]"),
                         ValueError);
    CHECK_NOTHROW(InferenceSession(KernelOptions{}, 0));
  }

  TEST_CASE("embedding ids follow index_select: negative from the end, out of range is an IndexError") {
    Tensor w = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {3, 2});
    Tensor last = embedding(w, Tensor::from_vector(std::vector<int64_t>{-1}));
    CHECK(kt::values(last) == std::vector<double>{4, 5});
    CHECK_THROWS_AS(embedding(w, Tensor::from_vector(std::vector<int64_t>{-4})), IndexError);
    CHECK_THROWS_AS(embedding(w, Tensor::from_vector(std::vector<int64_t>{3})), IndexError);
  }
}
