// Which memory a compiled result shares, on every way of running a callable
// (checked call, jit, execute_raw, engine::Model::execute, a callable read
// back from a MEF file): what eager's result shares (jit/fresh_results.h).
// And the errors of the call paths that name their entry point and argument.
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <limits>
#include <tuple>

#include "test_util.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
// x = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]] (float32)
Tensor x12() {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[static_cast<size_t>(i)] = float(i + 1);
  return Tensor::from_vector(v, {3, 4});
}
std::vector<double> one_to(int n, double scale = 1.0) {
  std::vector<double> r;
  for (int i = 1; i <= n; ++i) r.push_back(i * scale);
  return r;
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name) {
    static int n = 0;
    path = (fs::temp_directory_path() /
            ("kiln_result_alias_" + std::to_string(getpid()) + "_" + std::to_string(n++) + "_" + name))
               .string();
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

// The result of `c` on the single argument x by each path: 0 checked call,
// 1 execute_raw, 2 engine model, 3 from_mef's checked call, 4 from_mef's
// execute_raw.
Tensor run_path(const CompiledCallable& c, const Tensor& x, int path) {
  std::vector<Tensor> in{x};
  switch (path) {
    case 0: return c(x).tensor();
    case 1: return c.execute_raw(std::span<const Tensor>(in))[0];
    case 2: return c.engine_model().execute(std::span<const Tensor>(in))[0];
    default: {
      TempFile f("p.mef");
      c.export_mef(f.path);
      CompiledCallable back = CompiledCallable::from_mef(f.path);
      return path == 3 ? back(x).tensor() : back.execute_raw(std::span<const Tensor>(in))[0];
    }
  }
}
const char* path_name(int p) {
  static const char* n[] = {"checked call", "execute_raw", "engine model", "from_mef call", "from_mef execute_raw"};
  return n[p];
}

}  // namespace

TEST_SUITE("result aliasing") {
  TEST_CASE("a result eager makes new is new memory on every path, also where the optimiser reduced it to x") {
    using F = std::function<Tensor(Tensor)>;
    const std::vector<std::pair<const char*, F>> fs = {
        {"x * 1", [](Tensor x) { return x * 1; }},
        {"x * 1.0f", [](Tensor x) { return x * 1.0f; }},
        {"x - 0", [](Tensor x) { return x - 0.0; }},
        {"x / 1", [](Tensor x) { return x / 1.0; }},
        {"-(-x)", [](Tensor x) { return -(-x); }},
        {"x.reshape(same) * 1", [](Tensor x) { return x.reshape({3, 4}) * 1; }},
        {"x.transpose().transpose() * 1", [](Tensor x) { return x.transpose().transpose() * 1; }},
    };
    for (const auto& [name, f] : fs) {
      CompiledCallable c = compile(f)(TensorLayout(DType::float32, {3, 4}));
      for (int path = 0; path < 5; ++path) {
        CAPTURE(name);
        CAPTURE(path_name(path));
        const Tensor x = x12();
        Tensor r = run_path(c, x, path);
        CHECK(vals(r) == one_to(12));  // x's values
        CHECK_FALSE(may_share_memory(r, x));
        r.fill_(-7.0);
        CHECK(vals(x) == one_to(12));  // writing into the result leaves x alone
      }
      // jit takes the checked call's path
      const Tensor x = x12();
      Tensor rj = jit(f)(x).tensor();
      CHECK_FALSE(may_share_memory(rj, x));
    }
  }

  TEST_CASE("a result returned as the argument or a view of it aliases it on every path, as eagerly") {
    using F = std::function<Tensor(Tensor)>;
    const std::vector<std::pair<const char*, F>> fs = {
        {"x", [](Tensor x) { return x; }},
        {"x.reshape({12})", [](Tensor x) { return x.reshape({12}); }},
        {"x.transpose().transpose()", [](Tensor x) { return x.transpose().transpose(); }},
    };
    for (const auto& [name, f] : fs) {
      CompiledCallable c = compile(f)(TensorLayout(DType::float32, {3, 4}));
      for (int path = 0; path < 5; ++path) {
        CAPTURE(name);
        CAPTURE(path_name(path));
        const Tensor x = x12();
        const Tensor e = f(x);  // eager: shares x's memory
        REQUIRE(may_share_memory(e, x));
        Tensor r = run_path(c, x, path);
        CHECK(vals(r) == one_to(12));
        CHECK(may_share_memory(r, x));
      }
    }
  }

  TEST_CASE("two results the optimiser merged are two tensors; one tensor returned twice stays one") {
    // x * 2 twice: eagerly two new tensors (CSE makes them one value)
    auto f = [](Tensor x) { return std::make_tuple(x * 2.0f, x * 2.0f); };
    // y returned twice: eagerly the same tensor twice
    auto g = [](Tensor x) {
      Tensor y = x * 2.0f;
      return std::make_tuple(y, y);
    };
    CompiledCallable cf = compile(f)(TensorLayout(DType::float32, {3, 4}));
    CompiledCallable cg = compile(g)(TensorLayout(DType::float32, {3, 4}));
    const Tensor x = x12();
    for (int path = 0; path < 2; ++path) {
      CAPTURE(path);
      std::vector<Tensor> in{x};
      std::vector<Tensor> rf = path == 0 ? cf(x).leaves : cf.execute_raw(std::span<const Tensor>(in));
      std::vector<Tensor> rg = path == 0 ? cg(x).leaves : cg.execute_raw(std::span<const Tensor>(in));
      REQUIRE(rf.size() == 2);
      REQUIRE(rg.size() == 2);
      CHECK(vals(rf[0]) == one_to(12, 2.0));
      CHECK(vals(rf[1]) == one_to(12, 2.0));
      CHECK_FALSE(may_share_memory(rf[0], rf[1]));
      CHECK(vals(rg[1]) == one_to(12, 2.0));
      CHECK(may_share_memory(rg[0], rg[1]));
    }
  }

  TEST_CASE("hundreds of results, merged, repeated and reduced to x, keep eager's memory sharing") {
    // Result i: x * (i % 7) for i % 3 == 0 (CSE merges equal factors into one
    // value: eagerly new tensors each), y = x * 10 for i % 3 == 1 (one eager
    // tensor returned many times), x * 1 for i % 3 == 2 (reduced to x: new
    // memory). Enough results that the fusion planner splits its groups.
    constexpr int n = 600;
    auto f = [](Tensor x) {
      std::vector<Tensor> r;
      const Tensor y = x * 10.0f;
      for (int i = 0; i < n; ++i) r.push_back(i % 3 == 0 ? x * float(i % 7) : i % 3 == 1 ? y : x * 1.0f);
      return r;
    };
    CompiledCallable c = compile(f)(TensorLayout(DType::float32, {3, 4}));
    const Tensor x = x12();
    std::vector<Tensor> in{x};
    for (int path = 0; path < 2; ++path) {
      CAPTURE(path);
      std::vector<Tensor> r = path == 0 ? c(x).leaves : c.execute_raw(std::span<const Tensor>(in));
      REQUIRE(r.size() == static_cast<size_t>(n));
      int wrong_values = 0, wrong_sharing = 0;
      for (int i = 0; i < n; ++i) {
        const double scale = i % 3 == 0 ? double(i % 7) : i % 3 == 1 ? 10.0 : 1.0;
        wrong_values += vals(r[static_cast<size_t>(i)]) != one_to(12, scale);
        wrong_sharing += may_share_memory(r[static_cast<size_t>(i)], x);
        for (int j = i + 1; j < n; ++j)  // only the y results are one tensor
          wrong_sharing += may_share_memory(r[static_cast<size_t>(i)], r[static_cast<size_t>(j)]) != (i % 3 == 1 && j % 3 == 1);
      }
      CHECK(wrong_values == 0);
      CHECK(wrong_sharing == 0);
    }
  }

  TEST_CASE("a result reduced to another argument's written value is new memory (z.copy_(x * 1); return -(-z))") {
    auto h = [](Tensor x, Tensor z) {
      z.copy_(x * 1.0f);
      return -(-z);
    };
    const TensorLayout l(DType::float32, {3, 4});
    CompiledCallable c = compile(h)(l, l);
    TempFile f("h.mef");
    c.export_mef(f.path);
    CompiledCallable back = CompiledCallable::from_mef(f.path);
    for (int path = 0; path < 4; ++path) {
      CAPTURE(path);
      const Tensor x = x12(), z = zeros({3, 4});
      std::vector<Tensor> in{x, z};
      Tensor r = path == 0   ? c(x, z).tensor()
                 : path == 1 ? back(x, z).tensor()
                 : path == 2 ? c.execute_raw(std::span<const Tensor>(in))[0]
                             : back.execute_raw(std::span<const Tensor>(in))[0];
      CHECK(vals(z) == one_to(12));  // written back
      CHECK(vals(r) == one_to(12));
      CHECK_FALSE(may_share_memory(r, x));
      CHECK_FALSE(may_share_memory(r, z));  // eager -(-z) is new
      r.fill_(0.0);
      CHECK(vals(x) == one_to(12));
      CHECK(vals(z) == one_to(12));
    }
  }

  TEST_CASE("a result copied from an argument before the function writes it keeps the old values (r = a * 1; a.add_(1))") {
    auto f = [](Tensor a) {
      Tensor r = a * 1.0f;
      a.add_(1.0f);
      return r;
    };
    CompiledCallable c = compile(f)(TensorLayout(DType::float32, {3, 4}));
    TempFile file("w.mef");
    c.export_mef(file.path);
    CompiledCallable back = CompiledCallable::from_mef(file.path);
    for (int path = 0; path < 4; ++path) {
      CAPTURE(path);
      const Tensor a = x12();
      std::vector<Tensor> in{a};
      Tensor r = path == 0   ? c(a).tensor()
                 : path == 1 ? back(a).tensor()
                 : path == 2 ? c.execute_raw(std::span<const Tensor>(in))[0]
                             : jit(f)(a).tensor();
      CHECK(vals(r) == one_to(12));  // a's old values
      std::vector<double> a1 = one_to(12);
      for (double& v : a1) v += 1.0;
      CHECK(vals(a) == a1);
      CHECK_FALSE(may_share_memory(r, a));
    }
  }

  TEST_CASE("a result that is the argument the function wrote in place is that argument, as eagerly") {
    auto f = [](Tensor x) {
      x.mul_(2.0f);
      return x;
    };
    // x * 1 after the write: eagerly a new tensor of the new values
    auto g = [](Tensor x) {
      x.mul_(2.0f);
      return x * 1.0f;
    };
    {
      const Tensor x = x12();
      const Tensor e = f(x);
      REQUIRE(e.is_same(x));  // eager returns the argument itself
    }
    CompiledCallable cf = compile(f)(TensorLayout(DType::float32, {3, 4}));
    CompiledCallable cg = compile(g)(TensorLayout(DType::float32, {3, 4}));
    TempFile file("f.mef");
    cf.export_mef(file.path);
    CompiledCallable back = CompiledCallable::from_mef(file.path);
    auto jf = jit(f);
    for (int path = 0; path < 5; ++path) {
      CAPTURE(path);
      const Tensor x = x12();
      std::vector<Tensor> in{x};
      Tensor r = path == 0   ? cf(x).tensor()
                 : path == 1 ? jf(x).tensor()
                 : path == 2 ? back(x).tensor()
                 : path == 3 ? cf.execute_raw(std::span<const Tensor>(in))[0]
                             : back.execute_raw(std::span<const Tensor>(in))[0];
      CHECK(vals(x) == one_to(12, 2.0));
      CHECK(r.is_same(x));
      r.fill_(5.0);  // reaches x, as eagerly
      CHECK(vals(x) == std::vector<double>(12, 5.0));
    }
    // returning the written tensor does not stop its value being computed into it
    CHECK(cf.write_back_stats().in_place == 2);  // paths 0 and 3
    CHECK(cf.write_back_stats().copied == 0);
    for (int path = 0; path < 2; ++path) {
      CAPTURE(path);
      const Tensor x = x12();
      std::vector<Tensor> in{x};
      Tensor r = path == 0 ? cg(x).tensor() : cg.execute_raw(std::span<const Tensor>(in))[0];
      CHECK(vals(x) == one_to(12, 2.0));
      CHECK(vals(r) == one_to(12, 2.0));
      CHECK_FALSE(may_share_memory(r, x));
    }
  }

  TEST_CASE("a result that is a captured tensor the function wrote in place is that tensor") {
    Tensor state = zeros({4});
    auto h = [&state](Tensor x) {
      state.add_(x);
      return state;
    };
    CompiledCallable c = compile(h)(TensorLayout(DType::float32, {4}));
    const Tensor x = ones({4});
    Tensor r1 = c(x).tensor();
    Tensor r2 = c(x).tensor();
    CHECK(vals(state) == std::vector<double>{2, 2, 2, 2});
    CHECK(vals(r2) == std::vector<double>{2, 2, 2, 2});
    CHECK(r2.is_same(state));
    CHECK(r1.is_same(state));
  }

  TEST_CASE("a captured tensor returned unwritten, or a view of it, is that tensor (that view), as eagerly") {
    // state = [[0, 1, 2], [3, 4, 5]]
    Tensor state = arange(6).to(DType::float32).reshape({2, 3});
    using R = std::tuple<Tensor, Tensor, Tensor, Tensor>;
    auto f = [&](Tensor x) { return std::make_tuple(state, state[1], state.transpose(), x + 1.0f); };
    const R e = f(ones({2}));  // eager: state itself, and views of it
    REQUIRE(std::get<0>(e).is_same(state));
    auto same_view = [&](const Tensor& r, const Tensor& want) {
      CHECK(r.data_ptr() == want.data_ptr());
      CHECK(r.shape() == want.shape());
      CHECK(r.strides() == want.strides());
    };
    CompiledCallable c = compile(f)(TensorLayout(DType::float32, {2}));
    auto jf = jit(f);
    for (int mode = 0; mode < 2; ++mode) {
      CAPTURE(mode);  // 0 compiled call, 1 jit (second call: the cached entry)
      R r = mode == 0 ? c(ones({2})).as<R>() : (jf(ones({2})), jf(ones({2})).as<R>());
      CHECK(std::get<0>(r).is_same(state));
      same_view(std::get<1>(r), std::get<1>(e));
      same_view(std::get<2>(r), std::get<2>(e));
      CHECK(vals(std::get<1>(r)) == std::vector<double>{3, 4, 5});
      CHECK(vals(std::get<2>(r)) == std::vector<double>{0, 3, 1, 4, 2, 5});
      CHECK(vals(std::get<3>(r)) == std::vector<double>{2, 2});
      // writing into the view reaches state, as eagerly
      std::get<1>(r).fill_(7.0f);
      CHECK(vals(state) == std::vector<double>{0, 1, 2, 7, 7, 7});
      state.copy_(arange(6).to(DType::float32).reshape({2, 3}));  // back to the traced contents
    }
    // inlined into an outer trace: the outer function returns state (a view of it) too
    auto outer = jit([&](Tensor x) {
      R r = c(x).as<R>();
      return std::make_tuple(std::get<0>(r), std::get<1>(r), std::get<3>(r) * 2.0f);
    });
    auto [o0, o1, o2] = outer(ones({2})).as<std::tuple<Tensor, Tensor, Tensor>>();
    CHECK(o0.is_same(state));
    same_view(o1, std::get<1>(e));
    CHECK(vals(o2) == std::vector<double>{4, 4});
    // the contents check still holds: a call after state changed throws
    state.fill_(9.0f);
    CHECK_THROWS_AS(c(ones({2})), ValueError);
  }

  TEST_CASE("a returned tensor bound under CompileOptions::weights is that weight (a view of it), also from MEF") {
    // a captured tensor that is also a registry weight: returned as itself
    nn::Linear lin(2, 3);
    CompileOptions o;
    o.weights = lin.state_dict();
    const Tensor W = lin.state_dict().at("weight");  // float32[3, 2]
    auto g = [&](Tensor x) { return std::make_tuple(lin.state_dict().at("weight"), lin.state_dict().at("weight")[2], x * 2.0f); };
    using R3 = std::tuple<Tensor, Tensor, Tensor>;
    const R3 e = g(ones({1}));
    CompiledCallable cw = compile(g, o)(TensorLayout(DType::float32, {1}));
    R3 r = cw(ones({1})).as<R3>();
    CHECK(std::get<0>(r).data_ptr() == W.data_ptr());
    CHECK(std::get<0>(r).strides() == W.strides());
    CHECK(std::get<1>(r).data_ptr() == std::get<1>(e).data_ptr());
    CHECK(std::get<1>(r).strides() == std::get<1>(e).strides());
    std::get<0>(r).fill_(0.5f);  // writing into the result reaches the weight, as eagerly
    CHECK(vals(lin.state_dict().at("weight")) == std::vector<double>(6, 0.5));
    // still a captured tensor (not read as the weight): the next call throws, naming the binding
    CHECK_THROWS_WITH_AS(cw(ones({1})), doctest::Contains("It is bound as weight 'weight', but the function captured"),
                         ValueError);

    // a module parameter read as a graph weight, returned with a transposed view: the same on a
    // checked call and on a callable read back from MEF with the weights bound
    struct P : nn::Module {
      P() { register_parameter("w", arange(6).to(DType::float32).reshape({2, 3})); }
      Tensor forward(const Tensor& x) override { (void)x; return param("w"); }
    } m;
    const Tensor w = m.state_dict().at("w");
    auto h = [&](Tensor x) { Tensor p = m(x); return std::make_tuple(p, p.transpose(), p[1], x + 1.0f); };
    using R4 = std::tuple<Tensor, Tensor, Tensor, Tensor>;
    const R4 eh = h(ones({1}));
    REQUIRE(std::get<0>(eh).is_same(w));
    CompileOptions om;
    om.weights = m.state_dict();
    CompiledCallable cm = compile(h, om)(TensorLayout(DType::float32, {1}));
    TempFile f("weights.mef");
    cm.export_mef(f.path);
    CompiledCallable back = CompiledCallable::from_mef(f.path, m.state_dict());
    for (int path = 0; path < 2; ++path) {
      CAPTURE(path);  // 0 checked call, 1 from_mef's checked call
      R4 rm = (path == 0 ? cm : back)(ones({1})).as<R4>();
      CHECK(std::get<0>(rm).data_ptr() == w.data_ptr());
      CHECK(std::get<0>(rm).strides() == w.strides());
      for (int k : {1, 2}) {
        const Tensor& got = k == 1 ? std::get<1>(rm) : std::get<2>(rm);
        const Tensor& want = k == 1 ? std::get<1>(eh) : std::get<2>(eh);
        CHECK(got.data_ptr() == want.data_ptr());
        CHECK(got.shape() == want.shape());
        CHECK(got.strides() == want.strides());
        CHECK(vals(got) == vals(want));
      }
      CHECK(vals(std::get<3>(rm)) == std::vector<double>{2});
      std::get<2>(rm).fill_(path == 0 ? 10.0f : 20.0f);  // reaches the parameter, as eagerly
      const double v = path == 0 ? 10.0 : 20.0;
      CHECK(vals(w) == std::vector<double>{0, 1, 2, v, v, v});
    }
  }

  TEST_CASE("the engine model's results of a callable reduced to its input are new memory (no CompiledCallable check)") {
    CompiledCallable c = compile([](Tensor x) { return -(-x); })(TensorLayout(DType::float32, {3, 4}));
    const Tensor x = x12();
    std::vector<Tensor> in{x};
    std::vector<Tensor> out = c.engine_model().execute(std::span<const Tensor>(in));
    REQUIRE(out.size() == 1);
    CHECK(vals(out[0]) == one_to(12));
    CHECK_FALSE(may_share_memory(out[0], x));
    // the copy is in the optimised graph: the engine reads it from the file too
    CHECK(c.engine_model().artifact().graph().op_counts()["cast"] == 1);
    // unfused (the cast runs its eager kernel) and strict: the same
    for (bool strict : {false, true}) {
      CompileOptions o;
      o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = strict, .fuse = false});
      CompiledCallable u = compile([](Tensor x) { return x * 1.0f; }, o)(TensorLayout(DType::float32, {3, 4}));
      std::vector<Tensor> ou = u.engine_model().execute(std::span<const Tensor>(in));
      CHECK(vals(ou[0]) == one_to(12));
      CHECK_FALSE(may_share_memory(ou[0], x));
    }
  }
}

TEST_SUITE("call path errors") {
  TEST_CASE("a number out of range for a 0-d integer parameter names the compiled call and the argument") {
    auto f = [](Tensor x, Tensor s) { return x * s; };
    CompiledCallable c8 = compile(f)(TensorLayout(DType::int8, {2}), TensorLayout(DType::int8, {}));
    CHECK(vals(c8(ones({2}, DType::int8), 100)) == std::vector<double>{100, 100});
    CHECK(vals(c8(ones({2}, DType::int8), -128)) == std::vector<double>{-128, -128});
    CHECK_THROWS_WITH_AS(c8(ones({2}, DType::int8), 300),
                         "compiled call: argument 1: the number 300 is out of range for a 0-d int8 parameter (int8 "
                         "holds -128..127); pass a value in that range, or compile the function with a wider integer "
                         "dtype for this parameter",
                         ValueError);
    CHECK_THROWS_WITH_AS(c8(ones({2}, DType::int8), -129), doctest::Contains("the number -129 is out of range"),
                         ValueError);
    CompiledCallable cu = compile(f)(TensorLayout(DType::uint8, {2}), TensorLayout(DType::uint8, {}));
    CHECK_THROWS_WITH_AS(cu(ones({2}, DType::uint8), 256),
                         doctest::Contains("argument 1: the number 256 is out of range for a 0-d uint8 parameter "
                                           "(uint8 holds 0..255)"),
                         ValueError);
  }

  TEST_CASE("jit: a number no 0-d runtime tensor of jit's dtype holds names jit and the argument") {
    auto f = [](Tensor x, Tensor s) { return x * s; };
    auto j = jit(f);
    CHECK_THROWS_WITH_AS(j(zeros({2}), std::numeric_limits<uint64_t>::max()),
                         doctest::Contains("jit: argument 1: the number 18446744073709551615 is out of range for "
                                           "int64, the dtype of the 0-d tensor jit makes of an integer"),
                         ValueError);
    // a floating number is held as float64, exactly; beside a float32 tensor
    // it is stored as float32 where it is used, as eagerly (1e300 -> inf)
    CHECK(vals(j(full({2}, 1.0, DType::float64), 1e300)) == std::vector<double>{1e300, 1e300});
    CHECK(vals(j(ones({2}), 1e300)) == vals(ones({2}) * 1e300));
    // in range: the ordinary runtime scalar
    CHECK(vals(j(ones({2}), uint64_t{3})) == std::vector<double>{3, 3});
    CHECK(vals(j(ones({2}), 2.5)) == std::vector<double>{2.5, 2.5});
  }

  TEST_CASE("jit: an undefined tensor argument is named by its position") {
    auto f = [](Tensor x, Tensor y) { return x + y; };
    CHECK_THROWS_WITH_AS(jit(f)(ones({2}), Tensor()), doctest::Contains("jit: argument 1: an undefined tensor"),
                         ValueError);
    auto g = [](std::tuple<Tensor, Tensor> p) { return std::get<0>(p) + std::get<1>(p); };
    CHECK_THROWS_WITH_AS(jit(g)(std::make_tuple(Tensor(), ones({2}))),
                         doctest::Contains("jit: argument 0.0: an undefined tensor"), ValueError);
  }

  TEST_CASE("execute_raw on buffers: a buffer too small or empty names execute_raw, its position and the bytes") {
    auto f = [](Tensor x, Tensor y) { return exp(x) + y; };
    const TensorLayout l(DType::float32, {1000});
    CompiledCallable c = compile(f)(l, l);
    Tensor x = zeros({1000}), y = ones({1000});
    std::vector<Buffer> ok{x.buffer(), y.buffer()};
    std::vector<Buffer> r = c.execute_raw(ok);
    REQUIRE(r.size() == 1);
    CHECK(Tensor(r[0], DType::float32, {1000}, {1}, 0).to_vector<double>() == std::vector<double>(1000, 2.0));
    std::vector<Buffer> small{x.buffer(), Buffer::allocate(16)};
    CHECK_THROWS_WITH_AS(c.execute_raw(small),
                         doctest::Contains("execute_raw: buffer 1 (argument 1, float32[1000] cpu): expected at least "
                                           "4000 bytes (a contiguous float32[1000] cpu), got a buffer of 16 bytes"),
                         ValueError);
    std::vector<Buffer> empty{Buffer(), y.buffer()};
    CHECK_THROWS_WITH_AS(c.execute_raw(empty),
                         doctest::Contains("execute_raw: buffer 0 (argument 0, float32[1000] cpu): expected at least "
                                           "4000 bytes (a contiguous float32[1000] cpu), got an empty Buffer"),
                         ValueError);
  }

  TEST_CASE("from_mef: a weight missing or mis-typed names from_mef and the file, not compile") {
    nn::Linear lin(4, 3);
    CompileOptions o;
    o.weights = lin.state_dict();
    CompiledCallable c = compile([&](Tensor x) { return lin(x); }, o)(TensorLayout(DType::float32, {2, 4}));
    TempFile f("lin.mef");
    c.export_mef(f.path);
    const std::string missing = "from_mef '" + f.path +
                                "': the weights given do not match the file's; missing: 'weight' (float32[3, 4] cpu), "
                                "'bias' (float32[3] cpu)";
    CHECK_THROWS_WITH_AS(CompiledCallable::from_mef(f.path), doctest::Contains(missing.c_str()), ValueError);
    auto bad = lin.state_dict();
    bad["weight"] = zeros({4, 3});
    const std::string mistyped =
        "from_mef '" + f.path + "': weight 'weight' expects float32[3, 4] cpu, got float32[4, 3] cpu";
    CHECK_THROWS_WITH_AS(CompiledCallable::from_mef(f.path, bad), doctest::Contains(mistyped.c_str()), ValueError);
    // a captured tensor the function writes is a mutable weight the reader must bind
    Tensor state = zeros({4});
    CompiledCallable ch = compile([&state](Tensor x) {
      state.add_(x);
      return state * 2.0f;
    })(TensorLayout(DType::float32, {4}));
    TempFile fh("h.mef");
    ch.export_mef(fh.path);
    const std::string unbound =
        "from_mef '" + fh.path + "': the weights given do not match the file's; missing: 'mutable.0' (float32[4] cpu)";
    CHECK_THROWS_WITH_AS(CompiledCallable::from_mef(fh.path), doctest::Contains(unbound.c_str()), ValueError);
    // what that weight is, and what to bind (tester N6)
    CHECK_THROWS_WITH_AS(CompiledCallable::from_mef(fh.path),
                         doctest::Contains("; 'mutable.0' is a tensor the traced function captured and wrote in place "
                                           "(a write-back weight): bind the tensor each call should read and write "
                                           "back under that name"),
                         ValueError);
  }
}
