// libFuzzer target: engine::read must turn any bytes into either a model or a
// kiln::Error, never a crash, hang, leak or out-of-bounds access (ASan).
// A plan restored from a PLAN section is also run on zeros (small graphs
// only). Each input is read twice: as it is (the framing checks: magic,
// version, length, checksum) and, when it starts with the MEF magic, resealed with a
// matching length and checksum, so mutations also reach the section decoders,
// the signature checks and the graph parser.
// Built and run by scripts/fuzz_mef.sh (clang, -fsanitize=fuzzer,address).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include <kiln/kiln.h>

#include "../../jit/mef.h"
#include "../../jit/plan.h"

namespace {
// A plan restored from a (mutated) PLAN section that passed its checks must
// compute, never crash: it runs on zeros. Only small graphs run (every value at most 64 Ki elements), so a mutated shape cannot
// make the run allocate without bound.
void run_one(const std::shared_ptr<const kiln::engine::CompiledModel>& m) {
  if (!m->plan().read_note().empty()) return;  // planned on reading, not restored
  const kiln::Graph& g = m->graph();
  for (size_t v = 0; v < g.num_values(); ++v)
    if (g.type(static_cast<int32_t>(v)).layout().numel() > (1 << 16)) return;
  std::vector<kiln::Tensor> in;
  for (int32_t v : g.input_ids()) {
    const kiln::TensorType& t = g.type(v);
    if (t.device.type != kiln::DeviceType::cpu) return;
    in.push_back(kiln::zeros(t.shape, t.dtype));
  }
  std::map<std::string, kiln::Tensor> w;
  for (const auto& [name, t] : m->weight_slots()) {
    if (t.device.type != kiln::DeviceType::cpu) return;
    w[name] = kiln::zeros(t.shape, t.dtype);
  }
  kiln::engine::Model model(m, w);
  (void)model.execute(in);
}

void read_one(const std::string& bytes) {
  try {
    auto m = kiln::engine::read_bytes(bytes, "<fuzz>");
    // A graph that loaded was verified, by Graph::parse (GRPH) or by the
    // GRPB decoder's checks: Graph::verify must agree.
    try {
      m->graph().verify();
    } catch (const kiln::Error& e) {
      std::fprintf(stderr, "a graph engine::read accepted fails Graph::verify: %s\n", e.what());
      std::abort();
    }
    // ... and its text form reads back to the same graph (GRPB and GRPH agree).
    try {
      if (!kiln::Graph::parse(m->graph().to_text())->equals(m->graph())) {
        std::fprintf(stderr, "a graph engine::read accepted does not survive its text form\n");
        std::abort();
      }
    } catch (const kiln::Error& e) {
      std::fprintf(stderr, "the text form of a graph engine::read accepted does not parse: %s\n", e.what());
      std::abort();
    }
    // A file that loads must also describe itself without trouble.
    (void)m->graph().to_text();
    (void)m->plan().describe(false);
    run_one(m);
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
