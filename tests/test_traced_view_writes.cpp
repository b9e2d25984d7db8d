// Writes through views while tracing (trace/realization_context.h): eagerly a
// view shares its base's memory, so writing through it changes the base and
// every other view of the base. Traced and compiled, the same function must
// give the same results (and the same writes into its arguments).
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using namespace kiln;

using Fn = std::function<std::vector<Tensor>(Tensor)>;

Tensor grid() { return reshape(arange(0.0, 12.0, 1.0, DType::float64), {3, 4}); }  // [[0..3], [4..7], [8..11]]
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

// Runs f eagerly on a copy of `a`, and compiled (and staged lazily) on
// another copy; the results and the argument afterwards must agree.
void check_same(const Fn& f, const std::string& what, const Tensor& a = grid()) {
  CAPTURE(what);
  Tensor ea = a.clone();
  const std::vector<Tensor> want = f(ea);
  Tensor ca = a.clone();
  CompiledCallable run = compile(f)(TensorLayout(a.dtype(), a.shape()));
  const std::vector<Tensor> got = run(ca).leaves;
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(vals(got[i]) == vals(want[i]), what << ": result " << i);
  CHECK_MESSAGE(vals(ca) == vals(ea), what << ": the argument after the call");
  // a lazy scope records the same way
  Tensor la = a.clone();
  std::vector<Tensor> lazy_got;
  {
    auto scope = lazy();
    Tensor traced = la * 1.0;  // an unrealized tensor of the scope
    lazy_got = f(traced);
  }
  std::vector<Tensor> want2 = f(a.clone());
  for (size_t i = 0; i < lazy_got.size(); ++i) CHECK_MESSAGE(vals(lazy_got[i]) == vals(want2[i]), what << ": lazy " << i);
}

int count_op(const StagedGraph& s, const std::string& op) {
  const auto counts = s.graph->op_counts();
  auto it = counts.find(op);
  return it == counts.end() ? 0 : it->second;
}

}  // namespace

TEST_SUITE("traced writes through views") {
  TEST_CASE("a write through a basic view lands in the base, compiled as eagerly") {
    check_same([](Tensor a) { Tensor y = a * 1.0; y.slice(0, 1, 3).fill_(0); return std::vector<Tensor>{y}; },
               "slice rows 1:3 filled");
    check_same([](Tensor a) { Tensor y = a * 1.0; y[0].add_(5.0); return std::vector<Tensor>{y}; }, "y[0] += 5 (method)");
    check_same([](Tensor a) { Tensor y = a * 1.0; slice(y[1], 0, 0, std::nullopt, 2).mul_(-1.0); return std::vector<Tensor>{y}; },
               "y[1][::2] *= -1 (chained, strided)");
    check_same([](Tensor a) { Tensor y = a * 1.0; flip(y, {0, 1})[0].copy_(arange(0.0, 4.0, 1.0, DType::float64)); return std::vector<Tensor>{y}; },
               "flip(y)[0] = [0, 1, 2, 3] (negative strides: the last row, reversed)");
    check_same([](Tensor a) { Tensor y = a * 1.0; permute(y, {1, 0})[2].fill_(-7); return std::vector<Tensor>{y}; },
               "y.T[2] = -7 (column 2)");
    check_same([](Tensor a) { Tensor y = a * 1.0; slice(reshape(y, {12}), 0, 3, 9).neg_(); return std::vector<Tensor>{y}; },
               "reshape(y, 12)[3:9].neg_()");
    check_same([](Tensor a) { Tensor y = a * 1.0; unsqueeze(y, 0).slice(2, 1, 2).fill_(1.5); return std::vector<Tensor>{y}; },
               "y[None, :, 1:2] = 1.5");
    check_same([](Tensor a) { Tensor y = a * 1.0; y[2][1] = 100.0; y[0][3] += 0.5; return std::vector<Tensor>{y}; },
               "y[2][1] = 100; y[0][3] += 0.5 (chained indexing)");
    check_same([](Tensor a) { Tensor y = a * 1.0; y[1] = 9.0; Tensor e = y.slice(0, 3, 3); e.fill_(1); return std::vector<Tensor>{y}; },
               "an empty view written: nothing changes");
  }

  TEST_CASE("views taken before a write see it: siblings, the written view itself, whole-tensor writes") {
    check_same([](Tensor a) {
                 Tensor y = a * 1.0;
                 Tensor row = y[0], col = y.index({Slice(), 1});
                 row.fill_(3.0);           // through one view
                 Tensor seen = col * 1.0;  // the sibling sees y[0][1] = 3
                 col.add_(10.0);           // and writes back through itself
                 return std::vector<Tensor>{y, row, col, seen};
               },
               "sibling views");
    check_same([](Tensor a) {
                 Tensor y = a * 1.0;
                 Tensor v = y.slice(1, 1, 3);
                 y.mul_(2.0);  // a whole-tensor write: v follows
                 return std::vector<Tensor>{v + 0.0, y};
               },
               "a view after a whole-tensor write");
    check_same([](Tensor a) {
                 Tensor b = a * 1.0, c = a + 100.0;
                 Tensor keep_b = b[0];
                 b.copy_(c);              // b takes c's values; eagerly separate memory
                 b[0].fill_(-1.0);        // so this must not reach c
                 c[2].fill_(-2.0);        // nor this b
                 return std::vector<Tensor>{b, c, keep_b};
               },
               "a copy is separate memory");
  }

  TEST_CASE("a write through a view of an argument writes into the caller's tensor") {
    check_same([](Tensor a) { a[1].fill_(0.0); a.slice(1, 3, 4).mul_(10.0); return std::vector<Tensor>{a * 1.0}; },
               "into the argument");
  }

  TEST_CASE("advanced-index writes through a view (formerly refused)") {
    check_same([](Tensor a) {
                 Tensor y = a * 1.0;
                 y.index({Slice(1, None)}).index_put_({Tensor::from_vector(std::vector<int64_t>{0, -1})}, 1.0);
                 return std::vector<Tensor>{y};
               },
               "y[1:][[0, -1]] = 1");
  }

  TEST_CASE("a write through a view is one scatter into the base") {
    auto f = [](Tensor a) {
      Tensor y = a * 1.0;
      y.slice(0, 1, 3).slice(1, 0, 4, 2).fill_(0);
      return y;
    };
    StagedGraph s = stage(f)(TensorLayout(DType::float64, {3, 4}));
    CHECK(count_op(s, "scatter") == 1);
  }

  TEST_CASE("refused: a broadcast view (as eagerly), a view of a constant") {
    auto bc = [](Tensor a) {
      Tensor y = a * 1.0;
      broadcast_to(y[0], {2, 4}).fill_(1.0);
      return y;
    };
    CHECK_THROWS_AS(bc(grid()), ValueError);  // eagerly
    CHECK_THROWS_WITH_AS(compile(bc)(TensorLayout(DType::float64, {3, 4})),
                         doctest::Contains("fill_: the destination (shape [2, 4]) is a broadcast view"), ValueError);
    // a realized tensor captured and read as a constant cannot be written through a view
    Tensor w = grid();
    auto cst = [&w](Tensor a) {
      Tensor r = a + w;  // w is read: a constant of the graph
      w[0].fill_(0.0);
      return r;
    };
    CHECK_THROWS_WITH_AS(compile(cst)(TensorLayout(DType::float64, {3, 4})),
                         doctest::Contains("holds as a constant"), RealizationError);
  }

  TEST_CASE("a captured tensor written first (a mutable source) can then be written through a view") {
    Tensor w = grid(), we = grid();
    auto make = [](Tensor& t) {
      return [&t](Tensor a) {
        t.add_(1.0);  // a write makes t a mutable source
        t[2].fill_(-5.0);
        return a + t;
      };
    };
    auto fe = make(we);
    const Tensor want = fe(grid());
    auto fc = make(w);
    CompiledCallable run = compile(fc)(TensorLayout(DType::float64, {3, 4}));
    const Tensor got = run(grid()).tensor();
    CHECK(vals(got) == vals(want));
    CHECK(vals(w) == vals(we));
  }

  // A captured realized tensor that the function only takes views of before
  // writing through one becomes a mutable source, as a whole-tensor write
  // makes it one: each call writes into it as eagerly (the repro wrote
  // big.index({Slice(0, 4)}).add_(1) and was told big was "read before it
  // was first written").
  TEST_CASE("a captured tensor first written through a view becomes a mutable source") {
    using CapFn = std::function<Tensor(Tensor&, Tensor)>;
    auto check_capture = [](const CapFn& body, const std::string& what) {
      CAPTURE(what);
      Tensor te = grid(), tc = grid(), tj = grid();  // eager, compiled, jit: each its own captured tensor
      auto fe = [&](Tensor a) { return body(te, a); };
      auto fc = [&](Tensor a) { return body(tc, a); };
      auto fj = [&](Tensor a) { return body(tj, a); };
      CompiledCallable run = compile(fc)(TensorLayout(DType::float64, {3, 4}));
      auto jitted = jit(fj);
      for (int call = 0; call < 2; ++call) {  // the second call sees the first one's write
        CAPTURE(call);
        const Tensor a = grid() * static_cast<double>(call + 1);
        const Tensor want = fe(a.clone());
        CHECK(vals(run(a.clone()).tensor()) == vals(want));
        CHECK(vals(jitted(a.clone()).tensor()) == vals(want));
        CHECK(vals(tc) == vals(te));
        CHECK(vals(tj) == vals(te));
      }
      // not a constant: a mutable source, read from the tensor on every call
      for (const auto& c : run.staged().captured) CHECK_FALSE(c.source.is_same(tc));
      REQUIRE(run.staged().mutable_weights.size() == 1);
      CHECK(run.staged().mutable_weights.begin()->second.is_same(tc));
    };
    check_capture([](Tensor& t, Tensor a) { t.index({Slice(0, 2)}).add_(1.0); return a * 2.0; },
                  "t.index({Slice(0, 2)}).add_(1)");
    check_capture([](Tensor& t, Tensor a) { t.index({Slice(0, 2)}) += 1.0; return a * 2.0; },
                  "t.index({Slice(0, 2)}) += 1");
    check_capture([](Tensor& t, Tensor a) { t[0] = 7.0; return a * 2.0; }, "t[0] = 7");
    check_capture([](Tensor& t, Tensor a) { t[2] *= a[0]; return a * 2.0; }, "t[2] *= a[0]");
    check_capture(
        [](Tensor& t, Tensor a) {
          Tensor r = t[1] * 3.0;  // reads only elements the write below overwrites: read at call time
          t[1].add_(1.0);
          return r + a[1];
        },
        "t[1] read, then written");
    check_capture([](Tensor& t, Tensor a) { slice(t, 1, 1, 3).fill_(-1.0); return a + t; },
                  "slice(t, 1, 1, 3).fill_(-1), then t read");
    check_capture([](Tensor& t, Tensor a) { t[1][2] = a[0][0] + 100.0; return a - t; },
                  "t[1][2] = a value computed from the argument");
    check_capture(
        [](Tensor& t, Tensor a) {
          t.transpose(0, 1)[1].add_(a[2].slice(0, 0, 3));  // column 1 += a[2, 0:3]
          return a * t;
        },
        "a transposed view written");
    check_capture(
        [](Tensor& t, Tensor a) {
          Tensor r = t[1], c = t.index({Slice(), 3});  // views taken before the write see it
          t[1][3].mul_(10.0);
          return concat({r + a[1], c * 1.0}, 0);
        },
        "sibling views taken before the write");
    check_capture(
        [](Tensor& t, Tensor a) {
          Tensor v = t.index({Slice(0, 1)});  // a view, then a whole-tensor write: v sees it
          t.mul_(2.0);
          return v * 1.0 + a[0];
        },
        "a view taken, then the whole tensor written");
    check_capture(
        [](Tensor& t, Tensor a) {
          t[0].add_(1.0);
          t[0].add_(a[0]);  // a second write through a new view of the mutable source
          t.sub_(0.5);
          return a + t[0];
        },
        "several writes");
  }

  TEST_CASE("a captured tensor read before a write through its view: refused, naming what read it") {
    Tensor w = grid();
    const TensorLayout l(DType::float64, {3, 4});
    auto msg = [&](const std::function<Tensor(Tensor)>& f) {
      try {
        (void)compile(f)(l);
      } catch (const RealizationError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    // a value computed from it
    std::string m = msg([&](Tensor a) {
      Tensor r = a + w;
      w[0].fill_(0.0);
      return r;
    });
    CHECK_MESSAGE(m.find("fill_: writing through a view (graph value %") != std::string::npos, m);
    CHECK_MESSAGE(m.find("of a captured realized tensor (float64[3, 4] cpu) that this trace already holds as a constant") !=
                      std::string::npos,
                  m);
    CHECK_MESSAGE(m.find(": add (graph value %") != std::string::npos, m);
    CHECK_MESSAGE(m.find("read it before this write") != std::string::npos, m);
    CHECK_MESSAGE(m.find("read before it was first written, or a weight") == std::string::npos, m);
    // read through a view, then written through another one
    m = msg([&](Tensor a) {
      Tensor r = a[0] * w[1];
      w[2].add_(1.0);
      return r;
    });
    CHECK_MESSAGE(m.find("add_: writing through a view") != std::string::npos, m);
    CHECK_MESSAGE(m.find(": mul (graph value %") != std::string::npos, m);
    CHECK_MESSAGE(m.find("read it through a view (graph value %") != std::string::npos, m);
    // a whole-tensor write after a read says the same
    m = msg([&](Tensor a) {
      Tensor r = a + w;
      w.add_(1.0);
      return r;
    });
    CHECK_MESSAGE(m.find("add_: writing into a captured realized tensor (float64[3, 4] cpu)") != std::string::npos, m);
    CHECK_MESSAGE(m.find(": add (graph value %") != std::string::npos, m);
    // a subgraph body that captured it read it too (its copy would go stale)
    auto rd = as_subgraph([&](Tensor x) { return x + w; }, "rd");
    m = msg([&](Tensor a) {
      Tensor v = w[0];
      Tensor r = rd(a);
      v.fill_(0.0);
      return r;
    });
    CHECK_MESSAGE(m.find("the body of subgraph call 'rd' captured it") != std::string::npos, m);
    m = msg([&](Tensor a) {
      Tensor r = rd(a);
      w[0].fill_(0.0);
      return r;
    });
    CHECK_MESSAGE(m.find("the body of subgraph call 'rd' captured it") != std::string::npos, m);
    CHECK(vals(w) == vals(grid()));  // nothing was written
    // explicitly, add_mutable_source refuses it with the same reason
    Graph g("m", {TensorType(DType::float64, {3, 4})});
    {
      GraphRealizationContext ctx(g);
      Tensor x = Tensor::from_graph_value(g.inputs()[0]);
      Tensor v = w[1];  // a view only: still fine
      Tensor y = x * w;
      CHECK_THROWS_WITH_AS(ctx.add_mutable_source(w), doctest::Contains("already read as a constant of graph 'm' (mul"),
                           RealizationError);
      g.output(y + v);
    }
  }

  TEST_CASE("jit: a captured tensor written through a view, and a view of it passed in as the argument") {
    Tensor big = zeros({8}, DType::float64), big_e = zeros({8}, DType::float64);
    auto g = [&big](Tensor x) { big.index({Slice(0, 4)}).add_(1.0); return x * 2.0; };
    auto ge = [&big_e](Tensor x) { big_e.index({Slice(0, 4)}).add_(1.0); return x * 2.0; };
    auto jg = jit(g);
    CHECK(vals(jg(ones({4}, DType::float64)).tensor()) == vals(ge(ones({4}, DType::float64))));
    CHECK(vals(big) == vals(big_e));
    // the argument overlaps the memory written: eagerly x (big[2:6]) sees the write into big[0:4]
    const Tensor r = jg(big.index({Slice(2, 6)})).tensor();
    const Tensor re = ge(big_e.index({Slice(2, 6)}));
    CHECK(vals(re) == std::vector<double>{4, 4, 0, 0});  // big[2:6] after the second write: [2, 2, 0, 0]
    CHECK(vals(r) == vals(re));
    CHECK(vals(big) == vals(big_e));
  }
}

// Tester t17 F3: writing a captured non-contiguous view (a transpose, a
// column, a reversed view of a realized matrix) in a traced function failed
// with "compile: weight 'mutable.0' must be contiguous (pass .contiguous())":
// an internal name and wrong advice. The error now names the op, says the
// captured tensor is a non-contiguous view and what to do; the advice
// (capture the base, take the view inside) gives eager's answer.
TEST_SUITE("traced writes through views") {
  TEST_CASE("writing a captured non-contiguous view: the op named, and what to do instead") {
    const char* want[3] = {"(float64[4, 3] cpu, strides [1, 4])", "(float64[3] cpu, strides [4])",
                           "(float64[3, 4] cpu, strides [-4, 1])"};
    for (int mode = 0; mode < 3; ++mode) {
      CAPTURE(mode);
      const Tensor W = grid();
      auto view_of = [mode](const Tensor& w) {
        return mode == 0 ? w.transpose() : mode == 1 ? w.index({Slice(), 0}) : w.index({Slice(None, None, -1)});
      };
      Tensor view = view_of(W);
      auto step = jit([&](Tensor g) {
        view.sub_(g);
        return sum(view);
      });
      std::string msg;
      try {
        step(ones(view.shape(), DType::float64));
      } catch (const Error& e) {
        msg = e.what();
      }
      CHECK(msg.find(std::string("sub_: writing into a captured tensor that is a non-contiguous view ") + want[mode]) !=
            std::string::npos);
      CHECK(msg.find("capture its base") != std::string::npos);
      CHECK(msg.find("mutable.0") == std::string::npos);
      CHECK(vals(W) == vals(grid()));  // nothing written
      // as advised: the base captured, the view taken inside
      Tensor W2 = grid();
      auto step2 = jit([&](Tensor g) {
        Tensor v = view_of(W2);
        v.sub_(g);
        return sum(v);
      });
      Tensor We = grid();
      Tensor ve = view_of(We);
      ve.sub_(ones(ve.shape(), DType::float64));
      const double r = step2(ones(ve.shape(), DType::float64)).tensor().item<double>();
      CHECK(r == sum(ve).item<double>());
      CHECK(vals(W2) == vals(We));
      CHECK(vals(We) != vals(grid()));
    }
  }
}
