// kiln (internal): whole-file reads and writes for the io/ readers, with
// IoError messages that name the operation and the path.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kiln::io_detail {

/// The file's bytes. Throws IoError "<op>: cannot open '<path>': <reason>".
std::string read_file_bytes(const std::string& path, const std::string& op);
/// The file's bytes, read incrementally so that a file which is not of the
/// format (or a device that never ends, /dev/zero) is refused after its first
/// bytes instead of read whole: after each read `want(prefix)` says how many
/// bytes in total the format needs given the prefix read so far (what its
/// header declares), or throws IoError as soon as the prefix shows the file is
/// not of the format. Reading stops once the prefix holds what `want` asks for
/// (or at end of file: the parser then reports the truncation). A regular file
/// is then read to its end (its size is finite; the parser reports trailing
/// bytes exactly); another kind (a device, a FIFO) is read at most one byte
/// past, and a byte there is an IoError "<op>: '<path>': more bytes follow the
/// N its header declares".
std::string read_file_bytes_bounded(const std::string& path, const std::string& op,
                                    const std::function<uint64_t(std::string_view)>& want);
/// Writes `bytes` to `path` (replacing it). Throws IoError naming the path.
void write_file_bytes(const std::string& path, const std::string& bytes, const std::string& op);

}  // namespace kiln::io_detail
