// kiln: the print options' state (one copy per thread, see print_options.h).
#include "print_options.h"

#include <string>

#include "error.h"

namespace kiln {
namespace {

thread_local PrintOptions t_options;

void check_range(const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw ValueError(std::string("set_print_options: ") + field + " must be " +
                     (hi == INT64_MAX ? ">= " + std::to_string(lo)
                                      : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]") +
                     ", got " + std::to_string(v));
}

}  // namespace

PrintOptions get_print_options() { return t_options; }

void set_print_options(const PrintOptions& o) {
  check_range("precision", o.precision, 0, 100);
  check_range("threshold", o.threshold, 0, INT64_MAX);
  check_range("edgeitems", o.edgeitems, 1, INT64_MAX);
  check_range("linewidth", o.linewidth, 1, INT64_MAX);
  if (o.sci_mode != SciMode::auto_ && o.sci_mode != SciMode::on && o.sci_mode != SciMode::off)
    throw ValueError("set_print_options: sci_mode must be SciMode::auto_, on or off, got " +
                     std::to_string(static_cast<int>(o.sci_mode)));
  t_options = o;
}

PrintOptionsGuard::PrintOptionsGuard(const PrintOptions& options) : previous_(t_options) {
  set_print_options(options);
}

PrintOptionsGuard::~PrintOptionsGuard() { t_options = previous_; }

}  // namespace kiln
