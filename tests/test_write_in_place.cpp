// Compiled write-back computed in place: the final value of a written
// argument or mutable source is computed straight into its memory (no
// result tensor, no copy at the end of the call) where that is safe, and
// copied where it is not; the bits equal eager's either way (strict mode).
#include "../jit/plan.h"
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {
using kt::same_bits;
TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }
CompileOptions strict() {
  CompileOptions o;
  o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
  return o;
}
std::vector<double> as_double(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_SUITE("write_in_place") {
  TEST_CASE("an optimizer step writes its weights in place: no copy, no result buffer, eager's bits") {
    const int64_t n = 4096;
    Tensor w = random::normal({n}), v = zeros({n}), g = random::normal({n});
    Tensor we = w.clone(), ve = v.clone();
    std::vector<double> wd = as_double(w), vd(static_cast<size_t>(n), 0.0);
    const auto gd = as_double(g);
    const void* wp = w.data_ptr();
    const void* vp = v.data_ptr();
    auto step = [](const Tensor& W, const Tensor& V, const Tensor& G) {
      V.mul_(0.9).add_(G);
      W -= 0.1 * V;
      return sum(W * W);
    };
    CompiledCallable c = compile([&](Tensor grad) { return step(w, v, grad); }, strict())(f32({n}));
    REQUIRE(c.staged().writes.size() == 2);
    const bool arena = c.engine_model().artifact().plan().arena_bytes() > 0;
    for (int it = 0; it < 3; ++it) {
      const uint64_t before = memory_stats().allocations;
      Tensor loss = c(g);
      const uint64_t allocs = memory_stats().allocations - before;
      Tensor le = step(we, ve, g);
      CHECK(same_bits(w, we));
      CHECK(same_bits(v, ve));
      CHECK(same_bits(loss, le));
      // The call allocates the loss (and its scratch arena, if any), never a buffer for w or v.
      CHECK(allocs <= 1u + (arena ? 1u : 0u));
      for (size_t i = 0; i < wd.size(); ++i) {  // float64 reference
        vd[i] = vd[i] * 0.9 + gd[i];
        wd[i] -= 0.1 * vd[i];
      }
      double err = 0;
      auto wv = as_double(w);
      for (size_t i = 0; i < wd.size(); ++i) err = std::max(err, std::abs(wv[i] - wd[i]));
      CHECK(err <= 1e-5);
    }
    CHECK(w.data_ptr() == wp);
    CHECK(v.data_ptr() == vp);
    const auto st = c.write_back_stats();
    CHECK(st.in_place == 6);
    CHECK(st.copied == 0);
    CHECK(st.bytes_copied == 0);
  }

  TEST_CASE("a written argument is computed into the argument; execute_raw too") {
    auto f = [](Tensor a, Tensor g) {
      a -= 0.5 * g;
      return a * 2.0;
    };
    CompiledCallable c = compile(f, strict())(f32({257}), f32({257}));
    Tensor a = random::normal({257}), g = random::normal({257});
    Tensor ae = a.clone();
    const auto ad = as_double(a), gd = as_double(g);
    Tensor r = c(a, g);
    Tensor re = f(ae, g);
    CHECK(same_bits(a, ae));
    CHECK(same_bits(r, re));
    auto av = as_double(a);
    for (size_t i = 0; i < av.size(); ++i) CHECK(av[i] == doctest::Approx(ad[i] - 0.5 * gd[i]).epsilon(1e-6));
    std::vector<Tensor> in = {a, g};
    std::vector<Tensor> out = c.execute_raw(std::span<const Tensor>(in));
    f(ae, g);
    CHECK(same_bits(a, ae));
    CHECK(c.write_back_stats().in_place == 2);
    CHECK(c.write_back_stats().copied == 0);
  }

  TEST_CASE("the copy is kept where computing in place would be wrong, with eager's bits") {
    // The same tensor passed for both arguments: the destination aliases another input.
    auto f = [](Tensor a, Tensor b) {
      a += b;
      return sum(a);
    };
    CompiledCallable c = compile(f, strict())(f32({100}), f32({100}));
    Tensor x = random::normal({100});
    Tensor xe = x.clone();
    Tensor s = c(x, x);
    Tensor se = f(xe, xe);
    CHECK(same_bits(x, xe));
    CHECK(same_bits(s, se));
    CHECK(c.write_back_stats().copied == 1);
    CHECK(c.write_back_stats().bytes_copied == 400);
    // Distinct tensors: in place.
    Tensor y = random::normal({100}), ye = y.clone();
    c(x, y);
    f(xe, ye);
    CHECK(same_bits(x, xe));
    CHECK(c.write_back_stats().in_place == 1);

    // The new value is an argument passed through (no step computes it): copied.
    Tensor w = random::normal({8});
    CompiledCallable cp = compile([&](Tensor src) {
      w.copy_(src);
      return src + 1.0;
    }, strict())(f32({8}));
    Tensor src = random::normal({8});
    cp(src);
    CHECK(same_bits(w, src));
    CHECK(cp.write_back_stats().copied == 1);

    // The old value is also read for the result: whichever way the plan orders it, eager's bits.
    Tensor w2 = random::normal({64}), w2e = w2.clone(), g = random::normal({64});
    auto h = [](Tensor W, Tensor G) {
      Tensor before = sum(W * W);
      W -= 0.1 * G;
      return before - sum(W);
    };
    CompiledCallable ch = compile(h, strict())(f32({64}), f32({64}));
    for (int i = 0; i < 2; ++i) {
      Tensor r = ch(w2, g);
      Tensor re = h(w2e, g);
      CHECK(same_bits(r, re));
      CHECK(same_bits(w2, w2e));
    }
    CHECK(ch.write_back_stats().in_place + ch.write_back_stats().copied == 2);

    // A matmul that reads the old value while writing: never in place.
    Tensor m = random::normal({16, 16}), me = m.clone();
    auto mm = [](Tensor M) {
      M.copy_(matmul(M, M));
      return sum(M);
    };
    CompiledCallable cm = compile(mm, strict())(f32({16, 16}));
    CHECK(same_bits(Tensor(cm(m)), mm(me)));
    CHECK(same_bits(m, me));
    CHECK(cm.write_back_stats().copied == 1);
  }
}
