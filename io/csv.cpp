// read_csv_dataset: the file is read whole (through zlib when it starts with
// the gzip magic), then parsed line by line with std::from_chars.
#include "csv.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace kiln {
namespace {

constexpr const char* kOp = "read_csv_dataset: ";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw IoError(kOp + path + ": " + what);
}
[[noreturn]] void fail_at(const std::string& path, int64_t line, const std::string& what) {
  throw IoError(kOp + path + " line " + std::to_string(line) + ": " + what);
}

/// The file's bytes. A file that is not regular (a device, a FIFO) has no
/// size to bound the read, so each chunk of it that is not gzip data is
/// checked as it comes: a NUL byte is binary data, not CSV text, and ends the
/// read (tester t17 F4: /dev/zero was read until memory ran out).
std::string plain_contents(const std::string& path, bool regular) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  std::string out;
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) {
    out.append(chunk, n);
    const bool gzip = out.size() >= 2 && static_cast<unsigned char>(out[0]) == 0x1f &&
                      static_cast<unsigned char>(out[1]) == 0x8b;
    if (!regular && !gzip)
      if (const void* z = std::memchr(out.data() + out.size() - n, '\0', n))
        fail(path, "byte " + std::to_string(static_cast<const char*>(z) - out.data()) +
                       " is a NUL byte: binary data, not CSV text (it is not a regular file, so reading stops here)");
  }
  if (std::ferror(f.get())) fail(path, std::string("cannot read (") + std::strerror(errno) + ")");
  return out;
}

[[noreturn]] void twice(const std::string& path) {
  fail(path, "it inflates to gzip data again (compressed twice?); expected CSV text inside the gzip stream");
}

/// `bytes` (a gzip file's contents) inflated. zlib's gzread is not used: it
/// skips whatever follows the last gzip member without a word, so a file
/// with trailing garbage would read as good. inflate() on the bytes in
/// memory reports where the stream ends; what follows must be another gzip
/// member (gzip allows several, concatenated) or nothing.
std::string gunzip(const std::string& path, const std::string& bytes) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK)  // 15: the largest window; +16: gzip format only
    fail(path, "zlib cannot start inflating (out of memory?)");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, &inflateEnd);
  std::string out;
  std::vector<unsigned char> buf(1 << 16);
  size_t pos = 0;  // bytes of `bytes` consumed
  for (;;) {
    const size_t chunk = std::min<size_t>(bytes.size() - pos, size_t{1} << 30);  // avail_in is 32-bit
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + pos));
    zs.avail_in = static_cast<uInt>(chunk);
    zs.next_out = buf.data();
    zs.avail_out = static_cast<uInt>(buf.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    pos += chunk - zs.avail_in;
    const size_t got = buf.size() - zs.avail_out;
    if (out.empty() && got >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) twice(path);
    // CSV text holds no NUL byte: a gzip of binary data (or of zeros, which
    // inflates a thousandfold) is refused at its first chunk instead of
    // inflated whole into memory (tester t18 N5).
    if (const void* z = std::memchr(buf.data(), '\0', got))
      fail(path, "inflated byte " + std::to_string(out.size() + static_cast<size_t>(static_cast<const unsigned char*>(z) - buf.data())) +
                     " is a NUL byte: binary data, not CSV text inside the gzip stream (inflating stops here)");
    out.append(reinterpret_cast<const char*>(buf.data()), got);
    if (rc == Z_OK) continue;
    if (rc == Z_STREAM_END) {
      if (pos == bytes.size()) break;
      if (bytes.size() - pos >= 2 && static_cast<unsigned char>(bytes[pos]) == 0x1f &&
          static_cast<unsigned char>(bytes[pos + 1]) == 0x8b) {
        inflateReset(&zs);  // another gzip member follows
        continue;
      }
      fail(path, "the gzip stream ends at byte " + std::to_string(pos) + " of " + std::to_string(bytes.size()) +
                     ": " + std::to_string(bytes.size() - pos) +
                     " bytes of trailing garbage follow it (expected the end of the file or another gzip member)");
    }
    if (rc == Z_BUF_ERROR && pos == bytes.size())  // no progress: it needs input the file does not have
      fail(path, "the gzip stream is truncated (unexpected end of file)");
    fail(path, std::string("corrupt gzip stream at byte ") + std::to_string(pos) + " (zlib: " +
                   (zs.msg ? zs.msg : "error " + std::to_string(rc)) + ")");
  }
  if (out.size() >= 2 && static_cast<unsigned char>(out[0]) == 0x1f && static_cast<unsigned char>(out[1]) == 0x8b)
    twice(path);
  return out;
}

/// The file's bytes, inflated when it starts with the gzip magic 1f 8b.
std::string file_contents(const std::string& path) {
  if (path.empty()) throw IoError(kOp + std::string("the path is empty (expected the path of a CSV file)"));
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) fail(path, "no such file");
  if (std::filesystem::is_directory(st)) fail(path, "is a directory, expected a CSV file");
  std::string bytes = plain_contents(path, std::filesystem::is_regular_file(st));
  const bool gzip = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
                    static_cast<unsigned char>(bytes[1]) == 0x8b;
  return gzip ? gunzip(path, bytes) : bytes;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

/// The field as a finite double, or nullopt.
std::optional<double> parse_number(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);  // from_chars refuses a '+' sign
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

/// The field in double quotes for a message: a byte that is not printable
/// ASCII (binary garbage, a stray byte-order mark) as \xNN, '"' and '\\'
/// escaped, and cut with "..." past 40 characters so a garbage line stays short.
std::string quoted(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string body;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::string piece;
    if (c == '"' || c == '\\') {
      piece = {'\\', static_cast<char>(c)};
    } else if (c >= 0x20 && c < 0x7f) {
      piece = std::string(1, static_cast<char>(c));
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      piece = hex;
    }
    if (body.size() + piece.size() > kMax) break;
    body += piece;
  }
  return "\"" + body + (i < s.size() ? "...\"" : "\"");
}

std::string number_text(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}


/// A non-empty line of the text (without its '\n') and its number (from 1).
struct Line {
  std::string_view text;
  int64_t number;
};

std::vector<Line> nonempty_lines(const std::string& text, size_t pos) {
  std::vector<Line> out;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!trim(line).empty()) out.push_back({line, line_no});
  }
  return out;
}

/// The fields of one line: views into the text, or into `unquoted` for a
/// quoted field that holds a doubled quote.
struct Fields {
  std::vector<std::string_view> view;
  std::deque<std::string> unquoted;  // a deque: growing it keeps the views valid
};

/// Splits a line at commas outside double quotes. A field that starts
/// (after spaces) with '"' is quoted (RFC 4180): it runs to the next lone
/// '"', with "" standing for one '"'; only spaces may follow it. Elsewhere
/// a '"' is an ordinary character.
void split_fields(const std::string& path, const Line& line, Fields& out) {
  out.view.clear();
  out.unquoted.clear();
  const std::string_view s = line.text;
  size_t i = 0;
  for (;;) {
    const size_t begin = i;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i < s.size() && s[i] == '"') {
      const size_t open = i++;
      std::string body;
      bool doubled = false;
      for (;; ++i) {
        if (i >= s.size())
          throw IoError(kOp + path + " line " + std::to_string(line.number) + ", column " +
                        std::to_string(out.view.size() + 1) + ": the quoted field opened at character " +
                        std::to_string(open + 1) + " has no closing quote on its line");
        if (s[i] != '"') { body += s[i]; continue; }
        if (i + 1 < s.size() && s[i + 1] == '"') { body += '"'; doubled = true; ++i; continue; }
        break;
      }
      ++i;  // past the closing quote
      const size_t after = i;
      while (i < s.size() && s[i] != ',') ++i;
      if (!trim(s.substr(after, i - after)).empty())
        throw IoError(kOp + path + " line " + std::to_string(line.number) + ", column " +
                      std::to_string(out.view.size() + 1) + ": text after the closing quote: " +
                      quoted(trim(s.substr(after, i - after))));
      if (doubled) {
        out.unquoted.push_back(std::move(body));
        out.view.push_back(out.unquoted.back());
      } else {
        out.view.push_back(s.substr(open + 1, after - open - 2));
      }
    } else {
      while (i < s.size() && s[i] != ',') ++i;
      out.view.push_back(trim(s.substr(begin, i - begin)));
    }
    if (i >= s.size()) break;
    ++i;  // past the comma
  }
}

bool all_numbers(const std::vector<std::string_view>& fields) {
  for (std::string_view f : fields)
    if (!parse_number(f)) return false;
  return true;
}

}  // namespace

CsvTable read_csv_dataset(const std::string& path, int64_t num_label_classes, const CsvOptions& options) {
  if (num_label_classes < 1)
    throw ValueError(kOp + std::string("num_label_classes must be >= 1, got ") + std::to_string(num_label_classes));
  const std::string text = file_contents(path);
  // A UTF-8 byte-order mark (EF BB BF), as some editors and Excel write, is
  // not part of the first field.
  const size_t start = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  const std::vector<Line> lines = nonempty_lines(text, start);

  Fields fields;
  CsvTable out;
  int64_t columns = 0, first_line = 0;
  size_t first_data = 0;  // index into `lines`
  auto set_columns = [&](int64_t n, int64_t line_no) {
    if (n < 2) fail_at(path, line_no, "1 column; expected at least 2 (features, then a label)");
    columns = n;
    first_line = line_no;
  };
  if (options.header != CsvHeader::none && !lines.empty()) {
    split_fields(path, lines[0], fields);
    bool header = options.header == CsvHeader::skip;
    if (!header && !all_numbers(fields.view)) {
      Fields next;
      if (lines.size() > 1) split_fields(path, lines[1], next);
      header = lines.size() == 1 || all_numbers(next.view);
    }
    if (header) {
      set_columns(static_cast<int64_t>(fields.view.size()), lines[0].number);
      out.column_names.assign(fields.view.begin(), fields.view.end());
      first_data = 1;
      if (lines.size() == 1)
        fail(path, "line " + std::to_string(lines[0].number) + " is a header row and no data lines follow it");
    }
  }

  std::vector<float> features;
  std::vector<int64_t> labels;
  for (size_t li = first_data; li < lines.size(); ++li) {
    const int64_t line_no = lines[li].number;
    split_fields(path, lines[li], fields);
    const auto n = static_cast<int64_t>(fields.view.size());
    if (columns == 0) {
      set_columns(n, line_no);
    } else if (n != columns) {
      fail_at(path, line_no, std::to_string(n) + (n == 1 ? " column" : " columns") + ", expected " +
                                 std::to_string(columns) + " (as on line " + std::to_string(first_line) + ")");
    }

    for (int64_t c = 0; c < n; ++c) {
      std::optional<double> v = parse_number(fields.view[c]);
      if (!v)
        throw IoError(kOp + path + " line " + std::to_string(line_no) + ", column " + std::to_string(c + 1) + ": " +
                      quoted(fields.view[c]) + " is not a finite number");
      if (c + 1 < n) {
        auto f = static_cast<float>(*v);
        if (!std::isfinite(f))
          throw IoError(kOp + path + " line " + std::to_string(line_no) + ", column " + std::to_string(c + 1) + ": " +
                        quoted(fields.view[c]) + " is outside float32's range");
        features.push_back(f);
        continue;
      }
      // Compared as doubles before converting, so a huge value is no UB.
      if (*v != std::floor(*v) || *v < 0 || *v >= static_cast<double>(num_label_classes))
        fail_at(path, line_no, "label " + number_text(*v) + " is not an integer in [0, " +
                                   std::to_string(num_label_classes) + ")");
      labels.push_back(static_cast<int64_t>(*v));
    }
  }
  if (labels.empty()) fail(path, "the file is empty (no data lines)");

  const auto rows = static_cast<int64_t>(labels.size());
  out.features = Tensor::from_vector(features, {rows, columns - 1});
  out.labels = Tensor::from_vector(labels, {rows});
  return out;
}

}  // namespace kiln
