#include "assemble.h"

#include <stdexcept>

#include "../../../tensor/error.h"

namespace kiln::codegen {

namespace {
/// Records asmjit's first error instead of throwing through its frames.
struct FirstError : asmjit::ErrorHandler {
  asmjit::Error err = asmjit::kErrorOk;
  std::string msg;
  void handleError(asmjit::Error e, const char* m, asmjit::BaseEmitter*) override {
    if (err == asmjit::kErrorOk) {
      err = e;
      msg = m ? m : "";
    }
  }
};
}  // namespace

asmjit::JitRuntime& jit_runtime() {
  static auto* rt = new asmjit::JitRuntime();
  return *rt;
}

Assembled assemble(bool want_disassembly, const std::function<void(asmjit::x86::Compiler&)>& emit) {
  asmjit::CodeHolder code;
  code.init(jit_runtime().environment());
  FirstError eh;
  code.setErrorHandler(&eh);
  asmjit::StringLogger logger;
  if (want_disassembly) code.setLogger(&logger);
  asmjit::x86::Compiler cc(&code);
  try {
    emit(cc);
  } catch (const std::logic_error& e) {
    throw Error(std::string("codegen: internal error: ") + e.what());
  }
  cc.finalize();
  if (eh.err != asmjit::kErrorOk)
    throw Error("codegen: asmjit error " + std::string(asmjit::DebugUtils::errorAsString(eh.err)) + ": " + eh.msg);
  Assembled a;
  const asmjit::Error e = jit_runtime().add(&a.fn, &code);
  if (e != asmjit::kErrorOk || !a.fn)
    throw Error("codegen: cannot add code: " + std::string(asmjit::DebugUtils::errorAsString(e)));
  a.code_size = code.codeSize();
  if (want_disassembly) a.disassembly = logger.data();
  return a;
}

}  // namespace kiln::codegen
