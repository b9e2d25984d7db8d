// read_csv_dataset: the file is read whole (through zlib when it starts with
// the gzip magic), then parsed line by line with std::from_chars.
#include "csv.h"

#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
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

std::string plain_contents(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  std::string out;
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) out.append(chunk, n);
  if (std::ferror(f.get())) fail(path, std::string("cannot read (") + std::strerror(errno) + ")");
  return out;
}

std::string gzip_contents(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), &gzclose);
  if (!f) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  std::string out;
  std::vector<char> chunk(1 << 20);
  int n;
  while ((n = gzread(f.get(), chunk.data(), static_cast<unsigned>(chunk.size()))) > 0) out.append(chunk.data(), n);
  // gzread stops quietly on a truncated stream (it reports Z_BUF_ERROR only
  // through gzerror, to allow reading a file still being written), so check.
  int err = Z_OK;
  const char* msg = gzerror(f.get(), &err);
  if (n < 0 || err != Z_OK) {
    if (err == Z_BUF_ERROR) fail(path, "the gzip stream is truncated (unexpected end of file)");
    fail(path, std::string("corrupt gzip stream (zlib: ") + (msg ? msg : "unknown error") + ")");
  }
  return out;
}

/// The file's bytes, inflated when it starts with the gzip magic 1f 8b.
std::string file_contents(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) fail(path, "no such file");
  if (std::filesystem::is_directory(st)) fail(path, "is a directory, expected a CSV file");
  unsigned char magic[2] = {0, 0};
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
    if (std::fread(magic, 1, 2, f.get()) < 2) magic[0] = 0;  // shorter than a gzip header: plain
  }
  return magic[0] == 0x1f && magic[1] == 0x8b ? gzip_contents(path) : plain_contents(path);
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

std::string quoted(std::string_view s) {
  constexpr size_t kMax = 40;  // keep messages short for a garbage line
  return "\"" + std::string(s.substr(0, kMax)) + (s.size() > kMax ? "...\"" : "\"");
}

std::string number_text(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

}  // namespace

CsvTable read_csv_dataset(const std::string& path, int64_t num_label_classes) {
  if (num_label_classes < 1)
    throw ValueError(kOp + std::string("num_label_classes must be >= 1, got ") + std::to_string(num_label_classes));
  const std::string text = file_contents(path);

  std::vector<float> features;
  std::vector<int64_t> labels;
  std::vector<std::string_view> fields;
  int64_t columns = 0, first_line = 0, line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (trim(line).empty()) continue;

    fields.clear();
    for (size_t start = 0;;) {
      size_t comma = line.find(',', start);
      fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    const auto n = static_cast<int64_t>(fields.size());
    if (columns == 0) {
      if (n < 2) fail_at(path, line_no, "1 column; expected at least 2 (features, then a label)");
      columns = n;
      first_line = line_no;
    } else if (n != columns) {
      fail_at(path, line_no, std::to_string(n) + (n == 1 ? " column" : " columns") + ", expected " +
                                 std::to_string(columns) + " (as on line " + std::to_string(first_line) + ")");
    }

    for (int64_t c = 0; c < n; ++c) {
      std::optional<double> v = parse_number(fields[c]);
      if (!v)
        throw IoError(kOp + path + " line " + std::to_string(line_no) + ", column " + std::to_string(c + 1) + ": " +
                      quoted(fields[c]) + " is not a finite number");
      if (c + 1 < n) {
        auto f = static_cast<float>(*v);
        if (!std::isfinite(f))
          throw IoError(kOp + path + " line " + std::to_string(line_no) + ", column " + std::to_string(c + 1) + ": " +
                        quoted(fields[c]) + " is outside float32's range");
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
  return CsvTable{Tensor::from_vector(features, {rows, columns - 1}), Tensor::from_vector(labels, {rows})};
}

}  // namespace kiln
