// The compiled plan's fusion grouping, its liveness-planned arena and the
// peak memory of a compiled call.
#include "test_util.h"
#include "../jit/engine.h"
#include "../jit/plan.h"

namespace {
using namespace kiln;
TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }
const codegen::ExecutionPlan& plan_of(const CompiledCallable& c) { return c.engine_model().artifact().plan(); }
int fused_steps(const codegen::ExecutionPlan& p) {
  int n = 0;
  for (const auto& s : p.steps()) n += s.kind == codegen::PlanStep::Kind::fused;
  return n;
}
}  // namespace

TEST_SUITE("compile") {
  TEST_CASE("memory plan: the chain is one fused loop, and a call needs only its output") {
    auto f = [](Tensor a, Tensor b, Tensor c) { return tanh(a * b + c) * 0.5f + exp(-a); };
    const int64_t n = 1 << 20;
    CompiledCallable run = compile(f)(f32({n}), f32({n}), f32({n}));
    const auto& p = plan_of(run);
    // neg/exp and mul/add/tanh/mul/add read the same inputs: one loop, no scratch.
    CHECK(p.steps().size() == 1);
    CHECK(fused_steps(p) == 1);
    CHECK(p.arena_bytes() == 0);
    Tensor a = random::normal({n}, 1), b = random::normal({n}, 2), c = random::normal({n}, 3);
    Tensor warm = run(a, b, c);
    reset_peak_memory();
    const size_t before = memory_stats().bytes_in_use;
    Tensor y = run(a, b, c);
    const MemoryStats after = memory_stats();
    INFO("peak - before = " << after.peak_bytes_in_use - before);
    CHECK(after.peak_bytes_in_use - before == static_cast<size_t>(n) * sizeof(float));
    kt::check_all_close(y, kt::values(f(a, b, c)), 1e-6, 1e-6, "chain");
  }

  TEST_CASE("memory plan: intermediates share one arena planned from liveness") {
    // Five matmul intermediates of 64x64 float32 (16 KiB each), each dead
    // after the next one is made: the arena holds two at a time, not five.
    auto f = [](Tensor x, Tensor w) {
      Tensor h = x;
      for (int i = 0; i < 5; ++i) h = matmul(h, w);
      return sum(h);
    };
    CompiledCallable run = compile(f)(f32({64, 64}), f32({64, 64}));
    const auto& p = plan_of(run);
    CHECK(p.arena_bytes() == 2 * 64 * 64 * sizeof(float));
    Tensor x = random::normal({64, 64}, 4) * 0.1f, w = random::normal({64, 64}, 5) * 0.1f;
    Tensor want = f(x, w);
    for (int rep = 0; rep < 3; ++rep) CHECK(run(x, w).as<Tensor>().item<float>() == want.item<float>());
  }

  TEST_CASE("memory plan: a view of an intermediate keeps its memory alive") {
    // t = x*2 lives in the arena; its transpose feeds a matmul after other
    // intermediates were made, and a view of it is also returned.
    auto f = [](Tensor x) {
      Tensor t = matmul(x, x);
      Tensor tt = transpose(t);
      Tensor u = matmul(x, x + 1.0f);
      Tensor v = matmul(u, u);
      return std::make_tuple(matmul(tt, v), transpose(t));
    };
    CompiledCallable run = compile(f)(f32({8, 8}));
    Tensor x = random::normal({8, 8}, 6);
    auto [r0, r1] = run(x).as<std::tuple<Tensor, Tensor>>();
    Tensor r2 = std::get<0>(run(x * 2.0f).as<std::tuple<Tensor, Tensor>>());  // reuses the plan
    auto [w0, w1] = f(x);
    CHECK(kt::values(r0) == kt::values(w0));
    CHECK(kt::values(r1) == kt::values(w1));
    (void)r2;
  }

  TEST_CASE("memory plan: a group with more operands than a kernel takes is split") {
    // Ten independent inputs summed: 10 inputs + 1 output > 8 operands.
    auto f = [](std::vector<Tensor> xs) {
      Tensor s = xs[0];
      for (size_t i = 1; i < xs.size(); ++i) s = s + xs[i] * static_cast<float>(i);
      return s;
    };
    std::vector<TensorLayout> specs(10, f32({33}));
    CompiledCallable run = compile(f)(specs);
    CHECK(fused_steps(plan_of(run)) >= 2);
    for (const auto& s : plan_of(run).steps()) CHECK(s.kind == codegen::PlanStep::Kind::fused);
    std::vector<Tensor> xs;
    for (int i = 0; i < 10; ++i) xs.push_back(random::normal({33}, 10 + i));
    kt::check_all_close(run(xs).as<Tensor>(), kt::values(f(xs)), 1e-6, 1e-6, "split group");
  }
}
