// kiln (internal): the clock of KILN_PLAN_PROFILE (ExecutionPlan::profiling):
// the time stamp counter on x86-64 (a few cycles to read), else steady_clock
// nanoseconds. Ticks are converted to time against steady_clock when printed.
#pragma once
#include <chrono>
#include <cstdint>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <x86intrin.h>
#endif

namespace kiln::codegen {

inline uint64_t profile_ticks() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return __rdtsc();
#else
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
#endif
}

}  // namespace kiln::codegen
