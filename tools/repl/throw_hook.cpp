// kiln-repl's record of the type of the last C++ exception thrown.
//
// Cling (TCling::ProcessLine in cppyy-cling) catches an exception that
// escapes a line and prints only "compilation failed: <what()>". To print the
// type too ("kiln::ShapeError: add: cannot broadcast ..."), kiln-repl loads
// this library with RTLD_GLOBAL before libstdc++ is loaded, so this
// __cxa_throw comes first in the process's symbol lookup: it notes the
// thrown type and calls libstdc++'s __cxa_throw. A rethrow (`throw;`) does not
// pass here and keeps the type it had. Nothing else changes.
#include <cxxabi.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <typeinfo>

namespace {
std::atomic<const std::type_info*> g_last{nullptr};
using ThrowFn = void (*)(void*, std::type_info*, void (*)(void*));
}  // namespace

extern "C" {

void __cxa_throw(void* obj, std::type_info* tinfo, void (*dest)(void*)) {
  g_last.store(tinfo, std::memory_order_relaxed);
  static const ThrowFn real = reinterpret_cast<ThrowFn>(dlsym(RTLD_NEXT, "__cxa_throw"));
  if (!real) std::abort();  // no libstdc++ after us: cannot happen in a C++ process
  real(obj, tinfo, dest);
  __builtin_unreachable();
}

/// Demangled type of the last exception thrown ("" when none since the last
/// kiln_repl_clear_throw). The text stays valid until the next call.
const char* kiln_repl_last_throw() {
  static thread_local std::string name;
  const std::type_info* t = g_last.load(std::memory_order_relaxed);
  if (!t) return "";
  int status = 0;
  char* d = abi::__cxa_demangle(t->name(), nullptr, nullptr, &status);
  name = status == 0 && d ? d : t->name();
  std::free(d);
  return name.c_str();
}

void kiln_repl_clear_throw() { g_last.store(nullptr, std::memory_order_relaxed); }

}  // extern "C"
