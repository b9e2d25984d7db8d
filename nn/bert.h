// kiln: a BERT encoder (Devlin et al. 2019) from nn modules, laid out and
// named as Hugging Face's BertModel so a published safetensors file loads by
// name ("embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.
// query.weight", ...), and sentence embeddings as sentence-transformers makes
// them (mean pooling over the attention mask, L2 normalisation), e.g.
// all-MiniLM-L6-v2. Inference only: no dropout.
//
// Each BertLayer is marked as a subgraph: traced, the encoder's layers share
// one body and become one call per layer.
//
// Inside the encoder the hidden states are 2-d [n * L, hidden] so every
// Linear is one 2-d GEMM (a bound BLAS call in compiled plans); attention
// reshapes to [n, heads, L, head_dim] for its two batched products.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "layers.h"

namespace kiln::nn {

/// The hyper-parameters of a BERT encoder (Hugging Face's config.json names).
/// The defaults are all-MiniLM-L6-v2's.
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 384;
  int64_t num_hidden_layers = 6;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 1536;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;

  /// Reads a Hugging Face config.json. Throws IoError when the file cannot be
  /// read or is not a JSON object, ValueError for a missing or non-integer
  /// size, a hidden_act other than "gelu" (erf GELU, the only one built), or
  /// sizes that do not fit (hidden_size not a multiple of the head count).
  static BertConfig from_json_file(const std::string& path);
  /// Throws ValueError naming the first size that is not positive, or a
  /// hidden_size that the head count does not divide.
  void validate() const;
};

/// Token embeddings: LayerNorm(word[ids] + position[0..L) + token_type[0]).
/// Every token has token type 0 (one sentence per row).
class BertEmbeddings : public Module {
 public:
  explicit BertEmbeddings(const BertConfig& c);
  /// ids int32/int64 [n, L] (L <= max_position_embeddings, else ValueError)
  /// -> float32 [n * L, hidden] (rows in (sentence, position) order).
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override { return "BertEmbeddings"; }

 private:
  std::shared_ptr<Embedding> word_, position_, token_type_;
  std::shared_ptr<LayerNorm> norm_;
  int64_t max_positions_;
};

/// Multi-head scaled dot-product self-attention (query, key, value Linears).
class BertSelfAttention : public Module {
 public:
  explicit BertSelfAttention(const BertConfig& c);
  /// x float32 [n * L, hidden], mask_bias float32 [n, 1, 1, L] (0 for a
  /// token, a large negative number for padding; see attention_mask_bias)
  /// -> the heads' context [n * L, hidden]:
  /// softmax(q k^T / sqrt(head_dim) + mask_bias) v per head.
  Tensor forward(const Tensor& x, const Tensor& mask_bias);
  /// Throws ValueError: self-attention needs the mask (forward(x, mask_bias)).
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BertSelfAttention"; }

 private:
  std::shared_ptr<Linear> query_, key_, value_;
  int64_t heads_;
};

/// LayerNorm(dense(x) + residual): BERT's attention.output and output blocks.
class BertResidualOutput : public Module {
 public:
  BertResidualOutput(int64_t in_features, int64_t hidden, double eps);
  /// x [rows, in_features], residual [rows, hidden] -> [rows, hidden].
  Tensor forward(const Tensor& x, const Tensor& residual);
  /// Throws ValueError: the block needs its residual (forward(x, residual)).
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BertResidualOutput"; }

 private:
  std::shared_ptr<Linear> dense_;
  std::shared_ptr<LayerNorm> norm_;
};

/// One transformer layer: attention (self, output), intermediate (dense,
/// erf GELU), output (dense, residual, LayerNorm). Marked as a subgraph.
class BertLayer : public Module {
 public:
  explicit BertLayer(const BertConfig& c);
  /// x [n * L, hidden], mask_bias [n, 1, 1, L] -> [n * L, hidden]; one
  /// subgraph call while tracing (Module::call_module).
  Tensor operator()(const Tensor& x, const Tensor& mask_bias);
  using Module::operator();
  Tensor forward(const Tensor& x, const Tensor& mask_bias);
  /// Throws ValueError: a layer needs the mask (layer(x, mask_bias)).
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BertLayer"; }

 private:
  std::shared_ptr<BertSelfAttention> self_;
  std::shared_ptr<BertResidualOutput> attn_out_, out_;
  std::shared_ptr<Linear> intermediate_;
};

/// The additive attention mask: [n, L] (1 = token, 0 = padding; any
/// integer or float dtype) -> float32 [n, 1, 1, L], 0 where mask is 1 and
/// float32's lowest value where it is 0 (as Hugging Face's BertModel).
/// A realized mask holding any other value (2, 0.5, NaN) throws ValueError
/// naming attention_mask and the first such value; a traced mask (inside
/// jit/compile) is not checked: its values must be 0 or 1.
Tensor attention_mask_bias(const Tensor& attention_mask);

/// BertModel without its pooler: embeddings, then the encoder's layers.
class BertModel : public Module {
 public:
  explicit BertModel(const BertConfig& c = {});
  /// input_ids int32/int64 [n, L], attention_mask [n, L] (1 = token,
  /// 0 = padding) -> the last hidden states float32 [n, L, hidden]. Throws
  /// ShapeError when the two shapes differ or are not 2-d; ValueError for a
  /// mask value other than 0 or 1 (attention_mask_bias) and IndexError for
  /// a token id outside [0, vocab_size), negative included (embedding).
  Tensor forward(const Tensor& input_ids, const Tensor& attention_mask);
  /// forward(input_ids, ones): every token attended to.
  Tensor forward(const Tensor& input_ids) override;
  std::string type_name() const override { return "BertModel"; }
  const BertConfig& config() const { return config_; }

 private:
  BertConfig config_;
  std::shared_ptr<BertEmbeddings> embeddings_;
  std::shared_ptr<ModuleList> layers_;
};

/// The mean of `hidden` [n, L, d] over the tokens where `attention_mask`
/// [n, L] is 1, [n, d] (a row without tokens divides by 1e-9, as
/// sentence-transformers' pooling: zeros).
Tensor mean_pool(const Tensor& hidden, const Tensor& attention_mask);
/// Each row of x [n, d] divided by max(||row||_2, 1e-12) (torch's F.normalize).
Tensor l2_normalize(const Tensor& x);

/// Sentence embeddings as sentence-transformers computes them for a BERT
/// model: l2_normalize(mean_pool(model(ids, mask), mask)), float32 [n, hidden].
Tensor sentence_embedding(BertModel& model, const Tensor& input_ids, const Tensor& attention_mask);

/// Loads a Hugging Face BERT safetensors file into `model` by name. Every
/// parameter must be in the file with its shape and dtype, and every tensor
/// of the file must be a parameter, except the two that BertModel holds but
/// this encoder does not use: `embeddings.position_ids` (the constant
/// 0..max_positions-1 buffer) and `pooler.dense.*` (the [CLS] pooler, unused
/// by mean pooling). Throws IoError for an unreadable or malformed (e.g. truncated)
/// file (read_safetensors) and ValueError naming the tensor for a missing,
/// extra or mis-shaped one; the model is unchanged then.
void load_bert_safetensors(BertModel& model, const std::string& path);

}  // namespace kiln::nn
