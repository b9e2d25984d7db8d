// The compiled plan's fusion grouping, its liveness-planned arena and the
// peak memory of a compiled call.
#include <set>

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

  TEST_CASE("fusion: a value only a later group reads is computed there, not stored and loaded back") {
    // m * 0.9 could share x * 2's loop, but only the update after the matmul
    // reads it: it moves into the update's loop, so it never reaches memory.
    auto f = [](Tensor x, Tensor w, Tensor m) {
      Tensor h = x * 2.0f;
      Tensor ms = m * 0.9f;
      Tensor u = ms + matmul(h, w);
      return std::make_tuple(u, h);
    };
    for (bool strict : {false, true}) {
      CAPTURE(strict);
      CompileOptions o;
      o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = strict});
      CompiledCallable run = compile(f, o)(f32({8, 8}), f32({8, 8}), f32({8, 8}));
      const auto& p = plan_of(run);
      std::vector<const codegen::PlanStep*> fused;
      // (the update is the matmul's epilogue, gemm_fused, where the GEMM is generated)
      for (const auto& s : p.steps())
        if (s.kind == codegen::PlanStep::Kind::fused || s.kind == codegen::PlanStep::Kind::gemm_fused)
          fused.push_back(&s);
      REQUIRE(fused.size() == 2);
      CHECK(fused[0]->group_nodes.size() == 1);  // x * 2 only
      CHECK(fused[0]->num_outputs == 1);
      CHECK(fused[1]->group_nodes.size() == 2);  // m * 0.9 and the add
      // the arena holds the product only (h and u are outputs; ms is never
      // stored), and not even that when the update is the GEMM's epilogue
      const bool epilogue = fused[1]->kind == codegen::PlanStep::Kind::gemm_fused;
      CHECK(p.arena_bytes() == (epilogue ? 0 : 8 * 8 * sizeof(float)));
      Tensor x = random::uniform({8, 8}), w = random::uniform({8, 8}), m = random::uniform({8, 8});
      auto [u, h] = run(x, w, m).as<std::tuple<Tensor, Tensor>>();
      auto [u2, h2] = f(x, w, m);
      if (strict) CHECK(kt::values(u) == kt::values(u2));
      kt::check_all_close(u, kt::values(u2), 1e-6, 1e-6, "update");
      CHECK(kt::values(h) == kt::values(h2));
    }
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

namespace {
int fused_reductions(const codegen::ExecutionPlan& p) {
  int n = 0;
  for (const auto& s : p.steps()) n += s.kind == codegen::PlanStep::Kind::fused && s.reduce_operand >= 0;
  return n;
}
}  // namespace

TEST_SUITE("compile") {
  TEST_CASE("fused reductions: trailing sum/mean/max/min/prod run in the group, bitwise eager") {
    auto strict = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
    CompileOptions o;
    o.session = strict;
    // Several blocks of 8192 per row, rows split over threads.
    for (Shape shape : {Shape{3, 20000}, Shape{70001}, Shape{5, 1}, Shape{4, 0}, Shape{2, 3, 4}}) {
      auto f = [](Tensor a, Tensor b) {
        Tensor p = a * b + 1.0f;
        return std::make_tuple(sum(p, {-1}), mean(a - b, {-1}), max(a * 2.0f, {-1}), min(b - 1.0f, {-1}),
                               prod(a * 0.5f + 1.0f, {-1}));
      };
      CAPTURE(shape);
      bool empty = false;
      for (int64_t d : shape) empty = empty || d == 0;
      if (empty) continue;  // max/min of nothing is an error in eager too
      CompiledCallable run = compile(f, o)(f32(shape), f32(shape));
      CHECK(fused_reductions(plan_of(run)) == 5);
      Tensor a = random::normal(shape, 21), b = random::normal(shape, 22);
      auto got = run(a, b).as<std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>>();
      auto want = f(a, b);
      CHECK(kt::values(std::get<0>(got)) == kt::values(std::get<0>(want)));
      CHECK(kt::values(std::get<1>(got)) == kt::values(std::get<1>(want)));
      CHECK(kt::values(std::get<2>(got)) == kt::values(std::get<2>(want)));
      CHECK(kt::values(std::get<3>(got)) == kt::values(std::get<3>(want)));
      CHECK(kt::values(std::get<4>(got)) == kt::values(std::get<4>(want)));
    }
  }

  TEST_CASE("fused reductions: full reduction, keepdim, NaN, thread counts, capture and replay") {
    auto f = [](Tensor a) { return std::make_tuple(sum(a * a), max(a + 0.0f, {1}, true)); };
    Tensor a = random::normal({4, 9000}, 23);
    a.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();  // row 0's max is NaN
    CompiledCallable run = compile(f)(f32({4, 9000}));
    CHECK(fused_reductions(plan_of(run)) == 2);
    auto [s1, m1] = run(a).as<std::tuple<Tensor, Tensor>>();
    auto [s0, m0] = f(a);
    CHECK(std::isnan(s1.item<float>()));
    CHECK(m1.shape() == Shape{4, 1});
    const std::vector<double> mv = kt::values(m1), mw = kt::values(m0);
    CHECK(std::isnan(mv[0]));
    for (size_t i = 1; i < mv.size(); ++i) CHECK(mv[i] == mw[i]);
    const int threads = get_num_threads();
    set_num_threads(1);
    auto [s2, m2] = run(a).as<std::tuple<Tensor, Tensor>>();
    set_num_threads(threads);
    CHECK(std::memcmp(s2.data_ptr(), s1.data_ptr(), 4) == 0);
    // capture/replay runs the same bound step
    std::vector<Tensor> outs = run.engine_model().capture(7, std::vector<Tensor>{a});
    a.data<float>()[5] = 1.0f;
    run.engine_model().replay(7, std::vector<Tensor>{a});
    auto [s3, m3] = run(a).as<std::tuple<Tensor, Tensor>>();
    CHECK(std::memcmp(outs[0].data_ptr(), s3.data_ptr(), 4) == 0);
    CHECK(kt::values(outs[1]) == kt::values(m3));
  }

  TEST_CASE("fused reductions: not fused when the value is also used, or the axes are not trailing") {
    auto f = [](Tensor a) {
      Tensor p = a * 3.0f;
      return std::make_tuple(sum(p, {0}), p);
    };
    CompiledCallable run = compile(f)(f32({5, 7}));
    CHECK(fused_reductions(plan_of(run)) == 0);
    Tensor a = random::normal({5, 7}, 24);
    auto [s, p] = run(a).as<std::tuple<Tensor, Tensor>>();
    auto [s0, p0] = f(a);
    CHECK(kt::values(s) == kt::values(s0));
    CHECK(kt::values(p) == kt::values(p0));
  }
}

TEST_SUITE("compile") {
  TEST_CASE("constant tables: groups that differ only in constants share one kernel") {
    auto f = [](Tensor x, Tensor w) {
      Tensor h = x;
      for (int i = 0; i < 6; ++i) h = tanh(matmul(h, w) + static_cast<float>(i) * 0.25f);
      return h;
    };
    CompiledCallable run = compile(f)(f32({4, 4}), f32({4, 4}));
    std::set<const void*> kernels;
    int fused = 0;
    // (each group is its matmul's epilogue where the GEMM is generated: one generated GEMM then)
    for (const auto& s : plan_of(run).steps())
      if (s.kind == codegen::PlanStep::Kind::fused || s.kind == codegen::PlanStep::Kind::gemm_fused) {
        ++fused;
        kernels.insert(s.kind == codegen::PlanStep::Kind::fused ? static_cast<const void*>(s.kernel.get())
                                                                : static_cast<const void*>(s.small_gemm.get()));
        CHECK(s.imm_table.size() == 1);
      }
    CHECK(fused == 6);
    CHECK(kernels.size() == 1);
    Tensor x = random::normal({4, 4}, 30), w = random::normal({4, 4}, 31) * 0.5f;
    kt::check_all_close(run(x, w).as<Tensor>(), kt::values(f(x, w)), 1e-6, 1e-6, "shared kernel");
  }

  TEST_CASE("constant tables: int64 and float16 constants keep their exact values") {
    const int64_t big = (int64_t{1} << 53) + 1;  // not representable in a double
    auto f = [big](Tensor a, Tensor h) {
      return std::make_tuple(a + Tensor::from_vector(std::vector<int64_t>{big}).reshape({}),
                             h * full({}, 0.1, DType::float16));
    };
    Tensor a = Tensor::from_vector(std::vector<int64_t>{0, 1, -2}, {3});
    Tensor h = full({3}, 3.0, DType::float16);
    CompiledCallable run = compile(f)(a, h);
    auto [r0, r1] = run(a, h).as<std::tuple<Tensor, Tensor>>();
    auto [w0, w1] = f(a, h);
    CHECK(r0.to_vector<int64_t>() == std::vector<int64_t>{big, big + 1, big - 2});
    CHECK(r0.to_vector<int64_t>() == w0.to_vector<int64_t>());
    CHECK(kt::values(r1) == kt::values(w1));
  }
}
