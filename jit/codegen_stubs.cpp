// TEMPORARY weak stand-ins until backends/cpu/jit/ lands: no program can be
// generated, so the planner runs every op with its eager kernel.
#include "elementwise_program.h"

namespace kiln::codegen {
__attribute__((weak)) CpuTarget detect_cpu_target() { return CpuTarget::sse2; }
__attribute__((weak)) const char* cpu_target_name(CpuTarget) { return "none"; }
__attribute__((weak)) bool can_generate(const ElementwiseProgram&, CpuTarget) { return false; }
__attribute__((weak)) std::unique_ptr<ElementwiseKernel> generate_elementwise(const ElementwiseProgram&, CpuTarget,
                                                                              bool) {
  throw Error("jit: code generation is not built");
}
__attribute__((weak)) std::string ElementwiseProgram::str() const { return "<program>"; }
}  // namespace kiln::codegen
