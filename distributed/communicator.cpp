#include "communicator.h"

#include <atomic>
#include <cstdlib>
#include <string>

namespace kiln::distributed {

namespace {
double timeout_from_env() {
  const char* s = std::getenv("KILN_COLLECTIVE_TIMEOUT_S");
  if (!s || !*s) return 300.0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !(v > 0))
    throw ValueError(std::string("KILN_COLLECTIVE_TIMEOUT_S: expected a number of seconds > 0, got '") + s + "'");
  return v;
}
std::atomic<double>& timeout_slot() {
  static std::atomic<double> t{timeout_from_env()};
  return t;
}
}  // namespace

double collective_timeout() { return timeout_slot().load(std::memory_order_relaxed); }

void set_collective_timeout(double seconds) {
  if (!(seconds > 0)) throw ValueError("set_collective_timeout: expected seconds > 0, got " + std::to_string(seconds));
  timeout_slot().store(seconds, std::memory_order_relaxed);
}

}  // namespace kiln::distributed
