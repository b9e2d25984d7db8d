#include "wordpiece.h"

#include <algorithm>

#include "../io/csv.h"  // IoError
#include "../io/file_bytes.h"
#include "../tensor/error.h"
#include "basic_tokenizer.h"

namespace kiln::text {
namespace {

// BertTokenizer's max_input_chars_per_word: longer words become [UNK].
constexpr size_t kMaxWordChars = 100;

void check_max_length(int64_t max_length, const std::string& op) {
  if (max_length < 2)
    throw ValueError(op + ": max_length must be >= 2 (room for [CLS] and [SEP]), got " + std::to_string(max_length));
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& path, bool lowercase) {
  const std::string op = "WordPieceTokenizer::from_vocab_file";
  if (path.empty()) throw IoError(op + ": the path is empty (expected the path of a vocab.txt)");
  std::string bytes = io_detail::read_file_bytes(path, op);
  auto fail = [&](int64_t line, const std::string& what) {
    throw ValueError(op + ": '" + path + "' line " + std::to_string(line + 1) + ": " + what);
  };
  WordPieceTokenizer t;
  t.lowercase_ = lowercase;
  size_t pos = 0;
  int64_t id = 0;
  while (pos < bytes.size()) {
    size_t nl = bytes.find('\n', pos);
    size_t end = nl == std::string::npos ? bytes.size() : nl;
    std::string_view token(bytes.data() + pos, end - pos);
    if (!token.empty() && token.back() == '\r') token.remove_suffix(1);  // CRLF files
    if (token.empty()) fail(id, "empty line (expected one token per line)");
    if (size_t bad = find_invalid_utf8(token); bad != std::string_view::npos)
      fail(id, "the token is not valid UTF-8 (at its byte " + std::to_string(bad) + ")");
    auto [it, inserted] = t.vocab_.emplace(std::string(token), id);
    if (!inserted)
      fail(id, "token '" + std::string(token) + "' is listed twice (first on line " + std::to_string(it->second + 1) +
                   "): ids would be ambiguous");
    ++id;
    pos = end + 1;
  }
  if (id == 0) throw ValueError(op + ": '" + path + "' is empty (expected one token per line)");
  t.vocab_size_ = id;
  auto special = [&](std::string_view name) {
    int64_t v = t.token_id(name);
    if (v < 0) throw ValueError(op + ": '" + path + "' has no " + std::string(name) + " token (a BERT vocab needs it)");
    return v;
  };
  t.unk_ = special("[UNK]");
  t.cls_ = special("[CLS]");
  t.sep_ = special("[SEP]");
  t.pad_ = special("[PAD]");
  return t;
}

int64_t WordPieceTokenizer::token_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

void WordPieceTokenizer::run(std::string_view text, size_t limit, std::vector<int64_t>& ids,
                             std::vector<std::string>* pieces, const std::string& op) const {
  size_t emitted = 0;
  std::vector<size_t> cut;                             // byte offset of each code point, then the end
  std::vector<int64_t> word_ids;                       // the current word's pieces
  std::vector<std::string> word_pieces;
  std::string key;
  for (const std::string& word : basic_tokenize(text, lowercase_, op)) {
    if (emitted == limit) return;
    cut.clear();
    for (size_t i = 0; i < word.size(); ++i)
      if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) cut.push_back(i);  // not a continuation byte
    cut.push_back(word.size());
    size_t n = cut.size() - 1;
    word_ids.clear();
    word_pieces.clear();
    bool unknown = n > kMaxWordChars;
    // Greedy longest-match-first: the longest vocab entry starting at
    // `start` ("##"-prefixed after the first piece), then on from its end.
    for (size_t start = 0; !unknown && start < n;) {
      int64_t found = -1;
      size_t end = n;
      for (; end > start; --end) {
        key.assign(start > 0 ? "##" : "");
        key.append(word, cut[start], cut[end] - cut[start]);
        found = token_id(key);
        if (found >= 0) break;
      }
      if (found < 0) {
        unknown = true;
        break;
      }
      word_ids.push_back(found);
      if (pieces) word_pieces.push_back(key);
      start = end;
    }
    if (unknown) {
      word_ids.assign(1, unk_);
      if (pieces) word_pieces.assign(1, "[UNK]");
    }
    for (size_t i = 0; i < word_ids.size() && emitted < limit; ++i, ++emitted) {
      ids.push_back(word_ids[i]);
      if (pieces) pieces->push_back(std::move(word_pieces[i]));
    }
  }
}

std::vector<int64_t> WordPieceTokenizer::encode_as(std::string_view text, int64_t max_length,
                                                   const std::string& op) const {
  check_max_length(max_length, op);
  std::vector<int64_t> ids{cls_};
  run(text, static_cast<size_t>(max_length - 2), ids, nullptr, op);
  ids.push_back(sep_);
  return ids;
}

std::vector<int64_t> WordPieceTokenizer::encode(std::string_view text, int64_t max_length) const {
  return encode_as(text, max_length, "WordPieceTokenizer::encode");
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<int64_t> ids;
  std::vector<std::string> pieces;
  run(text, static_cast<size_t>(-1), ids, &pieces, "WordPieceTokenizer::tokenize");
  return pieces;
}

WordPieceTokenizer::Batch WordPieceTokenizer::encode_batch(std::span<const std::string> texts, int64_t max_length,
                                                           int64_t pad_to) const {
  const std::string op = "WordPieceTokenizer::encode_batch";
  check_max_length(max_length, op);
  if (pad_to < 0) throw ValueError(op + ": pad_to must be >= 0, got " + std::to_string(pad_to));
  std::vector<std::vector<int64_t>> rows;
  rows.reserve(texts.size());
  int64_t len = pad_to;
  for (size_t i = 0; i < texts.size(); ++i) {
    rows.push_back(encode_as(texts[i], max_length, op + ": texts[" + std::to_string(i) + "]"));
    len = std::max(len, static_cast<int64_t>(rows.back().size()));
  }
  const auto n = static_cast<int64_t>(texts.size());
  std::vector<int64_t> ids(static_cast<size_t>(n * len), pad_), mask(static_cast<size_t>(n * len), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy(rows[i].begin(), rows[i].end(), ids.begin() + static_cast<ptrdiff_t>(i * len));
    std::fill_n(mask.begin() + static_cast<ptrdiff_t>(i * len), rows[i].size(), int64_t{1});
  }
  return {Tensor::from_vector(ids, Shape{n, len}), Tensor::from_vector(mask, Shape{n, len})};
}

}  // namespace kiln::text
