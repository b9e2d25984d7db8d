// libFuzzer target: engine::read must turn any bytes into either a model or a
// kiln::Error, never a crash, hang, leak or out-of-bounds access (ASan).
// Each input is read twice: as it is (the framing checks: magic, version,
// length, checksum) and, when it starts with the MEF magic, resealed with a
// matching length and checksum, so mutations also reach the section decoders,
// the signature checks and the graph parser.
// Built and run by scripts/fuzz_mef.sh (clang, -fsanitize=fuzzer,address).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <kiln/kiln.h>

#include "../../jit/mef.h"
#include "../../jit/plan.h"

namespace {
void read_one(const std::string& bytes) {
  try {
    auto m = kiln::engine::read_bytes(bytes, "<fuzz>");
    // A file that loads must also describe itself without trouble.
    (void)m->graph().to_text();
    (void)m->plan().describe(false);
  } catch (const kiln::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  read_one(bytes);
  if (size >= sizeof kiln::mef::kMagic && std::memcmp(data, kiln::mef::kMagic, sizeof kiln::mef::kMagic) == 0) {
    kiln::mef::reseal(bytes);
    read_one(bytes);
  }
  return 0;
}
