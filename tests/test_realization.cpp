// Realization contexts: eager, lazy and graph; sources, nesting, defaults.
#include <atomic>
#include <cmath>
#include <sstream>
#include <thread>

#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

TEST_SUITE("realization") {
  TEST_CASE("the default context is eager and runs each op at once") {
    CHECK(dynamic_cast<EagerRealizationContext*>(&current_realization_context()) != nullptr);
    CHECK_FALSE(in_graph_context());
    Tensor a = tensor({1.f, 2.f, 3.f});
    Tensor b = a + 1.0f;
    CHECK(b.is_realized());
    CHECK(b.to_vector<float>() == std::vector<float>{2.f, 3.f, 4.f});
  }

  TEST_CASE("graph context records nodes instead of computing") {
    Graph g("my_model", {TensorType(DType::float32, {3}, Device::cpu())});
    {
      GraphRealizationContext ctx(g);
      CHECK(in_graph_context());
      CHECK(&current_realization_context() == &ctx);
      Tensor a = Tensor::from_graph_value(g.inputs()[0]);
      CHECK_FALSE(a.is_realized());
      Tensor y = exp(a) * 2.0f;
      CHECK_FALSE(y.is_realized());
      CHECK(y.shape() == Shape{3});
      CHECK(y.dtype() == DType::float32);
      g.output(y);
    }
    CHECK_FALSE(in_graph_context());
    g.verify();
    auto counts = g.op_counts();
    CHECK(counts["exp"] == 1);
    CHECK(counts["mul"] == 1);
    CHECK(g.to_text().find("exp(%0)") != std::string::npos);
  }

  TEST_CASE("realize_all in a graph context throws, and realizing a graph tensor throws") {
    Graph g("g", {TensorType(DType::float32, {2})});
    GraphRealizationContext ctx(g);
    CHECK_THROWS_WITH_AS(ctx.realize_all(), doctest::Contains("can't realize from a graph context"),
                         RealizationError);
    Tensor a = Tensor::from_graph_value(g.inputs()[0]);
    CHECK_THROWS_AS(a.to_vector<float>(), RealizationError);
    CHECK_THROWS_AS(a.data_ptr(), RealizationError);
  }

  TEST_CASE("add_source embeds realized tensors as constants; unrealized ones are refused") {
    Graph g("g", {TensorType(DType::float32, {2})});
    GraphRealizationContext ctx(g);
    Tensor c = tensor({5.f, 6.f});
    auto st1 = ctx.add_source(c);
    auto st2 = ctx.add_source(c);
    CHECK(st1->values[0] == st2->values[0]);  // same tensor -> same constant
    CHECK(g.node(g.producer(st1->values[0].id)).kind == NodeKind::constant);
    Tensor a = Tensor::from_graph_value(g.inputs()[0]);
    CHECK_THROWS_WITH_AS(ctx.add_source(a), doctest::Contains("only realized tensors may be graph sources"),
                         RealizationError);
    CHECK_THROWS_AS(ctx.add_mutable_source(a), RealizationError);
    // A captured realized tensor used in an op becomes a constant.
    Tensor y = a + c;
    g.output(y);
    g.verify();
    int consts = 0;
    for (const auto& n : g.nodes()) consts += n.kind == NodeKind::constant;
    CHECK(consts == 1);
  }

  TEST_CASE("from_graph_value outside the graph's context is an error") {
    Graph g("g", {TensorType(DType::float32, {2})});
    CHECK_THROWS_WITH_AS(Tensor::from_graph_value(g.inputs()[0]), doctest::Contains("current context records into"),
                         RealizationError);
  }

  TEST_CASE("shape errors surface while recording") {
    Graph g("g", {TensorType(DType::float32, {3, 4}), TensorType(DType::float32, {5})});
    GraphRealizationContext ctx(g);
    Tensor a = Tensor::from_graph_value(g.inputs()[0]);
    Tensor b = Tensor::from_graph_value(g.inputs()[1]);
    CHECK_THROWS_WITH_AS(a + b, "add: cannot broadcast shapes [3, 4] and [5]", ShapeError);
  }

  TEST_CASE("contexts nest; the innermost is current") {
    Graph outer("outer", {TensorType(DType::float32, {2})});
    Graph inner("inner", {TensorType(DType::float32, {2})});
    GraphRealizationContext c1(outer);
    {
      GraphRealizationContext c2(inner);
      CHECK(&current_realization_context() == &c2);
      Tensor x = Tensor::from_graph_value(inner.inputs()[0]);
      inner.output(x * x);
    }
    CHECK(&current_realization_context() == &c1);
    CHECK(inner.op_counts()["mul"] == 1);
    CHECK(outer.op_counts().empty());
  }

  TEST_CASE("lazy: ops are recorded and realized on demand, once") {
    Tensor x = tensor({1.f, 2.f, 3.f});
    Tensor b, c;
    std::shared_ptr<LazyRealizationContext> keep;
    {
      auto scope = lazy();
      keep = scope.context().shared_from_this();
      Tensor a = x + 1.0f;  // shared dependency
      b = a * 2.0f;
      c = a * 3.0f;
      CHECK_FALSE(b.is_realized());
      // Realizing while the lazy context is current is an error, and leaves the tensors unrealized.
      CHECK_THROWS_WITH_AS(b.to_vector<float>(), doctest::Contains("before its realization context is completed"),
                           RealizationError);
      CHECK_FALSE(b.is_realized());
      Tensor dead = exp(x);  // dies before realization: dropped
      (void)dead;
      CHECK(scope.context().ops_executed() == 0);
    }
    CHECK_FALSE(b.is_realized());
    CHECK(b.to_vector<float>() == std::vector<float>{4.f, 6.f, 8.f});
    // c was computed in the same run (a once, b, c; the dead exp never ran)
    // and is handed its value when read: reading it runs nothing.
    CHECK(keep->ops_executed() == 3);
    CHECK_FALSE(c.is_realized());
    CHECK(c.to_vector<float>() == std::vector<float>{6.f, 9.f, 12.f});
    CHECK(c.is_realized());
    CHECK(keep->ops_executed() == 3);
  }

  TEST_CASE("lazy: reading a tensor of a scope open in another thread throws; the recording thread is unaffected") {
    // Thread M opens a lazy scope, records d = ones * 7 and keeps recording
    // into the scope; this thread reads d meanwhile. Before the fix the read
    // realized M's context concurrently with its recording (a data race:
    // SIGSEGV, or an error thrown in M, or silently a value).
    Tensor d, m_result;
    std::atomic<bool> recorded{false}, finish{false};
    std::atomic<long> steps{0};
    std::string m_error;
    std::thread m([&] {
      try {
        auto scope = lazy();
        d = ones({64}) * 7.0f;
        recorded = true;
        Tensor acc = d;
        while (!finish || steps < 50) {
          acc = acc * 1.0f + 0.0f;
          ++steps;
        }
        m_result = acc;
      } catch (const std::exception& e) {
        m_error = e.what();
      }
    });
    while (!recorded) std::this_thread::yield();
    int reads = 0, errors = 0;
    std::string first;
    for (int i = 0; i < 200; ++i) {
      try {
        (void)d.to_vector<float>();
        ++reads;
      } catch (const RealizationError& e) {
        if (errors++ == 0) first = e.what();
      }
    }
    finish = true;
    m.join();
    CHECK(reads == 0);
    CHECK(errors == 200);
    CHECK(first.find("kiln::lazy() scope that is still open in another thread") != std::string::npos);
    CHECK(first.find("after that scope ends") != std::string::npos);
    CHECK(m_error.empty());
    // After M's scope ended, both tensors read normally (7 * 1 + 0 per step), from this thread.
    CHECK(d.to_vector<float>() == std::vector<float>(64, 7.f));
    CHECK(m_result.to_vector<float>() == std::vector<float>(64, 7.f));
  }

  TEST_CASE("many threads read different results of one ended lazy scope at once") {
    // 8 threads each read their own unrealized result of the same scope
    // (item, to_vector, data_ptr, printing, an eager op on it), while a 9th
    // writes eagerly into an unrelated tensor (every eager write asks the
    // live lazy scopes whether they recorded its memory). Before the fix the
    // readers realized the scope concurrently (pending list, graph and each
    // other's handles unlocked): SIGSEGV or wrong values. Now the scope runs
    // once and every thread gets its value. Reference: float64 loops.
    constexpr int kThreads = 8, kRounds = 40, kN = 256;
    Tensor x = arange(0.0, double(kN), 1.0) * 0.01f - 1.0f;
    const std::vector<float> xs = x.to_vector<float>();
    Tensor other = zeros({kN});
    for (int round = 0; round < kRounds; ++round) {
      std::vector<Tensor> r(kThreads);
      std::shared_ptr<LazyRealizationContext> ctx;
      {
        auto scope = lazy();
        ctx = scope.context().shared_from_this();
        Tensor shared = exp(x) + 1.0f;  // read by every result: computed once
        for (int k = 0; k < kThreads; ++k) r[k] = sum(shared * float(k + 1));
      }
      // reference: sum_i (exp(x_i) + 1) * (k + 1)
      double base = 0;
      for (float v : xs) base += std::exp(double(v)) + 1.0;
      std::vector<double> got(kThreads, -1);
      std::vector<std::string> errs(kThreads);
      std::atomic<int> ready{0};
      std::atomic<bool> stop{false};
      std::thread writer([&] {
        while (!stop) other.add_(1.0f);
      });
      std::vector<std::thread> ts;
      for (int k = 0; k < kThreads; ++k)
        ts.emplace_back([&, k] {
          ++ready;
          while (ready < kThreads) std::this_thread::yield();  // start together
          try {
            switch (k % 5) {
              case 0: got[k] = r[k].item<double>(); break;
              case 1: got[k] = r[k].to_vector<float>().at(0); break;
              case 2: got[k] = *static_cast<const float*>(r[k].data_ptr()); break;
              case 3: {
                std::ostringstream os;
                os << r[k];
                got[k] = (r[k] * 1.0f).item<double>();
                if (os.str().empty()) got[k] = -2;
                break;
              }
              default: got[k] = (r[k] + 0.0f).item<double>(); break;
            }
          } catch (const std::exception& e) {
            errs[k] = e.what();
          }
        });
      for (auto& t : ts) t.join();
      stop = true;
      writer.join();
      for (int k = 0; k < kThreads; ++k) {
        INFO("round " << round << ", thread " << k << ": " << errs[k]);
        CHECK(errs[k].empty());
        CHECK(got[k] == doctest::Approx(base * (k + 1)).epsilon(1e-5));
        CHECK(r[k].is_realized());
      }
      CHECK(ctx->ops_executed() == 2 + 2 * kThreads);  // exp, add once; mul, sum per result
    }
  }

  TEST_CASE("many threads read the same unrealized lazy tensor at once") {
    // 8 threads read ONE unrealized result of an ended scope (each through
    // its own copy of the handle: copies share the tensor) in different
    // ways at once: item of an eager reduction, to_vector, data_ptr after
    // polling is_realized(), strides(), printing, an op on it inside the
    // thread's own lazy scope. One of them realizes it; the others must
    // see it either unrealized (and wait on the scope's lock) or fully
    // realized. Before the fix the tensor's realization state was a plain
    // field written by the realizing thread while the others read it (a
    // data race: ThreadSanitizer reports it; in a release build a reader
    // could dereference the state just released). Reference: float64 loops.
    constexpr int kThreads = 8, kRounds = 40, kN = 96;
    Tensor x = arange(0.0, double(kN), 1.0) * 0.02f - 1.0f;
    const std::vector<float> xs = x.to_vector<float>();
    std::vector<double> ref(kN);
    double ref_sum = 0;
    for (int i = 0; i < kN; ++i) {
      ref[i] = std::exp(double(xs[i])) * 2.0 + 1.0;
      ref_sum += ref[i];
    }
    for (int round = 0; round < kRounds; ++round) {
      Tensor t, other;
      {
        auto scope = lazy();
        t = exp(x) * 2.0f + 1.0f;
        other = t * 3.0f;  // a second pending result of the same scope
      }
      std::vector<double> got(kThreads, -1);
      std::vector<std::string> errs(kThreads);
      std::atomic<int> ready{0};
      std::vector<std::thread> ts;
      for (int k = 0; k < kThreads; ++k)
        ts.emplace_back([&, k] {
          const Tensor mine = t;  // a copy of the handle: the same tensor
          ++ready;
          while (ready < kThreads) std::this_thread::yield();  // start together
          try {
            switch (k % 6) {
              case 0: got[k] = sum(mine).item<double>(); break;
              case 1: got[k] = mine.to_vector<float>().at(kN - 1); break;
              case 2: {
                for (int spin = 0; spin < 100000 && !mine.is_realized(); ++spin)  // until another thread realizes it
                  std::this_thread::yield();
                got[k] = static_cast<const float*>(mine.data_ptr())[kN - 1];
                break;
              }
              case 3: {
                std::ostringstream os;
                os << mine;
                got[k] = mine.strides() == Strides{1} && !os.str().empty() ? mine.to_vector<double>().at(kN - 1) : -2;
                break;
              }
              case 4: {
                Tensor y;
                {
                  auto own = lazy();  // another context reading it: realized in its own first
                  y = mine * 1.0f;
                }
                got[k] = y.to_vector<float>().at(kN - 1);
                break;
              }
              default: got[k] = (mine + 0.0f).to_vector<float>().at(kN - 1); break;
            }
          } catch (const std::exception& e) {
            errs[k] = e.what();
          }
        });
      for (auto& th : ts) th.join();
      for (int k = 0; k < kThreads; ++k) {
        INFO("round " << round << ", thread " << k << ": " << errs[k]);
        CHECK(errs[k].empty());
        CHECK(got[k] == doctest::Approx(k % 6 == 0 ? ref_sum : ref[kN - 1]).epsilon(1e-5));
      }
      CHECK(t.is_realized());
      const std::vector<float> tv = t.to_vector<float>();
      for (int i = 0; i < kN; ++i) CHECK(tv[i] == doctest::Approx(ref[i]).epsilon(1e-6));
      CHECK(other.to_vector<float>().at(0) == doctest::Approx(ref[0] * 3.0).epsilon(1e-6));
    }
  }

  TEST_CASE("capture realizes an unrealized lazy input first, as any read does; a traced one is refused") {
    auto f = [](Tensor a) { return exp(a) * 2.0f; };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {3}));
    const engine::Model& m = run.engine_model();
    Tensor a;
    {
      auto scope = lazy();
      a = Tensor::from_vector(std::vector<float>{0.0f, 1.0f, 2.0f}) * 0.5f;
    }
    REQUIRE_FALSE(a.is_realized());
    std::vector<Tensor> outs = m.capture(3, std::vector<Tensor>{a});
    CHECK(a.is_realized());  // the caller's handle: replay is given it again
    for (int i = 0; i < 3; ++i) CHECK(outs[0].to_vector<float>()[i] == doctest::Approx(std::exp(0.5 * i) * 2.0));
    a.data<float>()[0] = 1.0f;
    m.replay(3, std::vector<Tensor>{a});
    CHECK(outs[0].to_vector<float>()[0] == doctest::Approx(std::exp(1.0) * 2.0));
    // inside its own open scope: the scope's recorded ops up to it run first (as a compiled call's arguments)
    {
      auto scope = lazy();
      Tensor b = Tensor::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f}) - 1.0f;
      std::vector<Tensor> o2 = m.capture(4, std::vector<Tensor>{b});
      CHECK(b.is_realized());
      CHECK(o2[0].to_vector<float>()[2] == doctest::Approx(std::exp(2.0) * 2.0));
    }
    // a traced value has no buffer to capture: RealizationError naming capture
    std::string msg;
    try {
      (void)stage([&](Tensor x) {
        (void)m.capture(5, std::vector<Tensor>{x});
        return x;
      })(TensorLayout(DType::float32, {3}));
    } catch (const RealizationError& e) {
      msg = e.what();
    }
    CHECK(msg.find("capture") != std::string::npos);
    CHECK(msg.find("traced value") != std::string::npos);
    CHECK(m.num_captures() == 2);
  }

  TEST_CASE("lazy: an ended scope's results read after it is opened again are its values") {
    // Reading one result parks the other's value; opening the context again
    // (ops may record against the results) hands it over first.
    auto ctx = std::make_shared<LazyRealizationContext>();
    Tensor a, b, c;
    {
      RealizationScope s(*ctx);
      a = tensor({1.f, 2.f}) * 2.0f;
      b = tensor({1.f, 2.f}) * 3.0f;
    }
    CHECK(a.to_vector<float>() == std::vector<float>{2.f, 4.f});
    CHECK_FALSE(b.is_realized());
    {
      RealizationScope s(*ctx);
      CHECK(b.is_realized());
      c = b + 1.0f;
    }
    CHECK(c.to_vector<float>() == std::vector<float>{4.f, 7.f});
    CHECK(b.to_vector<float>() == std::vector<float>{3.f, 6.f});
  }

  TEST_CASE("lazy: shared dependency computed once, dead tensors dropped (counted)") {
    Tensor x = tensor({1.f, 2.f});
    auto ctx = std::make_shared<LazyRealizationContext>();
    Tensor b, c;
    {
      RealizationScope s(*ctx);
      Tensor a = x + 1.0f;
      b = a * 2.0f;
      c = a - 1.0f;
      { Tensor dead = exp(a) + 1.0f; }
    }
    b.realize();
    CHECK(ctx->ops_executed() == 3);  // a, b, c; not exp/add of the dead tensor
    c.realize();
    CHECK(ctx->ops_executed() == 3);
    CHECK(c.to_vector<float>() == std::vector<float>{1.f, 2.f});
  }

  TEST_CASE("lazy: an op that fails throws only for the tensors that depend on it") {
    // r41 of the t13 new-user test: reading a tensor of the scope that does not
    // depend on the failing op threw that op's error. Eager is the reference.
    std::string eager_msg;
    try {
      (void)gather(ones({3}), 0, tensor({int64_t(10)}));
    } catch (const IndexError& e) {
      eager_msg = e.what();
    }
    REQUIRE(eager_msg.find("gather") != std::string::npos);
    const Tensor ok_e = ones({3}) * 3.0f, mix_e = ok_e + 1.0f;
    Tensor ok, bad, dep, mix;
    {
      auto scope = lazy();
      Tensor three = ones({3}) * 3.0f;  // read by ok, mix and dep
      ok = three;
      bad = gather(ones({3}), 0, tensor({int64_t(10)}));
      dep = bad + three;  // depends on the failing op
      mix = three + 1.0f;
    }
    CHECK_NOTHROW(ok.realize());
    CHECK(ok.is_realized());
    CHECK_FALSE(mix.is_realized());  // computed in the same run; realized when read (below)
    CHECK(kt::same_bits(ok, ok_e));
    CHECK(kt::same_bits(mix, mix_e));
    CHECK(mix.is_realized());
    CHECK_FALSE(bad.is_realized());
    CHECK_FALSE(dep.is_realized());
    // each read of a tensor that depends on the failing op throws its error, as eagerly
    CHECK_THROWS_WITH_AS(bad.to_vector<float>(), eager_msg.c_str(), IndexError);
    CHECK_THROWS_WITH_AS(dep.to_vector<float>(), eager_msg.c_str(), IndexError);
    CHECK_THROWS_WITH_AS((void)bad.data_ptr(), eager_msg.c_str(), IndexError);
    CHECK_FALSE(bad.is_realized());
    // the failing tensor read first: the others are still realized
    Tensor ok2, bad2;
    {
      auto scope = lazy();
      ok2 = tensor({1.f, 2.f}) * 2.0f;
      bad2 = gather(ones({3}), 0, tensor({int64_t(10)}));
    }
    CHECK_THROWS_WITH_AS(bad2.realize(), eager_msg.c_str(), IndexError);
    CHECK(ok2.to_vector<float>() == std::vector<float>{2.f, 4.f});
    CHECK(ok2.is_realized());
    // called directly, realize_all realizes everything it computed and throws the failure
    Tensor ok3, bad3;
    std::shared_ptr<LazyRealizationContext> ctx3;
    {
      auto scope = lazy();
      ctx3 = scope.context().shared_from_this();
      ok3 = tensor({1.f, 2.f}) * 3.0f;
      bad3 = gather(ones({3}), 0, tensor({int64_t(10)}));
    }
    CHECK_THROWS_WITH_AS(ctx3->realize_all(), eager_msg.c_str(), IndexError);
    CHECK(ok3.is_realized());
    CHECK_FALSE(bad3.is_realized());
    CHECK(ok3.to_vector<float>() == std::vector<float>{3.f, 6.f});
  }

  TEST_CASE("a lazy tensor used in a user graph becomes a constant there") {
    Tensor lazy_t;
    {
      auto scope = lazy();
      lazy_t = tensor({1.f, 2.f}) * 10.0f;
    }
    Graph g("g", {TensorType(DType::float32, {2})});
    {
      GraphRealizationContext ctx(g);
      Tensor a = Tensor::from_graph_value(g.inputs()[0]);
      g.output(a + lazy_t);
    }
    CHECK(lazy_t.is_realized());
    int consts = 0;
    for (const auto& n : g.nodes()) consts += n.kind == NodeKind::constant;
    CHECK(consts == 1);
  }

  TEST_CASE("set_default_realization_context applies at once and its handle undoes it") {
    auto lazy_ctx = std::make_shared<LazyRealizationContext>();
    auto h = set_default_realization_context(lazy_ctx);
    CHECK(&current_realization_context() == lazy_ctx.get());
    Tensor t = tensor({1.f}) + 1.0f;
    CHECK_FALSE(t.is_realized());
    h.restore();
    CHECK(dynamic_cast<EagerRealizationContext*>(&current_realization_context()) != nullptr);
    CHECK(t.item<float>() == 2.f);
  }
}

// Tester t17 F6: a kiln::lazy() scope opened inside a traced function failed
// with "realize: can't realize from a graph context", naming nothing the user
// wrote; lazy() now says it was opened inside a trace. Around the call it works.
TEST_SUITE("realization") {
  TEST_CASE("kiln::lazy() inside a traced function says so; around the call it works") {
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3});
    auto jg = jit([](Tensor t) {
      Tensor r;
      {
        auto s = kiln::lazy();
        r = t * 2.0f;
      }
      return r + 1.0f;
    });
    CHECK_THROWS_WITH_AS(jg(x), doctest::Contains("kiln::lazy(): a lazy scope opened inside a traced function"),
                         RealizationError);
    auto jf = jit([](Tensor t) { return t * 2.0f + 1.0f; });
    Tensor r;
    {
      auto s = kiln::lazy();
      r = jf(x).tensor();
    }
    CHECK(r.to_vector<float>() == std::vector<float>{3, 5, 7});  // 2 * x + 1
  }
}
