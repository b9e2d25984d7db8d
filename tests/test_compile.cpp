// compile(), CompiledCallable, weights, staleness checks and jit()'s cache.
#include <thread>

#include "test_util.h"

using namespace kiln;

namespace {
std::vector<float> vecf(const Tensor& t) { return t.to_vector<float>(); }
TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }
}  // namespace

TEST_SUITE("compile") {
  TEST_CASE("a compiled function gives the eager result") {
    auto f = [](Tensor a, Tensor b, Tensor c) { return tanh(a * b + c) * 0.5f + exp(-a); };
    CompiledCallable run = compile(f)(f32({4, 5}), f32({4, 5}), f32({5}));
    Tensor a = random::normal({4, 5}), b = random::normal({4, 5}), c = random::normal({5});
    Tensor want = f(a, b, c);
    Tensor got = run(a, b, c);
    kt::check_all_close(got, kt::values(want), 1e-6, 1e-6, "compiled chain");
    CHECK(run.in_layouts().size() == 3);
    CHECK(run.out_layouts()[0].shape == Shape{4, 5});
    CHECK(run.signal_buffers().empty());
    // execute_raw: same result, no checks.
    std::vector<Tensor> raw = run.execute_raw(std::vector<Tensor>{a, b, c});
    CHECK(vecf(raw[0]) == vecf(got));
    std::vector<Buffer> rb = run.execute_raw(std::vector<Buffer>{a.buffer(), b.buffer(), c.buffer()});
    REQUIRE(rb.size() == 1);
    CHECK(std::memcmp(rb[0].data(), got.data_ptr(), 20 * sizeof(float)) == 0);
  }

  TEST_CASE("matmul, reductions and row ops compile and agree with eager") {
    auto f = [](Tensor x, Tensor w) {
      Tensor h = relu(matmul(x, w) + 1.0f);
      return std::make_tuple(softmax(h, -1), sum(h, {1}), layer_norm(h));
    };
    CompiledCallable run = compile(f)(f32({8, 16}), f32({16, 4}));
    Tensor x = random::normal({8, 16}), w = random::normal({16, 4});
    auto [s, r, l] = run(x, w).as<std::tuple<Tensor, Tensor, Tensor>>();
    auto [s0, r0, l0] = f(x, w);
    kt::check_all_close(s, kt::values(s0), 1e-6, 1e-7, "softmax");
    kt::check_all_close(r, kt::values(r0), 1e-6, 1e-6, "sum");
    kt::check_all_close(l, kt::values(l0), 1e-5, 1e-6, "layer_norm");
  }

  TEST_CASE("weights: load_state_dict writes into the bound parameters; a bad entry changes nothing") {
    nn::Linear lin(4, 3);
    auto f = [&](Tensor x) { return softmax(lin(x), -1); };
    CompileOptions o;
    o.weights = lin.state_dict();
    CompiledCallable run = compile(f, o)(f32({2, 4}));
    Tensor x = random::normal({2, 4});
    std::map<std::string, Tensor> zero = {{"weight", zeros({3, 4})}, {"bias", zeros({3})}};
    lin.load_state_dict(zero);
    // eager and compiled both see the zero weights: every row is uniform
    for (double v : kt::values(run(x))) CHECK(v == doctest::Approx(1.0 / 3));
    kt::check_all_close(run(x), kt::values(f(x)), 1e-6, 1e-6, "after load_state_dict");
    // the loaded tensors themselves are not aliased by the module
    CHECK(lin.state_dict().at("weight").data_ptr() != zero.at("weight").data_ptr());
    std::map<std::string, Tensor> bad = {{"bias", ones({3})}, {"nope", ones({1})}};
    CHECK_THROWS_WITH_AS(lin.load_state_dict(bad), doctest::Contains("1 unexpected (no parameter of that name): 'nope'"),
                         ValueError);
    for (double v : kt::values(lin.state_dict().at("bias"))) CHECK(v == 0.0);  // unchanged
  }

  TEST_CASE("load_state_dict: a misspelt key is named as unexpected beside the parameter it leaves missing") {
    // Before: strict named only the missing 'weight', non-strict only the unexpected 'wieght'.
    nn::Linear lin(4, 3);
    const std::map<std::string, Tensor> typo = {{"wieght", ones({3, 4})}, {"bias", ones({3})}, {"Bias", ones({3})}};
    const std::string head = "load_state_dict: the state dict's keys do not match the module's parameters; ";
    const std::string tail = " (the module has 2 parameter(s), named by state_dict())";
    CHECK_THROWS_WITH_AS(lin.load_state_dict(typo, /*strict=*/true),
                         (head + "2 unexpected (no parameter of that name): 'Bias', 'wieght'; 1 missing: 'weight'" + tail)
                             .c_str(),
                         ValueError);
    CHECK_THROWS_WITH_AS(lin.load_state_dict(typo),
                         (head + "2 unexpected (no parameter of that name): 'Bias', 'wieght'; 1 missing (not an error "
                                 "with strict = false: kept as they are): 'weight'" + tail)
                             .c_str(),
                         ValueError);
    // Strict with only missing keys lists them all; non-strict loads what is there.
    CHECK_THROWS_WITH_AS(lin.load_state_dict({}, true), (head + "2 missing: 'bias', 'weight'" + tail).c_str(), ValueError);
    for (double v : kt::values(lin.state_dict().at("bias"))) CHECK(v != 1.0);  // nothing loaded by the failed calls
    lin.load_state_dict({{"bias", ones({3})}});
    for (double v : kt::values(lin.state_dict().at("bias"))) CHECK(v == 1.0);
  }

  TEST_CASE("argument checks name the path and give expected vs got") {
    auto f = [](std::pair<Tensor, Tensor> p, int k) { return p.first * p.second * static_cast<float>(k); };
    CompiledCallable run = compile(f)(std::make_pair(f32({3}), f32({3})), 2);
    Tensor a = ones({3}), b = ones({3});
    CHECK(vecf(run(std::make_pair(a, b), 2)) == std::vector<float>{2, 2, 2});
    // Every argument check names the entry point, as the argument-count check does.
    CHECK_THROWS_WITH_AS(run(std::make_pair(a, ones({4})), 2),
                         "compiled call: argument 0.1: expected float32[3] cpu (contiguous), got float32[4] cpu "
                         "(contiguous) (a CompiledCallable runs the layouts it was compiled for: compile for this one, "
                         "or use jit(fn), which compiles once per layout)",
                         ValueError);
    CHECK_THROWS_WITH_AS(run(std::make_pair(a, ones({3}, DType::float64)), 2),
                         doctest::Contains("compiled call: argument 0.1: expected float32[3]"), ValueError);
    CHECK_THROWS_WITH_AS(run(std::make_pair(a, Tensor()), 2), "compiled call: argument 0.1: an undefined tensor",
                         ValueError);
    CHECK_THROWS_WITH_AS(run(std::make_pair(a, b), 3), doctest::Contains("tree structure mismatch"), ValueError);
    CHECK_THROWS_WITH_AS(run(std::make_pair(a, b)), doctest::Contains("expected 2 positional argument(s), got 1"),
                         ValueError);
    // Stride class is part of the signature.
    Tensor m = random::normal({3, 3});
    auto g = [](Tensor x) { return x + 1.0f; };
    CompiledCallable rg = compile(g)(f32({3, 3}));
    CHECK_THROWS_WITH_AS(rg(transpose(m)), doctest::Contains("(transposed)"), ValueError);
    CHECK_THROWS_WITH_AS(rg(transpose(m)), doctest::Contains("(the stride class is part of what a CompiledCallable is "
                                                              "compiled for: compile for this layout"),
                         ValueError);
    // A non-tensor argument differs: the message says which and what to do (t20 finding 9).
    CHECK_THROWS_WITH_AS(run(std::make_pair(a, b), 3),
                         doctest::Contains(": argument 1 is the value 2 this callable was compiled with, got 3 (a "
                                           "non-tensor argument is compiled into the code; pass a Tensor to vary it"),
                         ValueError);
    // Compiled for a transposed layout: accepted, and right.
    CompiledCallable rt = compile(g)(transpose(m));
    CHECK(vecf(rt(transpose(m))) == vecf(transpose(m) + 1.0f));
  }

  TEST_CASE("weights: bound by name when the callable is created") {
    nn::Linear lin(4, 3);
    auto f = [&](Tensor x) { return lin(x); };
    CompileOptions o;
    o.weights = lin.state_dict();
    CompiledCallable run = compile(f, o)(f32({2, 4}));
    Tensor x = random::normal({2, 4});
    kt::check_all_close(run(x), kt::values(lin(x)), 1e-6, 1e-6, "linear");
    CHECK(run.weights().size() == 2);
    // Without a registry the module's parameters are bound by their names (issue 11).
    CompiledCallable auto_bound = compile(f)(f32({2, 4}));
    CHECK(auto_bound.weights().size() == 2);
    CHECK(auto_bound.weights().at("weight").data_ptr() == lin.state_dict().at("weight").data_ptr());
    kt::check_all_close(auto_bound(x), kt::values(lin(x)), 1e-6, 1e-6, "linear, bound by name");
    // A graph whose weight nobody bound still names it.
    StagedGraph bare = stage(f)(f32({2, 4}));
    StagedGraph unbound;  // the graph and its signature only: no weights bound
    unbound.graph = bare.graph;
    unbound.in_layouts = bare.in_layouts;
    unbound.in_tree = bare.in_tree;
    unbound.out_layouts = bare.out_layouts;
    unbound.out_tree = bare.out_tree;
    CHECK_THROWS_WITH_AS(CompiledCallable{unbound},
                         doctest::Contains("weight 'weight' (float32[3, 4] cpu) is missing from the weights registry"),
                         ValueError);
    CompileOptions bad = o;
    bad.weights["bias"] = zeros({4});
    CHECK_THROWS_WITH_AS(compile(f, bad)(f32({2, 4})),
                         doctest::Contains("weight 'bias' expects float32[3] cpu, got float32[4] cpu"), ValueError);
    // Other weights on the same staged graph reuse its code.
    StagedGraph s = stage(f)(f32({2, 4}));
    CompiledCallable c1(s, o.weights);
    auto w2 = o.weights;
    w2["bias"] = ones({3});
    CompiledCallable c2(s, w2);
    CHECK(&c1.engine_model().artifact() == &c2.engine_model().artifact());
    Tensor w = lin.state_dict().at("weight");
    kt::check_all_close(c2(x), kt::values(matmul(x, transpose(w, 0, 1)) + 1.0f), 1e-6, 1e-6, "rebound bias");
  }

  TEST_CASE("a captured constant that changes makes the next call raise") {
    Tensor captured = tensor({1.f, 2.f, 3.f});
    auto f = [&](Tensor x) { return x * captured; };
    CompiledCallable run = compile(f)(f32({3}));
    CHECK(vecf(run(ones({3}))) == std::vector<float>{1, 2, 3});
    captured.data<float>()[1] = 20.f;
    CHECK_THROWS_WITH_AS(run(ones({3})), doctest::Contains("compiled call: the captured tensor float32[3] cpu (captured tensor 0 of the "
                                                   "function, in the order it first used them) changed"),
                         ValueError);
    CHECK_THROWS_WITH_AS(run(ones({3})), doctest::Contains("bind it as a named weight"), ValueError);
  }

  TEST_CASE("captured views: a slice at an offset and a transposed view are checked by their own elements") {
    // The slice is contiguous at an element offset into its storage (read
    // where it is); the transposed view is strided (hashed from a copy).
    Tensor base = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
    Tensor part = slice(base, 0, 2, 5);  // 3, 4, 5
    Tensor m = reshape(tensor({1.f, 2.f, 3.f, 4.f}), {2, 2});
    Tensor mt = transpose(m, 0, 1);
    auto f = [&](Tensor x, Tensor y) { return std::make_tuple(x * part, y * mt); };
    CompiledCallable run = compile(f)(f32({3}), f32({2, 2}));
    auto [a, b] = run(ones({3}), ones({2, 2})).as<std::tuple<Tensor, Tensor>>();
    CHECK(vecf(a) == std::vector<float>{3, 4, 5});
    CHECK(vecf(b) == std::vector<float>{1, 3, 2, 4});
    base.data<float>()[0] = 10.f;  // outside the slice: not a change of the constant
    base.data<float>()[5] = 10.f;
    CHECK_NOTHROW(run(ones({3}), ones({2, 2})));
    base.data<float>()[3] = 40.f;  // inside it
    CHECK_THROWS_WITH_AS(run(ones({3}), ones({2, 2})), doctest::Contains("changed since the function was traced"), ValueError);
    base.data<float>()[3] = 4.f;  // back: the same bytes again
    CHECK_NOTHROW(run(ones({3}), ones({2, 2})));
    m.data<float>()[1] = 20.f;  // the transposed view's element (1, 0)
    CHECK_THROWS_WITH_AS(run(ones({3}), ones({2, 2})), doctest::Contains("changed since the function was traced"), ValueError);
  }

  TEST_CASE("jit compiles on first use and caches by layout") {
    auto jf = jit([](Tensor x, Tensor y) { return x * y + 1.0f; });
    Tensor a = random::normal({32, 64}), b = random::normal({32, 64});
    Tensor r1 = jf(a, b);
    Tensor r2 = jf(b, a);
    CHECK(jf.stats().compiles == 1);
    CHECK(jf.stats().hits == 1);
    CHECK(jf.stats().misses == 1);
    kt::check_all_close(r1, kt::values(a * b + 1.0f), 1e-6, 1e-7, "jit result");  // a*b+1 may contract to FMA
    Tensor c = random::normal({16, 64});
    jf(c, c);
    CHECK(jf.stats().compiles == 2);
    CHECK(jf.last_miss_explanation().find("arg 0: shape [16, 64] vs cached [32, 64]") != std::string::npos);
    jf(transpose(random::normal({64, 32})), a);
    CHECK(jf.last_miss_explanation().find("stride class transposed vs cached contiguous") != std::string::npos);
    CHECK(jf.stats().entries == 3);
    jf.clear();
    CHECK(jf.stats().entries == 0);
  }

  TEST_CASE("jit: a call that throws counts as no hit, miss or eager call") {
    // hits + misses + eager_calls = calls that returned (JitStats): a bad
    // index, found while the compiled code (or the eager call) runs, throws
    // and counts nothing, on each path a call takes.
    const Tensor a = zeros({2, 3}, DType::float64);
    const Tensor good = Tensor::from_vector(std::vector<int64_t>{0, 2}), bad = Tensor::from_vector(std::vector<int64_t>{0, 3});
    auto expect = [](const JitStats& s, int64_t hits, int64_t misses, int64_t eager, int64_t compiles) {
      CHECK(s.hits == hits);
      CHECK(s.misses == misses);
      CHECK(s.eager_calls == eager);
      CHECK(s.compiles == compiles);
    };
    // Tensor arguments (the cached fast path): a miss that throws compiles
    // its entry (counted, kept) but counts no miss; a hit that throws no hit.
    auto jf = jit([](Tensor x, Tensor i) { return x.index({Slice(), i}) + 1.0; });
    CHECK_THROWS_WITH_AS(jf(a, bad), doctest::Contains("index 3 is out of range for axis 1"), IndexError);
    expect(jf.stats(), 0, 0, 0, 1);
    CHECK(kt::values(jf(a, good)) == std::vector<double>{1, 1, 1, 1});
    expect(jf.stats(), 1, 0, 0, 1);
    CHECK_THROWS_AS(jf(a, bad), IndexError);
    expect(jf.stats(), 1, 0, 0, 1);
    // A static argument (the general lookup): the same.
    auto jg = jit([](Tensor x, Tensor i, int k) { return x.index({Slice(), i}) + static_cast<double>(k); });
    CHECK_THROWS_AS(jg(a, bad, 2), IndexError);
    expect(jg.stats(), 0, 0, 0, 1);
    CHECK(kt::values(jg(a, good, 2)) == std::vector<double>{2, 2, 2, 2});
    CHECK_THROWS_AS(jg(a, bad, 2), IndexError);
    CHECK(kt::values(jg(a, good, 3)) == std::vector<double>{3, 3, 3, 3});
    expect(jg.stats(), 1, 1, 0, 2);
    // Overlapping arguments of a function that writes one run eagerly: an
    // eager call that throws counts no eager call.
    auto jw = jit([](Tensor x, Tensor y, Tensor i) {
      x.add_(1.0);
      return y.index({i});  // read after the write
    });
    Tensor buf = zeros({4}, DType::float64);
    const Tensor i2 = Tensor::from_vector(std::vector<int64_t>{0, 1, 2}), i5 = Tensor::from_vector(std::vector<int64_t>{0, 1, 5});
    CHECK_THROWS_WITH_AS(jw(slice(buf, 0, 0, 3), slice(buf, 0, 1, 4), i5), doctest::Contains("index 5"), IndexError);
    CHECK(jw.stats().eager_calls == 0);
    jw(slice(buf, 0, 0, 3), slice(buf, 0, 1, 4), i2);
    const JitStats s = jw.stats();
    CHECK(s.eager_calls == 1);
    CHECK(s.hits + s.misses + s.eager_calls == 1);  // the one call that returned
  }

  TEST_CASE("jit: static arguments are part of the key; LRU bound; recompile-as-error mode") {
    JitOptions o;
    o.max_entries = 2;
    auto jf = jit([](Tensor x, int k) { return x * static_cast<float>(k); }, o);
    Tensor x = ones({3});
    CHECK(vecf(jf(x, 2)) == std::vector<float>{2, 2, 2});
    CHECK(vecf(jf(x, 3)) == std::vector<float>{3, 3, 3});
    CHECK(jf.last_miss_explanation().find("tree structure (T, 3) vs cached (T, 2)") != std::string::npos);
    jf(x, 4);
    CHECK(jf.stats().entries == 2);
    CHECK(jf.stats().evictions == 1);
    JitOptions strict;
    strict.error_on_recompile = true;
    auto js = jit([](Tensor x) { return x + 1.0f; }, strict);
    js(ones({3}));
    js(ones({3}));
    CHECK_THROWS_WITH_AS(js(ones({4})), doctest::Contains("arg 0: shape [4] vs cached [3]"), ValueError);
  }

  TEST_CASE("jit: a number for a Tensor parameter is a runtime argument; a number parameter is static") {
    auto jr = jit([](Tensor x, Tensor s) { return x * s + 1.0f; });
    Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3});
    CHECK(vecf(jr(x, 0.5)) == std::vector<float>{1.5f, 2.0f, 2.5f});
    CHECK(vecf(jr(x, 2.0)) == std::vector<float>{3, 5, 7});
    CHECK(vecf(jr(x, 3)) == std::vector<float>{4, 7, 10});  // an int: a weak int64 0-d tensor; float32 * it -> float32
    CHECK(jr.stats().compiles == 2);  // one for the floating scalar, one for the integer
    CHECK(jr.stats().hits == 1);
    // A 0-d tensor is a tensor, not a weak number: an entry of its own (jit/jit_function.h).
    CHECK(vecf(jr(x, full({}, 0.25, DType::float32))) == std::vector<float>{1.25f, 1.5f, 1.75f});
    CHECK(jr.stats().compiles == 3);
    auto js = jit([](Tensor x, double s) { return x * static_cast<float>(s); });
    js(x, 0.5);
    js(x, 2.0);
    CHECK(js.stats().compiles == 2);  // declared static: the value is part of the key
  }

  TEST_CASE("many threads may call one callable and one jit function") {
    auto f = [](Tensor x) { return tanh(x) * 2.0f + 1.0f; };
    CompiledCallable run = compile(f)(f32({64}));
    auto jf = jit(f);
    Tensor x = random::normal({64});
    std::vector<float> want = vecf(f(x));
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&] {
        for (int i = 0; i < 50; ++i) {
          std::vector<float> a = vecf(run(x)), b = vecf(jf(x));
          for (size_t k = 0; k < want.size(); ++k)
            if (std::fabs(a[k] - want[k]) > 1e-5f || std::fabs(b[k] - want[k]) > 1e-5f) ++bad;
        }
      });
    for (auto& t : ts) t.join();
    CHECK(bad == 0);
    CHECK(jf.stats().compiles == 1);
  }
}
