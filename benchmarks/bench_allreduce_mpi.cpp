// all_reduce (sum) of 1 MB and 64 MB float32 between MPI processes: kiln's
// Communicator (non-blocking MPI_Iallreduce polled against the collective
// timeout) beside MPI_Allreduce called directly on the same buffers, in the
// same run. Run under mpiexec (scripts/run_benchmarks.sh does, with -n 2):
//   mpiexec -n 2 build/release/benchmarks/bench_allreduce_mpi
// Every process runs the same benchmarks with fixed iteration counts (so
// their collectives pair up); rank 0 reports.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <vector>

#include "../distributed/init.h"
#include "../distributed/mpi.h"
#include "bench_mpi.h"

namespace kd = kiln::distributed;

namespace {

constexpr size_t kMB = 1 << 20;

struct Buffers {
  std::vector<float> send, recv;
  explicit Buffers(size_t bytes) : send(bytes / sizeof(float), 1.0f), recv(bytes / sizeof(float)) {}
};

void BM_kiln_all_reduce(benchmark::State& st) {
  auto w = kd::world();
  Buffers b(size_t(st.range(0)) * kMB);
  MPI_Barrier(MPI_COMM_WORLD);
  for (auto _ : st) w->all_reduce(b.send.data(), b.recv.data(), b.send.size(), kiln::DType::float32, kd::ReduceOp::sum);
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(b.send.size() * sizeof(float)));
}

void BM_peer_MPI_Allreduce(benchmark::State& st) {
  kd::world();
  Buffers b(size_t(st.range(0)) * kMB);
  MPI_Barrier(MPI_COMM_WORLD);
  for (auto _ : st) MPI_Allreduce(b.send.data(), b.recv.data(), int(b.send.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(b.send.size() * sizeof(float)));
}

// Fixed iterations and repetitions: every rank runs the same collectives.
BENCHMARK(BM_kiln_all_reduce)->Arg(1)->Iterations(200)->Apply(kb::mpi_options);
BENCHMARK(BM_peer_MPI_Allreduce)->Arg(1)->Iterations(200)->Apply(kb::mpi_options);
BENCHMARK(BM_kiln_all_reduce)->Arg(64)->Iterations(10)->Apply(kb::mpi_options);
BENCHMARK(BM_peer_MPI_Allreduce)->Arg(64)->Iterations(10)->Apply(kb::mpi_options);

}  // namespace

int main(int argc, char** argv) {
  auto w = kd::init();  // MPI under mpiexec; one rank otherwise
  if (w->backend() != "mpi") {
    std::fprintf(stderr, "bench_allreduce_mpi: run under mpiexec -n 2 (MPI is %s)\n",
                 kd::mpi::is_built() ? "built" : "not built");
  }
  benchmark::Initialize(&argc, argv);
  return kb::run_benchmarks_on_rank(w->rank());
}
