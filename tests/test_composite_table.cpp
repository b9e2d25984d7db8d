// Runs every entry of the composite-op table (composite_table.h) eagerly and
// through kiln::compile, against its float64 loop reference, and checks that
// eager and compiled (strict kernels) agree bit for bit. Also: unique and
// nonzero refuse to compile, naming the op; their fixed-size variants compile.
#include <cmath>
#include <cstring>
#include <string>

#include "composite_table.h"
#include "test_util.h"

namespace {

using namespace kiln;
using kt::composite::Entry;
using kt::composite::Ref;

void check_against(const std::vector<Tensor>& got, const std::vector<Ref>& want, const Entry& e,
                   const std::string& how) {
  REQUIRE_MESSAGE(got.size() == want.size(), e.name << " (" << how << "): " << got.size() << " results, want "
                                                    << want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string what = e.name + " (" + how + ") result " + std::to_string(i);
    CHECK_MESSAGE(got[i].dtype() == want[i].dtype, what << ": dtype " << name(got[i].dtype()) << ", want "
                                                        << name(want[i].dtype));
    REQUIRE_MESSAGE(got[i].shape() == want[i].shape, what << ": shape " << shape_str(got[i].shape()) << ", want "
                                                          << shape_str(want[i].shape));
    kt::check_all_close(got[i], want[i].values, e.rtol, e.atol, what);
  }
}

// Equal values, bit for bit through float64 (exact for every dtype up to
// 2^53), with -0 told from +0; any NaN matches any NaN (the numerics contract,
// jit/compiled_callable.h).
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (x[i] != y[i] || std::signbit(x[i]) != std::signbit(y[i])) return false;
  }
  return true;
}

std::vector<Tensor> run_compiled(const Entry& e, bool strict) {
  auto f = [&e](std::vector<Tensor> xs) { return e.build(xs); };
  std::vector<TensorLayout> layouts;
  for (const Tensor& t : e.inputs) layouts.push_back(t.layout());
  CompileOptions o;
  o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = strict});
  CompiledCallable run = compile(f, o)(layouts);
  return run(e.inputs).as<std::vector<Tensor>>();
}

std::string realization_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const RealizationError& e) {
    return e.what();
  }
  return "(no RealizationError)";
}

}  // namespace

TEST_SUITE("composite op table") {
  TEST_CASE("every entry: eager and compiled against the float64 loops, eager == compiled (strict) bitwise") {
    for (const Entry& e : kt::composite::entries()) {
      CAPTURE(e.name);
      const std::vector<Ref> want = e.reference(e.inputs);
      const std::vector<Tensor> eager = e.build(e.inputs);
      check_against(eager, want, e, "eager");
      check_against(run_compiled(e, false), want, e, "compiled");
      const std::vector<Tensor> strict = run_compiled(e, true);
      check_against(strict, want, e, "compiled strict");
      REQUIRE(strict.size() == eager.size());
      for (size_t i = 0; i < eager.size(); ++i)
        CHECK_MESSAGE(same_values(eager[i], strict[i]), e.name << " result " << i << ": eager " << eager[i]
                                                              << " != compiled " << strict[i]);
    }
  }

  TEST_CASE("the table covers what it claims: empty and size-1 extents, views, NaN and inf") {
    bool empty = false, one = false, strided = false, nan = false, inf = false;
    for (const Entry& e : kt::composite::entries())
      for (const Tensor& t : e.inputs) {
        empty = empty || t.numel() == 0;
        for (int64_t s : t.shape()) one = one || s == 1;
        strided = strided || !t.is_contiguous();
        for (int64_t st : t.strides()) strided = strided || st < 0;
        for (double v : t.to_vector<double>()) {
          nan = nan || std::isnan(v);
          inf = inf || std::isinf(v);
        }
      }
    CHECK(empty);
    CHECK(one);
    CHECK(strided);
    CHECK(nan);
    CHECK(inf);
  }

  TEST_CASE("nonzero, argwhere, unique and a bool-mask index traced: one message naming the op and what to use") {
    const Tensor x = Tensor::from_vector(std::vector<float>{0, 2, 0, 5, 1});
    const TensorLayout l(DType::float32, {5});
    struct Case {
      const char* op;
      std::function<Tensor(Tensor)> f;
      const char* instead;
    };
    const std::vector<Case> cases = {
        {"nonzero", [](Tensor t) { return nonzero(t)[0]; }, "use nonzero_static(x, size, fill)"},
        {"argwhere", [](Tensor t) { return argwhere(t); }, "use nonzero_static(x, size, fill)"},
        {"unique", [](Tensor t) { return unique(t).values; }, "use unique_static(x, size, fill)"},
        {"index (a bool mask)", [](Tensor t) { return t.index({t > 1.0f}); }, "use where(mask, x, fill)"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.op);
      const std::string viajit = realization_message([&] { (void)jit(c.f)(x); });
      const std::string viacompile = realization_message([&] { (void)compile(c.f)(l); });
      for (const std::string& m : {viajit, viacompile}) {
        CHECK_MESSAGE(m.rfind(std::string(c.op) + ": the result's shape depends on the data, and inside "
                              "jit/compile/stage tensors are symbolic values with no data until the compiled "
                              "function runs, so " + c.op + " cannot be traced; " + c.instead,
                              0) == 0,
                      m);
        CHECK_MESSAGE(m.find("to_vector") == std::string::npos, m);  // no nested explanation of another call
        CHECK_MESSAGE(m.find(": realize") == std::string::npos, m);
      }
    }
  }

  TEST_CASE("unique, nonzero and argwhere refuse to compile and name the op; the static variants compile") {
    const TensorLayout l(DType::float32, {5});
    const std::string u = realization_message([&] { (void)compile([](Tensor x) { return unique(x).values; })(l); });
    CHECK_MESSAGE(u.rfind("unique: the result's shape depends on the data", 0) == 0, u);
    const std::string n = realization_message([&] { (void)compile([](Tensor x) { return nonzero(x)[0]; })(l); });
    CHECK_MESSAGE(n.rfind("nonzero: the result's shape depends on the data", 0) == 0, n);
    const std::string a = realization_message([&] { (void)compile([](Tensor x) { return argwhere(x); })(l); });
    CHECK_MESSAGE(a.rfind("argwhere: the result's shape depends on the data", 0) == 0, a);
    // the same data through the fixed-size variants, compiled once and called with two inputs
    CompiledCallable nz = compile([](Tensor x) { return nonzero_static(x, 3, -1)[0]; })(l);
    CHECK(nz(Tensor::from_vector(std::vector<float>{0, 2, 0, 5, 1})).tensor().to_vector<int64_t>() ==
          std::vector<int64_t>{1, 3, 4});
    CHECK(nz(Tensor::from_vector(std::vector<float>{0, 0, 9, 0, 0})).tensor().to_vector<int64_t>() ==
          std::vector<int64_t>{2, -1, -1});
    CompiledCallable uq = compile([](Tensor x) {
      UniqueStatic r = unique_static(x, 4, -1.0);
      return std::make_tuple(r.values, r.counts, r.count);
    })(l);
    auto [v, c, k] = uq(Tensor::from_vector(std::vector<float>{2, 1, 2, 2, 1})).as<std::tuple<Tensor, Tensor, Tensor>>();
    CHECK(v.to_vector<float>() == std::vector<float>{1, 2, -1, -1});
    CHECK(c.to_vector<int64_t>() == std::vector<int64_t>{2, 3, 0, 0});
    CHECK(k.item<int64_t>() == 2);
  }

  TEST_CASE("nonzero_static and unique_static: bad arguments") {
    CHECK_THROWS_WITH_AS(nonzero_static(zeros({3}), -1), "nonzero_static: size must be >= 0, got -1", ValueError);
    CHECK_THROWS_AS(nonzero_static(zeros({}), 2), ShapeError);
    CHECK_THROWS_WITH_AS(unique_static(zeros({3}), -2), "unique_static: size must be >= 0, got -2", ValueError);
    CHECK_THROWS_AS(unique_static(zeros({3}, DType::int32), 2, std::nan("")), ValueError);  // NaN into int32
    // errors of the ops they are built from name them first
    CHECK_THROWS_WITH_AS(unique_static(zeros({3}, DType::int32), 2, std::nan("")),
                         doctest::Contains("unique_static: "), ValueError);
    try {
      nonzero_static(zeros({3}), INT64_MAX);
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).rfind("nonzero_static: ", 0) == 0);
    }
    // size 0: empty results, the count still counts
    const UniqueStatic u = unique_static(Tensor::from_vector(std::vector<float>{3, 3, 1}), 0);
    CHECK(u.values.shape() == Shape{0});
    CHECK(u.count.item<int64_t>() == 2);
    CHECK(u.inverse.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0});
  }
}
