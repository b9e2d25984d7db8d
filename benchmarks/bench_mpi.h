// kiln benchmarks run under mpiexec (bench_allreduce_mpi, bench_tp_mpi):
// every process runs the same benchmarks with fixed iteration counts, so
// that their collectives pair up, and rank 0 reports.
#pragma once
#include <benchmark/benchmark.h>

#include <vector>

namespace kb {

/// The options of a benchmark every process runs in step (its fixed
/// iteration count is set where it is registered): wall time (a collective
/// waits) in microseconds, 5 repetitions, aggregates only.
inline void mpi_options(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMicrosecond)->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
}

/// Runs the registered benchmarks (after benchmark::Initialize) on this
/// process: rank 0 reports, any other rank runs them silently (it takes
/// part in the collectives). Returns main's exit code.
inline int run_benchmarks_on_rank(int rank) {
  class SilentReporter : public benchmark::BenchmarkReporter {
   public:
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>&) override {}
  };
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace kb
