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
}
