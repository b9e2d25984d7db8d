#include "file_bytes.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <new>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

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

namespace {
// Physical memory in bytes (UINT64_MAX when unknown).
uint64_t memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
}
}  // namespace

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
  const bool regular = std::filesystem::is_regular_file(st);
  for (;;) {
    const uint64_t need = want(b);
    if (need <= b.size() || eof) break;
    // A header declaring more than this machine's memory: a stream (a FIFO,
    // a device) would be read until allocation fails (tester t18 N2). A
    // regular file shorter than that stops at its end (the parser then
    // reports the truncation).
    if (need > memory_bytes()) {
      const uint64_t size = regular ? std::filesystem::file_size(path, ec) : 0;
      if (!regular || (!ec && size >= need))
        throw IoError(op + ": '" + path + "': its header declares " + std::to_string(need) +
                      " bytes, more than this machine's memory (" + std::to_string(memory_bytes()) + " bytes)");
    }
    try {
      read_more(need - b.size());
    } catch (const std::bad_alloc&) {
      throw IoError(op + ": '" + path + "': out of memory after " + std::to_string(b.size()) + " of the " +
                    std::to_string(need) + " bytes its header declares");
    }
  }
  if (eof) return b;
  if (regular) {
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
