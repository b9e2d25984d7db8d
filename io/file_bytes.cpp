#include "file_bytes.h"

#include <cerrno>
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

void write_file_bytes(const std::string& path, const std::string& bytes, const std::string& op) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw IoError(op + ": cannot open '" + path + "' for writing: " + std::strerror(errno));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.flush();
  if (!f) throw IoError(op + ": writing '" + path + "' failed: " + std::strerror(errno));
}

}  // namespace kiln::io_detail
