// kiln: timeit(fn): how long a call takes, for the interactive prompt and
// quick experiments (benchmarks/ is where speed is measured and compared).
// Header-only; not part of <kiln/kiln.h>.
//
//   Tensor x = random::normal({256, 256});
//   auto f = [](Tensor x) { return tanh(x) * 2.0f + 1.0f; };
//   kiln::timeit([&] { return f(x); })            // eager
//   kiln::timeit([&] { return jit(f)(x); })       // (one jit object, reused, in real code)
//   // -> "median 41.2 us, best 39.8 us (2048 calls in 0.10 s)"
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "tensor/error.h"

namespace kiln {

/// Per-call times of a timeit() run, in seconds.
struct Timing {
  double median = 0;   ///< median of the timed calls (s)
  double best = 0;     ///< fastest timed call (s)
  int64_t calls = 0;   ///< timed calls (the warm-up call is not counted)
  double total = 0;    ///< wall time of the timed calls (s)
  /// "median 41.2 us, best 39.8 us (2048 calls in 0.10 s)".
  std::string str() const {
    auto unit = [](double s) {
      char b[32];
      if (s >= 1) std::snprintf(b, sizeof b, "%.3g s", s);
      else if (s >= 1e-3) std::snprintf(b, sizeof b, "%.3g ms", s * 1e3);
      else if (s >= 1e-6) std::snprintf(b, sizeof b, "%.3g us", s * 1e6);
      else std::snprintf(b, sizeof b, "%.3g ns", s * 1e9);
      return std::string(b);
    };
    char t[32];
    std::snprintf(t, sizeof t, "%.2f s", total);
    return "median " + unit(median) + ", best " + unit(best) + " (" + std::to_string(calls) + " calls in " + t + ")";
  }
};
inline std::ostream& operator<<(std::ostream& os, const Timing& t) { return os << t.str(); }

/// Calls fn() once to warm up (a jit compiles then), then times single calls
/// until `min_seconds` of calls have run and at least `min_calls` were made
/// (at most `max_calls`). A result fn returns is dropped after each call (its
/// work is done: kiln ops run when called). Throws ValueError when
/// min_seconds is negative or min_calls < 1 or max_calls < min_calls;
/// whatever fn throws passes through.
template <class F>
Timing timeit(F&& fn, double min_seconds = 0.1, int64_t min_calls = 3, int64_t max_calls = 1000000) {
  if (!(min_seconds >= 0) || min_calls < 1 || max_calls < min_calls)
    throw ValueError("timeit: expected min_seconds >= 0 and 1 <= min_calls <= max_calls, got " +
                     std::to_string(min_seconds) + ", " + std::to_string(min_calls) + ", " +
                     std::to_string(max_calls));
  using clock = std::chrono::steady_clock;
  (void)fn();
  std::vector<double> times;
  const auto start = clock::now();
  double elapsed = 0;
  while ((elapsed < min_seconds || static_cast<int64_t>(times.size()) < min_calls) &&
         static_cast<int64_t>(times.size()) < max_calls) {
    const auto t0 = clock::now();
    (void)fn();
    const auto t1 = clock::now();
    times.push_back(std::chrono::duration<double>(t1 - t0).count());
    elapsed = std::chrono::duration<double>(t1 - start).count();
  }
  Timing r;
  r.calls = static_cast<int64_t>(times.size());
  r.total = elapsed;
  r.best = *std::min_element(times.begin(), times.end());
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  r.median = times[times.size() / 2];
  return r;
}

}  // namespace kiln
