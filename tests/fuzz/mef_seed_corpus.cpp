// Writes the fuzzer's seed corpus: real MEF files exported from a few
// compiled callables (elementwise chains, weights, reductions, matmul,
// static arguments, nested argument trees, constants, out-of-line calls),
// one file each, with their generated code (CODE) and execution plan (PLAN)
// except the last two (one with PLAN and no CODE, one with neither), into
// the folder given as the only argument. Together the PLAN sections hold
// every step kind: op, fused (with and without a reduction), row (and the
// softmax + log_softmax pair), fused_row, gemm (with a bias, a transposed
// operand), gemm_fused, column_sum.
#include <cstdio>
#include <filesystem>
#include <string>

#include <kiln/kiln.h>

#include "../../jit/mef.h"
#include "../../jit/mef_plan.h"

using namespace kiln;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mef_seed_corpus OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  auto f32 = [](Shape s) { return TensorLayout(DType::float32, std::move(s)); };
  int n = 0;
  auto save = [&](const CompiledCallable& c, bool source) {
    c.export_mef((dir / ("seed_" + std::to_string(n++) + ".mef")).string(), source);
  };
  save(compile([](Tensor a, Tensor b) { return tanh(a * b + 1.0f) - exp(-a); })(f32({4, 5}), f32({5})), false);
  save(compile([](Tensor x, Tensor w) { return softmax(matmul(x, w), -1); })(f32({3, 4}), f32({4, 2})), true);
  {
    nn::Linear lin(4, 3);
    CompileOptions o;
    o.weights = lin.state_dict();
    save(compile([&](Tensor x) { return relu(lin(x)); }, o)(f32({2, 4})), true);
  }
  save(compile([](std::pair<Tensor, Tensor> p, int k) {
         return std::make_tuple(p.first * static_cast<float>(k), sum(p.second, {0}));
       })(std::make_pair(f32({3}), f32({2, 3})), 3),
       false);
  {
    Tensor c = tensor({1.f, 2.f, 3.f});
    save(compile([c](Tensor x) { return where(x > c, x, c).to(DType::float64); })(f32({3})), false);
  }
  save(compile([](Tensor x) { return layer_norm(x) + max(x, {1}, true); })(TensorLayout(DType::float32, {2, 8})),
       false);
  // Out-of-line calls (float pow, sin's large-argument path): a CODE section
  // with relocations. Every file export_mef writes carries CODE; one without
  // it (the version 2 files written before it) keeps that path seeded too.
  save(compile([](Tensor a, Tensor b) { return sin(a) + pow(b, a); })(f32({7}), f32({7})), false);
  // Plans with every step kind (jit/mef_plan.h).
  save(compile([](Tensor x, Tensor w) { return tanh(matmul(x, w) + 0.5f) * 2.0f; })(f32({4, 8}), f32({8, 8})), false);
  save(compile([](Tensor x, Tensor w, Tensor b) {
         Tensor h = matmul(x, transpose(w, 0, 1)) + b;
         return std::make_tuple(softmax(h, -1), log_softmax(h, -1), sum(h * h, {0}));
       })(f32({6, 5}), f32({3, 5}), f32({3})),
       false);
  save(compile([](Tensor x, Tensor m) { return std::make_tuple(softmax(x * 0.25f + m, -1), sum(exp(x), {1})); })(
           f32({4, 16}), f32({4, 16})),
       false);
  save(compile([](Tensor x) { return cumsum(exp(x), 0) * 2.0f; })(f32({9})), false);
  {
    CompiledCallable c = compile([](Tensor x, Tensor w) { return relu(matmul(x, w) * 3.0f); })(f32({5, 6}), f32({6, 7}));
    const engine::CompiledModel& art = c.engine_model().artifact();
    mef::Contents m;
    m.graph_text = art.graph().to_text();
    m.signature = c.signature();
    m.weights = art.weight_slots();
    m.plan = mef::encode_plan(art.plan());
    mef::write_file_atomically((dir / ("seed_" + std::to_string(n++) + ".mef")).string(), mef::encode(m), "seed");
  }
  {
    CompiledCallable c = compile([](Tensor a) { return exp(a) * 3.0f; })(f32({5}));
    const engine::CompiledModel& art = c.engine_model().artifact();
    mef::Contents m;
    m.graph_text = art.graph().to_text();
    m.signature = c.signature();
    m.weights = art.weight_slots();
    mef::write_file_atomically((dir / ("seed_" + std::to_string(n++) + ".mef")).string(), mef::encode(m), "seed");
  }
  std::printf("mef_seed_corpus: wrote %d files to %s\n", n, dir.string().c_str());
  return 0;
}
