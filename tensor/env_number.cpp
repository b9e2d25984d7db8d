#include "env_number.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "error.h"

namespace kiln::detail {

uint64_t env_whole_number(const char* name, uint64_t fallback, uint64_t lo, uint64_t hi, const char* what) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  bool ok = true;
  for (const char* c = e; *c; ++c) ok = ok && *c >= '0' && *c <= '9';  // strtoull takes "-5" and " 5"
  errno = 0;
  const unsigned long long v = ok ? std::strtoull(e, nullptr, 10) : 0;
  if (!ok || errno == ERANGE || v < lo || v > hi)
    throw ValueError(std::string(name) + ": expected " + what + " in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got '" + e + "'");
  return v;
}

}  // namespace kiln::detail
