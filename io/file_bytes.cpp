#include "file_bytes.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "csv.h"  // IoError

namespace kiln::io_detail {

std::string read_file_bytes(const std::string& path, const std::string& op) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(op + ": cannot open '" + path + "': " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw IoError(op + ": reading '" + path + "' failed: " + std::strerror(errno));
  return bytes;
}

void write_file_bytes(const std::string& path, const std::string& bytes, const std::string& op) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw IoError(op + ": cannot open '" + path + "' for writing: " + std::strerror(errno));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.flush();
  if (!f) throw IoError(op + ": writing '" + path + "' failed: " + std::strerror(errno));
}

}  // namespace kiln::io_detail
