// all-MiniLM-L6-v2 sentence embeddings with kiln (examples/embed.cpp), shared
// with tests/test_minilm.cpp and benchmarks/bench_minilm.cpp so they exercise
// the example's own code: the model (nn/bert.h) loaded from the folder that
// scripts/fetch_minilm.sh fills, run eagerly or compiled by jit with every
// batch padded to a bucket length, so a handful of compiles serve every batch.
//
// Eager vs compiled (jit/compiled_callable.h's contract): GEMMs, softmax and
// layer_norm rows run eager's kernels; the fused elementwise code (erf GELU
// within 4 ulp, a*b+c contracted to an FMA) differs by ulps, which the
// layers carry forward: embeddings differ by about 1e-7. With
// KernelOptions::strict the two are bitwise equal.
#pragma once
#include <kiln/kiln.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace minilm {

/// Sequence lengths batches are padded to (the tokenizer truncates to 256).
inline constexpr int64_t kBuckets[] = {16, 32, 64, 128, 256};
inline constexpr int64_t kMaxLength = 256;

/// The smallest bucket holding `length` tokens; ValueError past kMaxLength.
inline int64_t bucket_length(int64_t length) {
  for (int64_t b : kBuckets)
    if (length <= b) return b;
  throw kiln::ValueError("minilm: " + std::to_string(length) + " tokens exceed the longest bucket, " +
                         std::to_string(kMaxLength));
}

/// Token ids and mask, int64 [n, L].
struct Batch {
  kiln::Tensor input_ids;
  kiln::Tensor attention_mask;
};

/// Token id lists (with [CLS]/[SEP]) as one batch padded with id 0 and mask
/// 0 to `length` (0: the longest list). ValueError for an empty list or
/// batch, or a list longer than `length`.
inline Batch pad_ids(const std::vector<std::vector<int64_t>>& ids, int64_t length = 0) {
  if (ids.empty()) throw kiln::ValueError("minilm::pad_ids: no sentences");
  int64_t longest = 0;
  for (const auto& s : ids) {
    if (s.empty()) throw kiln::ValueError("minilm::pad_ids: a sentence has no tokens");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
  }
  if (length == 0) length = longest;
  if (longest > length)
    throw kiln::ValueError("minilm::pad_ids: " + std::to_string(longest) + " tokens do not fit length " +
                           std::to_string(length));
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<int64_t> flat(static_cast<size_t>(n * length), 0), mask(flat.size(), 0);
  for (int64_t i = 0; i < n; ++i)
    for (size_t j = 0; j < ids[i].size(); ++j) {
      flat[i * length + j] = ids[i][j];
      mask[i * length + j] = 1;
    }
  return {kiln::Tensor::from_vector(flat, {n, length}), kiln::Tensor::from_vector(mask, {n, length})};
}

/// `b` padded on the right (id 0, mask 0) to `length` tokens.
inline Batch pad_batch(const Batch& b, int64_t length) {
  const int64_t extra = length - b.input_ids.size(1);
  if (extra < 0) throw kiln::ValueError("minilm::pad_batch: the batch is longer than " + std::to_string(length));
  if (extra == 0) return b;
  return {kiln::pad(b.input_ids, {{0, extra}}, 0.0), kiln::pad(b.attention_mask, {{0, extra}}, 0.0)};
}

/// The files of the model folder, checked to exist; IoError naming
/// scripts/fetch_minilm.sh otherwise.
struct ModelFiles {
  std::string weights, vocab, config;
  explicit ModelFiles(const std::string& dir) {
    namespace fs = std::filesystem;
    weights = (fs::path(dir) / "model.safetensors").string();
    vocab = (fs::path(dir) / "vocab.txt").string();
    config = (fs::path(dir) / "config.json").string();
    for (const std::string& f : {config, weights, vocab})
      if (!fs::is_regular_file(f))
        throw kiln::IoError("minilm: '" + f + "' not found: run scripts/fetch_minilm.sh to download the model " +
                            "(all-MiniLM-L6-v2) into " + dir);
  }
};

/// The sentence encoder: BertModel loaded from a model folder, eager and
/// compiled (jit, padded to kBuckets) forwards.
class Encoder {
 public:
  /// Loads `dir`'s config.json and model.safetensors (ModelFiles; then the
  /// errors of BertConfig::from_json_file and nn::load_bert_safetensors).
  /// `session` (null: the default) compiles the jit entries.
  explicit Encoder(const std::string& dir, std::shared_ptr<kiln::InferenceSession> session = nullptr)
      : files_(dir),
        model_(std::make_shared<kiln::nn::BertModel>(kiln::nn::BertConfig::from_json_file(files_.config))),
        session_(std::move(session)),
        jit_(make_jit(model_, session_)) {
    kiln::nn::load_bert_safetensors(*model_, files_.weights);
  }

  /// Eager embeddings of `b`, float32 [n, hidden], unit rows.
  kiln::Tensor eager(const Batch& b) const {
    return kiln::nn::sentence_embedding(*model_, b.input_ids, b.attention_mask);
  }
  /// Compiled embeddings of `b` padded to its bucket length (a compile for
  /// each new (n, bucket) pair), float32 [n, hidden].
  kiln::Tensor compiled(const Batch& b) const {
    const Batch p = pad_batch(b, bucket_length(b.input_ids.size(1)));
    return jit_(p.input_ids, p.attention_mask).tensor();
  }
  /// Compiles for `b` padded to its bucket and writes the callable to a MEF
  /// file (arguments: input_ids, attention_mask int64 [n, bucket]; weights by
  /// their Hugging Face names, i.e. model.safetensors). Returns the padded batch.
  Batch export_mef(const Batch& b, const std::string& path) const {
    const Batch p = pad_batch(b, bucket_length(b.input_ids.size(1)));
    kiln::compile(forward_fn(model_), compile_options(model_, session_))(p.input_ids, p.attention_mask).export_mef(path);
    return p;
  }
  kiln::JitStats jit_stats() const { return jit_.stats(); }
  kiln::nn::BertModel& model() const { return *model_; }
  const ModelFiles& files() const { return files_; }

 private:
  using Fn = std::function<kiln::Tensor(kiln::Tensor, kiln::Tensor)>;
  static Fn forward_fn(std::shared_ptr<kiln::nn::BertModel> m) {
    return [m](kiln::Tensor ids, kiln::Tensor mask) { return kiln::nn::sentence_embedding(*m, ids, mask); };
  }
  static kiln::CompileOptions compile_options(const std::shared_ptr<kiln::nn::BertModel>& m,
                                              std::shared_ptr<kiln::InferenceSession> session) {
    kiln::CompileOptions o;
    o.name = "minilm";
    o.weights = m->state_dict();  // bound by name: compiled callables see the loaded values
    o.session = std::move(session);
    return o;
  }
  static kiln::JitFunction<Fn> make_jit(const std::shared_ptr<kiln::nn::BertModel>& m,
                                        std::shared_ptr<kiln::InferenceSession> session) {
    kiln::JitOptions o;
    o.compile = compile_options(m, std::move(session));
    return kiln::jit(forward_fn(m), o);
  }

  ModelFiles files_;
  std::shared_ptr<kiln::nn::BertModel> model_;
  std::shared_ptr<kiln::InferenceSession> session_;
  kiln::JitFunction<Fn> jit_;
};

}  // namespace minilm
