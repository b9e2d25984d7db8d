// kiln benchmarks: a Google Benchmark reporter that also prints each kiln
// figure as a ratio to its peers measured in the same run, and can append
// that table to a markdown file (--kiln_results=FILE).
#pragma once
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace kb {

/// One comparison row: the kiln benchmark and its peers (full benchmark
/// names as printed, e.g. "BM_kiln_add/1"); the ratio is kiln's time over
/// the fastest peer's. `eager`, when given, is kiln's eager run of the same
/// work: `kiln` is then the compiled figure, and the row also shows
/// eager / compiled. Without it, `kiln` is an eager figure unless `compiled`
/// (compiled runs or compile times with no eager counterpart).
struct Comparison {
  std::string title;
  std::string kiln;
  std::vector<std::string> peers;
  std::string budget;  // the target, in words (printed beside the ratio)
  std::string eager = {};
  bool compiled = false;
  /// Per peer: its time is multiplied by this before comparing (a copy loop
  /// moving fewer bytes per element than the op, scaled to the op's bytes).
  std::map<std::string, double> peer_scale = {};
  /// Also show CPU time (the benchmark's, process-wide when it measures
  /// MeasureProcessCPUTime) beside each wall time in the peers column.
  bool cpu_time = false;
};

/// Registers a comparison to report after the run.
void compare(Comparison c);

/// A line printed (and written) under the comparison table.
void note(std::string line);

/// Runs the registered benchmarks (argv as for benchmark::Initialize), then
/// prints the comparison table; writes it to --kiln_results=FILE when given.
/// With --benchmark_repetitions, each figure is the median of the repetitions.
int run_main(int argc, char** argv, const char* title);

}  // namespace kb
