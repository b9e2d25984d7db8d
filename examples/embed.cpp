// embed: sentence embeddings with the pretrained all-MiniLM-L6-v2 (a 6-layer
// BERT, nn/bert.h), eagerly and compiled (examples/minilm.h), the README's
// main job (issue 15). Prints the cosine-similarity matrix of the sentences,
// with --search the nearest sentences of a small corpus, then the largest
// eager/compiled difference, the time per batch of each and the speedup.
// The weights come from scripts/fetch_minilm.sh (data/minilm/).
#include <unistd.h>

#include <kiln/kiln.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "cli_args.h"
#include "minilm.h"

namespace {

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

struct Options {
  std::vector<std::string> sentences;
  std::string file;
  std::string data = KILN_SOURCE_DIR "/data/minilm";
  std::string corpus = KILN_SOURCE_DIR "/examples/data/corpus.txt";
  std::string mode = "both";
  std::string output, export_path;
  std::optional<std::string> search;  // --search QUERY (given: never empty or blank)
  int threads = 0;  // 0: kiln's default
  int repeats = 5;
  bool strict = false;
};

const char* kUsage =
    "usage: embed [options] [SENTENCE ...]\n"
    "  Embeds sentences with all-MiniLM-L6-v2 (384-d unit vectors), eagerly and\n"
    "  compiled, and prints their cosine-similarity matrix.\n"
    "  --file PATH      one sentence per line (added after the SENTENCE arguments)\n"
    "  --search QUERY   also print the corpus sentences nearest to QUERY\n"
    "  --corpus PATH    the corpus for --search (default: examples/data/corpus.txt)\n"
    "  --mode M         eager, compiled or both (default both)\n"
    "  --output F.npy   the embeddings, float32 [n, 384] (compiled; eager with --mode eager)\n"
    "  --export F.mef   also write the compiled callable and its padded inputs\n"
    "                   (F.input_ids.npy, F.attention_mask.npy) for `kiln run`\n"
    "  --threads N      CPU threads for kiln's kernels (default: all cores)\n"
    "  --repeats N      timed runs per mode, the median is reported (default 5)\n"
    "  --strict         strict numerics (KernelOptions::strict): compiled must be\n"
    "                   bitwise eager (exit status 1 otherwise)\n"
    "  --data DIR       the model folder (default: <repo>/data/minilm, written by\n"
    "                   scripts/fetch_minilm.sh)\n"
    "  --help           this text\n";

// Nothing a tokenizer keeps: spaces and control characters only (the
// tokenizer drops control characters, so such a sentence would embed as
// [CLS][SEP] alone).
bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) || std::iscntrl(c); });
}

[[noreturn]] void usage_error(const std::string& msg) { example_cli::Args::usage_error("embed", kUsage, msg); }

Options parse_args(int argc, char** argv) {
  Options o;
  example_cli::Args a("embed", kUsage, argc, argv);
  while (a.next()) {
    const std::string& arg = a.arg();
    if (!a.is_option()) o.sentences.push_back(arg);
    else if (arg == "--help") a.help();
    else if (arg == "--file") o.file = a.value();
    else if (arg == "--search") {
      o.search = a.value();
      if (blank(*o.search))
        a.error("--search expects a QUERY with words, got '" + *o.search + "' (empty, spaces or control characters)");
    }
    else if (arg == "--corpus") o.corpus = a.value();
    else if (arg == "--mode") {
      o.mode = a.value();
      if (o.mode != "eager" && o.mode != "compiled" && o.mode != "both")
        a.error("--mode expects eager, compiled or both, got '" + o.mode + "'");
    } else if (arg == "--output" || arg == "--export") {
      (arg == "--output" ? o.output : o.export_path) = a.value();
      if ((arg == "--output" ? o.output : o.export_path).empty()) a.error(arg + " expects a file path, got ''");
    }
    else if (arg == "--data") o.data = a.value();
    else if (arg == "--threads") o.threads = a.positive(100000);
    else if (arg == "--repeats") o.repeats = a.positive(100000);
    else if (arg == "--strict") {
      a.no_value();
      o.strict = true;
    } else a.error("unknown option '" + arg + "'");
  }
  if (o.strict && o.mode != "both") usage_error("--strict compares both runs: it needs --mode both");
  if (!o.export_path.empty() && o.mode == "eager") usage_error("--export writes the compiled callable: not with --mode eager");
  return o;
}

// One sentence per line; an empty (or blank) line is an error naming it.
std::vector<std::string> read_lines(const std::string& path, const char* what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw kiln::IoError(std::string(what) + " '" + path + "' is a directory (expected a text file, one sentence per line)");
  std::ifstream f(path);
  if (!f) throw kiln::IoError(std::string("cannot open ") + what + " '" + path + "'");
  std::vector<std::string> out;
  std::string line;
  for (int no = 1; std::getline(f, line); ++no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (blank(line))
      throw kiln::ValueError(std::string(what) + " '" + path + "' line " + std::to_string(no) +
                             " is empty (one sentence per line, no blank lines; spaces and control characters count as blank)");
    out.push_back(line);
  }
  if (out.empty()) throw kiln::ValueError(std::string(what) + " '" + path + "' has no sentences");
  return out;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Runs `f` once untimed (a compile, caches), then `repeats` timed times;
// returns the last result and the median seconds.
template <class F>
std::pair<kiln::Tensor, double> timed(F&& f, int repeats) {
  kiln::Tensor r = f();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    r = f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return {r, median(t)};
}

// Cosine similarities of unit rows: a @ b^T.
kiln::Tensor cosine(const kiln::Tensor& a, const kiln::Tensor& b) {
  return kiln::matmul(a, kiln::transpose(b, 0, 1)).contiguous();
}

std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

void print_matrix(const std::vector<std::string>& sentences, const kiln::Tensor& emb) {
  const kiln::Tensor sim = cosine(emb, emb);
  const int64_t n = sim.size(0);
  std::printf("\nsentences:\n");
  for (int64_t i = 0; i < n; ++i) std::printf("  [%lld] %s\n", static_cast<long long>(i), clip(sentences[i], 90).c_str());
  std::printf("\ncosine similarity:\n      ");
  // Cells 7 wide: a sign column, so negative similarities keep the columns aligned.
  for (int64_t j = 0; j < n; ++j) std::printf("  [%2lld] ", static_cast<long long>(j));
  std::printf("\n");
  for (int64_t i = 0; i < n; ++i) {
    std::printf("  [%2lld]", static_cast<long long>(i));
    for (int64_t j = 0; j < n; ++j) std::printf(" %6.3f", sim.data<float>()[i * n + j]);
    std::printf("\n");
  }
}

double max_abs_diff(const kiln::Tensor& a, const kiln::Tensor& b) {
  const kiln::Tensor ac = a.contiguous(), bc = b.contiguous();
  double m = 0;
  for (int64_t k = 0; k < ac.numel(); ++k) m = std::max(m, std::abs(double(ac.data<float>()[k]) - bc.data<float>()[k]));
  return m;
}

// A file the run writes, checked before any work (loading the model,
// embedding): not a folder, in a folder that exists and can be written.
void check_writable(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw kiln::IoError(option + " '" + path + "': is a folder, not a file");
  const fs::path dir = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(dir, ec))
    throw kiln::IoError(option + " '" + path + "': the folder '" + dir.string() + "' does not exist");
  if (access(dir.c_str(), W_OK) != 0)
    throw kiln::IoError(option + " '" + path + "': the folder '" + dir.string() + "' cannot be written");
}

int run(const Options& opt) {
  if (!opt.output.empty()) check_writable(opt.output, "--output");
  if (!opt.export_path.empty()) check_writable(opt.export_path, "--export");  // its .npy inputs go beside it
  if (opt.threads > 0) kiln::set_num_threads(opt.threads);
  std::vector<std::string> sentences = opt.sentences;
  for (size_t i = 0; i < sentences.size(); ++i)
    if (blank(sentences[i])) throw kiln::ValueError("sentence argument " + std::to_string(i + 1) +
                             " is empty (nothing but spaces or control characters)");
  if (!opt.file.empty())
    for (auto& s : read_lines(opt.file, "--file")) sentences.push_back(std::move(s));
  if (sentences.empty() && !opt.search) usage_error("no sentences: give them as arguments or with --file");
  // The corpus is read before any work (a bad one is reported at once).
  std::vector<std::string> corpus;
  if (opt.search) corpus = read_lines(opt.corpus, "--corpus");

  std::shared_ptr<kiln::InferenceSession> session;
  if (opt.strict) session = std::make_shared<kiln::InferenceSession>(kiln::KernelOptions{.strict = true});
  // The vocabulary must be the model's: as many tokens as its embedding rows
  // (checked before the weights are loaded).
  const minilm::ModelFiles files(opt.data);
  const auto tok = kiln::text::WordPieceTokenizer::from_vocab_file(files.vocab);
  if (const int64_t want = kiln::nn::BertConfig::from_json_file(files.config).vocab_size; tok.vocab_size() != want)
    throw kiln::ValueError("'" + files.vocab + "' has " + std::to_string(tok.vocab_size()) + " tokens but '" +
                           files.config + "' says vocab_size " + std::to_string(want) +
                           " (the vocabulary must be the model's own)");
  const minilm::Encoder enc(opt.data, session);
  const bool eager = opt.mode != "compiled", compiled = opt.mode != "eager";
  std::printf("embed: all-MiniLM-L6-v2 (%lld layers, hidden %lld), %d threads%s\n",
              static_cast<long long>(enc.model().config().num_hidden_layers),
              static_cast<long long>(enc.model().config().hidden_size), kiln::get_num_threads(),
              opt.strict ? ", strict numerics" : "");

  // The embeddings the report uses: compiled unless only eager runs.
  auto embed = [&](const std::vector<std::string>& texts) {
    const auto b = tok.encode_batch(texts, minilm::kMaxLength);
    const minilm::Batch batch{b.input_ids, b.attention_mask};
    return compiled ? enc.compiled(batch) : enc.eager(batch);
  };

  int status = 0;
  if (!sentences.empty()) {
    // Both runs take the batch padded to its bucket: the same work, and (with
    // --strict) the same GEMM shapes, so the same bits.
    const auto tb = tok.encode_batch(sentences, minilm::kMaxLength);
    const int64_t n = tb.input_ids.size(0), L = tb.input_ids.size(1);
    const minilm::Batch batch = minilm::pad_batch({tb.input_ids, tb.attention_mask}, minilm::bucket_length(L));
    std::printf("batch: %lld sentences, %lld tokens (longest), padded to %lld\n", static_cast<long long>(n),
                static_cast<long long>(L), static_cast<long long>(batch.input_ids.size(1)));
    std::optional<std::pair<kiln::Tensor, double>> e, c;
    double compile_s = 0;
    if (eager) e = timed([&] { return enc.eager(batch); }, opt.repeats);
    if (compiled) {
      const auto t0 = std::chrono::steady_clock::now();
      enc.compiled(batch);  // compiles (once per batch size and bucket)
      compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      c = timed([&] { return enc.compiled(batch); }, opt.repeats);
    }
    const kiln::Tensor& emb = c ? c->first : e->first;
    print_matrix(sentences, emb);
    if (!opt.output.empty()) {
      kiln::write_npy(opt.output, emb);
      std::printf("\nwrote %s (float32 [%lld, %lld], %s)\n", opt.output.c_str(), static_cast<long long>(emb.size(0)),
                  static_cast<long long>(emb.size(1)), c ? "compiled" : "eager");
    }
    if (!opt.export_path.empty()) {
      const minilm::Batch p = enc.export_mef(batch, opt.export_path);
      const std::string ids = opt.export_path + ".input_ids.npy", mask = opt.export_path + ".attention_mask.npy";
      kiln::write_npy(ids, p.input_ids);
      kiln::write_npy(mask, p.attention_mask);
      std::printf("\nexported %s; run it with:\n  kiln run %s --weights %s --input %s --input %s --output out.npy\n",
                  opt.export_path.c_str(), opt.export_path.c_str(), enc.files().weights.c_str(), ids.c_str(),
                  mask.c_str());
    }
    if (e && c) {
      const double diff = max_abs_diff(e->first, c->first);
      const bool bitwise = diff == 0 && std::memcmp(e->first.contiguous().data<float>(), c->first.contiguous().data<float>(),
                                                     static_cast<size_t>(e->first.numel()) * sizeof(float)) == 0;
      std::printf("\nlargest |eager - compiled|: %.3g%s\n", diff, bitwise ? " (bitwise equal)" : "");
      if (opt.strict) {
        std::printf("strict numerics: embeddings bitwise equal: %s\n", bitwise ? "yes" : "NO");
        if (!bitwise) status = 1;
      }
    }
    if (e) std::printf("time per batch:  eager %.2f ms", 1e3 * e->second);
    if (c) std::printf("%scompiled %.2f ms (median of %d; compile took %.0f ms, %lld compile(s) so far)",
                       e ? ", " : "time per batch:  ", 1e3 * c->second, opt.repeats, 1e3 * compile_s,
                       static_cast<long long>(enc.jit_stats().compiles));
    std::printf("\n");
    if (e && c) std::printf("speedup:         %.2fx\n", e->second / c->second);
  }

  if (opt.search) {
    const kiln::Tensor ce = embed(corpus), qe = embed({*opt.search});
    const kiln::Tensor sim = cosine(qe, ce);
    std::vector<int64_t> order(corpus.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return sim.data<float>()[a] > sim.data<float>()[b]; });
    std::printf("\nnearest to \"%s\" (of %zu corpus sentences, %s):\n", clip(*opt.search, 70).c_str(), corpus.size(),
                compiled ? "compiled" : "eager");
    for (size_t k = 0; k < std::min<size_t>(5, order.size()); ++k)
      std::printf("  %6.3f  %s\n", sim.data<float>()[order[k]], clip(corpus[order[k]], 90).c_str());
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_args(argc, argv);
  try {
    return run(opt);
  } catch (const kiln::Error& e) {
    std::cerr << "embed: " << e.what() << "\n";
    return 1;
  }
}
