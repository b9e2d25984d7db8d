// JitOptions::check_captures / KILN_JIT_CHECK_CAPTURES=1 (issue 11, item 4):
// a sampled re-trace catches captured values that changed after tracing.
#include <cmath>

#include "test_util.h"

using namespace kiln;

namespace {

// Calls jf until it throws (at most `limit` calls); returns the calls made.
template <class J, class... A>
int calls_until_throw(J& jf, std::string& msg, int limit, const A&... args) {
  for (int i = 1; i <= limit; ++i) {
    try {
      jf(args...);
    } catch (const ValueError& e) {
      msg = e.what();
      return i;
    }
  }
  return 0;
}

}  // namespace

TEST_SUITE("capture checks") {
  TEST_CASE("a captured number that changed after tracing raises within 16 calls, naming the constant") {
    JitOptions o;
    o.check_captures = true;
    int64_t k = 3;
    auto jf = jit([&k](Tensor x) { return x + k; }, o);
    const Tensor x = Tensor::from_vector(std::vector<int64_t>{1, 2});
    CHECK(jf(x).tensor().to_vector<int64_t>() == std::vector<int64_t>{4, 5});  // compiles
    CHECK(jf(x).tensor().to_vector<int64_t>() == std::vector<int64_t>{4, 5});  // sampled: same trace
    k = 9007199254740993;
    std::string msg;
    const int n = calls_until_throw(jf, msg, 16, x);
    CHECK(n >= 1);
    CHECK(msg.find("check_captures") != std::string::npos);
    CHECK(msg.find("constant 0x0300000000000000 : int64[] cpu") != std::string::npos);  // the old k, little-endian
    CHECK(msg.find("constant 0x0100000000002000 : int64[] cpu") != std::string::npos);  // 2^53 + 1
  }

  TEST_CASE("a captured tensor variable assigned a new tensor raises too") {
    JitOptions o;
    o.check_captures = true;
    Tensor w = Tensor::from_vector(std::vector<float>{1, 2, 3});
    auto jf = jit([&w](Tensor x) { return x * w; }, o);
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 1, 1});
    CHECK(jf(x).tensor().to_vector<float>() == std::vector<float>{1, 2, 3});
    w = Tensor::from_vector(std::vector<float>{100, 200, 300});
    std::string msg;
    CHECK(calls_until_throw(jf, msg, 16, x) >= 1);
    CHECK(msg.find("constant") != std::string::npos);
  }

  TEST_CASE("no false alarm when nothing changed; off by default") {
    JitOptions o;
    o.check_captures = true;
    const Tensor w = Tensor::from_vector(std::vector<float>{1, 2, 3});
    const int64_t k = 7;
    auto jf = jit([&w, k](Tensor x, Tensor s) { return softmax(x * w + s, -1) + static_cast<float>(k); }, o);
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3});
    for (int i = 0; i < 40; ++i) CHECK_NOTHROW(jf(x, 0.5));
    // default: no re-trace, the documented stale value (README "What tracing fixes")
    int64_t m = 1;
    auto plain = jit([&m](Tensor t) { return t + m; });
    const Tensor y = Tensor::from_vector(std::vector<int64_t>{0});
    plain(y);
    m = 2;
    CHECK_NOTHROW(plain(y));
  }

  TEST_CASE("a subgraph body whose control flow follows a captured value that changed between its calls raises") {
    // The body embeds no constant, so one trace serves every call with the
    // same argument types: the compiled function computes exp twice where
    // eager computes exp then tanh. The sampled re-trace traces each call of
    // the body again and reports the difference.
    JitOptions o;
    o.check_captures = true;
    int mode = 0;
    auto block = as_subgraph([&mode](Tensor x) { return mode == 0 ? exp(x) : tanh(x); }, "block");
    auto jf = jit(
        [&](Tensor x) {
          Tensor y = x;
          for (int i = 0; i < 2; ++i) {
            mode = i;
            y = block(y);
          }
          return y;
        },
        o);
    const Tensor x = Tensor::from_vector(std::vector<float>{0.5f, -1.0f});
    // the compile: one body, served twice (the silent stale trace the check is for)
    const std::vector<float> first = jf(x).tensor().to_vector<float>();
    CHECK(first[0] == doctest::Approx(std::exp(std::exp(0.5))).epsilon(1e-5));
    std::string msg;
    const int n = calls_until_throw(jf, msg, 16, x);
    CHECK(n >= 1);
    CHECK(msg.find("check_captures") != std::string::npos);
    CHECK(msg.find("subgraph body 'block'") != std::string::npos);
    CHECK(msg.find("exp") != std::string::npos);
    CHECK(msg.find("tanh") != std::string::npos);
  }

  TEST_CASE("subgraph bodies re-traced by the check raise nothing when their calls trace alike") {
    JitOptions o;
    o.check_captures = true;
    int calls = 0;
    auto block = as_subgraph([&calls](Tensor x) { ++calls; return tanh(x) * x; }, "block");
    auto jf = jit([&](Tensor x) { return block(block(x)); }, o);
    const Tensor x = Tensor::from_vector(std::vector<float>{0.5f, -1.0f});
    for (int i = 0; i < 20; ++i) {
      const std::vector<float> r = jf(x).tensor().to_vector<float>();
      const double a = std::tanh(0.5) * 0.5, b = std::tanh(a) * a;  // float64 reference, element 0
      CHECK(r[0] == doctest::Approx(b).epsilon(1e-5));
    }
    // traces: the compile traces the body once (its second call reuses it);
    // each sampled re-trace (calls 2 and 18 here) traces both calls
    CHECK(calls == 1 + 2 * 2);
  }
}

