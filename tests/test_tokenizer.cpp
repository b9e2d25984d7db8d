// The WordPiece tokenizer (text/wordpiece.h): BERT's rules on small
// hand-made vocabularies (every edge case, each expectation worked out by
// hand from HuggingFace BertTokenizer's algorithm), then the real MiniLM
// vocab against the ids its own tokenizer gave the 16 reference sentences
// (../shared/data/minilm/reference.json, computed with sentence-transformers).
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "test_util.h"

using namespace kiln;
using kiln::text::WordPieceTokenizer;
namespace fs = std::filesystem;
using Pieces = std::vector<std::string>;
using Ids = std::vector<int64_t>;

namespace {

/// Writes `text` to a fresh file under the temp folder; removed on destruction.
struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& text, const std::string& name = "vocab.txt") {
    static int counter = 0;
    fs::path dir = fs::temp_directory_path() / ("kiln_test_tokenizer_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    path = dir / (std::to_string(counter++) + "_" + name);
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

// A tiny vocab: ids are the line numbers.
const char* kVocab =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n"           // 0-3
    "the\nquick\nbrown\nun\n##aff\n##able\n"  // 4-9
    "cafe\ncreme\n,\n.\n!\n^\n$\n`\n+\n"      // 10-18
    "\xE6\x9D\xB1\n\xE4\xBA\xAC\n"            // 19 東, 20 京
    "a\n##a\nhello\nworld\nCaf\xC3\xA9\n";    // 21-25 (25: "Café" for the cased tokenizer)

const WordPieceTokenizer& small() {
  static TempFile f(kVocab);
  static WordPieceTokenizer t = WordPieceTokenizer::from_vocab_file(f.path.string());
  return t;
}

fs::path minilm_dir() { return KILN_MINILM_DIR; }
fs::path reference_json() { return fs::path(KILN_SHARED_DATA_DIR) / "minilm" / "reference.json"; }

/// True when the MiniLM vocab and reference are present. When absent the
/// test fails with the command that fetches them, unless KILN_SKIP_MINILM=1.
bool minilm_present() {
  bool vocab = fs::exists(minilm_dir() / "vocab.txt"), ref = fs::exists(reference_json());
  if (vocab && ref) return true;
  const char* skip = std::getenv("KILN_SKIP_MINILM");
  std::string what = !vocab ? (minilm_dir() / "vocab.txt").string() + " is absent: run `bash scripts/fetch_minilm.sh`"
                            : reference_json().string() +
                                  " is absent: point the CMake cache variable KILN_SHARED_DATA_DIR at the shared data folder";
  if (skip && std::string(skip) == "1") {
    MESSAGE("skipped (KILN_SKIP_MINILM=1): " << what);
    return false;
  }
  FAIL(what << " (or set KILN_SKIP_MINILM=1 to skip this test)");
  return false;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_SUITE("tokenizer") {
  TEST_CASE("vocab: ids are line numbers; token_id is -1 when absent") {
    const auto& t = small();
    CHECK(t.vocab_size() == 26);
    CHECK(t.token_id("[PAD]") == 0);
    CHECK(t.token_id("[SEP]") == 3);
    CHECK(t.token_id("##able") == 9);
    CHECK(t.token_id("Caf\xC3\xA9") == 25);
    CHECK(t.token_id("able") == -1);
    CHECK(t.token_id("") == -1);
  }

  TEST_CASE("empty text and text of only whitespace or dropped characters give no pieces") {
    const auto& t = small();
    CHECK(t.tokenize("").empty());
    CHECK(t.tokenize("   \t\n\r  ").empty());
    CHECK(t.tokenize(std::string("\0\0", 2)).empty());
    CHECK(t.tokenize("\xEF\xBF\xBD\xE2\x80\x8B").empty());  // U+FFFD, U+200B (Cf)
    CHECK(t.encode("") == Ids{2, 3});
    CHECK(t.encode("    ") == Ids{2, 3});
  }

  TEST_CASE("greedy longest-match-first with ## continuations; lowercase") {
    const auto& t = small();
    CHECK(t.tokenize("unaffable") == Pieces{"un", "##aff", "##able"});
    CHECK(t.tokenize("UnAffABLE the QUICK") == Pieces{"un", "##aff", "##able", "the", "quick"});
    CHECK(t.encode("the quick brown") == Ids{2, 4, 5, 6, 3});
    CHECK(t.tokenize("aaa") == Pieces{"a", "##a", "##a"});
    // A word whose tail matches nothing is one [UNK], not a partial match.
    CHECK(t.tokenize("unaffablex the") == Pieces{"[UNK]", "the"});
    CHECK(t.tokenize("able") == Pieces{"[UNK]"});  // only "##able" is in the vocab
  }

  TEST_CASE("whitespace: tab, newline, CR, no-break space and line separator split words") {
    const auto& t = small();
    CHECK(t.tokenize("the\tquick\nbrown\rthe") == Pieces{"the", "quick", "brown", "the"});
    CHECK(t.tokenize("the\xC2\xA0quick\xE2\x80\xA8" "brown\xE3\x80\x80the") ==
          Pieces{"the", "quick", "brown", "the"});  // U+00A0, U+2028, U+3000
  }

  TEST_CASE("cleaning drops NUL, U+FFFD and control/format characters inside words") {
    const auto& t = small();
    CHECK(t.tokenize(std::string("a\0a", 3)) == Pieces{"a", "##a"});
    CHECK(t.tokenize("a\x07" "a\xEF\xBF\xBD" "a") == Pieces{"a", "##a", "##a"});  // BEL, U+FFFD
    CHECK(t.tokenize("a\xC2\xAD" "a\xE2\x80\x8D" "a") == Pieces{"a", "##a", "##a"});  // soft hyphen, ZWJ (Cf)
  }

  TEST_CASE("accents are stripped after NFD (precomposed and combining forms alike)") {
    const auto& t = small();
    CHECK(t.tokenize("Cr\xC3\xA8me") == Pieces{"creme"});                 // è precomposed
    CHECK(t.tokenize("CAF\xC3\x89") == Pieces{"cafe"});                   // É
    CHECK(t.tokenize("cafe\xCC\x81") == Pieces{"cafe"});                  // e + U+0301
    CHECK(t.tokenize("\xC3\xA0\xCC\x80\xCC\x81") == Pieces{"a"});        // à + two more marks
    CHECK(t.tokenize("\xCC\x81" "the") == Pieces{"the"});                 // a leading lone mark
  }

  TEST_CASE("cased tokenizer: no lowercasing, no accent stripping, NFC") {
    TempFile f(kVocab);
    auto t = WordPieceTokenizer::from_vocab_file(f.path.string(), /*lowercase=*/false);
    CHECK(t.tokenize("Caf\xC3\xA9") == Pieces{"Caf\xC3\xA9"});
    CHECK(t.tokenize("Cafe\xCC\x81") == Pieces{"Caf\xC3\xA9"});  // composed to é first
    CHECK(t.tokenize("caf\xC3\xA9 The the") == Pieces{"[UNK]", "[UNK]", "the"});
  }

  TEST_CASE("CJK ideographs are words of their own; kana and Hangul are not split") {
    const auto& t = small();
    CHECK(t.tokenize("\xE6\x9D\xB1\xE4\xBA\xAC") == Pieces{"\xE6\x9D\xB1", "\xE4\xBA\xAC"});  // 東京
    CHECK(t.tokenize("a\xE6\x9D\xB1" "a") == Pieces{"a", "\xE6\x9D\xB1", "a"});
    CHECK(t.tokenize("\xE3\x81\xAF\xE3\x81\xAF") == Pieces{"[UNK]"});  // はは: one word
    CHECK(t.tokenize("\xE6\x9D\xB1\xE3\x81\xAF") == Pieces{"\xE6\x9D\xB1", "[UNK]"});
  }

  TEST_CASE("emoji and symbols are not punctuation: an unknown word is one [UNK]") {
    const auto& t = small();
    CHECK(t.tokenize("\xF0\x9F\x98\x80") == Pieces{"[UNK]"});                     // 😀
    CHECK(t.tokenize("the\xF0\x9F\x98\x80 quick") == Pieces{"[UNK]", "quick"});   // "the😀" is one word
    CHECK(t.tokenize("a\xC2\xA9" "a") == Pieces{"[UNK]"});                       // © (So) does not split
  }

  TEST_CASE("punctuation splits: Unicode P* and all ASCII punctuation, symbols like ^ $ ` + included") {
    const auto& t = small();
    CHECK(t.tokenize("hello,world!") == Pieces{"hello", ",", "world", "!"});
    CHECK(t.tokenize("^$`+") == Pieces{"^", "$", "`", "+"});
    CHECK(t.tokenize("a.a") == Pieces{"a", ".", "a"});
    CHECK(t.tokenize("a-a") == Pieces{"a", "[UNK]", "a"});                     // '-' split, not in vocab
    CHECK(t.tokenize("a\xC2\xAB" "a\xE2\x80\x94" "a") == Pieces{"a", "[UNK]", "a", "[UNK]", "a"});  // « —
    CHECK(t.tokenize("...") == Pieces{".", ".", "."});
  }

  TEST_CASE("a word of more than 100 characters is [UNK]; 100 are split") {
    const auto& t = small();
    CHECK(t.tokenize(repeat("a", 101)) == Pieces{"[UNK]"});
    Pieces hundred{"a"};
    for (int i = 0; i < 99; ++i) hundred.push_back("##a");
    CHECK(t.tokenize(repeat("a", 100)) == hundred);
    // Characters, not bytes: 100 two-byte characters that strip to "a".
    CHECK(t.tokenize(repeat("\xC3\xA0", 100)) == hundred);
    CHECK(t.tokenize(repeat("\xC3\xA0", 101) + " the") == Pieces{"[UNK]", "the"});
  }

  TEST_CASE("truncation keeps [CLS] and [SEP] and cuts pieces, mid-word too") {
    const auto& t = small();
    CHECK(t.encode("the quick brown", 2) == Ids{2, 3});
    CHECK(t.encode("the quick brown", 3) == Ids{2, 4, 3});
    CHECK(t.encode("the quick brown", 5) == Ids{2, 4, 5, 6, 3});
    CHECK(t.encode("the quick brown", 6) == Ids{2, 4, 5, 6, 3});
    CHECK(t.encode("unaffable", 4) == Ids{2, 7, 8, 3});
    CHECK(t.encode(repeat("the ", 1000)).size() == 256);
    CHECK_THROWS_AS(t.encode("the", 1), ValueError);
    CHECK_THROWS_WITH(t.encode("the", -5), doctest::Contains("max_length must be >= 2"));
  }

  TEST_CASE("encode_batch pads to the longest row or pad_to; mask marks the ids") {
    const auto& t = small();
    std::vector<std::string> texts{"the quick", "", "unaffable brown"};
    auto b = t.encode_batch(texts);
    CHECK(b.input_ids.dtype() == DType::int64);
    CHECK(b.attention_mask.dtype() == DType::int64);
    CHECK(b.input_ids.shape() == Shape{3, 6});
    CHECK(b.attention_mask.shape() == Shape{3, 6});
    CHECK(b.input_ids.to_vector<int64_t>() == Ids{2, 4, 5, 3, 0, 0,  //
                                                  2, 3, 0, 0, 0, 0,  //
                                                  2, 7, 8, 9, 6, 3});
    CHECK(b.attention_mask.to_vector<int64_t>() == Ids{1, 1, 1, 1, 0, 0,  //
                                                       1, 1, 0, 0, 0, 0,  //
                                                       1, 1, 1, 1, 1, 1});
    // Each row equals encode() of its text.
    for (int64_t i = 0; i < 3; ++i) {
      Ids row = t.encode(texts[static_cast<size_t>(i)]);
      Ids got = b.input_ids.to_vector<int64_t>();
      CHECK(Ids(got.begin() + i * 6, got.begin() + i * 6 + static_cast<int64_t>(row.size())) == row);
    }
    auto padded = t.encode_batch(texts, 256, 8);
    CHECK(padded.input_ids.shape() == Shape{3, 8});
    CHECK(padded.input_ids.to_vector<int64_t>() == Ids{2, 4, 5, 3, 0, 0, 0, 0,  //
                                                       2, 3, 0, 0, 0, 0, 0, 0,  //
                                                       2, 7, 8, 9, 6, 3, 0, 0});
    CHECK(padded.attention_mask.to_vector<int64_t>() == Ids{1, 1, 1, 1, 0, 0, 0, 0,  //
                                                            1, 1, 0, 0, 0, 0, 0, 0,  //
                                                            1, 1, 1, 1, 1, 1, 0, 0});
    CHECK(t.encode_batch(texts, 256, 4).input_ids.shape() == Shape{3, 6});  // pad_to below the longest
    auto cut = t.encode_batch(texts, 3);
    CHECK(cut.input_ids.to_vector<int64_t>() == Ids{2, 4, 3, 2, 3, 0, 2, 7, 3});
    CHECK(cut.attention_mask.to_vector<int64_t>() == Ids{1, 1, 1, 1, 1, 0, 1, 1, 1});
    auto none = t.encode_batch({}, 256, 5);
    CHECK(none.input_ids.shape() == Shape{0, 5});
    CHECK_THROWS_WITH(t.encode_batch(texts, 256, -1), doctest::Contains("pad_to must be >= 0"));
    CHECK_THROWS_AS(t.encode_batch(texts, 1), ValueError);
  }

  TEST_CASE("invalid UTF-8 is a ValueError naming the byte offset") {
    const auto& t = small();
    CHECK_THROWS_WITH_AS(t.encode("ab\xC3("), doctest::Contains("byte 0xC3 at byte offset 2"), ValueError);
    CHECK_THROWS_WITH_AS(t.tokenize("the \xED\xA0\x80"), doctest::Contains("byte offset 4"), ValueError);  // surrogate
    CHECK_THROWS_WITH_AS(t.tokenize("\xC0\xAF"), doctest::Contains("byte offset 0"), ValueError);  // overlong '/'
    CHECK_THROWS_WITH_AS(t.tokenize("abc\xE2\x82"), doctest::Contains("byte offset 3"), ValueError);  // cut short
    CHECK_THROWS_WITH_AS(t.tokenize("\xF4\x90\x80\x80"), doctest::Contains("byte offset 0"), ValueError);  // > U+10FFFF
    CHECK_THROWS_WITH_AS(t.tokenize("a\x80"), doctest::Contains("byte offset 1"), ValueError);
    std::vector<std::string> texts{"the", "x\xFF"};
    CHECK_THROWS_WITH_AS(t.encode_batch(texts), doctest::Contains("texts[1]: text is not valid UTF-8"), ValueError);
    // Invalid bytes past the truncation point are still reported.
    CHECK_THROWS_AS(t.encode("the quick brown \xFF", 3), ValueError);
  }

  TEST_CASE("bad vocab files: missing, empty, duplicate, empty line, no specials, bad UTF-8; CRLF works") {
    CHECK_THROWS_WITH_AS(WordPieceTokenizer::from_vocab_file("/nonexistent/kiln/vocab.txt"),
                         doctest::Contains("cannot open '/nonexistent/kiln/vocab.txt'"), IoError);
    CHECK_THROWS_AS(WordPieceTokenizer::from_vocab_file(""), IoError);
    TempFile empty("");
    CHECK_THROWS_WITH_AS(WordPieceTokenizer::from_vocab_file(empty.path.string()), doctest::Contains("is empty"),
                         ValueError);
    TempFile dup("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nthe\n");
    CHECK_THROWS_WITH_AS(WordPieceTokenizer::from_vocab_file(dup.path.string()),
                         doctest::Contains("line 6: token 'the' is listed twice (first on line 5)"), ValueError);
    TempFile blank("[PAD]\n[UNK]\n\n[CLS]\n[SEP]\n");
    CHECK_THROWS_WITH_AS(WordPieceTokenizer::from_vocab_file(blank.path.string()),
                         doctest::Contains("line 3: empty line"), ValueError);
    TempFile nounk("[PAD]\n[CLS]\n[SEP]\nthe\n");
    CHECK_THROWS_WITH_AS(WordPieceTokenizer::from_vocab_file(nounk.path.string()), doctest::Contains("no [UNK] token"),
                         ValueError);
    TempFile badutf("[PAD]\n[UNK]\n[CLS]\n[SEP]\nth\xFF\n");
    CHECK_THROWS_WITH_AS(WordPieceTokenizer::from_vocab_file(badutf.path.string()),
                         doctest::Contains("line 5: the token is not valid UTF-8"), ValueError);
    TempFile crlf("[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nthe");  // no final newline either
    auto t = WordPieceTokenizer::from_vocab_file(crlf.path.string());
    CHECK(t.vocab_size() == 5);
    CHECK(t.encode("The") == Ids{2, 4, 3});
  }

  TEST_CASE("MiniLM vocab: the reference ids of all 16 sentences (BertTokenizer via sentence-transformers)") {
    if (!minilm_present()) return;
    auto t = WordPieceTokenizer::from_vocab_file((minilm_dir() / "vocab.txt").string());
    CHECK(t.vocab_size() == 30522);
    CHECK(t.token_id("[PAD]") == 0);
    CHECK(t.token_id("[UNK]") == 100);
    std::ifstream f(reference_json());
    nlohmann::json ref = nlohmann::json::parse(f);
    auto sentences = ref.at("sentences").get<std::vector<std::string>>();
    auto want = ref.at("input_ids").get<std::vector<Ids>>();
    int64_t max_len = ref.at("max_seq_length").get<int64_t>();
    REQUIRE(sentences.size() == 16);
    REQUIRE(want.size() == sentences.size());
    size_t longest = 0;
    for (size_t i = 0; i < sentences.size(); ++i) {
      INFO("sentence " << i << ": " << sentences[i]);
      CHECK(t.encode(sentences[i], max_len) == want[i]);
      longest = std::max(longest, want[i].size());
    }
    // The batch: the same rows, padded with 0 and masked.
    auto b = t.encode_batch(sentences, max_len);
    const auto l = static_cast<int64_t>(longest);
    REQUIRE(b.input_ids.shape() == Shape{16, l});
    Ids ids = b.input_ids.to_vector<int64_t>(), mask = b.attention_mask.to_vector<int64_t>();
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("batch row " << i);
      for (size_t j = 0; j < longest; ++j) {
        bool in = j < want[i].size();
        CHECK(ids[i * longest + j] == (in ? want[i][j] : 0));
        CHECK(mask[i * longest + j] == (in ? 1 : 0));
      }
    }
  }
}
