// Invariant 6 (hot paths allocation-free), counted through the allocator's
// statistics: a cached compiled call allocates its outputs only, execute_raw
// the same, a capture's replay nothing; on plans of every step kind. And
// counted through operator new (replaced below for this test binary): jit's
// cached call of fixed-structure arguments makes no heap allocation beyond
// the compiled call it runs.
#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>
#include <set>
#include <thread>

#include "test_util.h"
#include "../jit/engine.h"
#include "../jit/plan.h"

struct AfParams {
  kiln::Tensor w, b;
};
KILN_PYTREE(AfParams, w, b);

// ---- operator new, counted per thread ---------------------------------------------
// The replaceable non-aligned forms (the aligned ones stay the runtime's:
// each pairs with its own delete), all on malloc/free, so every new/delete
// pair of the program matches under the sanitizers too. Only the count is
// added: a thread-local (constant-initialised, so no TLS init call).
namespace {
thread_local uint64_t t_heap_allocations = 0;
void* counted_new(std::size_t n) {
  ++t_heap_allocations;
  for (;;) {
    if (void* p = std::malloc(n ? n : 1)) return p;
    std::new_handler h = std::get_new_handler();
    if (!h) throw std::bad_alloc();
    h();
  }
}
void* counted_new_nothrow(std::size_t n) noexcept {
  try {
    return counted_new(n);
  } catch (...) {
    return nullptr;
  }
}
}  // namespace
void* operator new(std::size_t n) { return counted_new(n); }
void* operator new[](std::size_t n) { return counted_new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_new_nothrow(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_new_nothrow(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {
/// Heap allocations (operator new) that f() made on this thread.
uint64_t heap_allocations_in(const std::function<void()>& f) {
  const uint64_t before = t_heap_allocations;
  f();
  return t_heap_allocations - before;
}
using namespace kiln;
TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }

/// Buffer allocations made by f().
uint64_t allocations_in(const std::function<void()>& f) {
  const uint64_t before = memory_stats().allocations;
  f();
  return memory_stats().allocations - before;
}

bool has_step(const CompiledCallable& c, codegen::PlanStep::Kind k) {
  for (const auto& s : c.engine_model().artifact().plan().steps())
    if (s.kind == k) return true;
  return false;
}

std::vector<std::vector<double>> values_of(const std::vector<Tensor>& ts) {
  std::vector<std::vector<double>> v;
  for (const Tensor& t : ts) v.push_back(kt::values(t));
  return v;
}

/// Compiles nothing: runs the three hot paths of `run` on `inputs` and pins
/// their allocation counts; the results must equal `want` (the eager
/// function's, computed before) on every path, and a result must keep its
/// values when later calls run.
void check_paths(const CompiledCallable& run, const std::vector<Tensor>& inputs, size_t n_outputs,
                 const std::vector<std::vector<double>>& want, double tol) {
  auto close = [&](const std::vector<Tensor>& got, const char* path) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(path << " output " << i);
      kt::check_all_close(got[i], want[i], tol, tol, path);
    }
  };
  const TreeDef& tree = run.in_tree();
  std::vector<Tensor> first = run.call_flat(inputs, tree).leaves;  // warm: scratch made once
  close(first, "first call");
  // Every earlier result is held in what follows (a plan reuses only output
  // memory the caller dropped): each call allocates its outputs.
  std::vector<Tensor> r, r2;
  CHECK(allocations_in([&] { r = run.call_flat(inputs, tree).leaves; }) == n_outputs);
  close(r, "cached call");
  CHECK(allocations_in([&] { r2 = run.execute_raw(inputs); }) == n_outputs);
  close(r2, "execute_raw");
  // Two calls in a row (the second one while the first's results live).
  std::vector<Tensor> r3, r4;
  CHECK(allocations_in([&] {
          r3 = run.execute_raw(inputs);
          r4 = run.execute_raw(inputs);
        }) == 2 * n_outputs);
  close(r3, "execute_raw, then another");
  close(first, "the first call's results after later calls");
  // Results dropped: the next call may reuse their memory (no more
  // allocations than outputs), never the memory of results still held.
  r3.clear();
  std::vector<Tensor> r5;
  CHECK(allocations_in([&] { r5 = run.execute_raw(inputs); }) <= n_outputs);
  close(r5, "execute_raw after results were dropped");
  for (size_t i = 0; i < r5.size(); ++i) {
    if (first[i].data_ptr() == r[i].data_ptr()) continue;  // not memory of its own per call (an input, say)
    INFO("output " << i);
    for (const std::vector<Tensor>* held : {&first, &r, &r2, &r4}) CHECK(r5[i].data_ptr() != (*held)[i].data_ptr());
  }
  close(first, "the first call's results after the reusing call");
  close(r, "the cached call's results after the reusing call");
  close(r4, "execute_raw's results after the reusing call");

  const engine::Model& m = run.engine_model();
  std::vector<Tensor> outs = m.capture(41, inputs);
  close(outs, "capture");
  CHECK(allocations_in([&] { m.replay(41, inputs); }) == 0);
  close(outs, "replay");
  CHECK(allocations_in([&] {
          for (int i = 0; i < 3; ++i) m.replay(41, inputs);
        }) == 0);
  close(outs, "third replay");
  m.release(41);
}
}  // namespace

TEST_SUITE("alloc_free") {
  TEST_CASE("hot paths allocate only outputs: fused elementwise chain, two outputs") {
    auto f = [](Tensor a, Tensor b, Tensor c) {
      Tensor t = tanh(a * b + c);
      return std::make_tuple(t * 0.5f + exp(-a), t - b);
    };
    CompiledCallable run = compile(f)(f32({3, 1000}), f32({3, 1000}), f32({3, 1000}));
    REQUIRE(has_step(run, codegen::PlanStep::Kind::fused));
    std::vector<Tensor> in = {random::normal({3, 1000}, 1), random::normal({3, 1000}, 2),
                              random::normal({3, 1000}, 3)};
    auto [w0, w1] = f(in[0], in[1], in[2]);
    check_paths(run, in, 2, values_of({w0, w1}), 1e-5);
  }

  TEST_CASE("hot paths allocate only outputs: matmul + bias + relu, an intermediate in the arena") {
    auto f = [](Tensor x, Tensor w, Tensor b, Tensor w2) { return matmul(relu(matmul(x, w) + b), w2); };
    CompiledCallable run = compile(f)(f32({16, 32}), f32({32, 24}), f32({24}), f32({24, 8}));
    REQUIRE(has_step(run, codegen::PlanStep::Kind::gemm));
    REQUIRE(run.engine_model().artifact().plan().arena_bytes() > 0);
    std::vector<Tensor> in = {random::normal({16, 32}, 4), random::normal({32, 24}, 5), random::normal({24}, 6),
                              random::normal({24, 8}, 7)};
    check_paths(run, in, 1, values_of({f(in[0], in[1], in[2], in[3])}), 1e-4);
  }

  TEST_CASE("hot paths allocate only outputs: softmax and layer_norm row steps") {
    // softmax of an input is a row step; layer_norm of a sum read by nothing
    // else is a fused_row step (the sum computed block by block in scratch).
    auto f = [](Tensor x, Tensor g, Tensor b) {
      Tensor s = softmax(x, -1);
      return std::make_tuple(s, layer_norm(s + x, g, b, 1e-5));
    };
    CompiledCallable run = compile(f)(f32({7, 64}), f32({64}), f32({64}));
    REQUIRE(has_step(run, codegen::PlanStep::Kind::row));
    REQUIRE(has_step(run, codegen::PlanStep::Kind::fused_row));
    std::vector<Tensor> in = {random::normal({7, 64}, 8), random::normal({64}, 9), random::normal({64}, 10)};
    auto [w0, w1] = f(in[0], in[1], in[2]);
    check_paths(run, in, 2, values_of({w0, w1}), 1e-5);
  }

  TEST_CASE("hot paths allocate only outputs: fused and column reductions") {
    auto f = [](Tensor a) {
      return std::make_tuple(sum(a * a), max(a + 1.0f, {1}, true), sum(exp(a), {0}), mean(a * 3.0f, {1}));
    };
    CompiledCallable run = compile(f)(f32({6, 500}));
    std::vector<Tensor> in = {random::normal({6, 500}, 11)};
    auto [w0, w1, w2, w3] = f(in[0]);
    check_paths(run, in, 4, values_of({w0, w1, w2, w3}), 1e-4);
  }

  TEST_CASE("hot paths allocate only outputs: non-fused op steps (cumsum, concat) between fused ones") {
    auto f = [](Tensor x, Tensor y) {
      Tensor c = cumsum(exp(x * 0.1f), 1);
      Tensor k = concat({c, y * 2.0f}, 0);
      return k + 1.0f;
    };
    CompiledCallable run = compile(f)(f32({4, 50}), f32({3, 50}));
    REQUIRE(has_step(run, codegen::PlanStep::Kind::op));
    std::vector<Tensor> in = {random::normal({4, 50}, 12), random::normal({3, 50}, 13)};
    check_paths(run, in, 1, values_of({f(in[0], in[1])}), 1e-5);
  }

  TEST_CASE("hot paths allocate only outputs: var, std and logsumexp op steps (two-pass, with scratch)") {
    auto f = [](Tensor a) {
      return std::make_tuple(var(a * 2.0f, {1}), kiln::std(a + 1.0f, {0}, 0.0, true), logsumexp(a * 0.5f, {1}));
    };
    CompiledCallable run = compile(f)(f32({5, 40}));
    REQUIRE(has_step(run, codegen::PlanStep::Kind::op));
    std::vector<Tensor> in = {random::normal({5, 40}, 15)};
    auto [w0, w1, w2] = f(in[0]);
    check_paths(run, in, 3, values_of({w0, w1, w2}), 1e-5);
  }

  TEST_CASE("var's reused scratch: shapes that grow and shrink between calls, against a float64 reference") {
    for (int64_t n : {3, 700, 5, 70000, 2}) {
      CAPTURE(n);
      Tensor x = random::normal({2, n}, static_cast<uint64_t>(n));
      const std::vector<double> xv = kt::values(x);
      std::vector<double> want;
      for (int r = 0; r < 2; ++r) {
        double m = 0, ss = 0;
        for (int64_t j = 0; j < n; ++j) m += xv[r * n + j];
        m /= static_cast<double>(n);
        for (int64_t j = 0; j < n; ++j) ss += (xv[r * n + j] - m) * (xv[r * n + j] - m);
        want.push_back(ss / static_cast<double>(n - 1));
      }
      kt::check_all_close(var(x, {1}), want, 1e-4, 1e-6, "var");  // float32 accumulation over up to 70000 terms
    }
  }

  TEST_CASE("hot paths: a result that is a view of an intermediate keeps its values over later calls") {
    auto f = [](Tensor x) {
      Tensor t = matmul(x, x);
      return std::make_tuple(matmul(transpose(t), x + 1.0f), transpose(t));
    };
    CompiledCallable run = compile(f)(f32({8, 8}));
    Tensor x = random::normal({8, 8}, 14);
    auto [r0, r1] = run(x).as<std::tuple<Tensor, Tensor>>();
    const std::vector<double> want = kt::values(std::get<1>(f(x)));
    for (int i = 0; i < 3; ++i) (void)run(x * 3.0f);
    CHECK(kt::values(r1) == want);
  }
}

TEST_SUITE("alloc_free") {
  TEST_CASE("operator new is counted here: a vector's buffer counts once, a reserve that fits none") {
    uint64_t n = heap_allocations_in([] {
      std::vector<int> v;
      v.reserve(10);
      for (int i = 0; i < 10; ++i) v.push_back(i);
      CHECK(v[9] == 9);
    });
    CHECK(n == 1);
    n = heap_allocations_in([] { delete new int(3); });
    CHECK(n == 1);
  }

  TEST_CASE("a cached jit call of fixed structure allocates what the compiled call does: its outputs") {
    // The same function through jit and through compile, on the same
    // arguments; every result held, so each call makes its outputs anew.
    // jit's cached path gathers the leaves into an array and finds its entry
    // field by field: no TreeDef, layouts vector or std::function per call,
    // so its heap allocations are the compiled call's (the result's leaves
    // vector, its output tensor and buffer), and its buffer allocations the
    // outputs. Two shapes of arguments: two tensors, and a struct of two
    // tensors and a tensor (trace/pytree_fixed.h).
    auto f = [](Tensor a, Tensor b) { return a + b; };
    auto jf = jit(f);
    CompiledCallable run = compile(f)(f32({1}), f32({1}));
    const Tensor a = Tensor::from_vector(std::vector<float>{1.5f}, {1});
    const Tensor b = Tensor::from_vector(std::vector<float>{2.25f}, {1});
    std::vector<CallResult> held;
    held.reserve(64);  // no growth inside a counted call
    for (int i = 0; i < 2; ++i) {  // warm both: the compile, a first run, a second
      held.push_back(jf(a, b));
      held.push_back(run(a, b));
    }
    uint64_t heap_jit = 0, heap_run = 0, buffers_jit = 0;
    for (int i = 0; i < 3; ++i) {
      heap_jit = heap_allocations_in([&] { held.push_back(jf(a, b)); });
      heap_run = heap_allocations_in([&] { held.push_back(run(a, b)); });
      buffers_jit = allocations_in([&] { held.push_back(jf(a, b)); });
      CHECK(heap_jit == heap_run);
      CHECK(buffers_jit == 1);  // the one output
    }
    MESSAGE("heap allocations of one cached call, 1 output: jit " << heap_jit << ", compiled " << heap_run);
    for (const CallResult& r : held) CHECK(r.tensor().to_vector<float>() == std::vector<float>{3.75f});  // 1.5 + 2.25
    CHECK(jf.stats().misses == 1);
    CHECK(jf.stats().hits == 7);  // one warm call and two per round

    auto g = [](AfParams p, Tensor x) { return std::make_tuple(p.w * x + p.b, p.b - x); };
    auto jg = jit(g);
    CompiledCallable rg = compile(g)(AfParams{zeros({2}), zeros({2})}, f32({2}));
    const AfParams p{Tensor::from_vector(std::vector<float>{1, 2}, {2}), Tensor::from_vector(std::vector<float>{3, 4}, {2})};
    const Tensor x = Tensor::from_vector(std::vector<float>{10, 20}, {2});
    for (int i = 0; i < 2; ++i) {
      held.push_back(jg(p, x));
      held.push_back(rg(p, x));
    }
    for (int i = 0; i < 3; ++i) {
      heap_jit = heap_allocations_in([&] { held.push_back(jg(p, x)); });
      heap_run = heap_allocations_in([&] { held.push_back(rg(p, x)); });
      buffers_jit = allocations_in([&] { held.push_back(jg(p, x)); });
      CHECK(heap_jit == heap_run);
      CHECK(buffers_jit == 2);  // the two outputs
    }
    MESSAGE("heap allocations of one cached call, struct arguments, 2 outputs: jit " << heap_jit << ", compiled "
                                                                                     << heap_run);
    auto [y0, y1] = held.back().as<std::tuple<Tensor, Tensor>>();
    CHECK(y0.to_vector<float>() == std::vector<float>{13, 44});  // 1*10+3, 2*20+4
    CHECK(y1.to_vector<float>() == std::vector<float>{-7, -16});  // 3-10, 4-20
    CHECK(jg.stats().misses == 1);
  }

  TEST_CASE("many threads share one plan's reused arenas (each call takes its own)") {
    // Two matmul intermediates in the arena, and a result that views one.
    auto f = [](Tensor x, Tensor w) {
      Tensor t = matmul(x, w);
      Tensor u = matmul(relu(t), w);
      return std::make_tuple(u * 2.0f, transpose(t));
    };
    CompiledCallable run = compile(f)(f32({16, 16}), f32({16, 16}));
    REQUIRE(run.engine_model().artifact().plan().arena_bytes() > 0);
    std::vector<Tensor> xs, w0s, w1s;
    for (int t = 0; t < 4; ++t) {
      xs.push_back(random::normal({16, 16}, 100 + t));
      auto [a, b] = f(xs.back(), xs[0]);
      w0s.push_back(a);
      w1s.push_back(b);
    }
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&, t] {
        const std::vector<double> want0 = kt::values(w0s[t]), want1 = kt::values(w1s[t]);
        for (int i = 0; i < 40; ++i) {
          auto [a, b] = run(xs[t], xs[0]).as<std::tuple<Tensor, Tensor>>();
          const std::vector<double> ga = kt::values(a), gb = kt::values(b);
          for (size_t k = 0; k < ga.size(); ++k)
            if (!kt::close(ga[k], want0[k], 1e-4, 1e-4) || !kt::close(gb[k], want1[k], 1e-4, 1e-4)) ++bad;
        }
      });
    for (auto& t : ts) t.join();
    CHECK(bad == 0);
  }

  TEST_CASE("many threads calling one plan whose outputs are reused: each result keeps its own values") {
    // One call at a time owns the plan and reuses outputs dropped earlier;
    // calls running at the same time allocate theirs. Each thread drops its
    // previous results before the next call (so they are reusable) and
    // checks every element of the new ones against its own reference: two
    // calls handed one buffer would show the other thread's values.
    auto f = [](Tensor w, Tensor g) { return std::make_tuple(w - g * 0.5f, tanh(w) * g); };
    CompiledCallable run = compile(f)(f32({4, 8}), f32({4, 8}));
    std::vector<Tensor> ws, gs;
    std::vector<std::vector<double>> want0, want1;
    for (int t = 0; t < 4; ++t) {
      ws.push_back(random::normal({4, 8}, 200 + t));
      gs.push_back(random::normal({4, 8}, 300 + t));
      // float64 reference, element by element
      const std::vector<double> w = kt::values(ws.back()), g = kt::values(gs.back());
      std::vector<double> a(w.size()), b(w.size());
      for (size_t k = 0; k < w.size(); ++k) {
        a[k] = w[k] - g[k] * 0.5;
        b[k] = std::tanh(w[k]) * g[k];
      }
      want0.push_back(a);
      want1.push_back(b);
    }
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&, t] {
        std::vector<Tensor> r;
        for (int i = 0; i < 3000; ++i) {
          r.clear();  // dropped: the next call may reuse their memory
          r = run.execute_raw(std::vector<Tensor>{ws[t], gs[t]});
          const std::vector<double> a = kt::values(r[0]), b = kt::values(r[1]);
          for (size_t k = 0; k < a.size(); ++k)
            if (!kt::close(a[k], want0[t][k], 1e-6, 1e-6) || !kt::close(b[k], want1[t][k], 1e-5, 1e-5)) ++bad;
        }
      });
    for (auto& t : ts) t.join();
    CHECK(bad == 0);
    // Alone again, a call owns the plan: dropped outputs are reused (no allocation).
    std::vector<Tensor> r = run.execute_raw(std::vector<Tensor>{ws[0], gs[0]});
    r.clear();
    CHECK(allocations_in([&] { r = run.execute_raw(std::vector<Tensor>{ws[0], gs[0]}); }) == 0);
    const std::vector<double> a = kt::values(r[0]);
    for (size_t k = 0; k < a.size(); k += 31) CHECK(kt::close(a[k], want0[0][k], 1e-6, 1e-6));
  }

  TEST_CASE("a call reuses the outputs of an earlier call the caller dropped, never those it holds") {
    // A training step's shape: the results are fed back as the next call's
    // arguments, and the call before's results are then dropped.
    auto f = [](Tensor w, Tensor g) { return std::make_tuple(w - g * 0.5f, w * g); };
    CompiledCallable run = compile(f)(f32({64, 128}), f32({64, 128}));
    Tensor w = random::normal({64, 128}, 21), g = random::normal({64, 128}, 22);
    std::vector<Tensor> cur = run.execute_raw(std::vector<Tensor>{w, g});  // warm
    const std::vector<double> gv = kt::values(g);
    std::set<const void*> seen;
    for (int step = 0; step < 6; ++step) {
      const std::vector<double> wv = kt::values(cur[0]);
      std::vector<Tensor> next;
      const uint64_t n = allocations_in([&] { next = run.execute_raw(std::vector<Tensor>{cur[0], g}); });
      INFO("step " << step);
      // cur is held (it is an argument): never the next results' memory
      CHECK(next[0].data_ptr() != cur[0].data_ptr());
      CHECK(next[1].data_ptr() != cur[1].data_ptr());
      // from the second step on, the results dropped the step before are reused
      if (step >= 1) CHECK(n == 0);
      for (const Tensor& t : next) seen.insert(t.data_ptr());
      const std::vector<double> a = kt::values(next[0]), b = kt::values(next[1]);
      for (size_t k = 0; k < a.size(); k += 97) {
        CHECK(kt::close(a[k], wv[k] - gv[k] * 0.5, 1e-6, 1e-6));
        CHECK(kt::close(b[k], wv[k] * gv[k], 1e-6, 1e-6));
      }
      cur = std::move(next);  // the previous results dropped here
    }
    CHECK(seen.size() <= 6);  // two outputs, at most three buffers each in turn
    // A view of a dropped result keeps its memory from reuse.
    Tensor view = slice(cur[0], 0, 0, 1);
    const void* kept = cur[0].data_ptr();
    cur = run.execute_raw(std::vector<Tensor>{w, g});
    std::vector<Tensor> again = run.execute_raw(std::vector<Tensor>{w, g});
    CHECK(cur[0].data_ptr() != kept);
    CHECK(again[0].data_ptr() != kept);
    CHECK(view.data_ptr() == kept);
  }

  TEST_CASE("the outputs a plan keeps for reuse are bounded (16 MiB, two per output)") {
    // 12 outputs of 1 MiB: the first 8 (2 x 8 MiB kept) are reused once
    // dropped, the other 4 are allocated per call.
    auto f = [](Tensor x) {
      std::vector<Tensor> r;
      for (int i = 2; i <= 13; ++i) r.push_back(x * static_cast<float>(i));  // (x * 1 would be x itself)
      return r;
    };
    CompiledCallable run = compile(f)(f32({512, 512}));
    Tensor x = random::normal({512, 512}, 23);
    std::vector<Tensor> r = run.execute_raw(std::vector<Tensor>{x});  // warm
    r = run.execute_raw(std::vector<Tensor>{x});                       // fills the second slots
    r.clear();
    uint64_t n = allocations_in([&] { r = run.execute_raw(std::vector<Tensor>{x}); });
    CHECK(n == 4);
    const std::vector<double> xv = kt::values(x);
    for (size_t i = 0; i < r.size(); ++i) CHECK(kt::values(r[i])[777] == doctest::Approx(xv[777] * double(i + 2)));
  }

  TEST_CASE("a compiled call's large output reuses the block the previous result freed (no fresh pages per call)") {
    // The 4 MiB output of the 1M-element chain: once the previous call's
    // result is dropped, the next call takes the same block from the
    // allocator's cache (mapped, touched pages) instead of the system, which
    // would hand out fresh pages to fault and zero on first write.
    const size_t saved = buffer_cache_limit();
    set_buffer_cache_limit(size_t{64} << 20);
    constexpr int64_t n = 1 << 20;
    auto f = [](Tensor a, Tensor b, Tensor c) { return tanh(a * b + c) * 0.5f + exp(-a); };
    CompiledCallable run = compile(f)(f32({n}), f32({n}), f32({n}));
    REQUIRE(has_step(run, codegen::PlanStep::Kind::fused));
    Tensor a = random::uniform({n}, 0.0, 1.0, DType::float32, nullptr);
    Tensor b = random::uniform({n}, 0.0, 1.0, DType::float32, nullptr);
    Tensor c = random::uniform({n}, 0.0, 1.0, DType::float32, nullptr);
    const void* block = nullptr;
    { block = run(a, b, c).leaves[0].data_ptr(); }  // warm; its block goes to the cache
    const MemoryStats before = memory_stats();
    Tensor y;
    for (int i = 0; i < 5; ++i) {
      y = Tensor();  // the previous result freed first
      y = run(a, b, c).leaves[0];
      CHECK(y.data_ptr() == block);
    }
    const MemoryStats after = memory_stats();
    CHECK(after.allocations == before.allocations + 5);
    CHECK(after.cache_hits == before.cache_hits + 5);
    CHECK(after.bytes_in_use == before.bytes_in_use + size_t(n) * 4);
    // values: float64 reference at a spread of elements
    const std::vector<double> av = kt::values(a), bv = kt::values(b), cv = kt::values(c), yv = kt::values(y);
    for (int64_t k = 0; k < n; k += 4099) {
      const size_t j = size_t(k);
      CHECK(kt::close(yv[j], std::tanh(av[j] * bv[j] + cv[j]) * 0.5 + std::exp(-av[j]), 1e-6, 1e-6));
    }
    set_buffer_cache_limit(saved);
  }

  TEST_CASE("empty_cache drops the outputs and scratch compiled plans keep for reuse; calls go on right") {
    // (the new-user run t20: 64 layouts of a jit function with 8 outputs kept
    // 496 MiB after every result was dropped and empty_cache() was called)
    const size_t saved = buffer_cache_limit();
    set_buffer_cache_limit(size_t{64} << 20);
    empty_cache();
    const size_t base = memory_stats().bytes_in_use;
    auto f = [](Tensor x, Tensor w) { return std::make_tuple(x + 1.0f, exp(x) * 2.0f, matmul(x, w) + 1.0f); };
    Tensor x = random::uniform({64, 64}, 0.0, 1.0, DType::float32, nullptr);
    Tensor w = random::uniform({64, 64}, 0.0, 1.0, DType::float32, nullptr);
    auto check = [&](const CallResult& r) {
      const std::vector<double> xv = kt::values(x), wv = kt::values(w);
      const std::vector<double> a = kt::values(r.leaves[0]), e = kt::values(r.leaves[1]), m = kt::values(r.leaves[2]);
      for (size_t i = 0; i < xv.size(); i += 97) {
        CHECK(kt::close(a[i], xv[i] + 1.0, 1e-6, 1e-6));
        CHECK(kt::close(e[i], std::exp(xv[i]) * 2.0, 1e-6, 1e-6));
        double dot = 1.0;
        for (size_t k = 0; k < 64; ++k) dot += xv[i / 64 * 64 + k] * wv[k * 64 + i % 64];
        CHECK(kt::close(m[i], dot, 1e-5, 1e-5));
      }
    };
    {
      std::vector<CompiledCallable> runs;
      for (int k = 0; k < 4; ++k) runs.push_back(compile(f)(f32({64, 64}), f32({64, 64})));
      for (int rep = 0; rep < 3; ++rep)
        for (const CompiledCallable& run : runs) check(run(x, w));
      const size_t inputs = 2 * 64 * 64 * 4;
      const size_t outputs = 3 * 64 * 64 * 4;  // per call
      CHECK(memory_stats().bytes_in_use > base + inputs + outputs);  // the plans keep outputs for their next calls
      empty_cache();
      // what is left beside the inputs: the callables' constants (a few scalars)
      CHECK(memory_stats().bytes_in_use < base + inputs + 1024);
      CHECK(memory_stats().bytes_cached == 0);
      for (const CompiledCallable& run : runs) check(run(x, w));  // they allocate again, and are right
      // empty_cache while other threads call: a plan a call owns keeps its memory that call
      std::atomic<bool> stop{false};
      std::thread t([&] {
        while (!stop.load()) empty_cache();
      });
      for (int rep = 0; rep < 50; ++rep) check(runs[size_t(rep) % runs.size()](x, w));
      stop = true;
      t.join();
    }
    x = Tensor();
    w = Tensor();
    empty_cache();
    CHECK(memory_stats().bytes_in_use == base);
    set_buffer_cache_limit(saved);
  }
}
