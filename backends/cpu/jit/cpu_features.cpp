// kiln (internal): the instruction set the code generator targets, from
// CPUID (through asmjit's CpuInfo). KILN_JIT_TARGET=sse2|avx2|avx512 caps it
// (for testing the narrower paths on a wide machine).
#include <asmjit/core.h>

#include <cstdlib>
#include <cstring>

#include "../../../jit/elementwise_program.h"

namespace kiln::codegen {

namespace {
CpuTarget host_target() {
  using F = asmjit::CpuFeatures::X86;
  const asmjit::CpuInfo& ci = asmjit::CpuInfo::host();
  const bool avx2 = ci.hasFeature(F::kAVX2) && ci.hasFeature(F::kFMA) && ci.hasFeature(F::kF16C);
  if (avx2 && ci.hasFeature(F::kAVX512_F) && ci.hasFeature(F::kAVX512_DQ) && ci.hasFeature(F::kAVX512_BW) &&
      ci.hasFeature(F::kAVX512_VL) && ci.hasFeature(F::kBMI2))
    return CpuTarget::avx512;
  return avx2 ? CpuTarget::avx2 : CpuTarget::sse2;
}
}  // namespace

/// Best target the host runs (no environment cap): can_generate refuses wider ones.
CpuTarget host_cpu_target() {
  static const CpuTarget t = host_target();
  return t;
}

CpuTarget detect_cpu_target() {
  CpuTarget t = host_cpu_target();
  if (const char* e = std::getenv("KILN_JIT_TARGET")) {
    CpuTarget cap = t;
    if (!std::strcmp(e, "sse2")) cap = CpuTarget::sse2;
    else if (!std::strcmp(e, "avx2")) cap = CpuTarget::avx2;
    else if (!std::strcmp(e, "avx512")) cap = CpuTarget::avx512;
    if (cap < t) t = cap;
  }
  return t;
}

const char* cpu_target_name(CpuTarget t) {
  switch (t) {
    case CpuTarget::sse2: return "sse2";
    case CpuTarget::avx2: return "avx2";
    case CpuTarget::avx512: return "avx512";
  }
  return "?";
}

}  // namespace kiln::codegen
