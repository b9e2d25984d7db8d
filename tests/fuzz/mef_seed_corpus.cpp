// Writes the fuzzer's seed corpus: real MEF files exported from a few
// compiled callables (elementwise chains, weights, reductions, matmul,
// static arguments, nested argument trees, constants, out-of-line calls),
// one file each, with their generated code (CODE) except the last, into the
// folder given as the only argument.
#include <cstdio>
#include <filesystem>
#include <string>

#include <kiln/kiln.h>

#include "../../jit/mef.h"

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
