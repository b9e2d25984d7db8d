// Test helpers shared by the vector-math and code-image tests: the error of
// a float32 result in ulps against a float64 reference, and a scoped
// KILN_JIT_TARGET setting.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

/// Error of `got` in ulps of the correctly rounded float result of `want`
/// (subnormal ulp 2^-149); special values must match exactly (a result that
/// should be NaN, +-inf or a signed zero and is not counts as 1e9).
inline double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  if (std::isnan(got)) return 1e9;
  const float wf = float(want);
  if (got == wf) return (got == 0 && std::signbit(got) != std::signbit(wf)) ? 1e9 : 0;
  if (std::isinf(got) || std::isinf(wf)) return 1e9;
  int e;
  std::frexp(want, &e);
  e = std::max(e - 1, -126);
  return std::fabs(double(got) - want) / std::ldexp(1.0, e - 23);
}

/// Sets KILN_JIT_TARGET for one scope (restores or unsets it after).
struct EnvTarget {
  std::string saved;
  bool had;
  explicit EnvTarget(const char* v) {
    const char* s = std::getenv("KILN_JIT_TARGET");
    had = s != nullptr;
    if (had) saved = s;
    setenv("KILN_JIT_TARGET", v, 1);
  }
  ~EnvTarget() {
    if (had) setenv("KILN_JIT_TARGET", saved.c_str(), 1);
    else unsetenv("KILN_JIT_TARGET");
  }
};
