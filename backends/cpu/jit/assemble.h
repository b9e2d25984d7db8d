// kiln (internal): the one place generated code is assembled and placed in
// executable memory, shared by the elementwise and row-kernel generators,
// and where a relocatable image of it (for MEF files) is made and loaded.
#pragma once
#include <asmjit/x86.h>

#include <cstddef>
#include <functional>
#include <string>

#include "../../../jit/elementwise_program.h"

namespace kiln::codegen {

/// The process's executable-code runtime (never destroyed: cached kernels
/// may outlive static destruction).
asmjit::JitRuntime& jit_runtime();

/// Generated code in jit_runtime(); release with jit_runtime().release(fn).
struct Assembled {
  void* fn = nullptr;
  size_t code_size = 0;
  std::string disassembly;  ///< empty unless asked for
  /// The code as a relocatable image (CodeImage); empty bytes when asmjit
  /// left a relocation kiln does not record (the code is then not exported).
  CodeImage image;
};

/// Runs `emit` on a fresh x86::Compiler, finalises and adds the code.
/// asmjit's first error, a std::logic_error from `emit` (an internal
/// error) or a failure to add the code becomes kiln::Error.
Assembled assemble(bool want_disassembly, const std::function<void(asmjit::x86::Compiler&)>& emit);

/// Emits, inside assemble()'s `emit`, a call to kiln function `c` through an
/// 8-byte address slot placed after the function (`call [rip + slot]`), so
/// the code stays position independent and the slot is the image's one kind
/// of relocation. Returns the call node (set its arguments).
asmjit::InvokeNode* invoke_callee(asmjit::x86::Compiler& cc, Callee c, const asmjit::FuncSignature& sig);

/// The address of callee `c` in this process (null for an unknown id).
const void* callee_address(uint32_t c);

/// Copies `image` into executable memory, writing each relocation slot with
/// its callee's address in this process. Returns the code's address (release
/// with jit_runtime().release). Throws kiln::Error when the image is
/// malformed (empty or over 64 MiB, a slot outside the bytes or overlapping
/// another, an unknown callee) or memory cannot be had; the hash is the
/// caller's to check (CodeImage::hash).
void* place_image(const CodeImage& image);

}  // namespace kiln::codegen
