#include "basic_tokenizer.h"

#include <utf8proc.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "../tensor/error.h"

namespace kiln::text {
namespace {

using Cp = utf8proc_int32_t;

// BERT's _is_whitespace, plus the line/paragraph separators that its
// str.split() (and the Rust tokenizer's char::is_whitespace) split on.
bool is_whitespace(Cp c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

// BERT's _is_control: category C* (Cc, Cf, Cs, Co, Cn), except tab, newline, CR.
bool is_control(Cp c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: return true;
    default: return false;
  }
}

// BERT's _is_punctuation: every non-alphanumeric printable ASCII character
// (so ^ $ ` + count although Unicode calls them symbols), and category P*.
bool is_punctuation(Cp c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO: return true;
    default: return false;
  }
}

// BERT's _is_chinese_char: the CJK Unified Ideographs blocks, verbatim from
// its code (not Unicode's full Ideographic property: Hangul, kana etc. stay).
bool is_cjk(Cp c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append_utf8(std::string& out, Cp c) {
  utf8proc_uint8_t buf[4];
  auto n = utf8proc_encode_char(c, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// Calls f(code point) for each character of valid UTF-8 `s`; the first
// invalid sequence throws ValueError naming its byte offset.
template <class F>
void for_each_cp(std::string_view s, const std::string& op, F&& f) {
  auto p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t pos = 0;
  while (pos < s.size()) {
    Cp c;
    auto n = utf8proc_iterate(p + pos, static_cast<utf8proc_ssize_t>(s.size() - pos), &c);
    if (n <= 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(p[pos]));
      throw ValueError(op + ": text is not valid UTF-8: byte " + hex + " at byte offset " + std::to_string(pos) +
                       " does not start a valid sequence");
    }
    f(c);
    pos += static_cast<size_t>(n);
  }
}

}  // namespace

size_t find_invalid_utf8(std::string_view s) {
  auto p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  for (size_t pos = 0; pos < s.size();) {
    Cp c;
    auto n = utf8proc_iterate(p + pos, static_cast<utf8proc_ssize_t>(s.size() - pos), &c);
    if (n <= 0) return pos;
    pos += static_cast<size_t>(n);
  }
  return std::string_view::npos;
}

std::vector<std::string> basic_tokenize(std::string_view text, bool lowercase, const std::string& op) {
  // Clean, space out CJK ideographs and lowercase in one pass.
  std::string clean;
  clean.reserve(text.size() + 8);
  for_each_cp(text, op, [&](Cp c) {
    if (c == 0 || c == 0xFFFD || is_control(c)) return;
    if (is_whitespace(c)) {
      clean += ' ';
    } else if (is_cjk(c)) {
      clean += ' ';
      append_utf8(clean, c);
      clean += ' ';
    } else {
      append_utf8(clean, lowercase ? utf8proc_tolower(c) : c);
    }
  });

  // Lowercased text is decomposed (NFD) so that accents become marks to
  // drop; cased text is composed (NFC), as BertTokenizer does first.
  utf8proc_uint8_t* raw = nullptr;
  auto options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | (lowercase ? UTF8PROC_DECOMPOSE : UTF8PROC_COMPOSE));
  auto len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(clean.data()),
                          static_cast<utf8proc_ssize_t>(clean.size()), &raw, options);
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(raw, &std::free);
  if (len < 0) throw ValueError(op + ": Unicode normalisation failed: " + utf8proc_errmsg(len));
  std::string_view norm(reinterpret_cast<const char*>(raw), static_cast<size_t>(len));

  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for_each_cp(norm, op, [&](Cp c) {
    if (lowercase && utf8proc_category(c) == UTF8PROC_CATEGORY_MN) return;  // strip accents
    if (is_whitespace(c)) {
      flush();
    } else if (is_punctuation(c)) {
      flush();
      append_utf8(word, c);
      flush();
    } else {
      append_utf8(word, c);
    }
  });
  flush();
  return words;
}

}  // namespace kiln::text
