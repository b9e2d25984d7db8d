// The REPL's printing (tools/repl/kiln_repl_print.h) and kiln::timeit
// (timeit.h), without a prompt: the scripted sessions in tests/repl/ check them
// through Cling and clang-repl.
#include <kiln/repl/kiln_repl_print.h>
#include <kiln/timeit.h>

#include <sstream>

#include "test_util.h"

using namespace kiln;

TEST_SUITE("repl_print") {
  TEST_CASE("a tensor prints a dtype, shape, device line, then operator<<'s text") {
    Tensor t = tensor({1.5f, -2.0f, 3.0f, 4.0f}).reshape({2, 2});
    std::ostringstream body;
    body << t;
    CHECK(repl::to_repl_string(t) == "float32, [2, 2], cpu\n" + body.str());
    CHECK(body.str() == "[[ 1.5, -2. ],\n [ 3. ,  4. ]]");
    CHECK(repl::to_repl_string(scalar(7, DType::int64)).rfind("int64, [], cpu\n7", 0) == 0);
    CHECK(repl::to_repl_string(Tensor()) == "undefined tensor");
  }

  TEST_CASE("layouts, dtypes, devices and plain values") {
    CHECK(repl::to_repl_string(TensorLayout(DType::float64, {3})) == "TensorLayout(float64, [3], cpu, contiguous)");
    CHECK(repl::to_repl_string(DType::bfloat16) == "bfloat16");
    CHECK(repl::to_repl_string(Device::cpu()) == "cpu");
    CHECK(repl::to_repl_string(true) == "true");
    CHECK(repl::to_repl_string(2.5) == "2.5");
  }

  TEST_CASE("staged and compiled functions print their signature; staged ones their IR") {
    auto f = [](Tensor x, Tensor y) { return x * y + 1.0f; };
    const TensorLayout l(DType::float32, {2, 3});
    StagedGraph s = stage(f)(l, l);
    const std::string sig = "(float32[2, 3] cpu, float32[2, 3] cpu) -> float32[2, 3] cpu";
    std::string ir = s.ir();
    if (!ir.empty() && ir.back() == '\n') ir.pop_back();
    CHECK(repl::to_repl_string(s) == "StagedGraph " + sig + "\n" + ir);
    CompiledCallable c = compile(f)(l, l);
    CHECK(repl::to_repl_string(c) == "CompiledCallable " + sig);
    // A static (non-tensor) argument shows the trees.
    auto g = [](Tensor x, int k) { return x * static_cast<float>(k); };
    const std::string gs = repl::to_repl_string(stage(g)(l, 3));
    CHECK(gs.rfind("StagedGraph (float32[2, 3] cpu) -> float32[2, 3] cpu  [arguments (T, 3), result T]\n", 0) == 0);
  }

  TEST_CASE("call results and jit statistics") {
    auto f = [](Tensor x) { return std::tuple<Tensor, Tensor>(x + 1.0f, x * 2.0f); };
    auto jf = jit(f);
    Tensor x = tensor({1.0f, 2.0f});
    CallResult r = jf(x);
    jf(x);
    CHECK(repl::to_repl_string(r) ==
          "CallResult of 2 tensors (T, T)\nresult 0: float32, [2], cpu\n[2., 3.]\nresult 1: float32, [2], cpu\n[2., 4.]");
    JitStats st = jf.stats();
    CHECK(st.code_bytes > 0);
    CHECK(repl::to_repl_string(st) == "JitStats{hits: 1, misses: 1, compiles: 1, evictions: 0, entries: 1, code_bytes: " +
                                          std::to_string(st.code_bytes) + "}");
  }
}

TEST_SUITE("timeit") {
  TEST_CASE("counts calls, one warm-up call untimed; best <= median") {
    int calls = 0;
    Timing t = timeit([&] { return ++calls; }, 0.0, 5, 5);
    CHECK(t.calls == 5);
    CHECK(calls == 6);
    CHECK(t.best <= t.median);
    CHECK(t.best >= 0);
    CHECK(t.total >= t.best * 5);
    // Runs for at least min_seconds.
    Timing u = timeit([] { return 0; }, 0.02, 1);
    CHECK(u.total >= 0.02);
    CHECK(u.str().find(" calls in ") != std::string::npos);
  }

  TEST_CASE("unit choice in str()") {
    Timing t;
    t.median = 41.2e-6;
    t.best = 39.8e-6;
    t.calls = 2048;
    t.total = 0.1;
    CHECK(t.str() == "median 41.2 us, best 39.8 us (2048 calls in 0.10 s)");
    t.median = 2.5;
    t.best = 1e-3;
    t.calls = 3;
    t.total = 7.5;
    CHECK(t.str() == "median 2.5 s, best 1 ms (3 calls in 7.50 s)");
    t.median = 5e-9;
    t.best = 5e-9;
    CHECK(repl::to_repl_string(t).rfind("median 5 ns, best 5 ns", 0) == 0);
  }

  TEST_CASE("bad arguments are ValueErrors; fn's exceptions pass through") {
    CHECK_THROWS_AS(timeit([] { return 0; }, -1.0), ValueError);
    CHECK_THROWS_AS(timeit([] { return 0; }, 0.0, 0), ValueError);
    CHECK_THROWS_AS(timeit([] { return 0; }, 0.0, 5, 4), ValueError);
    CHECK_THROWS_AS(timeit([]() -> int { throw ShapeError("boom"); }), ShapeError);
  }
}
