// all-MiniLM-L6-v2 forward (examples/minilm.h's encoder: 6 BERT layers,
// mean pooling, L2 normalisation) at batch 1 x 16 tokens (latency) and
// 32 x 128 tokens (throughput), 1 and 2 threads: kiln eager and compiled,
// beside LibTorch running the same forward in C++ from the same weights
// (bench_minilm_torch.cpp, when libtorch-dev is installed; its embeddings
// are checked against kiln's first) and the GEMM floor: the forward's GEMMs
// alone (per layer Q, K, V, the attention output, the two feed-forward
// products, and per sentence and head the scores and context products),
// called directly through OpenBLAS's cblas_sgemm on buffers allocated once.
// Compiled / floor shows what the rest of the plan (softmax, layer_norm,
// GELU, copies) costs. Also the encoder's compile time, cold (a new session)
// and read back from its MEF file.
// Weights: data/minilm when present (scripts/fetch_minilm.sh), else random
// (same shapes, same speed). Inputs: random token ids, every token attended.
// CPU times are process-wide (MeasureProcessCPUTime): on a loaded machine
// they show what each run consumed when wall times swing.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <kiln/kiln.h>
#include <memory>
#include <sstream>
#include <vector>

#include "../jit/engine.h"
#include "bench_minilm.h"
#include "bench_peers.h"
#include "bench_report.h"
#include "minilm.h"

#ifndef KILN_MINILM_DIR
#define KILN_MINILM_DIR "data/minilm"
#endif

namespace {
using kiln::Tensor;

// The model: the published weights when fetched, else a random BertModel.
struct Model {
  std::unique_ptr<minilm::Encoder> enc;          // with the weights
  std::shared_ptr<kiln::nn::BertModel> random;   // without
  kiln::nn::BertModel& model() const { return enc ? enc->model() : *random; }
};
const Model& model() {
  static const Model m = [] {
    Model out;
    if (std::filesystem::exists(KILN_MINILM_DIR "/model.safetensors"))
      out.enc = std::make_unique<minilm::Encoder>(KILN_MINILM_DIR);
    else
      out.random = std::make_shared<kiln::nn::BertModel>();
    return out;
  }();
  return m;
}

minilm::Batch inputs(int64_t n, int64_t L) {
  const kb::minilm_bench::Tokens t = kb::minilm_bench::tokens(n, L);
  return {Tensor::from_vector(t.ids, {n, L}), Tensor::from_vector(t.mask, {n, L})};
}

void BM_kiln_eager_minilm(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(2)));
  const minilm::Batch b = inputs(st.range(0), st.range(1));
  auto& m = model().model();
  kiln::nn::sentence_embedding(m, b.input_ids, b.attention_mask).realize();  // warm-up
  for (auto _ : st) kiln::nn::sentence_embedding(m, b.input_ids, b.attention_mask).realize();
}

void BM_kiln_compiled_minilm(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(2)));
  const minilm::Batch b = inputs(st.range(0), st.range(1));
  auto& m = model().model();
  kiln::CompileOptions o;
  o.weights = m.state_dict();
  auto fn = [&m](Tensor ids, Tensor mask) { return kiln::nn::sentence_embedding(m, ids, mask); };
  const kiln::CompiledCallable run = kiln::compile(fn, o)(b.input_ids, b.attention_mask);
  run(b.input_ids, b.attention_mask);  // warm-up
  for (auto _ : st) benchmark::DoNotOptimize(run(b.input_ids, b.attention_mask));
}

// Compile time of the encoder for one shape (stage + optimise + generate),
// cold: a new session each time, so nothing comes from its cache.
void BM_kiln_compile_minilm(benchmark::State& st) {
  kb::set_threads(1);
  const minilm::Batch b = inputs(1, 16);
  auto& m = model().model();
  kiln::CompileOptions o;
  o.weights = m.state_dict();
  auto fn = [&m](Tensor ids, Tensor mask) { return kiln::nn::sentence_embedding(m, ids, mask); };
  for (auto _ : st) {
    o.session = std::make_shared<kiln::InferenceSession>();
    benchmark::DoNotOptimize(kiln::compile(fn, o)(b.input_ids, b.attention_mask));
  }
}

// The same encoder read back from its MEF file (bytes in memory): parse,
// verify, optimise and plan for this CPU, no tracing.
void BM_kiln_mef_read_minilm(benchmark::State& st) {
  kb::set_threads(1);
  const minilm::Batch b = inputs(1, 16);
  auto& m = model().model();
  kiln::CompileOptions o;
  o.weights = m.state_dict();
  auto fn = [&m](Tensor ids, Tensor mask) { return kiln::nn::sentence_embedding(m, ids, mask); };
  const std::string path = (std::filesystem::temp_directory_path() / "kiln_bench_minilm.mef").string();
  kiln::compile(fn, o)(b.input_ids, b.attention_mask).export_mef(path);
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  std::filesystem::remove(path);
  for (auto _ : st) benchmark::DoNotOptimize(kiln::engine::read_bytes(bytes, "minilm", std::make_shared<kiln::InferenceSession>()));
  st.counters["file_bytes"] = static_cast<double>(bytes.size());
}

// The forward's GEMMs alone, through cblas_sgemm (row-major, weights
// transposed as Linear uses them). Each layer has its own weights, as the
// model has (42 MB in all): at batch 1 the forward streams them from memory,
// and one shared set would stay in cache and make the floor too low.
void BM_gemm_floor_minilm(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(2)));
  const kiln::nn::BertConfig c;
  const int64_t n = st.range(0), L = st.range(1), T = n * L, H = c.hidden_size, I = c.intermediate_size,
                heads = c.num_attention_heads, d = H / heads;
  std::vector<float> x(T * H, 0.01f), q(T * H), k(T * H), v(T * H), ctx(T * H), a(T * H), inter(T * I), out(T * H),
      scores(L * L);
  struct Weights {
    std::vector<float> q, k, v, o, i, o2;
  };
  std::vector<Weights> lw;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    lw.push_back({std::vector<float>(H * H, 0.02f), std::vector<float>(H * H, 0.02f), std::vector<float>(H * H, 0.02f),
                  std::vector<float>(H * H, 0.02f), std::vector<float>(I * H, 0.02f), std::vector<float>(H * I, 0.02f)});
  auto linear = [](const float* in, const float* wt, float* o, int64_t rows, int64_t in_f, int64_t out_f) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(out_f),
                static_cast<int>(in_f), 1.0f, in, static_cast<int>(in_f), wt, static_cast<int>(in_f), 0.0f, o,
                static_cast<int>(out_f));
  };
  auto layer = [&](const Weights& w) {
    linear(x.data(), w.q.data(), q.data(), T, H, H);
    linear(x.data(), w.k.data(), k.data(), T, H, H);
    linear(x.data(), w.v.data(), v.data(), T, H, H);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off = s * L * H + h * d;  // head h of sentence s: rows of stride H
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(L), static_cast<int>(L),
                    static_cast<int>(d), 1.0f, q.data() + off, static_cast<int>(H), k.data() + off,
                    static_cast<int>(H), 0.0f, scores.data(), static_cast<int>(L));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(L), static_cast<int>(d),
                    static_cast<int>(L), 1.0f, scores.data(), static_cast<int>(L), v.data() + off,
                    static_cast<int>(H), 0.0f, ctx.data() + off, static_cast<int>(H));
      }
    linear(ctx.data(), w.o.data(), a.data(), T, H, H);
    linear(a.data(), w.i.data(), inter.data(), T, H, I);
    linear(inter.data(), w.o2.data(), out.data(), T, I, H);
  };
  for (const Weights& w : lw) layer(w);  // warm-up
  for (auto _ : st) {
    for (const Weights& w : lw) layer(w);
    benchmark::DoNotOptimize(out.data());
  }
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2}) {
    b->Args({1, 16, t});
    b->Args({32, 128, t});
  }
  b->ArgNames({"n", "L", "threads"})->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_kiln_eager_minilm)->Apply(shapes);
BENCHMARK(BM_kiln_compiled_minilm)->Apply(shapes);
BENCHMARK(BM_gemm_floor_minilm)->Apply(shapes);
BENCHMARK(BM_kiln_compile_minilm)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_kiln_mef_read_minilm)->UseRealTime()->Unit(benchmark::kMillisecond);

// kiln compiled vs LibTorch on the benchmarks' inputs: the largest
// |difference| of the embeddings, printed under the table (LibTorch's
// timings measure a wrong result when it is large).
std::string check_torch() {
  constexpr double kTolerance = 1e-5;  // float32 rounding through 6 layers: measured ~1e-7
  std::string out = "Same math: largest |embedding(LibTorch) - embedding(kiln compiled)|:";
  bool bad = false;
  kb::set_threads(1);
  for (auto [n, L] : {std::pair<int64_t, int64_t>{1, 16}, std::pair<int64_t, int64_t>{32, 128}}) {
    const std::vector<float> t = kb::minilm_bench::torch_embed(kb::minilm_bench::tokens(n, L));
    if (t.empty()) return "LibTorch peer: not built (needs libtorch-dev and -DKILN_BENCH_LIBTORCH=ON).";
    const minilm::Batch b = inputs(n, L);
    auto& m = model().model();
    kiln::CompileOptions o;
    o.weights = m.state_dict();
    auto fn = [&m](Tensor ids, Tensor mask) { return kiln::nn::sentence_embedding(m, ids, mask); };
    const std::vector<float> k =
        kiln::compile(fn, o)(b.input_ids, b.attention_mask)(b.input_ids, b.attention_mask).leaves[0].to_vector<float>();
    double worst = k.size() == t.size() ? 0.0 : INFINITY;
    for (size_t i = 0; i < k.size() && i < t.size(); ++i) worst = std::max(worst, std::fabs(double(k[i]) - t[i]));
    char buf[96];
    std::snprintf(buf, sizeof buf, " batch %lld x %lld: %.2g;", static_cast<long long>(n), static_cast<long long>(L), worst);
    out += buf;
    bad |= !(worst <= kTolerance);
  }
  if (bad) out += "\n\n**WARNING: LibTorch's embeddings differ from kiln's by more than 1e-5: its timings measure a wrong result.**";
  return out;
}

}  // namespace

namespace kb::minilm_bench {
const std::map<std::string, Weight>& weights() {
  static const std::map<std::string, kiln::Tensor> tensors = [] {
    const std::string file = KILN_MINILM_DIR "/model.safetensors";
    if (std::filesystem::exists(file)) return kiln::read_safetensors(file);
    std::map<std::string, kiln::Tensor> sd;
    for (const auto& [name, t] : model().model().state_dict()) sd.emplace(name, t.contiguous());
    return sd;
  }();
  static const std::map<std::string, Weight> out = [] {
    std::map<std::string, Weight> w;
    for (const auto& [name, t] : tensors)
      if (t.dtype() == kiln::DType::float32)
        w[name] = {std::vector<int64_t>(t.shape().begin(), t.shape().end()), static_cast<const float*>(t.data_ptr())};
    return w;
  }();
  return out;
}

Tokens tokens(int64_t n, int64_t L) {
  kiln::random::Generator gen(42);
  const Tensor ids = kiln::cast(kiln::random::uniform({n, L}, 1000, 30000, kiln::DType::float32, &gen), kiln::DType::int64);
  return {n, L, ids.contiguous().to_vector<int64_t>(), std::vector<int64_t>(static_cast<size_t>(n * L), 1)};
}

// Replaced by bench_minilm_torch.cpp's when LibTorch is built in.
__attribute__((weak)) std::vector<float> torch_embed(const Tokens&) { return {}; }
}  // namespace kb::minilm_bench

int main(int argc, char** argv) {
  using kb::compare;
  for (int t : {1, 2})
    for (auto [n, L] : {std::pair{1, 16}, std::pair{32, 128}}) {
      const std::string s = "/n:" + std::to_string(n) + "/L:" + std::to_string(L) + "/threads:" + std::to_string(t) +
                            "/process_time/real_time";
      const std::string what = "MiniLM forward, batch " + std::to_string(n) + " x " + std::to_string(L) + " tokens, " +
                               std::to_string(t) + " thread(s)";
      compare({what + ", vs LibTorch", "BM_kiln_compiled_minilm" + s, {"BM_torch_minilm" + s},
               n == 1 ? "<= 0.5x LibTorch; compiled >= 1.3x faster than eager" : "<= 0.7x LibTorch",
               "BM_kiln_eager_minilm" + s, false, {}, true});
      compare({what + ", vs its GEMM floor", "BM_kiln_compiled_minilm" + s, {"BM_gemm_floor_minilm" + s},
               "within 1.25x of the GEMM floor", "BM_kiln_eager_minilm" + s, false, {}, true});
    }
  compare({"compile the MiniLM encoder (1 x 16, cold: a new session)", "BM_kiln_compile_minilm/real_time", {},
           "reported (no target)", "", true});
  compare({"read the MiniLM encoder back from its MEF (1 x 16)", "BM_kiln_mef_read_minilm/real_time", {},
           "reported (no target)", "", true});
  kb::note(check_torch());
  kb::note(std::string("MiniLM weights: ") +
           (model().enc ? "data/minilm (the published all-MiniLM-L6-v2)" : "random (data/minilm missing)") + ".");
  return kb::run_main(argc, argv, "all-MiniLM-L6-v2 sentence embeddings (main job)");
}
