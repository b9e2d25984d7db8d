// The tensor-parallel MLP forward (batch 256, 1024-4096-1024 float32,
// column- then row-parallel, one all-reduce of the 1 MB result) compiled
// with distributed::compile, one CPU device per MPI process:
//   mpiexec -n 2 build/release/benchmarks/bench_tp_mpi    (2 processes)
//   build/release/benchmarks/bench_tp_mpi                 (1 process, the whole MLP)
// Beside it in the same run: the same per-process work written by hand (the
// process's shard program compiled with kiln::compile, then
// Communicator::all_reduce into a new result) and the all_reduce alone. The
// plan's own cost per call is compiled - by hand; on the big MLP it drowns
// in the noise of the GEMMs, so it is also measured on a small MLP (batch 8,
// 64-256-64, arg 1), and
//   plan overhead = (compiled - by hand)[small] / all_reduce[big]
// is what the compiled plan adds to the collective's own time. Every
// process runs the same benchmarks with fixed iteration counts (their
// collectives pair up); rank 0 reports. Wall time: a collective waits.
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>

#include "../distributed/compiled.h"
#include "../distributed/init.h"
#include "../distributed/sharding_rules.h"
#include "../kiln.h"
#include "bench_mpi.h"

namespace kd = kiln::distributed;
using namespace kiln;

namespace {

struct Dims {
  int64_t batch, in, hidden, out;
};
constexpr Dims kBig{256, 1024, 4096, 1024};
// Small enough that compute does not hide the plan's own cost: compiled -
// by hand here is the plan's overhead per call in absolute time.
constexpr Dims kSmall{8, 64, 256, 64};

struct Setup {
  std::unique_ptr<kd::DeviceMesh> mesh;
  kd::DistributedTensor X;
  std::unique_ptr<kd::DistributedCallable> compiled;
  std::unique_ptr<CompiledCallable> shard_program;  // the process's shard of the MLP, one device
  Tensor xs, partial;
  int rank = 0, size = 1;
};

Setup make_setup(const Dims& dm) {
  const int64_t kBatch = dm.batch, kIn = dm.in, kHidden = dm.hidden, kOut = dm.out;
  {
    Setup s;
    auto w = kd::world();
    s.rank = w->rank();
    s.size = w->size();
    random::seed(7);
    Tensor x = random::normal({kBatch, kIn});
    Tensor w1 = random::normal({kIn, kHidden}, 0.0, 1.0 / std::sqrt(double(kIn)));
    Tensor w2 = random::normal({kHidden, kOut}, 0.0, 1.0 / std::sqrt(double(kHidden)));
    s.mesh = std::make_unique<kd::DeviceMesh>(kd::cpu_devices(s.size), "tp");
    const kd::DeviceMapping rep(*s.mesh, {kd::Replicated()});
    const kd::DistributedLayout l1(DType::float32, w1.shape(), kd::DeviceMapping(*s.mesh, {kd::Sharded(1)}));
    const kd::DistributedLayout l2(DType::float32, w2.shape(), kd::DeviceMapping(*s.mesh, {kd::Sharded(0)}));
    const kd::DistributedTensor W1 = kd::distribute(w1, l1.mapping), W2 = kd::distribute(w2, l2.mapping);
    kd::DistributedCompileOptions o;
    o.weights = kd::shard_weights("w1", W1);
    for (auto& [k, v] : kd::shard_weights("w2", W2)) o.weights[k] = v;
    s.X = kd::distribute(x, rep);
    s.compiled = std::make_unique<kd::DistributedCallable>(
        [&](const std::vector<kd::DistributedTensor>& a) {
          return std::vector<kd::DistributedTensor>{
              kd::matmul(kd::relu(kd::matmul(a[0], kd::weight("w1", l1))), kd::weight("w2", l2))
                  .redistribute({kd::Replicated()})};
        },
        std::vector<kd::DistributedLayout>{s.X.layout()}, o);
    // By hand: this process's shards, one single-device program.
    const Tensor w1s = W1.shard(s.rank), w2s = W2.shard(s.rank);
    s.xs = s.X.shard(s.rank);
    s.shard_program = std::make_unique<CompiledCallable>(
        compile([w1s, w2s](const Tensor& a) { return matmul(relu(matmul(a, w1s)), w2s); })(s.xs));
    s.partial = Tensor::empty({kBatch, kOut}, DType::float32, s.xs.device());
    return s;
  }
}

Setup& setup(int which) {
  static Setup big = make_setup(kBig), small = make_setup(kSmall);
  return which ? small : big;
}

void BM_tp_compiled(benchmark::State& st) {
  Setup& s = setup(int(st.range(0)));
  kd::world()->barrier();
  for (auto _ : st) benchmark::DoNotOptimize(s.compiled->call({s.X}));
  st.counters["processes"] = s.size;
}

void BM_tp_by_hand(benchmark::State& st) {
  Setup& s = setup(int(st.range(0)));
  auto w = kd::world();
  w->barrier();
  for (auto _ : st) {
    Tensor p = s.shard_program->execute_raw(std::span<const Tensor>(&s.xs, 1))[0];
    Tensor y = Tensor::empty(p.shape(), DType::float32, p.device());  // a new result per call, as the plan's
    w->all_reduce(p.data_ptr(), y.data_ptr(), size_t(p.numel()), DType::float32, kd::ReduceOp::sum);
    benchmark::DoNotOptimize(y);
  }
  st.counters["processes"] = s.size;
}

void BM_tp_all_reduce_only(benchmark::State& st) {
  Setup& s = setup(int(st.range(0)));
  auto w = kd::world();
  Tensor p = ones(s.partial.shape());
  w->barrier();
  for (auto _ : st)
    w->all_reduce(p.data_ptr(), s.partial.data_ptr(), size_t(p.numel()), DType::float32, kd::ReduceOp::sum);
}

// Arg 0: the big MLP (20 iterations); arg 1: the small one (500).
BENCHMARK(BM_tp_compiled)->Arg(0)->Iterations(20)->Apply(kb::mpi_options);
BENCHMARK(BM_tp_by_hand)->Arg(0)->Iterations(20)->Apply(kb::mpi_options);
BENCHMARK(BM_tp_all_reduce_only)->Arg(0)->Iterations(20)->Apply(kb::mpi_options);
BENCHMARK(BM_tp_compiled)->Arg(1)->Iterations(500)->Apply(kb::mpi_options);
BENCHMARK(BM_tp_by_hand)->Arg(1)->Iterations(500)->Apply(kb::mpi_options);

}  // namespace

int main(int argc, char** argv) {
  auto w = kd::init();
  benchmark::Initialize(&argc, argv);
  return kb::run_benchmarks_on_rank(w->rank());
}
