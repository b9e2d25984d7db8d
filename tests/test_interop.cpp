// Inter-op parallelism (jit/step_pairs.h): independent single-threaded GEMM
// steps large enough to pay for the handoff run at once, one per thread.
// Checked: which steps pair (size threshold, dependencies, the reordering
// that brings a later GEMM next to an earlier one), that the pair's results
// are bitwise those of the steps run in order (KILN_JIT_INTEROP=0) and of
// eager, on 1 and 2 threads, and against a float64 reference.
#include <cstdlib>
#include <filesystem>
#include <tuple>

#include "../backends/cpu/jit/small_gemm.h"
#include "../jit/engine.h"
#include "../jit/plan.h"
#include "../jit/step_pairs.h"
#include "ref_matmul.h"
#include "same_bits.h"
#include "test_util.h"

namespace {
using namespace kiln;
using codegen::PlanStep;
using kt::ref_matmul;
using kt::ThreadGuard;

const codegen::ExecutionPlan& plan_of(const CompiledCallable& c) { return c.engine_model().artifact().plan(); }
int pairs(const codegen::ExecutionPlan& p) {
  int n = 0;
  for (const auto& s : p.steps()) n += s.run_with_next;
  return n;
}
bool generated_target() { return codegen::detect_cpu_target() >= codegen::CpuTarget::avx2; }
TensorLayout f32(std::vector<int64_t> shape) { return TensorLayout(DType::float32, Shape(shape)); }

// KILN_JIT_INTEROP for the plans built in a scope.
struct InteropEnv {
  explicit InteropEnv(bool on) { setenv("KILN_JIT_INTEROP", on ? "1" : "0", 1); }
  ~InteropEnv() { unsetenv("KILN_JIT_INTEROP"); }
};

}  // namespace

TEST_SUITE("interop") {
  TEST_CASE("two independent 96^3 GEMMs run as a pair; bits equal the in-order plan's and eager's") {
    if (!generated_target()) return;
    const int64_t n = 96;
    // (a b + c d would fuse the add into the second GEMM's epilogue, which
    // then reads the first product: dependent)
    auto f = [](Tensor a, Tensor b, Tensor c, Tensor d) { return std::make_tuple(matmul(a, b), matmul(c, d)); };
    Tensor a = kt::random_tensor({n, n}, DType::float32, 1, false, 1.0);
    Tensor b = kt::random_tensor({n, n}, DType::float32, 2, false, 1.0);
    Tensor c = kt::random_tensor({n, n}, DType::float32, 3, false, 1.0);
    Tensor d = kt::random_tensor({n, n}, DType::float32, 4, false, 1.0);
    CompiledCallable paired = [&] {
      InteropEnv on(true);
      return compile(f)(f32({n, n}), f32({n, n}), f32({n, n}), f32({n, n}));
    }();
    CompiledCallable in_order = [&] {
      InteropEnv off(false);
      // a different function object: the jit cache must not hand back the paired plan
      auto g = [](Tensor a, Tensor b, Tensor c, Tensor d) { return std::make_tuple(matmul(a, b), matmul(c, d)); };
      return compile(g)(f32({n, n}), f32({n, n}), f32({n, n}), f32({n, n}));
    }();
    CHECK(pairs(plan_of(paired)) == 1);
    CHECK(pairs(plan_of(in_order)) == 0);
    const auto [ab, cd] = f(a, b, c, d);
    const std::vector<double> want_ab = ref_matmul(kt::values(a), kt::values(b), n, n, n);
    const std::vector<double> want_cd = ref_matmul(kt::values(c), kt::values(d), n, n, n);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      ThreadGuard t(threads);
      const auto ref = in_order(a, b, c, d);
      for (int rep = 0; rep < 20; ++rep) {
        const auto got = paired(a, b, c, d);
        CHECK(kt::same_bits(got.leaves[0], ref.leaves[0]));
        CHECK(kt::same_bits(got.leaves[1], ref.leaves[1]));
        CHECK(kt::same_bits(got.leaves[0], ab));
        CHECK(kt::same_bits(got.leaves[1], cd));
      }
      kt::check_all_close(ref.leaves[0], want_ab, 1e-5, 1e-4, "a b vs float64");
      kt::check_all_close(ref.leaves[1], want_cd, 1e-5, 1e-4, "c d vs float64");
    }
  }

  TEST_CASE("a later independent GEMM moves up beside an earlier one; dependent and small GEMMs never pair") {
    if (!generated_target()) return;
    // x w1 and the unrelated y w2 are separated by a softmax row step in
    // trace order; y w2 feeds a reduction (not a graph output, so it may move)
    auto moved = [](Tensor x, Tensor w1, Tensor y, Tensor w2) {
      Tensor h = softmax(tanh(matmul(x, w1)) * 0.5f, -1);
      return std::make_tuple(h, sum(exp(matmul(y, w2) * 0.01f), {1}));
    };
    const auto specs = std::make_tuple(f32({128, 64}), f32({64, 96}), f32({96, 64}), f32({64, 128}));
    CompiledCallable run = [&] {
      InteropEnv on(true);
      return std::apply(compile(moved), specs);
    }();
    CompiledCallable in_order = [&] {
      InteropEnv off(false);
      return std::apply(compile(moved), specs);
    }();
    CHECK(pairs(plan_of(run)) == 1);
    Tensor x = kt::random_tensor({128, 64}, DType::float32, 5, false, 1.0);
    Tensor w1 = kt::random_tensor({64, 96}, DType::float32, 6, false, 1.0);
    Tensor y = kt::random_tensor({96, 64}, DType::float32, 7, false, 1.0);
    Tensor w2 = kt::random_tensor({64, 128}, DType::float32, 8, false, 1.0);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      ThreadGuard t(threads);
      auto [h, z] = moved(x, w1, y, w2);
      const auto want = in_order(x, w1, y, w2);
      for (int rep = 0; rep < 10; ++rep) {
        auto out = run(x, w1, y, w2);
        CHECK(kt::same_bits(out.leaves[0], want.leaves[0]));
        CHECK(kt::same_bits(out.leaves[1], want.leaves[1]));
      }
      kt::check_all_close(want.leaves[0], kt::values(h), 1e-5, 1e-6, "softmax(tanh(x w1) / 2) vs eager");
      kt::check_all_close(want.leaves[1], kt::values(z), 1e-4, 1e-4, "sum(exp(y w2 / 100)) vs eager");
    }
    InteropEnv on(true);

    auto chained = [](Tensor a, Tensor b, Tensor c) { return matmul(matmul(a, b), c); };
    CHECK(pairs(plan_of(compile(chained)(f32({96, 96}), f32({96, 96}), f32({96, 96})))) == 0);
    auto small = [](Tensor a, Tensor b, Tensor c, Tensor d) { return std::make_tuple(matmul(a, b), matmul(c, d)); };
    CHECK(pairs(plan_of(compile(small)(f32({16, 16}), f32({16, 16}), f32({16, 16}), f32({16, 16})))) == 0);
    // 256^3 splits its own rows among the threads: not a single-threaded step
    auto big = [](Tensor a, Tensor b, Tensor c, Tensor d) { return std::make_tuple(matmul(a, b), matmul(c, d)); };
    CHECK(pairs(plan_of(compile(big)(f32({256, 256}), f32({256, 256}), f32({256, 256}), f32({256, 256})))) == 0);
  }

  TEST_CASE("the backward's two GEMMs of a 256-wide layer pair (the weight gradient and the input gradient)") {
    if (!generated_target()) return;
    InteropEnv on(true);
    // dW = x^T dy and dx = dy W^T read the same dy: independent of each other
    auto backward = [](Tensor x, Tensor w, Tensor dy) {
      return std::make_tuple(matmul(transpose(x), dy), matmul(dy, transpose(w)));
    };
    const int64_t B = 64, I = 96, O = 128;
    CompiledCallable run = compile(backward)(f32({B, I}), f32({I, O}), f32({B, O}));
    CHECK(pairs(plan_of(run)) == 1);
    CHECK(plan_of(run).describe(false).find("runs at once with the next step") != std::string::npos);
    Tensor x = kt::random_tensor({B, I}, DType::float32, 9, false, 1.0);
    Tensor w = kt::random_tensor({I, O}, DType::float32, 10, false, 1.0);
    Tensor dy = kt::random_tensor({B, O}, DType::float32, 11, false, 1.0);
    ThreadGuard t(2);
    auto [dw, dx] = backward(x, w, dy);
    for (int rep = 0; rep < 10; ++rep) {
      auto out = run(x, w, dy);
      CHECK(kt::same_bits(out.leaves[0], dw));
      CHECK(kt::same_bits(out.leaves[1], dx));
    }
  }

  TEST_CASE("a MEF file's PLAN keeps the pairs; read with pairing off, it plans again without them") {
    if (!generated_target()) return;
    auto backward = [](Tensor x, Tensor w, Tensor dy) {
      return std::make_tuple(matmul(transpose(x), dy), matmul(dy, transpose(w)));
    };
    const int64_t B = 64, I = 96, O = 128;
    CompiledCallable run = [&] {
      InteropEnv on(true);
      return compile(backward)(f32({B, I}), f32({I, O}), f32({B, O}));
    }();
    const std::string path = (std::filesystem::temp_directory_path() / "kiln_test_interop.mef").string();
    {
      InteropEnv on(true);
      run.export_mef(path);
    }
    Tensor x = kt::random_tensor({B, I}, DType::float32, 12, false, 1.0);
    Tensor w = kt::random_tensor({I, O}, DType::float32, 13, false, 1.0);
    Tensor dy = kt::random_tensor({B, O}, DType::float32, 14, false, 1.0);
    const auto want = backward(x, w, dy);
    const std::vector<Tensor> in = {x, w, dy};
    ThreadGuard t(2);
    for (bool on : {true, false}) {
      CAPTURE(on);
      InteropEnv env(on);
      auto art = engine::read(path);
      CHECK(pairs(art->plan()) == (on ? 1 : 0));
      const std::string& note = art->plan().read_note();
      if (on) CHECK(note == "");
      else CHECK(note.find("no inter-op pairs") != std::string::npos);
      engine::Model m(art, {});
      const std::vector<Tensor> got = m.execute(in);
      CHECK(kt::same_bits(got[0], std::get<0>(want)));
      CHECK(kt::same_bits(got[1], std::get<1>(want)));
    }
    std::filesystem::remove(path);
  }

  TEST_CASE("pairing is off with KILN_JIT_INTEROP=0") {
    InteropEnv off(false);
    CHECK_FALSE(codegen::interop_enabled());
  }
}
