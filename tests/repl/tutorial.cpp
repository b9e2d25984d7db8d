Tensor x = arange(6, DType::float32).reshape({2, 3})
x * tensor({1.0f, 10.0f, 100.0f})
sum(x, {1})
matmul(x, x.transpose())
x.transpose()
auto f = [](Tensor t) { return tanh(t) * 2.0f + 1.0f; };
auto jf = jit(f);
jf(x)
Tensor big = random::normal({512, 512});
timeit([] { return f(big); })
timeit([] { return jf(big); })
stage(f)(x.layout())
