// What user code sees of a traced tensor's memory layout, and calls that mix
// compiled code with other contexts, compared with eager:
// - strides(), stride_class(), is_contiguous() of traced views report the
//   layout eager code would see (so a branch on it takes eager's branch);
// - contiguous() of an already contiguous traced view is the view itself,
//   so writes through it reach its base as eagerly;
// - stride_class() of a traced view whose class depends on strides the trace
//   does not know throws; layout() (specs, subgraph keys) names the class
//   that covers every layout, and a subgraph body sees what inlined code sees;
// - several threads tracing at once keep their traces' bookkeeping apart;
// - a compiled callable takes a C++ number for a 0-d tensor parameter;
// - a jit function or compiled callable runs inside a lazy() scope.
// Expected values are literals worked out by hand, and eager runs.
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

TEST_SUITE("traced_layout") {
  TEST_CASE("a traced transposed view reports eager's strides and class, and a branch on it matches eager") {
    Strides seen_t, seen_row;
    StrideClass seen_cls = StrideClass::contiguous;
    bool seen_row_contig = false;
    auto f = [&](Tensor y) {
      Tensor t = y.transpose();  // [3, 2], strides {1, 3}
      seen_t = t.strides();
      seen_cls = t.stride_class();
      seen_row = y[1].strides();  // [3], strides {1}
      seen_row_contig = y[1].is_contiguous();
      return t.is_contiguous() ? t * 1.0f : t * 2.0f;
    };
    Tensor x = tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}});
    Tensor want = tensor({{2.0f, 8.0f}, {4.0f, 10.0f}, {6.0f, 12.0f}});  // not contiguous: * 2
    CHECK(array_equal(f(x), want));
    CHECK(seen_t == Strides{1, 3});
    seen_t.clear();
    seen_row.clear();
    CompiledCallable c = compile(f)(x.layout());
    CHECK(seen_t == Strides{1, 3});  // as eagerly
    CHECK(seen_cls == StrideClass::transposed);
    CHECK(seen_row == Strides{1});
    CHECK(seen_row_contig);
    CHECK(array_equal(Tensor(c(x)), want));
    CHECK(array_equal(Tensor(jit(f)(x)), want));
    // A view of a captured tensor: its own strides replayed.
    Tensor w = tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
    Strides ws;
    auto g = [&](Tensor a) {
      ws = w.transpose().strides();
      return a + w.transpose();
    };
    (void)compile(g)(w.layout());
    CHECK(ws == Strides{1, 2});
  }

  TEST_CASE("strides() of a traced value whose strides the trace does not know throws, naming strides()") {
    auto f = [](Tensor y) {
      (void)y.transpose().strides();  // y itself has any transposed layout
      return y * 1.0f;
    };
    // A 3-d transposed argument: the key does not say which axes it permutes.
    Tensor xt = arange(0.0, 24.0, 1.0, DType::float32).reshape({2, 3, 4}).permute({2, 0, 1});  // [4, 2, 3]
    CHECK(xt.stride_class() == StrideClass::transposed);
    CHECK_THROWS_WITH_AS(compile(f)(xt.layout()), doctest::Contains("strides()"), RealizationError);
    // A 2-d transposed one (both extents > 1) has one possible layout: its strides are known.
    Tensor x2 = tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}).transpose();  // [3, 2], strides {1, 3}
    Strides s2;
    auto h = [&](Tensor y) {
      s2 = y.transpose().strides();
      return y * 1.0f;
    };
    (void)compile(h)(x2.layout());
    CHECK(s2 == Strides{3, 1});
    // Its class is known, and an op result's strides are.
    StrideClass cls = StrideClass::contiguous;
    Strides rs;
    auto g = [&](Tensor y) {
      cls = y.stride_class();
      rs = (y + 1.0f).strides();
      return y * 1.0f;
    };
    (void)compile(g)(xt.layout());
    CHECK(cls == StrideClass::transposed);
    CHECK(rs == Strides{6, 3, 1});
  }

  TEST_CASE("contiguous() of a contiguous traced view is the view: writes through it reach the argument as eagerly") {
    auto f = [](Tensor y) {
      Tensor r = y[1].contiguous();  // eagerly y[1] itself
      r[0] = 100.0;                  // so this writes y[1][0]
      Tensor s = y.reshape({6}).contiguous();
      s[5] = -1.0;  // and this y[1][2]
      return y * 1.0f;
    };
    Tensor x1 = tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}});
    Tensor x2 = x1.clone(), x3 = x1.clone();
    Tensor want = tensor({{1.0f, 2.0f, 3.0f}, {100.0f, 5.0f, -1.0f}});
    CHECK(array_equal(f(x1), want));  // eager
    CHECK(array_equal(x1, want));
    CompiledCallable c = compile(f)(x2.layout());
    CHECK(array_equal(Tensor(c(x2)), want));
    CHECK(array_equal(x2, want));
    CHECK(array_equal(Tensor(jit(f)(x3)), want));
    CHECK(array_equal(x3, want));
  }

  TEST_CASE("a compiled callable accepts a C++ number for a 0-d tensor parameter, as jit does") {
    auto f = [](Tensor x, Tensor s) { return x * s; };
    Tensor x = tensor({1.0f, -2.0f});
    CompiledCallable c = compile(f)(x.layout(), TensorLayout(DType::float32, {}));
    CHECK(array_equal(Tensor(c(x, 2.0)), tensor({2.0f, -4.0f})));
    CHECK(array_equal(Tensor(c(x, 3)), tensor({3.0f, -6.0f})));  // an integer for a float parameter
    CHECK(array_equal(Tensor(c(x, 0.25f)), f(x, full({}, 0.25f))));
    CHECK(array_equal(Tensor(jit(f)(x, 2.0)), Tensor(c(x, 2.0))));
    // An int32 0-d parameter: integers fit; a fractional number or one out of range is refused.
    Tensor xi = tensor({1, 2}, DType::int32);
    CompiledCallable ci = compile(f)(xi.layout(), TensorLayout(DType::int32, {}));
    CHECK(array_equal(Tensor(ci(xi, 5)), tensor({5, 10}, DType::int32)));
    CHECK_THROWS_WITH_AS(ci(xi, 2.5), doctest::Contains("0-d tensor"), ValueError);
    CHECK_THROWS_AS(ci(xi, int64_t{1} << 40), ValueError);
    // A number for a parameter that is not 0-d.
    CompiledCallable c2 = compile(f)(x.layout(), x.layout());
    CHECK_THROWS_WITH_AS(c2(x, 2.0), doctest::Contains("pass a tensor"), ValueError);
  }

  TEST_CASE("a jit function and a compiled callable called in a lazy scope on lazy tensors") {
    auto f = [](Tensor a) { return a * 3.0f + 1.0f; };
    Tensor x = tensor({1.0f, 2.0f});
    auto jf = jit(f);
    CompiledCallable c = compile(f)(x.layout());
    Tensor r1, r2;
    {
      auto scope = lazy();
      Tensor a = x + 1.0f;  // lazy: [2, 3]
      CHECK_FALSE(a.is_realized());
      r1 = Tensor(jf(a)) * 2.0f;
      r2 = Tensor(c(a)) - 1.0f;
    }
    // Eager: (x + 1) * 3 + 1 = [7, 10].
    CHECK(array_equal(r1, tensor({14.0f, 20.0f})));
    CHECK(array_equal(r2, tensor({6.0f, 9.0f})));
    CHECK(array_equal(r1, f(x + 1.0f) * 2.0f));
  }

  TEST_CASE("a number for a 0-d parameter keeps its exact value: -0.0, infinities, NaN, subnormals, int8_t") {
    auto div = [](Tensor x, Tensor s) { return x / s; };
    CompiledCallable c = compile(div)(TensorLayout(DType::float32, {1}), TensorLayout(DType::float32, {}));
    const Tensor one = ones({1});
    // 1 / -0 is -inf: the sign of -0.0 survives (as a double and as a float).
    Tensor r = Tensor(c(one, -0.0));
    CHECK(kt::same_bits(r, full({1}, -std::numeric_limits<float>::infinity())));
    CHECK(kt::same_bits(r, div(one, full({}, -0.0f))));
    CHECK(kt::same_bits(r, jit(div)(one, -0.0)));
    CHECK(kt::same_bits(Tensor(c(one, -0.0f)), r));
    CHECK(kt::same_bits(Tensor(c(one, 0.0)), full({1}, std::numeric_limits<float>::infinity())));
    // 1 / inf = 0, 1 / -inf = -0; NaN stays NaN.
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(kt::same_bits(Tensor(c(one, inf)), full({1}, 0.0f)));
    CHECK(kt::same_bits(Tensor(c(one, -inf)), full({1}, -0.0f)));
    CHECK(std::isnan(Tensor(c(one, std::numeric_limits<double>::quiet_NaN())).item<double>()));

    auto add = [](Tensor x, Tensor s) { return x + s; };
    CompiledCallable cd = compile(add)(TensorLayout(DType::float64, {1}), TensorLayout(DType::float64, {}));
    const Tensor z = zeros({1}, DType::float64);
    CHECK(Tensor(cd(z, 1e-320)).item<double>() == 1e-320);  // a subnormal double
    CHECK(Tensor(cd(z, std::numeric_limits<double>::denorm_min())).item<double>() ==
          std::numeric_limits<double>::denorm_min());
    // One-byte integers are integers ('7' is the integer 55), never raw bytes.
    CHECK(Tensor(cd(z, int8_t{7})).item<double>() == 7.0);
    CHECK(Tensor(cd(z, int8_t{-100})).item<double>() == -100.0);
    CHECK(Tensor(cd(z, uint8_t{200})).item<double>() == 200.0);
    CHECK(Tensor(cd(z, '7')).item<double>() == 55.0);
    CHECK(Tensor(cd(z, int8_t{55})).item<double>() == 55.0);
    CHECK(Tensor(jit(add)(z, int8_t{7})).item<double>() == 7.0);
    CompiledCallable c1 = compile(add)(TensorLayout(DType::float64, {1}), TensorLayout(DType::float64, {1}));
    CHECK_THROWS_WITH_AS(c1(z, int8_t{7}), doctest::Contains("a C++ number (7) for a tensor parameter"), ValueError);
    try {
      c1(z, '\a');
    } catch (const ValueError& e) {
      CHECK(std::string(e.what()).find('\a') == std::string::npos);
      CHECK(std::string(e.what()).find("(7)") != std::string::npos);
    }
  }

  TEST_CASE("a number a 0-d float parameter cannot hold is a ValueError; the messages say which kind of number") {
    auto div = [](Tensor x, Tensor s) { return x / s; };
    CompiledCallable c16 = compile(div)(TensorLayout(DType::float16, {1}), TensorLayout(DType::float16, {}));
    const Tensor h = ones({1}, DType::float16);
    CHECK_THROWS_WITH_AS(c16(h, 70000), doctest::Contains("the number 70000 is out of range for a 0-d float16 parameter"),
                         ValueError);
    CHECK_THROWS_WITH_AS(c16(h, -65520.0), doctest::Contains("out of range for a 0-d float16"), ValueError);
    CHECK(Tensor(c16(h, 65504.0)).item<double>() == div(h, full({}, 65504.0, DType::float16)).item<double>());
    CHECK(Tensor(c16(h, 65519.0)).item<double>() == Tensor(c16(h, 65504.0)).item<double>());  // rounds to 65504
    CompiledCallable c32 = compile(div)(TensorLayout(DType::float32, {1}), TensorLayout(DType::float32, {}));
    CHECK_THROWS_WITH_AS(c32(ones({1}), 1e300), doctest::Contains("out of range for a 0-d float32 parameter"),
                         ValueError);
    CHECK(Tensor(c32(ones({1}), std::numeric_limits<double>::infinity())).item<double>() == 0.0);  // inf is a value
    CompiledCallable cb =
        compile([](Tensor x, Tensor s) { return x * s; })(TensorLayout(DType::float32, {1}), TensorLayout(DType::bool_, {}));
    CHECK_THROWS_WITH_AS(cb(ones({1}), 3), doctest::Contains(": an integer number (3) for a 0-d bool"), ValueError);
    CompiledCallable ci =
        compile(div)(TensorLayout(DType::int32, {1}), TensorLayout(DType::int32, {}));
    CHECK_THROWS_WITH_AS(ci(tensor({1}, DType::int32), 2.5), doctest::Contains(": a floating number (2.5) for a 0-d int32"),
                         ValueError);
  }

  TEST_CASE("stride_class() of a traced view whose class depends on unknown strides throws, naming stride_class()") {
    // Two general-class arguments of shape [4, 3], so one compiled entry covers
    // both; eagerly row 0 of the first is contiguous, of the second not.
    Tensor a = slice(arange(0.0, 20.0, 1.0, DType::float32).reshape({4, 5}), 1, 0, 3);     // strides {5, 1}
    Tensor b = slice(arange(0.0, 24.0, 1.0, DType::float32).reshape({4, 6}), 1, 0, 6, 2);  // strides {6, 2}
    REQUIRE(a.stride_class() == StrideClass::general);
    REQUIRE(b.stride_class() == StrideClass::general);
    CHECK(a[0].stride_class() == StrideClass::contiguous);  // strides {1}
    CHECK(b[0].stride_class() == StrideClass::general);     // strides {2}
    auto f = [](Tensor x) {
      (void)x[0].stride_class();
      return x * 1.0f;
    };
    CHECK_THROWS_WITH_AS(compile(f)(a.layout()), doctest::Contains("stride_class(): the stride class of this traced"),
                         RealizationError);
    CHECK_THROWS_WITH_AS(jit(f)(b), doctest::Contains("not known while tracing"), RealizationError);
    CHECK_THROWS_WITH_AS(jit(f)(b), doctest::Contains("covers every layout"), RealizationError);
    // The argument's own class is the one its entry is traced for; layout()
    // of the view names the covering class, without throwing.
    StrideClass own = StrideClass::contiguous, spec = StrideClass::contiguous;
    auto g = [&](Tensor x) {
      own = x.stride_class();
      spec = x[0].layout().stride_class;
      return x * 1.0f;
    };
    (void)compile(g)(a.layout());
    CHECK(own == StrideClass::general);
    CHECK(spec == StrideClass::general);
    // A view of a contiguous argument keeps a known class.
    StrideClass row = StrideClass::general;
    auto h = [&](Tensor x) {
      row = x[1].stride_class();
      return x * 1.0f;
    };
    (void)compile(h)(TensorLayout(DType::float32, {4, 3}));
    CHECK(row == StrideClass::contiguous);
  }

  TEST_CASE("conv2d of a traced view whose class is not known traces (it reads layout()) and gives eager's numbers") {
    // [1, 1, 5, 4] of general class (strides {40, 40, 8, 1}); x[r][c] = 8 r + c.
    auto mk = [] { return slice(arange(0.0, 40.0, 1.0, DType::float32).reshape({1, 1, 5, 8}), 3, 0, 4); };
    Tensor w = ones({1, 1, 2, 2});
    auto h = [&](Tensor x) { return conv2d(x.permute({0, 1, 3, 2}), w); };  // [1, 1, 4, 5] -> [1, 1, 3, 4]
    // out[i][j] = sum over a, b in {0, 1} of xt[i + a][j + b], xt[r][c] = x[c][r] = 8 c + r.
    std::vector<double> want;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        double sum = 0;
        for (int da = 0; da < 2; ++da)
          for (int db = 0; db < 2; ++db) sum += 8.0 * (j + db) + (i + da);
        want.push_back(sum);
      }
    Tensor x = mk();
    REQUIRE(x.stride_class() == StrideClass::general);
    CHECK(kt::values(h(x)) == want);  // eager
    CompiledCallable c = compile(h)(x.layout());
    CHECK(kt::values(Tensor(c(mk()))) == want);
    CHECK(kt::values(Tensor(jit(h)(mk()))) == want);
  }

  TEST_CASE("a subgraph body given a view of unknown class sees what inlined code sees (its own key)") {
    // [3, 3] of general class (strides {4, 1}); x[i][j] = 4 i + j. Its
    // transpose (strides {1, 4}) is general eagerly too, but traced its class
    // depends on the argument's strides.
    auto mk = [] { return slice(slice(arange(0.0, 16.0, 1.0, DType::float32).reshape({4, 4}), 0, 0, 3), 1, 0, 3); };
    std::vector<int> threw;  // per body trace: 1 when stride_class() of its argument threw
    auto body = as_subgraph(
        [&](Tensor a) {
          try {
            (void)a.stride_class();
            threw.push_back(0);
          } catch (const RealizationError&) {
            threw.push_back(1);
          }
          return a + a;  // no constants: traced once per key, then reused
        },
        "probe");
    auto f = [&](Tensor x) {
      Tensor p = body(x);  // in this order
      Tensor q = body(x.transpose());
      return p + q;
    };
    std::vector<double> want;  // 2 x + 2 x^T
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) want.push_back(2.0 * (4 * i + j) + 2.0 * (4 * j + i));
    Tensor x = mk();
    REQUIRE(x.stride_class() == StrideClass::general);
    CHECK(kt::values(f(x)) == want);  // eager: the body runs as a plain function
    CHECK(threw == std::vector<int>{0, 0});
    threw.clear();
    CompiledCallable c = compile(f)(x.layout());
    // x: the class its entry is traced for; x.transpose(): not known, and a
    // key of its own, so the body is traced again rather than reused (the two
    // traces are the same graph, so they still end up as one body).
    CHECK(threw == std::vector<int>{0, 1});
    CHECK(c.staged().graph->subgraphs().size() == 1);
    CHECK(kt::values(Tensor(c(mk()))) == want);
  }

  TEST_CASE("many threads trace at once: each trace keeps its own layouts, ambiguous marks and reads after writes") {
    auto g = [](Tensor a, Tensor b) {
      a.mul_(2.0f);
      return b + 1.0f;
    };
    const TensorLayout l3(DType::float32, {3});
    CompiledCallable c = compile(g)(l3, l3);
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < 8; ++i) {
          // A shape per thread, [2, n]: a transposed view's strides are {1, n}.
          const int64_t n = 2 + t;
          Strides seen;
          auto f = [&](Tensor y) {
            seen = y.transpose().strides();
            return y * 2.0f;
          };
          Tensor r = Tensor(jit(f)(full({2, n}, 1.0f)));  // a fresh jit function: traced on this thread
          if (seen != Strides{1, n}) ++bad;
          if (kt::values(r) != std::vector<double>(static_cast<size_t>(2 * n), 2.0)) ++bad;
          // A general-class argument: its flattening is ambiguous, and the write into it refused.
          Tensor x = slice(arange(0.0, 20.0, 1.0, DType::float32).reshape({4, 5}), 1, 0, 3);
          auto wr = [](Tensor z) {
            z.reshape({-1}).fill_(-1.0f);
            return z * 1.0f;
          };
          try {
            (void)jit(wr)(x);
            ++bad;
          } catch (const RealizationError& e) {
            if (std::string(e.what()).find("result of reshape") == std::string::npos) ++bad;
          }
          // The compiled callable inlined: b is read after a's write.
          auto body = [&](Tensor a, Tensor b) { return Tensor(c(a, b)); };
          StagedGraph s = stage(body)(l3, l3);
          if (s.write_reads.size() != 1 || s.write_reads[0].arguments != std::vector<char>{1, 1}) ++bad;
        }
      });
    for (auto& th : ts) th.join();
    CHECK(bad == 0);
  }
}
