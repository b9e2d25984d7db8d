#include "file_bytes.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "csv.h"  // IoError

namespace kiln::io_detail {

std::string read_file_bytes(const std::string& path, const std::string& op) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw IoError(op + ": '" + path + "' is a directory, expected a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(op + ": cannot open '" + path + "': " + std::strerror(errno));
  try {
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) throw IoError(op + ": reading '" + path + "' failed: " + std::strerror(errno));
    return bytes;
  } catch (const std::ios_base::failure& e) {  // libstdc++ throws from underflow on some errors
    throw IoError(op + ": reading '" + path + "' failed: " + e.what());
  }
}

std::string read_file_bytes_bounded(const std::string& path, const std::string& op,
                                    const std::function<uint64_t(std::string_view)>& want) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(st)) throw IoError(op + ": '" + path + "' is a directory, expected a file");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw IoError(op + ": cannot open '" + path + "': " + std::strerror(errno));
  std::string b;
  bool eof = false;
  // Appends up to `n` more bytes (fewer at end of file).
  auto read_more = [&](uint64_t n) {
    while (n > 0 && !eof) {
      char chunk[1 << 16];
      const size_t k = std::fread(chunk, 1, static_cast<size_t>(std::min<uint64_t>(n, sizeof chunk)), f.get());
      if (k == 0) {
        if (std::ferror(f.get())) throw IoError(op + ": reading '" + path + "' failed: " + std::strerror(errno));
        eof = true;
      }
      b.append(chunk, k);
      n -= k;
    }
  };
  for (;;) {
    const uint64_t need = want(b);
    if (need <= b.size() || eof) break;
    read_more(need - b.size());
  }
  if (eof) return b;
  if (std::filesystem::is_regular_file(st)) {
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > b.size()) b.reserve(static_cast<size_t>(size));
    read_more(UINT64_MAX);
    return b;
  }
  const size_t declared = b.size();
  read_more(1);
  if (b.size() > declared)
    throw IoError(op + ": '" + path + "': more bytes follow the " + std::to_string(declared) +
                  " its header declares (it is not a regular file: a device or a stream that does not end?)");
  return b;
}

void write_file_bytes(const std::string& path, const std::string& bytes, const std::string& op) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw IoError(op + ": cannot open '" + path + "' for writing: " + std::strerror(errno));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.flush();
  if (!f) throw IoError(op + ": writing '" + path + "' failed: " + std::strerror(errno));
}

}  // namespace kiln::io_detail
