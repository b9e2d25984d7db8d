Tensor a = tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}).reshape({2, 3});
a
Tensor b = (a - 1.0f) * 2.0f + tensor({0.5f, 0.25f, 0.125f});
b
sum(b * b, {1})
Tensor bad = a + ones({4});
a + b
int oops = ;
matmul(a, b.transpose())
auto f = [](Tensor x, Tensor y) {
  return exp(x) * y - x;
};
auto run = compile(f)(a.layout(), b.layout());
run
Tensor eager = f(a, b);
Tensor compiled = run(a, b);
all(abs(compiled - eager) <= abs(eager) * 1e-6f).item<bool>()
auto jf = jit(f);
jf(a, b);
jf(a, b);
jf(ones({3}), ones({3}))
jf.stats()
jf.last_miss_explanation()
stage(f)(a.layout(), b.layout())
run.export_mef("repl_session.mef");
auto back = CompiledCallable::from_mef("repl_session.mef");
back
all(equal(back(a, b).tensor(), compiled)).item<bool>()
auto f = [](Tensor x, Tensor y) { return x * y; };
auto jf = jit(f);
jf(a, b)
jf.stats()
compile(f)(a.layout(), b.layout())
a.dtype()
show(a.dtype());
a.device()
a.layout()
random::normal({100, 100}).layout()
zeros({40, 40})
