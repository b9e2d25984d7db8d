// kiln: BERT's WordPiece tokenizer (HuggingFace BertTokenizer with
// do_lower_case, tokenize_chinese_chars and strip_accents following the
// lowercase flag), for models such as all-MiniLM-L6-v2 that ship a vocab.txt.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln::text {

/// Text -> token ids, as BERT's tokenizer does it:
///  1. basic tokenizer: drop NUL, U+FFFD and control characters (Unicode
///     category C*, except tab/newline/CR) and map whitespace (tab, newline,
///     CR, categories Zs/Zl/Zp) to a space; put spaces around CJK ideographs
///     (BERT's fixed list of blocks); with `lowercase`: lowercase (utf8proc's
///     simple mapping), Unicode NFD, drop nonspacing marks (category Mn);
///     without it: Unicode NFC. Then split on whitespace and punctuation
///     (category P*, and every ASCII character in !-/ :-@ [-` {-~), each
///     punctuation character a word of its own.
///  2. WordPiece: each word greedily split longest-match-first into vocab
///     entries, continuation pieces prefixed "##"; a word longer than 100 code
///     points or with a part matching no entry becomes one [UNK].
/// All text is UTF-8; invalid UTF-8 throws ValueError naming the byte offset.
/// Immutable after construction: one tokenizer may be used from many threads.
///
/// Not done (as in BertTokenizer's defaults these models do not need): text
/// that spells a special token ("[CLS]") is tokenized as ordinary text, and
/// a final capital sigma lowercases to "σ", not "ς".
class WordPieceTokenizer {
 public:
  /// Reads vocab.txt: one token per line (a final newline is optional, a CR
  /// before a newline is dropped), id = line number from 0. `lowercase`:
  /// lowercase and strip accents (the uncased models); false keeps case and
  /// accents. Throws IoError when the file cannot be read; ValueError (naming
  /// the path and line) for an empty file, an empty line, a line that is not
  /// UTF-8, a token listed twice, or a missing [UNK], [CLS], [SEP] or [PAD].
  static WordPieceTokenizer from_vocab_file(const std::string& path, bool lowercase = true);

  /// Token ids (int64) of one text: [CLS], the word pieces, [SEP]; the pieces
  /// are truncated so that the whole has at most `max_length` ids. Throws
  /// ValueError for max_length < 2 or invalid UTF-8.
  std::vector<int64_t> encode(std::string_view text, int64_t max_length = 256) const;

  /// The word pieces (vocab entries, "##" continuations, "[UNK]") of one
  /// text, without [CLS]/[SEP] or truncation (for debugging/tests). Throws
  /// ValueError for invalid UTF-8.
  std::vector<std::string> tokenize(std::string_view text) const;

  /// A padded batch: both int64 [n, L], row i is texts[i].
  struct Batch {
    Tensor input_ids;       ///< encode(texts[i], max_length), then [PAD] ids
    Tensor attention_mask;  ///< 1 over the encoded ids, 0 over the padding
  };
  /// encode() of every text, each row padded to L = max(longest row, pad_to)
  /// with [PAD]'s id (0 in BERT's vocabs) and mask 0. No texts gives [0, pad_to].
  /// Throws ValueError for max_length < 2, pad_to < 0 or invalid UTF-8 (the
  /// message names the text's index).
  Batch encode_batch(std::span<const std::string> texts, int64_t max_length = 256, int64_t pad_to = 0) const;

  /// Number of vocab entries (lines of vocab.txt).
  int64_t vocab_size() const { return vocab_size_; }
  /// The id of `token` (exactly as in vocab.txt, e.g. "##ing", "[CLS]"); -1 when absent.
  int64_t token_id(std::string_view token) const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  WordPieceTokenizer() = default;
  // Runs both stages on `text`, appending at most `limit` pieces to `ids`
  // and (when non-null) their strings to `pieces`. `op` starts messages.
  void run(std::string_view text, size_t limit, std::vector<int64_t>& ids, std::vector<std::string>* pieces,
           const std::string& op) const;
  std::vector<int64_t> encode_as(std::string_view text, int64_t max_length, const std::string& op) const;

  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> vocab_;
  bool lowercase_ = true;
  int64_t vocab_size_ = 0;
  int64_t unk_ = -1, cls_ = -1, sep_ = -1, pad_ = -1;
};

}  // namespace kiln::text
