// kiln: jit() at the prompts (kiln-repl on Cling, kiln-clang-repl), keeping
// its cache between inputs.
//
// A lambda typed at a prompt has a closure type without linkage, and both
// incremental compilers mishandle a global whose type is built from one when
// later inputs use it: Cling (cppyy-cling 6.32) re-runs its initializer each
// time, so `auto jf = jit(f);` (a JitFunction<closure type>) would start every
// line with a fresh, empty cache (jf.stats() reading zeros, every call
// compiling again); clang-repl-19 crashes on the first call. Both prompts
// include this header and `using kiln::repl::jit;`: this jit() wraps the
// callable in a std::function (a type with linkage) first, so `jf` is an
// ordinary global. It is preferred over kiln::jit for any callable
// std::function can hold (its constraint makes it more specialised);
// `kiln::jit(f)` written out in full still gets the plain one. Other globals
// whose type is built from a prompt lambda (std::vector<decltype(f)>, ...)
// have the same problem; see README "The interactive prompt".
#pragma once
#include <functional>
#include <utility>

#include <kiln/kiln.h>

namespace kiln::repl {

/// kiln::jit(std::function(fn), opts): same tracing, cache and results.
template <class F>
  requires requires(F f) { std::function(f); }
auto jit(F fn, JitOptions opts = {}) {
  return kiln::jit(std::function(std::move(fn)), std::move(opts));
}

}  // namespace kiln::repl
