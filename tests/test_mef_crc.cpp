// The MEF checksum (jit/mef_crc.h): zlib's CRC-32 for every length and
// alignment, whichever path (carry-less multiply folding or zlib's loop)
// computes it. The reference is the bit-at-a-time definition (reflected
// polynomial 0xEDB88320, initial and final value 0xFFFFFFFF).
#include <cstdint>
#include <random>
#include <string>

#include "../jit/mef_crc.h"
#include "test_util.h"

namespace {

uint32_t crc_bitwise(const std::string& s, size_t from, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = from; i < from + n; ++i) {
    c ^= static_cast<unsigned char>(s[i]);
    for (int b = 0; b < 8; ++b) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

}  // namespace

TEST_SUITE("mef crc") {
  TEST_CASE("the check value of CRC-32 and the empty input") {
    CHECK(kiln::mef::crc32_of("123456789") == 0xCBF43926u);  // the catalogue's check value
    CHECK(kiln::mef::crc32_of("") == 0u);
    const std::string zeros(64, '\0');
    CHECK(kiln::mef::crc32_of(zeros) == crc_bitwise(zeros, 0, 64));
  }

  TEST_CASE("every length up to 1100 bytes at every alignment mod 16 matches the bitwise definition") {
    std::mt19937 rng(7);
    std::string buf(1100 + 16, '\0');
    for (char& ch : buf) ch = static_cast<char>(rng());
    for (size_t off = 0; off < 16; ++off)
      for (size_t n = 0; n <= 1100; n += (n < 200 ? 1 : 7)) {
        const uint32_t got = kiln::mef::crc32_of(std::string_view(buf).substr(off, n));
        if (got != crc_bitwise(buf, off, n)) {
          FAIL("offset " << off << " length " << n << ": 0x" << std::hex << got);
        }
      }
  }

  TEST_CASE("a 1 MiB input and one bit flipped") {
    std::mt19937 rng(11);
    std::string buf((1 << 20) + 13, '\0');
    for (char& ch : buf) ch = static_cast<char>(rng());
    const uint32_t a = kiln::mef::crc32_of(buf);
    CHECK(a == crc_bitwise(buf, 0, buf.size()));
    buf[buf.size() / 2] ^= 4;
    CHECK(kiln::mef::crc32_of(buf) != a);
    CHECK(kiln::mef::crc32_of(buf) == crc_bitwise(buf, 0, buf.size()));
  }
}
