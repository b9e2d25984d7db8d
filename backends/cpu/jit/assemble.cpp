#include "assemble.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "../../../tensor/error.h"
#include "codegen.h"

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

/// The callee slots of the function being assembled on this thread.
struct CalleeSlot {
  asmjit::Label label;
  Callee callee;
};
thread_local std::vector<CalleeSlot>* t_slots = nullptr;

constexpr size_t kMaxImageBytes = size_t(64) << 20;
}  // namespace

asmjit::JitRuntime& jit_runtime() {
  static auto* rt = new asmjit::JitRuntime();
  return *rt;
}

const void* callee_address(uint32_t c) {
  switch (static_cast<Callee>(c)) {
    case Callee::scalar_lanes: return reinterpret_cast<const void*>(&cg::scalar_lanes);
    case Callee::trig_lanes: return reinterpret_cast<const void*>(&cg::trig_lanes);
  }
  return nullptr;
}

asmjit::InvokeNode* invoke_callee(asmjit::x86::Compiler& cc, Callee c, const asmjit::FuncSignature& sig) {
  if (!t_slots) throw std::logic_error("invoke_callee outside assemble()");
  const asmjit::Label slot = cc.newLabel();
  t_slots->push_back({slot, c});
  asmjit::InvokeNode* node = nullptr;
  cc.invoke(&node, asmjit::x86::qword_ptr(slot), sig);
  return node;
}

Assembled assemble(bool want_disassembly, const std::function<void(asmjit::x86::Compiler&)>& emit) {
  asmjit::CodeHolder code;
  code.init(jit_runtime().environment());
  FirstError eh;
  code.setErrorHandler(&eh);
  asmjit::StringLogger logger;
  if (want_disassembly) code.setLogger(&logger);
  asmjit::x86::Compiler cc(&code);
  std::vector<CalleeSlot> slots;
  struct SlotScope {  // restores the thread's slot list however emit() ends
    std::vector<CalleeSlot>* saved;
    explicit SlotScope(std::vector<CalleeSlot>* s) : saved(t_slots) { t_slots = s; }
    ~SlotScope() { t_slots = saved; }
  } scope(&slots);
  try {
    emit(cc);
  } catch (const std::logic_error& e) {
    throw Error(std::string("codegen: internal error: ") + e.what());
  }
  // The callee slots after the function: 8-byte aligned addresses.
  for (const CalleeSlot& s : slots) {
    cc.align(asmjit::AlignMode::kData, 8);
    cc.bind(s.label);
    cc.embedUInt64(reinterpret_cast<uintptr_t>(callee_address(static_cast<uint32_t>(s.callee))));
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
  // The image: the placed bytes, if asmjit needed no relocation of its own
  // (every reference is RIP-relative inside the code; calls go through the slots).
  bool relocatable = code.sectionCount() == 1;
  for (const asmjit::RelocEntry* r : code.relocEntries())
    if (r->relocType() != asmjit::RelocType::kNone) relocatable = false;
  if (relocatable) {
    a.image.bytes.assign(static_cast<const char*>(a.fn), a.code_size);
    for (const CalleeSlot& s : slots) {
      const uint64_t off = code.labelOffsetFromBase(s.label);
      if (off + 8 > a.code_size) {
        relocatable = false;
        break;
      }
      std::memset(a.image.bytes.data() + off, 0, 8);
      a.image.relocs.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(s.callee)});
    }
    if (!relocatable) a.image = CodeImage{};
  }
  return a;
}

void* place_image(const CodeImage& im) {
  const size_t n = im.bytes.size();
  if (n == 0 || n > kMaxImageBytes)
    throw Error("codegen: a code image of " + std::to_string(n) + " bytes (expected 1 to " +
                std::to_string(kMaxImageBytes) + ")");
  std::vector<CodeImage::Reloc> rs = im.relocs;
  std::sort(rs.begin(), rs.end(), [](const auto& x, const auto& y) { return x.offset < y.offset; });
  for (size_t i = 0; i < rs.size(); ++i) {
    if (n < 8 || rs[i].offset > n - 8)
      throw Error("codegen: a code image's relocation at byte " + std::to_string(rs[i].offset) +
                  " lies outside its " + std::to_string(n) + " bytes");
    if (i > 0 && rs[i].offset < rs[i - 1].offset + 8)
      throw Error("codegen: a code image's relocations at bytes " + std::to_string(rs[i - 1].offset) + " and " +
                  std::to_string(rs[i].offset) + " overlap");
    if (!callee_address(rs[i].callee))
      throw Error("codegen: a code image's relocation names callee " + std::to_string(rs[i].callee) + ", this kiln knows " +
                  std::to_string(kNumCallees));
  }
  void* rx = nullptr;
  void* rw = nullptr;
  const asmjit::Error e = jit_runtime().allocator()->alloc(&rx, &rw, n);
  if (e != asmjit::kErrorOk || !rx)
    throw Error("codegen: cannot allocate " + std::to_string(n) + " bytes of executable memory: " +
                std::string(asmjit::DebugUtils::errorAsString(e)));
  {
    asmjit::VirtMem::ProtectJitReadWriteScope write(rx, n);
    char* dst = static_cast<char*>(rw);
    std::memcpy(dst, im.bytes.data(), n);
    for (const CodeImage::Reloc& r : rs) {
      const uint64_t addr = reinterpret_cast<uintptr_t>(callee_address(r.callee));
      std::memcpy(dst + r.offset, &addr, 8);
    }
  }
  return rx;
}

}  // namespace kiln::codegen
