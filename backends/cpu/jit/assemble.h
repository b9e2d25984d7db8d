// kiln (internal): the one place generated code is assembled and placed in
// executable memory, shared by the elementwise and row-kernel generators.
#pragma once
#include <asmjit/x86.h>

#include <cstddef>
#include <functional>
#include <string>

namespace kiln::codegen {

/// The process's executable-code runtime (never destroyed: cached kernels
/// may outlive static destruction).
asmjit::JitRuntime& jit_runtime();

/// Generated code in jit_runtime(); release with jit_runtime().release(fn).
struct Assembled {
  void* fn = nullptr;
  size_t code_size = 0;
  std::string disassembly;  ///< empty unless asked for
};

/// Runs `emit` on a fresh x86::Compiler, finalises and adds the code.
/// asmjit's first error, a std::logic_error from `emit` (an internal
/// error) or a failure to add the code becomes kiln::Error.
Assembled assemble(bool want_disassembly, const std::function<void(asmjit::x86::Compiler&)>& emit);

}  // namespace kiln::codegen
