// kiln: how operator<<(std::ostream&, const Tensor&) formats tensors
// (numpy's set_printoptions / printoptions).
#pragma once
#include <cstdint>

namespace kiln {

/// When floats print in scientific notation.
enum class SciMode : uint8_t {
  /// numpy's rule: scientific when the largest nonzero magnitude is >=
  /// 10^min(8, decimal digits of the dtype), the smallest is < 1e-4, or
  /// their ratio is > 1000. (Spelled with an underscore: `auto` is a keyword.)
  auto_,
  /// Every element of a floating tensor in scientific notation (as numpy
  /// prints an array its rule sends there), zeros included: `0.e+00`.
  on,
  /// Never scientific: positional notation rounded to `precision` decimals,
  /// so values below 10^-precision print as `0.` (numpy's `suppress=True`,
  /// which additionally keeps numpy's large-value cutoff; kiln's `off` does
  /// not, as torch's `sci_mode=False`).
  off,
};

/// numpy's print options, same names and defaults (numpy 2.x).
struct PrintOptions {
  /// Most digits after the decimal point (numpy's floatmode "maxprec": the
  /// shortest digits that read back, cut to this many). In [0, 100].
  int precision = 8;
  /// Tensors with more than this many elements are summarised with `...`. >= 0.
  int64_t threshold = 1000;
  /// Items shown at each end of a summarised axis. >= 1.
  int64_t edgeitems = 3;
  /// Characters per line before wrapping (numpy's linewidth). >= 1.
  int linewidth = 75;
  SciMode sci_mode = SciMode::auto_;
  friend bool operator==(const PrintOptions&, const PrintOptions&) = default;
};

/// The options in effect on this thread.
///
/// Thread-safety: the options are thread-local (as numpy 2's, which live in
/// a context variable): set_print_options and PrintOptionsGuard change how
/// the calling thread prints and nothing else, so threads (or test cases run
/// in parallel) that print with different options neither race nor see each
/// other's settings, and printing takes no lock. A thread starts with the
/// defaults, `PrintOptions{}`; to print from worker threads with other
/// options, set them in each worker.
PrintOptions get_print_options();

/// Sets this thread's options until changed again. Throws ValueError naming
/// the field when one is out of its range (nothing is changed then).
void set_print_options(const PrintOptions& options);

/// Sets options for a scope and restores the previous ones on destruction
/// (numpy's `with np.printoptions(...)`). Nests; use it on one thread only.
///
///     {
///       PrintOptionsGuard g({.precision = 3, .sci_mode = SciMode::off});
///       std::cout << x;  // 3 decimals
///     }                  // previous options again
class PrintOptionsGuard {
 public:
  /// Throws ValueError as set_print_options (the options are then unchanged).
  explicit PrintOptionsGuard(const PrintOptions& options);
  ~PrintOptionsGuard();
  PrintOptionsGuard(const PrintOptionsGuard&) = delete;
  PrintOptionsGuard& operator=(const PrintOptionsGuard&) = delete;
  /// The options this guard restores.
  const PrintOptions& previous() const { return previous_; }

 private:
  PrintOptions previous_;
};

}  // namespace kiln
