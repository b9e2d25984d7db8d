// kiln (internal): the build links a copy of Debian's (non-PIC) libasmjit.a
// in which asmjit's reference to libc's `stderr` is renamed to this variable,
// so that the archive can go into the shared libkiln (see CMakeLists.txt).
#include <cstdio>

extern "C" {
__attribute__((visibility("hidden"))) FILE* kiln_asmjit_stderr = stderr;
}
