// kiln (internal): the checksum of a MEF file (jit/mef.h): CRC-32 as zlib's
// crc32() defines it (reflected polynomial 0xEDB88320, initial and final
// value 0xFFFFFFFF), computed with carry-less multiplication (PCLMULQDQ)
// where the CPU has it: engine::read checks the whole file, and zlib's
// table-driven loop takes longer than the rest of reading a 1,000-node
// graph's framing. The value is zlib's bit for bit, so files written by
// any kiln read with any other.
#pragma once
#include <cstdint>
#include <string_view>

namespace kiln::mef {

/// zlib's crc32(0, bytes, size) of `bytes` (any length, any alignment).
uint32_t crc32_of(std::string_view bytes);

}  // namespace kiln::mef
