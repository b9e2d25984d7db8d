// kiln benchmarks: what bench_minilm.cpp shares with its LibTorch peer
// (bench_minilm_torch.cpp): the weights as read by kiln's safetensors reader
// and the token ids, as plain arrays so the peer needs no kiln header.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kb::minilm_bench {

/// all-MiniLM-L6-v2's configuration (config.json).
inline constexpr int64_t kLayers = 6, kHidden = 384, kHeads = 12, kIntermediate = 1536;
inline constexpr double kLayerNormEps = 1e-12;

/// One float32 tensor, row-major, owned by bench_minilm.cpp for the whole run.
struct Weight {
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

/// Defined in bench_minilm.cpp: the tensors of data/minilm/model.safetensors
/// (kiln::read_safetensors) by their Hugging Face names, or the random
/// model's state_dict when the folder is missing.
const std::map<std::string, Weight>& weights();

/// Random token ids [n, L] (every token attended: mask all 1), row-major.
struct Tokens {
  int64_t n = 0, L = 0;
  std::vector<int64_t> ids, mask;
};
/// Defined in bench_minilm.cpp (the same ids kiln's benchmarks run).
Tokens tokens(int64_t n, int64_t L);

/// LibTorch's sentence embeddings of `t`, float32 [n, 384] row-major (empty
/// without LibTorch).
std::vector<float> torch_embed(const Tokens& t);

}  // namespace kb::minilm_bench
