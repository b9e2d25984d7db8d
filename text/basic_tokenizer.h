// kiln: BERT's "basic tokenizer" (the step before WordPiece): text cleaning,
// CJK splitting, lowercasing and accent stripping, whitespace and
// punctuation splitting, with Unicode data from utf8proc.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kiln::text {

/// The words of `text` (UTF-8) as HuggingFace's BasicTokenizer gives them,
/// each a UTF-8 string; see WordPieceTokenizer (wordpiece.h) for the rules.
/// `op` starts error messages. Throws ValueError "<op>: text is not valid
/// UTF-8: byte 0x.. at byte offset N" for invalid UTF-8 (overlong forms,
/// surrogates and code points above U+10FFFF included).
std::vector<std::string> basic_tokenize(std::string_view text, bool lowercase, const std::string& op);

/// The byte offset where the first invalid UTF-8 sequence of `s` starts, or
/// std::string_view::npos when `s` is valid UTF-8.
size_t find_invalid_utf8(std::string_view s);

}  // namespace kiln::text
