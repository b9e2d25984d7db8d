// all-MiniLM-L6-v2 (nn/bert.h, examples/minilm.h) against the reference
// embeddings that sentence-transformers computed (../shared/data/minilm,
// README there), eagerly and compiled; strict mode bitwise; padding; the
// loader's errors on small generated files.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <kiln/kiln.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "../examples/minilm.h"

using namespace kiln;

namespace {

const std::string kSharedDir = KILN_SHARED_DATA_DIR "/minilm";
const std::string kModelDir = KILN_MINILM_DIR;

struct Reference {
  std::vector<std::vector<int64_t>> ids;
  Tensor embeddings;  // float32 [16, 384]
};

const Reference& reference() {
  static const Reference r = [] {
    Reference out;
    std::ifstream f(kSharedDir + "/reference.json");
    REQUIRE_MESSAGE(f.good(), "reference data missing: " << kSharedDir);
    nlohmann::json j = nlohmann::json::parse(f);
    for (const auto& row : j.at("input_ids")) out.ids.push_back(row.get<std::vector<int64_t>>());
    out.embeddings = read_npy(kSharedDir + "/reference_embeddings.npy");
    return out;
  }();
  return r;
}

// The encoder, or null (test skipped) when the weights are absent and
// KILN_SKIP_MINILM=1; absent weights otherwise fail the test.
const minilm::Encoder* encoder() {
  static std::optional<minilm::Encoder> enc;
  static bool tried = false;
  if (!tried) {
    tried = true;
    if (std::filesystem::exists(kModelDir + "/model.safetensors")) enc.emplace(kModelDir);
  }
  if (enc) return &*enc;
  const char* skip = std::getenv("KILN_SKIP_MINILM");
  if (skip && std::string(skip) == "1") {
    MESSAGE("skipped: no weights in " << kModelDir << " (KILN_SKIP_MINILM=1)");
    return nullptr;
  }
  FAIL("all-MiniLM-L6-v2 weights not found in " << kModelDir
                                                << ": run scripts/fetch_minilm.sh (or set KILN_SKIP_MINILM=1)");
  return nullptr;
}

// Row i of `got` against reference row `ref_row`: cosine and max |diff|.
void check_row(const Tensor& got, int64_t i, int64_t ref_row, const char* what) {
  const Tensor& ref = reference().embeddings;
  const int64_t d = ref.size(1);
  REQUIRE(got.size(1) == d);
  const float* g = got.contiguous().data<float>() + i * d;
  const float* r = ref.data<float>() + ref_row * d;
  double dot = 0, gg = 0, rr = 0, maxdiff = 0;
  for (int64_t k = 0; k < d; ++k) {
    dot += double(g[k]) * r[k];
    gg += double(g[k]) * g[k];
    rr += double(r[k]) * r[k];
    maxdiff = std::max(maxdiff, std::abs(double(g[k]) - r[k]));
  }
  const double cosine = dot / std::sqrt(gg * rr);
  INFO(what << " sentence " << ref_row << ": cosine " << cosine << ", max|diff| " << maxdiff);
  CHECK(cosine > 0.99999);
  CHECK(maxdiff < 2e-5);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  double m = 0;
  for (int64_t k = 0; k < ac.numel(); ++k) m = std::max(m, std::abs(double(ac.data<float>()[k]) - bc.data<float>()[k]));
  return m;
}

// Sentences whose token counts fall in the same bucket, batched.
std::vector<std::vector<int64_t>> bucket_groups() {
  std::map<int64_t, std::vector<int64_t>> by_bucket;
  const auto& ids = reference().ids;
  for (size_t i = 0; i < ids.size(); ++i)
    by_bucket[minilm::bucket_length(static_cast<int64_t>(ids[i].size()))].push_back(static_cast<int64_t>(i));
  std::vector<std::vector<int64_t>> out;
  for (auto& [b, rows] : by_bucket) out.push_back(rows);
  return out;
}

minilm::Batch batch_of(const std::vector<int64_t>& rows) {
  std::vector<std::vector<int64_t>> ids;
  for (int64_t r : rows) ids.push_back(reference().ids[r]);
  return minilm::pad_ids(ids);
}

}  // namespace

TEST_SUITE("minilm") {

TEST_CASE("eager embeddings of the 16 reference sentences match sentence-transformers") {
  const minilm::Encoder* enc = encoder();
  if (!enc) return;
  const auto& ids = reference().ids;
  REQUIRE(ids.size() == 16);
  for (int64_t i = 0; i < 16; ++i) {
    const Tensor e = enc->eager(minilm::pad_ids({ids[i]}));  // one sentence, unpadded
    check_row(e, 0, i, "eager");
  }
}

TEST_CASE("compiled embeddings (batched, padded to buckets) match the reference") {
  const minilm::Encoder* enc = encoder();
  if (!enc) return;
  const int64_t compiles_before = enc->jit_stats().compiles;
  const auto groups = bucket_groups();
  for (const auto& rows : groups) {
    const Tensor e = enc->compiled(batch_of(rows));
    for (size_t k = 0; k < rows.size(); ++k) check_row(e, static_cast<int64_t>(k), rows[k], "compiled");
  }
  // One compile per (batch size, bucket) pair; calling again reuses them.
  CHECK(enc->jit_stats().compiles - compiles_before == static_cast<int64_t>(groups.size()));
  enc->compiled(batch_of(groups.front()));
  CHECK(enc->jit_stats().compiles - compiles_before == static_cast<int64_t>(groups.size()));
}

TEST_CASE("a padded batch of mixed lengths gives the rows of one sentence at a time") {
  const minilm::Encoder* enc = encoder();
  if (!enc) return;
  const std::vector<int64_t> rows = {0, 2, 6, 7, 8, 9, 11};  // 12 .. 34 tokens
  const minilm::Batch b = minilm::pad_batch(batch_of(rows), 64);
  const Tensor batched_eager = enc->eager(b);
  const Tensor batched_compiled = enc->compiled(b);
  for (size_t k = 0; k < rows.size(); ++k) {
    const Tensor one = enc->eager(minilm::pad_ids({reference().ids[rows[k]]}));
    const Tensor kk = slice(batched_eager, 0, int64_t(k), int64_t(k) + 1);
    const Tensor kc = slice(batched_compiled, 0, int64_t(k), int64_t(k) + 1);
    INFO("sentence " << rows[k]);
    CHECK(max_abs_diff(kk, one) < 2e-6);
    CHECK(max_abs_diff(kc, one) < 2e-6);
  }
}

TEST_CASE("strict numerics: compiled embeddings are bitwise eager's") {
  if (!encoder()) return;
  const minilm::Encoder strict(kModelDir, std::make_shared<InferenceSession>(KernelOptions{.strict = true}));
  for (const auto& rows : bucket_groups()) {
    const minilm::Batch b = minilm::pad_batch(batch_of(rows), minilm::bucket_length(batch_of(rows).input_ids.size(1)));
    const Tensor e = strict.eager(b), c = strict.compiled(b);
    REQUIRE(e.shape() == c.shape());
    CHECK(std::memcmp(e.contiguous().data<float>(), c.contiguous().data<float>(), e.numel() * sizeof(float)) == 0);
  }
}

TEST_CASE("the 6 layers trace as one subgraph body and 6 calls") {
  const minilm::Encoder* enc = encoder();
  if (!enc) return;
  const minilm::Batch b = batch_of({0, 1});
  auto fn = [&](Tensor ids, Tensor mask) { return nn::sentence_embedding(enc->model(), ids, mask); };
  const StagedGraph s = stage(fn)(b.input_ids, b.attention_mask);
  REQUIRE(s.graph->subgraphs().size() == 1);
  const auto& [name, body] = *s.graph->subgraphs().begin();
  CHECK(name.find("BertLayer") == 0);
  int calls = 0;
  std::vector<std::string> prefixes;
  for (const Node& n : s.graph->nodes())
    if (n.kind == NodeKind::call) {
      ++calls;
      CHECK(n.name == name);
      prefixes.push_back(n.prefix);
    }
  CHECK(calls == 6);
  CHECK(prefixes.front() == "encoder.layer.0.");
  CHECK(prefixes.back() == "encoder.layer.5.");
}

TEST_CASE("the exported MEF, read back (and through `kiln run`) with the file's weights, gives the in-process embeddings") {
  const minilm::Encoder* enc = encoder();
  if (!enc) return;
  const std::string mef = (std::filesystem::temp_directory_path() / "kiln_test_minilm.mef").string();
  const minilm::Batch b = enc->export_mef(batch_of({0, 3, 5}), mef);
  const std::map<std::string, Tensor> published = read_safetensors(enc->files().weights);
  // from_mef is strict: the published checkpoint also holds tensors the
  // encoder does not read (nn/bert.cpp's loader skips the same ones), which
  // it names; the weights the file lists load.
  try {
    (void)CompiledCallable::from_mef(mef, published);
    FAIL("from_mef took a checkpoint with tensors the file does not list");
  } catch (const ValueError& e) {
    const std::string m = e.what();
    CHECK(m.find("unexpected (the file's graph reads no weight of that name): ") != std::string::npos);
    CHECK(m.find("'embeddings.position_ids'") != std::string::npos);
    CHECK(m.find("'pooler.dense.weight'") != std::string::npos);
  }
  std::map<std::string, Tensor> weights;
  const auto art = engine::read(mef);  // (kept: a range-for over a temporary's member would dangle)
  for (const auto& [name, type] : art->weight_slots()) weights[name] = published.at(name);
  const CompiledCallable run = CompiledCallable::from_mef(mef, weights);
  const Tensor from_file = run(b.input_ids, b.attention_mask).tensor();
  CHECK(max_abs_diff(from_file, enc->compiled(b)) == 0);
#ifdef KILN_CLI_PATH
  // The same through the command-line tool, with the published weights file.
  const std::string ids = mef + ".ids.npy", mask = mef + ".mask.npy", out = mef + ".out.npy";
  write_npy(ids, b.input_ids);
  write_npy(mask, b.attention_mask);
  const std::string cmd = std::string("'") + KILN_CLI_PATH + "' run '" + mef + "' --weights '" + enc->files().weights +
                          "' --input '" + ids + "' --input '" + mask + "' --output '" + out + "' >/dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const Tensor from_cli = read_npy(out);
  REQUIRE(from_cli.shape() == from_file.shape());
  CHECK(std::memcmp(from_cli.data<float>(), from_file.contiguous().data<float>(), from_cli.numel() * sizeof(float)) == 0);
  for (const auto& f : {ids, mask, out}) std::filesystem::remove(f);
#endif
  std::filesystem::remove(mef);
}

}  // TEST_SUITE minilm

// ---- the loader's errors, on a tiny BERT written here (no weights needed) ----------------------

namespace {

nn::BertConfig tiny_config() {
  nn::BertConfig c;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 12;
  c.max_position_embeddings = 16;
  return c;
}

// A file like Hugging Face's: the model's parameters plus position_ids and the pooler.
std::map<std::string, Tensor> tiny_file_tensors() {
  random::seed(7);
  nn::BertModel m(tiny_config());
  auto sd = m.state_dict();
  sd["embeddings.position_ids"] = reshape(arange(16), {1, 16});
  sd["pooler.dense.weight"] = zeros({8, 8});
  sd["pooler.dense.bias"] = zeros({8});
  return sd;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kiln_test_minilm_" + name)).string();
}

std::string load_error(const std::map<std::string, Tensor>& tensors) {
  const std::string p = temp_path("bad.safetensors");
  write_safetensors(p, tensors);
  nn::BertModel m(tiny_config());
  std::string msg;
  try {
    nn::load_bert_safetensors(m, p);
  } catch (const ValueError& e) {
    msg = e.what();
  }
  std::filesystem::remove(p);
  return msg;
}

}  // namespace

TEST_SUITE("minilm_loader") {

TEST_CASE("a complete file loads: every parameter takes the file's values") {
  const auto sd = tiny_file_tensors();
  const std::string p = temp_path("ok.safetensors");
  write_safetensors(p, sd);
  nn::BertModel m(tiny_config());
  nn::load_bert_safetensors(m, p);
  std::filesystem::remove(p);
  const auto loaded = m.state_dict();
  CHECK(loaded.size() == sd.size() - 3);
  for (const auto& [name, t] : loaded) {
    INFO(name);
    REQUIRE(sd.count(name));
    CHECK(all(equal(t, sd.at(name))).item<bool>());
  }
  CHECK(loaded.count("encoder.layer.1.attention.self.query.weight"));
  CHECK(loaded.count("encoder.layer.0.intermediate.dense.bias"));
  CHECK(loaded.count("embeddings.LayerNorm.weight"));
}

TEST_CASE("a wrong-shaped, missing or extra tensor is an error naming it") {
  auto sd = tiny_file_tensors();
  sd["encoder.layer.1.output.dense.weight"] = zeros({8, 11});
  std::string msg = load_error(sd);
  CHECK(msg.find("encoder.layer.1.output.dense.weight") != std::string::npos);
  CHECK(msg.find("[8, 12]") != std::string::npos);

  sd = tiny_file_tensors();
  sd.erase("encoder.layer.0.attention.self.key.bias");
  msg = load_error(sd);
  CHECK(msg.find("missing") != std::string::npos);
  CHECK(msg.find("encoder.layer.0.attention.self.key.bias") != std::string::npos);

  sd = tiny_file_tensors();
  sd["encoder.layer.2.output.dense.weight"] = zeros({8, 12});
  msg = load_error(sd);
  CHECK(msg.find("encoder.layer.2.output.dense.weight") != std::string::npos);
}

TEST_CASE("a truncated file is an IoError; the model keeps its values") {
  const std::string bytes = encode_safetensors(tiny_file_tensors());
  const std::string p = temp_path("truncated.safetensors");
  for (size_t keep : {size_t(4), size_t(100), bytes.size() - 1}) {
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(keep));
    nn::BertModel m(tiny_config());
    const Tensor before = m.state_dict().at("embeddings.word_embeddings.weight").clone();
    INFO("kept " << keep << " of " << bytes.size() << " bytes");
    CHECK_THROWS_AS(nn::load_bert_safetensors(m, p), IoError);
    CHECK(all(equal(before, m.state_dict().at("embeddings.word_embeddings.weight"))).item<bool>());
  }
  std::filesystem::remove(p);
}

TEST_CASE("a missing model folder names scripts/fetch_minilm.sh") {
  std::string msg;
  try {
    minilm::Encoder enc(temp_path("no_such_folder"));
  } catch (const IoError& e) {
    msg = e.what();
  }
  CHECK(msg.find("scripts/fetch_minilm.sh") != std::string::npos);
}

TEST_CASE("layers given bad shapes say what they expected") {
  random::seed(3);
  nn::BertModel m(tiny_config());
  CHECK_THROWS_AS(m.forward(zeros({2, 5}, DType::int64), ones({2, 4}, DType::int64)), ShapeError);
  CHECK_THROWS_AS(m.forward(zeros({2, 17}, DType::int64), ones({2, 17}, DType::int64)), ValueError);
  CHECK_THROWS_AS(minilm::bucket_length(257), ValueError);
  CHECK_THROWS_AS(minilm::pad_ids({{101, 102}, {}}), ValueError);
}

TEST_CASE("tiny BERT: padding leaves a sentence's embedding unchanged, compiled equals eager") {
  random::seed(5);
  nn::BertModel m(tiny_config());
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 4, 7, 2}, {1, 4});
  const minilm::Batch one = {ids, ones({1, 4}, DType::int64)};
  const minilm::Batch padded = minilm::pad_batch(one, 9);
  const Tensor a = nn::sentence_embedding(m, one.input_ids, one.attention_mask);
  const Tensor b = nn::sentence_embedding(m, padded.input_ids, padded.attention_mask);
  CHECK(max_abs_diff(a, b) < 1e-6);
  // unit rows
  const Tensor norm = sum(a * a, {1});
  CHECK(std::abs(norm.item<float>() - 1.0f) < 1e-6);
  CompileOptions o;
  o.weights = m.state_dict();
  auto fn = [&](Tensor i, Tensor k) { return nn::sentence_embedding(m, i, k); };
  const Tensor c = compile(fn, o)(padded.input_ids, padded.attention_mask)(padded.input_ids, padded.attention_mask).tensor();
  CHECK(max_abs_diff(b, c) < 1e-6);
}

}  // TEST_SUITE minilm_loader
