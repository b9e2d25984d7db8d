// kiln (internal): whole-file reads and writes for the io/ readers, with
// IoError messages that name the operation and the path.
#pragma once
#include <string>

namespace kiln::io_detail {

/// The file's bytes. Throws IoError "<op>: cannot open '<path>': <reason>".
std::string read_file_bytes(const std::string& path, const std::string& op);
/// Writes `bytes` to `path` (replacing it). Throws IoError naming the path.
void write_file_bytes(const std::string& path, const std::string& bytes, const std::string& op);

}  // namespace kiln::io_detail
