// Nested tracing (a jit function or a compiled callable called while another
// function is traced is inlined into that trace), jit of a module call (its
// parameters become named weights by state_dict key, no registry), and a
// module registered under two parents (a path per parent).
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {
using kt::same_bits;
TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }
std::shared_ptr<InferenceSession> strict_session() {
  return std::make_shared<InferenceSession>(KernelOptions{.strict = true});
}
// jit options compiling in strict mode (built member by member: GCC 12 warns
// about the members a designated initializer leaves out).
JitOptions strict_jit() {
  JitOptions o;
  o.compile.session = strict_session();
  return o;
}
// Largest |a - ref| over the elements, ref computed in float64.
double max_err(const Tensor& a, const std::vector<double>& ref) {
  auto v = a.to_vector<double>();
  REQUIRE(v.size() == ref.size());
  double e = 0;
  for (size_t i = 0; i < v.size(); ++i) e = std::max(e, std::abs(v[i] - ref[i]));
  return e;
}
// float64 reference of y = x W^T + b for x [n, k], W [m, k], b [m].
std::vector<double> ref_linear(const std::vector<double>& x, int64_t n, int64_t k, const Tensor& W, const Tensor& b) {
  auto w = W.to_vector<double>(), bb = b.to_vector<double>();
  const int64_t m = W.size(0);
  std::vector<double> y(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = bb[static_cast<size_t>(j)];
      for (int64_t q = 0; q < k; ++q) s += x[static_cast<size_t>(i * k + q)] * w[static_cast<size_t>(j * k + q)];
      y[static_cast<size_t>(i * m + j)] = s;
    }
  return y;
}
// Two Linear layers with a tanh between; children "fc1", "fc2".
class Mlp : public nn::Module {
 public:
  Mlp(int64_t in, int64_t hidden, int64_t out)
      : fc1_(register_module("fc1", std::make_shared<nn::Linear>(in, hidden))),
        fc2_(register_module("fc2", std::make_shared<nn::Linear>(hidden, out))) {}
  Tensor forward(const Tensor& x) override { return (*fc2_)(tanh((*fc1_)(x))); }
  std::vector<double> reference(const Tensor& x) const {
    auto sd = state_dict();
    auto h = ref_linear(x.to_vector<double>(), x.size(0), x.size(1), sd.at("fc1.weight"), sd.at("fc1.bias"));
    for (double& v : h) v = std::tanh(v);
    return ref_linear(h, x.size(0), sd.at("fc1.weight").size(0), sd.at("fc2.weight"), sd.at("fc2.bias"));
  }

 private:
  std::shared_ptr<nn::Linear> fc1_, fc2_;
};
// A module holding another one under `name` (a second parent for it).
class Holder : public nn::Module {
 public:
  Holder(const std::string& name, std::shared_ptr<nn::Module> child, int64_t dim)
      : child_(register_module(name, std::move(child))) {
    register_parameter("scale", full({dim}, 2.0));
  }
  Tensor forward(const Tensor& x) override { return (*child_)(x) * param("scale"); }
  void adopt(const std::string& name, std::shared_ptr<nn::Module> m) { register_module(name, std::move(m)); }

 private:
  std::shared_ptr<nn::Module> child_;
};
std::vector<std::string> keys(const std::map<std::string, Tensor>& m) {
  std::vector<std::string> k;
  for (const auto& [n, t] : m) k.push_back(n);
  return k;
}
}  // namespace

TEST_SUITE("nested_trace") {
  TEST_CASE("a jit function called inside jit or compile is inlined, nested twice too, runtime scalars included") {
    auto inner = kiln::jit([](Tensor x, Tensor s) { return exp(x) * s; });
    auto middle = kiln::jit([&](Tensor x, Tensor s) { return Tensor(inner(x, s)) + x; });
    auto outer = kiln::jit([&](Tensor x, Tensor s) { return Tensor(middle(x, s)) * 0.5; });
    Tensor x = random::normal({3, 5});
    auto xv = x.to_vector<double>();
    for (double s : {3.0, -1.5}) {
      std::vector<double> ref;
      for (double v : xv) ref.push_back((std::exp(v) * s + v) * 0.5);
      Tensor eager = (exp(x) * s + x) * 0.5;
      Tensor got = outer(x, s);
      CHECK(max_err(got, ref) <= 1e-5 * 40);
      CHECK(max_err(eager, ref) <= 1e-5 * 40);
      Tensor m = middle(x, s);  // called on its own: compiled and run
      for (size_t i = 0; i < ref.size(); ++i) ref[i] *= 2;
      CHECK(max_err(m, ref) <= 1e-5 * 80);
    }
    // One compile for both scalar values; the inner function was never compiled, only traced into outer's graph.
    CHECK(outer.stats().compiles == 1);
    CHECK(middle.stats().compiles == 1);
    CHECK(inner.stats().compiles == 0);
    // The outer graph holds the inner ops (exp), not a call.
    StagedGraph s = stage([&](Tensor a, Tensor b) { return Tensor(middle(a, b)); })(f32({3, 5}), f32({}));
    CHECK(s.graph->op_counts().count("exp") == 1);
    CHECK(s.graph->subgraphs().empty());
    // A static scalar of the inner function stays static.
    auto scaled = kiln::jit([](Tensor x, double k) { return x * k; });
    auto use = kiln::jit([&](Tensor x) { return Tensor(scaled(x, 4.0)) + 1.0; });
    std::vector<double> ref2;
    for (double v : xv) ref2.push_back(v * 4.0 + 1.0);
    CHECK(max_err(use(x), ref2) <= 2e-6);  // float32 rounding of x * 4 + 1
  }

  TEST_CASE("a compiled callable called inside a trace is inlined with its weights; the outer MEF export runs") {
    Mlp mlp(4, 6, 3);
    CompileOptions co;
    co.session = strict_session();
    auto cc = compile([&](Tensor x) { return mlp(x); }, co)(f32({2, 4}));  // weights bound automatically
    auto outer_fn = [&](Tensor x) { return relu(Tensor(cc(x))) * 2.0; };
    auto outer = compile(outer_fn, co)(f32({2, 4}));
    auto twice = kiln::jit([&](Tensor x) { return Tensor(compile(outer_fn, co)(f32({2, 4}))(x)) + 1.0; },
                           JitOptions{.compile = co});
    Tensor x = random::normal({2, 4});
    auto check = [&] {
      std::vector<double> ref = mlp.reference(x);
      for (double& v : ref) v = std::max(v, 0.0) * 2.0;
      Tensor eager = relu(mlp(x)) * 2.0;
      Tensor got = outer(x);
      CHECK(same_bits(got, eager));  // strict: compiled == eager bit for bit
      CHECK(max_err(got, ref) <= 1e-5);
      for (double& v : ref) v += 1.0;
      CHECK(max_err(twice(x), ref) <= 1e-5);
    };
    check();
    // The inner graph's weights are weights of the outer graph, bound to the same parameters.
    CHECK(keys(outer.weights()) == std::vector<std::string>{"fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"});
    CHECK(outer.staged().graph->op_counts().count("tanh") == 1);
    // An in-place update of a parameter is seen by the inner and the outer callable.
    mlp.state_dict().at("fc2.weight").mul_(-0.5);
    check();
    // MEF export of the outer graph; loaded with the same weights it gives the same bits.
    const auto path = (std::filesystem::temp_directory_path() /
                       ("kiln_nested_" + std::to_string(getpid()) + ".mef")).string();
    outer.export_mef(path);
    auto loaded = CompiledCallable::from_mef(path, mlp.state_dict(), strict_session());
    CHECK(same_bits(Tensor(loaded(x)), Tensor(outer(x))));
    std::filesystem::remove(path);
    // A loaded callable inlines too (its graph is the optimised one from the file).
    auto around = compile([&](Tensor a) { return Tensor(loaded(a)) - 1.0; }, co)(f32({2, 4}));
    CHECK(same_bits(Tensor(around(x)), relu(mlp(x)) * 2.0 - 1.0));
    // Wrong argument types are still refused by name inside a trace.
    CHECK_THROWS_AS(stage([&](Tensor a) { return Tensor(cc(a)); })(f32({2, 5})), ValueError);
  }

  TEST_CASE("an inlined compiled callable's in-place writes become writes of the outer trace") {
    Tensor w = random::normal({16}), g = random::normal({16});
    Tensor we = w.clone();
    auto wd = w.to_vector<double>();
    const auto gd = g.to_vector<double>();
    CompileOptions co;
    co.session = strict_session();
    auto step = compile([&](Tensor grad) {
      w -= 0.1 * grad;
      return sum(w * w);
    }, co)(f32({16}));
    auto outer = compile([&](Tensor grad) { return Tensor(step(grad * 2.0)) + 1.0; }, co)(f32({16}));
    for (int it = 0; it < 3; ++it) {
      Tensor loss = outer(g);
      we -= 0.1 * (g * 2.0);  // eager
      Tensor le = sum(we * we) + 1.0;
      CHECK(same_bits(w, we));
      CHECK(same_bits(loss, le));
      for (size_t i = 0; i < wd.size(); ++i) wd[i] -= 0.1 * (gd[i] * 2.0);  // float64 reference
      CHECK(max_err(w, wd) <= 1e-5);
    }
    // An argument written by the inner callable: the outer call writes its own argument.
    auto inc = compile([](Tensor a) {
      a += 1.0;
      return a * 1.0;
    }, co)(f32({4}));
    auto outer2 = compile([&](Tensor a) { return Tensor(inc(a)) * 3.0; }, co)(f32({4}));
    Tensor a = tensor({1.0f, 2.0f, 3.0f, 4.0f});
    Tensor r = outer2(a);
    CHECK(a.to_vector<double>() == std::vector<double>{2, 3, 4, 5});
    CHECK(r.to_vector<double>() == std::vector<double>{6, 9, 12, 15});
  }

  TEST_CASE("jit of a module call binds its parameters by state_dict key and sees later updates") {
    Mlp mlp(5, 7, 2);
    Tensor x = random::normal({3, 5});
    auto by_model = kiln::jit(std::ref(mlp), strict_jit());
    auto by_lambda = kiln::jit([&](const Tensor& t) { return mlp(t); },
                               strict_jit());
    auto check = [&] {
      Tensor eager = mlp(x);
      CHECK(max_err(eager, mlp.reference(x)) <= 1e-5);
      CHECK(same_bits(Tensor(by_model(x)), eager));
      CHECK(same_bits(Tensor(by_lambda(x)), eager));
    };
    check();
    // The traced weights are named by the module's state_dict keys.
    StagedGraph s = stage([&](Tensor t) {
      nn::ParameterNaming names(mlp);
      return mlp(t);
    })(f32({3, 5}));
    CHECK(keys(s.bound_weights) == keys(mlp.state_dict()));
    // load_state_dict with new values, then an in-place update: the cached code sees both.
    std::map<std::string, Tensor> sd;
    for (const auto& [n, t] : mlp.state_dict()) sd[n] = random::normal(t.shape());
    mlp.load_state_dict(sd);
    check();
    mlp.state_dict().at("fc1.bias").add_(1.0);
    check();
    CHECK(by_model.stats().compiles == 1);
    CHECK(by_lambda.stats().compiles == 1);
    // jit(model) inlines when called inside another trace, its weights bound there too.
    auto outer = kiln::jit([&](Tensor t) { return Tensor(by_model(t)) * 2.0; });
    CHECK(max_err(outer(x), [&] {
            auto r = mlp.reference(x);
            for (double& v : r) v *= 2;
            return r;
          }()) <= 2e-5);
    CHECK(by_model.stats().compiles == 1);
    // An explicit registry entry wins over the parameter.
    Tensor other = zeros({2});
    JitOptions pin;
    pin.compile.weights = {{"fc2.bias", other}};
    auto pinned = kiln::jit(std::ref(mlp), pin);
    CHECK(max_err(Tensor(pinned(x)) + mlp.state_dict().at("fc2.bias"), mlp.reference(x)) <= 1e-5);
  }

  TEST_CASE("jit of a model whose layers share one subgraph body binds every layer's parameters") {
    auto seq = std::make_shared<nn::Sequential>();
    for (int i = 0; i < 3; ++i) {
      auto l = std::make_shared<nn::Linear>(4, 4);
      l->set_subgraph(true);
      seq->push_back(l);
    }
    StagedGraph s = stage([&](Tensor t) { return (*seq)(t); })(f32({2, 4}));
    CHECK(s.graph->subgraphs().size() == 1);  // one body, three calls
    CHECK(keys(s.bound_weights) == keys(seq->state_dict()));
    auto j = kiln::jit(seq, strict_jit());
    Tensor x = random::normal({2, 4});
    CHECK(same_bits(Tensor(j(x)), (*seq)(x)));
    // float64 reference: three affine maps
    auto sd = seq->state_dict();
    std::vector<double> h = x.to_vector<double>();
    for (int i = 0; i < 3; ++i) {
      const std::string p = std::to_string(i) + ".";
      h = ref_linear(h, 2, 4, sd.at(p + "weight"), sd.at(p + "bias"));
    }
    CHECK(max_err(Tensor(j(x)), h) <= 1e-5);
  }

  TEST_CASE("two models with alike parameter names inlined into one trace get distinct weights") {
    Mlp a(3, 4, 2), b(3, 4, 2);
    auto ja = kiln::jit(std::ref(a)), jb = kiln::jit(std::ref(b));
    auto both = kiln::jit([&](Tensor x) { return Tensor(ja(x)) - Tensor(jb(x)); });
    Tensor x = random::normal({2, 3});
    auto ra = a.reference(x), rb = b.reference(x);
    for (size_t i = 0; i < ra.size(); ++i) ra[i] -= rb[i];
    CHECK(max_err(both(x), ra) <= 2e-5);
  }

  TEST_CASE("a module under two parents keeps a path per parent") {
    auto mlp = std::make_shared<Mlp>(3, 4, 3);
    const auto own = keys(mlp->state_dict());
    CHECK(own == std::vector<std::string>{"fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"});
    Holder b("a", mlp, 3);
    CHECK(keys(mlp->state_dict()) == own);
    CHECK(keys(b.state_dict()) ==
          std::vector<std::string>{"a.fc1.bias", "a.fc1.weight", "a.fc2.bias", "a.fc2.weight", "scale"});
    Holder c("x", mlp, 3);
    CHECK(keys(mlp->state_dict()) == own);
    CHECK(keys(b.state_dict())[0] == "a.fc1.bias");  // the first parent's keys do not change
    CHECK(c.state_dict().count("x.fc1.bias") == 1);
    CHECK(c.state_dict().count("a.fc1.bias") == 0);
    CHECK(mlp->path() == "a.");
    // The same tensors under both parents; loading through one parent's keys works.
    CHECK(b.state_dict().at("a.fc1.weight").data_ptr() == c.state_dict().at("x.fc1.weight").data_ptr());
    c.load_state_dict({{"x.fc2.bias", tensor({1.0f, 2.0f, 3.0f})}});
    CHECK(mlp->state_dict().at("fc2.bias").to_vector<double>() == std::vector<double>{1, 2, 3});
    CHECK_THROWS_AS(c.load_state_dict({{"a.fc2.bias", tensor({1.0f, 2.0f, 3.0f})}}), ValueError);
    // Traced, each root names the weights by its own keys, eager and compiled agree.
    Tensor x = random::normal({2, 3});
    for (nn::Module* root : std::vector<nn::Module*>{mlp.get(), &b, &c}) {
      StagedGraph s = stage([&](Tensor t) {
        nn::ParameterNaming names(*root);
        return (*root)(t);
      })(f32({2, 3}));
      CHECK(keys(s.bound_weights) == keys(root->state_dict()));
      auto j = kiln::jit(std::ref(*root), strict_jit());
      CHECK(same_bits(Tensor(j(x)), (*root)(x)));
    }
    std::vector<double> ref = mlp->reference(x);
    for (double& v : ref) v *= 2;
    CHECK(max_err(b(x), ref) <= 1e-5);
    // A module cannot become its own descendant.
    auto inner = std::make_shared<Holder>("in", mlp, 3);
    auto top = std::make_shared<Holder>("h", inner, 3);
    CHECK_THROWS_AS(inner->adopt("up", top), ValueError);
    CHECK_THROWS_AS(inner->adopt("self", inner), ValueError);
  }
}
