// The examples' command lines (examples/cli_args.h, shared by embed and
// digits) and embed's early checks of the files it will write: each bad
// argument fails with a message naming it before any work is done (the
// model folder given here does not exist, so an error about it would mean
// the check came too late).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

#if defined(KILN_EMBED_PATH) && defined(KILN_DIGITS_PATH)

namespace fs = std::filesystem;

namespace {

struct Run {
  int code = -1;
  std::string err;
};

// Runs `exe args` with stderr captured; stdout is discarded.
Run run(const char* exe, const std::string& args) {
  const fs::path err = fs::temp_directory_path() / ("kiln_example_args_" + std::to_string(getpid()) + ".err");
  const std::string cmd = std::string("'") + exe + "' " + args + " >/dev/null 2>'" + err.string() + "' </dev/null";
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream f(err);
  r.err.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  fs::remove(err);
  return r;
}

bool has(const Run& r, const std::string& text) { return r.err.find(text) != std::string::npos; }

}  // namespace

TEST_SUITE("example command lines") {
  TEST_CASE("embed checks --output and --export before loading or computing anything") {
    const std::string nodata = " --data /nonexistent/kiln_minilm 'a sentence'";
    Run out = run(KILN_EMBED_PATH, "--output /nonexistent/kiln_dir/e.npy" + nodata);
    CHECK(out.code == 1);
    CHECK_MESSAGE(has(out, "embed: --output '/nonexistent/kiln_dir/e.npy': the folder '/nonexistent/kiln_dir' does not exist"),
                  out.err);
    CHECK_FALSE(has(out, "fetch_minilm"));  // the model folder was never looked at
    Run exp = run(KILN_EMBED_PATH, "--export /nonexistent/kiln_dir/m.mef" + nodata);
    CHECK(exp.code == 1);
    CHECK(has(exp, "--export '/nonexistent/kiln_dir/m.mef': the folder '/nonexistent/kiln_dir' does not exist"));
    const std::string dir = fs::temp_directory_path().string();
    Run folder = run(KILN_EMBED_PATH, "--output '" + dir + "'" + nodata);
    CHECK(folder.code == 1);
    CHECK(has(folder, "--output '" + dir + "': is a folder, not a file"));
    Run empty = run(KILN_EMBED_PATH, "--output=" + nodata);
    CHECK(empty.code == 2);
    CHECK(has(empty, "embed: --output expects a file path, got ''"));
    // a good path gets past the check: the next error is the missing model folder
    Run good = run(KILN_EMBED_PATH, "--output '" + dir + "/kiln_example_args.npy'" + nodata);
    CHECK(good.code == 1);
    CHECK(has(good, "fetch_minilm"));
  }

  TEST_CASE("embed refuses an empty query, a blank sentence and an empty corpus before any work") {
    const std::string nodata = " --data /nonexistent/kiln_minilm";
    Run q = run(KILN_EMBED_PATH, "--search '' 'a sentence'" + nodata);
    CHECK(q.code == 2);
    CHECK_MESSAGE(has(q, "embed: --search expects a QUERY with words, got ''"), q.err);
    Run qc = run(KILN_EMBED_PATH, "--search '\x01\x02' 'a sentence'" + nodata);
    CHECK(qc.code == 2);
    CHECK_MESSAGE(has(qc, "--search expects a QUERY with words"), qc.err);
    // control characters only: the tokenizer drops them, so the sentence is empty
    Run ctl = run(KILN_EMBED_PATH, "'\x01\x02'" + nodata);
    CHECK(ctl.code == 1);
    CHECK_MESSAGE(has(ctl, "sentence argument 1 is empty (nothing but spaces or control characters)"), ctl.err);
    CHECK_FALSE(has(ctl, "fetch_minilm"));
    // a corpus with no sentences: reported before the model is looked at
    Run corpus = run(KILN_EMBED_PATH, "--corpus /dev/null --search q 'a sentence'" + nodata);
    CHECK(corpus.code == 1);
    CHECK_MESSAGE(has(corpus, "--corpus '/dev/null' has no sentences"), corpus.err);
    CHECK_FALSE(has(corpus, "fetch_minilm"));
    // a directory is named as one (it used to read as a file with no sentences)
    const std::string tmp = fs::temp_directory_path().string();
    Run dir_file = run(KILN_EMBED_PATH, "--file '" + tmp + "'" + nodata);
    CHECK(dir_file.code == 1);
    CHECK_MESSAGE(has(dir_file, "--file '" + tmp + "' is a directory (expected a text file, one sentence per line)"),
                  dir_file.err);
    CHECK_FALSE(has(dir_file, "has no sentences"));
    Run dir_corpus = run(KILN_EMBED_PATH, "--corpus '" + tmp + "' --search q 'a sentence'" + nodata);
    CHECK(dir_corpus.code == 1);
    CHECK_MESSAGE(has(dir_corpus, "--corpus '" + tmp + "' is a directory"), dir_corpus.err);
  }

  TEST_CASE("embed refuses a vocab.txt whose size is not the config's vocab_size, before loading the weights") {
    const fs::path dir = fs::temp_directory_path() / ("kiln_example_args_vocab_" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "config.json")
        << R"({"hidden_act": "gelu", "hidden_size": 384, "intermediate_size": 1536, "layer_norm_eps": 1e-12,
               "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 6,
               "type_vocab_size": 2, "vocab_size": 30522})";
    std::ofstream(dir / "vocab.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nman\n";
    std::ofstream(dir / "model.safetensors");  // empty: never read, the check comes first
    Run r = run(KILN_EMBED_PATH, "--data '" + dir.string() + "' 'the man'");
    CHECK(r.code == 1);
    CHECK_MESSAGE(has(r, "vocab.txt' has 6 tokens but '" + (dir / "config.json").string() + "' says vocab_size 30522"),
                  r.err);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  TEST_CASE("embed and digits share one option parser") {
    for (const char* exe : {KILN_EMBED_PATH, KILN_DIGITS_PATH}) {
      CAPTURE(exe);
      const std::string prog = std::string(exe).find("embed") != std::string::npos ? "embed" : "digits";
      Run threads = run(exe, "--threads 0");
      CHECK(threads.code == 2);
      CHECK(has(threads, prog + ": --threads expects a positive integer, got '0'"));
      Run threads_eq = run(exe, "--threads=x2");
      CHECK(threads_eq.code == 2);
      CHECK(has(threads_eq, "--threads expects a positive integer, got 'x2'"));
      Run missing = run(exe, "--threads");
      CHECK(missing.code == 2);
      CHECK(has(missing, "--threads expects a value"));
      Run strict = run(exe, "--strict=1");
      CHECK(strict.code == 2);
      CHECK(has(strict, "--strict takes no value"));
      Run unknown = run(exe, "--frobnicate");
      CHECK(unknown.code == 2);
      CHECK(has(unknown, "unknown option '--frobnicate'"));
      CHECK(has(unknown, "usage:"));
      CHECK(run(exe, "--help").code == 0);
    }
  }
}

#endif
