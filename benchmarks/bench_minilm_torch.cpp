// LibTorch peer for bench_minilm (built only when libtorch-dev is installed):
// the all-MiniLM-L6-v2 forward written with ATen ops as Hugging Face's
// BertModel (eager attention) runs it, under InferenceMode, from the tensors
// kiln's safetensors reader loaded (wrapped with from_blob, not copied):
// embeddings + LayerNorm, per layer Q/K/V linears, scores * 1/sqrt(d) + mask,
// softmax, context, output linear + residual + LayerNorm, erf GELU feed
// forward + residual + LayerNorm; mean pooling over the mask, L2 normalised.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "bench_minilm.h"
#include "bench_torch_peers.h"

namespace {
namespace mb = kb::minilm_bench;

at::Tensor w(const std::string& name) {
  const mb::Weight& t = mb::weights().at(name);
  return at::from_blob(const_cast<float*>(t.data), t.shape, at::kFloat);
}

struct TorchBert {
  struct Layer {
    at::Tensor qw, qb, kw, kb, vw, vb, ow, ob, ln1w, ln1b, iw, ib, o2w, o2b, ln2w, ln2b;
  };
  at::Tensor word, pos, type, lnw, lnb;
  std::vector<Layer> layers;
  TorchBert() {
    word = w("embeddings.word_embeddings.weight");
    pos = w("embeddings.position_embeddings.weight");
    type = w("embeddings.token_type_embeddings.weight");
    lnw = w("embeddings.LayerNorm.weight");
    lnb = w("embeddings.LayerNorm.bias");
    for (int64_t i = 0; i < mb::kLayers; ++i) {
      const std::string p = "encoder.layer." + std::to_string(i) + ".";
      layers.push_back({w(p + "attention.self.query.weight"), w(p + "attention.self.query.bias"),
                        w(p + "attention.self.key.weight"), w(p + "attention.self.key.bias"),
                        w(p + "attention.self.value.weight"), w(p + "attention.self.value.bias"),
                        w(p + "attention.output.dense.weight"), w(p + "attention.output.dense.bias"),
                        w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias"),
                        w(p + "intermediate.dense.weight"), w(p + "intermediate.dense.bias"),
                        w(p + "output.dense.weight"), w(p + "output.dense.bias"), w(p + "output.LayerNorm.weight"),
                        w(p + "output.LayerNorm.bias")});
    }
  }
  at::Tensor forward(const at::Tensor& ids, const at::Tensor& mask) const {
    const int64_t n = ids.size(0), L = ids.size(1), H = mb::kHidden, h = mb::kHeads, d = H / h;
    const double eps = mb::kLayerNormEps, scale = 1.0 / std::sqrt(static_cast<double>(d));
    at::Tensor x = at::embedding(word, ids) + type[0] + pos.slice(0, 0, L);  // HF's order of the sums
    x = at::layer_norm(x, {H}, lnw, lnb, eps);
    const at::Tensor fmask = mask.to(at::kFloat);
    const at::Tensor bias = ((1.0 - fmask) * std::numeric_limits<float>::lowest()).view({n, 1, 1, L});
    auto heads = [&](const at::Tensor& t) { return t.view({n, L, h, d}).transpose(1, 2); };
    for (const Layer& l : layers) {
      const at::Tensor q = heads(at::linear(x, l.qw, l.qb)), k = heads(at::linear(x, l.kw, l.kb)),
                       v = heads(at::linear(x, l.vw, l.vb));
      const at::Tensor p = at::softmax(at::matmul(q, k.transpose(-1, -2)) * scale + bias, -1);
      const at::Tensor ctx = at::matmul(p, v).transpose(1, 2).reshape({n, L, H});
      const at::Tensor a = at::layer_norm(at::linear(ctx, l.ow, l.ob) + x, {H}, l.ln1w, l.ln1b, eps);
      const at::Tensor i = at::gelu(at::linear(a, l.iw, l.ib));  // erf form (approximate = "none")
      x = at::layer_norm(at::linear(i, l.o2w, l.o2b) + a, {H}, l.ln2w, l.ln2b, eps);
    }
    const at::Tensor m = fmask.unsqueeze(-1);
    const at::Tensor pooled = (x * m).sum(1) / m.sum(1).clamp_min(1e-9);
    return pooled / pooled.norm(2, {1}, /*keepdim=*/true).clamp_min(1e-12);
  }
};

const TorchBert& model() {
  static const TorchBert m;
  return m;
}

struct TorchTokens {
  at::Tensor ids, mask;
  explicit TorchTokens(const mb::Tokens& t)
      : ids(at::from_blob(const_cast<int64_t*>(t.ids.data()), {t.n, t.L}, at::kLong).clone()),
        mask(at::from_blob(const_cast<int64_t*>(t.mask.data()), {t.n, t.L}, at::kLong).clone()) {}
};

void BM_torch_minilm(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(2)));
  const TorchTokens t(mb::tokens(st.range(0), st.range(1)));
  c10::InferenceMode guard;
  const TorchBert& m = model();
  m.forward(t.ids, t.mask);  // warm-up
  for (auto _ : st) benchmark::DoNotOptimize(m.forward(t.ids, t.mask));
}
BENCHMARK(BM_torch_minilm)
    ->Args({1, 16, 1})
    ->Args({32, 128, 1})
    ->Args({1, 16, 2})
    ->Args({32, 128, 2})
    ->ArgNames({"n", "L", "threads"})
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
}  // namespace

namespace kb::minilm_bench {
std::vector<float> torch_embed(const Tokens& t) {
  c10::InferenceMode guard;
  const TorchTokens tt(t);
  const at::Tensor e = model().forward(tt.ids, tt.mask).contiguous();
  return std::vector<float>(e.data_ptr<float>(), e.data_ptr<float>() + e.numel());
}
}  // namespace kb::minilm_bench
