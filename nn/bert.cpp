#include "bert.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "../io/csv.h"  // IoError
#include "../io/file_bytes.h"
#include "../io/safetensors.h"
#include "../tensor/creation.h"
#include "../tensor/num_str.h"
#include "../tensor/ops.h"

namespace kiln::nn {

namespace {

// A module that only holds children (Hugging Face's "attention",
// "encoder"...), so paths match the published names.
class Group : public Module {
 public:
  explicit Group(std::string type) : type_(std::move(type)) {}
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return register_module(name, std::move(m));
  }
  Tensor forward(const Tensor&) override { throw Error(type_ + ": holds modules only; it has no forward"); }
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
};

int64_t json_size(const nlohmann::json& j, const char* key, int64_t fallback, const std::string& path) {
  if (!j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_number_integer())
    throw ValueError("BertConfig: '" + path + "': \"" + key + "\" must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

}  // namespace

// ---- config -------------------------------------------------------------------------

void BertConfig::validate() const {
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", vocab_size},           {"hidden_size", hidden_size},
      {"num_hidden_layers", num_hidden_layers}, {"num_attention_heads", num_attention_heads},
      {"intermediate_size", intermediate_size}, {"max_position_embeddings", max_position_embeddings},
      {"type_vocab_size", type_vocab_size}};
  for (const auto& [name, v] : sizes)
    if (v <= 0) throw ValueError(std::string("BertConfig: ") + name + " must be positive, got " + std::to_string(v));
  if (hidden_size % num_attention_heads != 0)
    throw ValueError("BertConfig: hidden_size " + std::to_string(hidden_size) + " is not a multiple of " +
                     "num_attention_heads " + std::to_string(num_attention_heads));
  if (!(layer_norm_eps > 0)) throw ValueError("BertConfig: layer_norm_eps must be positive");
}

BertConfig BertConfig::from_json_file(const std::string& path) {
  const std::string text = io_detail::read_file_bytes(path, "BertConfig");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw IoError("BertConfig: '" + path + "' is not a JSON object");
  BertConfig c;
  c.vocab_size = json_size(j, "vocab_size", c.vocab_size, path);
  c.hidden_size = json_size(j, "hidden_size", c.hidden_size, path);
  c.num_hidden_layers = json_size(j, "num_hidden_layers", c.num_hidden_layers, path);
  c.num_attention_heads = json_size(j, "num_attention_heads", c.num_attention_heads, path);
  c.intermediate_size = json_size(j, "intermediate_size", c.intermediate_size, path);
  c.max_position_embeddings = json_size(j, "max_position_embeddings", c.max_position_embeddings, path);
  c.type_vocab_size = json_size(j, "type_vocab_size", c.type_vocab_size, path);
  if (j.contains("layer_norm_eps")) {
    if (!j["layer_norm_eps"].is_number()) throw ValueError("BertConfig: '" + path + "': layer_norm_eps must be a number");
    c.layer_norm_eps = j["layer_norm_eps"].get<double>();
  }
  if (j.contains("hidden_act") && j["hidden_act"] != "gelu")
    throw ValueError("BertConfig: '" + path + "': hidden_act " + j["hidden_act"].dump() +
                     " is not supported (only \"gelu\", the erf form)");
  c.validate();
  return c;
}

// ---- embeddings ------------------------------------------------------------------------

BertEmbeddings::BertEmbeddings(const BertConfig& c) : max_positions_(c.max_position_embeddings) {
  c.validate();
  word_ = register_module("word_embeddings", std::make_shared<Embedding>(c.vocab_size, c.hidden_size));
  position_ = register_module("position_embeddings", std::make_shared<Embedding>(c.max_position_embeddings, c.hidden_size));
  token_type_ = register_module("token_type_embeddings", std::make_shared<Embedding>(c.type_vocab_size, c.hidden_size));
  norm_ = register_module("LayerNorm", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps));
}

Tensor BertEmbeddings::forward(const Tensor& ids) {
  if (ids.ndim() != 2) throw ShapeError("BertEmbeddings: input_ids must be [n, L], got " + shape_str(ids.shape()));
  const int64_t n = ids.size(0), L = ids.size(1);
  if (L > max_positions_)
    throw ValueError("BertEmbeddings: " + std::to_string(L) + " tokens exceed max_position_embeddings " +
                     std::to_string(max_positions_));
  // Hugging Face's order of the sums: (word + token_type) + position.
  Tensor e = word_->forward(ids) + token_type_->forward(zeros({1}, DType::int64));
  e = e + position_->forward(arange(L));
  return reshape(norm_->forward(e), {n * L, e.size(2)});
}

// ---- attention -------------------------------------------------------------------------

BertSelfAttention::BertSelfAttention(const BertConfig& c) : heads_(c.num_attention_heads) {
  c.validate();
  query_ = register_module("query", std::make_shared<Linear>(c.hidden_size, c.hidden_size));
  key_ = register_module("key", std::make_shared<Linear>(c.hidden_size, c.hidden_size));
  value_ = register_module("value", std::make_shared<Linear>(c.hidden_size, c.hidden_size));
}

Tensor BertSelfAttention::forward(const Tensor& x, const Tensor& mask_bias) {
  if (mask_bias.ndim() != 4 || mask_bias.size(1) != 1 || mask_bias.size(2) != 1)
    throw ShapeError("BertSelfAttention: mask_bias must be [n, 1, 1, L], got " + shape_str(mask_bias.shape()));
  const int64_t n = mask_bias.size(0), L = mask_bias.size(3);
  if (x.ndim() != 2 || x.size(0) != n * L)
    throw ShapeError("BertSelfAttention: x must be [n * L, hidden] = [" + std::to_string(n * L) +
                     ", hidden] for mask_bias " + shape_str(mask_bias.shape()) + ", got " + shape_str(x.shape()));
  const int64_t hidden = x.size(1), d = hidden / heads_;
  auto heads = [&](const Tensor& t, const Axes& order) { return permute(reshape(t, {n, L, heads_, d}), order); };
  const Tensor q = heads(query_->forward(x), {0, 2, 1, 3});  // [n, heads, L, d]
  const Tensor k = heads(key_->forward(x), {0, 2, 3, 1});    // [n, heads, d, L]
  const Tensor v = heads(value_->forward(x), {0, 2, 1, 3});  // [n, heads, L, d]
  const Tensor scores = matmul(q, k) * (1.0 / std::sqrt(static_cast<double>(d))) + mask_bias;
  const Tensor ctx = matmul(softmax(scores, -1), v);  // [n, heads, L, d]
  return reshape(permute(ctx, {0, 2, 1, 3}), {n * L, hidden});
}

Tensor BertSelfAttention::forward(const Tensor&) {
  throw ValueError("BertSelfAttention: needs the attention mask: call forward(x, mask_bias)");
}

BertResidualOutput::BertResidualOutput(int64_t in_features, int64_t hidden, double eps) {
  dense_ = register_module("dense", std::make_shared<Linear>(in_features, hidden));
  norm_ = register_module("LayerNorm", std::make_shared<LayerNorm>(hidden, eps));
}

Tensor BertResidualOutput::forward(const Tensor& x, const Tensor& residual) {
  return norm_->forward(dense_->forward(x) + residual);
}

Tensor BertResidualOutput::forward(const Tensor&) {
  throw ValueError("BertResidualOutput: needs the residual: call forward(x, residual)");
}

// ---- layer and model ----------------------------------------------------------------------

BertLayer::BertLayer(const BertConfig& c) {
  c.validate();
  auto attention = register_module("attention", std::make_shared<Group>("BertAttention"));
  self_ = attention->add("self", std::make_shared<BertSelfAttention>(c));
  attn_out_ = attention->add("output", std::make_shared<BertResidualOutput>(c.hidden_size, c.hidden_size, c.layer_norm_eps));
  auto intermediate = register_module("intermediate", std::make_shared<Group>("BertIntermediate"));
  intermediate_ = intermediate->add("dense", std::make_shared<Linear>(c.hidden_size, c.intermediate_size));
  out_ = register_module("output",
                         std::make_shared<BertResidualOutput>(c.intermediate_size, c.hidden_size, c.layer_norm_eps));
  set_subgraph(true);
}

Tensor BertLayer::operator()(const Tensor& x, const Tensor& mask_bias) {
  return call_module({x, mask_bias}, [this](const std::vector<Tensor>& a) { return forward(a[0], a[1]); });
}

Tensor BertLayer::forward(const Tensor& x, const Tensor& mask_bias) {
  const Tensor a = attn_out_->forward(self_->forward(x, mask_bias), x);
  const Tensor h = gelu(intermediate_->forward(a));  // erf GELU (BERT's "gelu")
  return out_->forward(h, a);
}

Tensor BertLayer::forward(const Tensor&) {
  throw ValueError("BertLayer: needs the attention mask: call layer(x, mask_bias)");
}

Tensor attention_mask_bias(const Tensor& attention_mask) {
  if (attention_mask.ndim() != 2)
    throw ShapeError("attention_mask_bias: attention_mask must be [n, L], got " + shape_str(attention_mask.shape()));
  // Values other than 0 and 1 would give a bias of the wrong sign or
  // size (mask 2: +3.4e38). Checked where the values are at hand (a
  // realized CPU mask: n x L reads, nothing next to the model); a traced
  // mask's values are known only when the compiled function runs.
  if (attention_mask.is_realized() && attention_mask.device().is_cpu()) {
    const std::vector<double> v = attention_mask.to_vector<double>();
    for (size_t k = 0; k < v.size(); ++k)
      if (v[k] != 0.0 && v[k] != 1.0)
        throw ValueError("attention_mask_bias: attention_mask must hold 0 (padding) or 1 (token), got " +
                         detail::num_str(v[k]) + " at flat position " + std::to_string(k) + " (shape " +
                         shape_str(attention_mask.shape()) + ")");
  }
  const Tensor m = cast(attention_mask, DType::float32);
  const Tensor bias = (1.0 - m) * static_cast<double>(std::numeric_limits<float>::lowest());
  return reshape(bias, {attention_mask.size(0), 1, 1, attention_mask.size(1)});
}

BertModel::BertModel(const BertConfig& c) : config_(c) {
  c.validate();
  embeddings_ = register_module("embeddings", std::make_shared<BertEmbeddings>(c));
  auto encoder = register_module("encoder", std::make_shared<Group>("BertEncoder"));
  layers_ = encoder->add("layer", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers_->push_back(std::make_shared<BertLayer>(c));
}

Tensor BertModel::forward(const Tensor& input_ids, const Tensor& attention_mask) {
  if (input_ids.ndim() != 2 || attention_mask.shape() != input_ids.shape())
    throw ShapeError("BertModel: input_ids and attention_mask must both be [n, L], got " +
                     shape_str(input_ids.shape()) + " and " + shape_str(attention_mask.shape()));
  const Tensor mask_bias = attention_mask_bias(attention_mask);
  Tensor h = embeddings_->forward(input_ids);
  for (size_t i = 0; i < layers_->size(); ++i) h = static_cast<BertLayer&>((*layers_)[i])(h, mask_bias);
  return reshape(h, {input_ids.size(0), input_ids.size(1), config_.hidden_size});
}

Tensor BertModel::forward(const Tensor& input_ids) {
  return forward(input_ids, ones(input_ids.shape(), DType::int64));
}

// ---- pooling --------------------------------------------------------------------------------

Tensor mean_pool(const Tensor& hidden, const Tensor& attention_mask) {
  if (hidden.ndim() != 3 || attention_mask.ndim() != 2 || attention_mask.size(0) != hidden.size(0) ||
      attention_mask.size(1) != hidden.size(1))
    throw ShapeError("mean_pool: expected hidden [n, L, d] and attention_mask [n, L], got " +
                     shape_str(hidden.shape()) + " and " + shape_str(attention_mask.shape()));
  const Tensor m = unsqueeze(cast(attention_mask, hidden.dtype()), -1);  // [n, L, 1]
  return sum(hidden * m, {1}) / clamp(sum(m, {1}), 1e-9, std::nullopt);
}

Tensor l2_normalize(const Tensor& x) {
  if (x.ndim() != 2) throw ShapeError("l2_normalize: expected [n, d], got " + shape_str(x.shape()));
  return x / maximum(sqrt(sum(x * x, {1}, /*keepdim=*/true)), 1e-12);
}

Tensor sentence_embedding(BertModel& model, const Tensor& input_ids, const Tensor& attention_mask) {
  return l2_normalize(mean_pool(model.forward(input_ids, attention_mask), attention_mask));
}

void load_bert_safetensors(BertModel& model, const std::string& path) {
  std::map<std::string, Tensor> sd;
  for (auto& [name, t] : read_safetensors(path)) {
    // Held by Hugging Face's BertModel, unused here (see the header).
    if (name == "embeddings.position_ids" || name.rfind("pooler.dense.", 0) == 0) continue;
    sd.emplace(name, std::move(t));
  }
  try {
    model.load_state_dict(sd, /*strict=*/true);
  } catch (const ValueError& e) {
    throw ValueError("load_bert_safetensors: '" + path + "': " + e.what());
  }
}

}  // namespace kiln::nn
