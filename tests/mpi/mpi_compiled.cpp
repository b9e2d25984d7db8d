// Run under `mpiexec -n N` (ctest does, N = 2 and 4): the tensor-parallel
// MLP compiled with distributed::compile over one CPU device per process,
// against one device (float64 reference) and against the eager distributed
// run (bitwise, strict session); per-shard weights (each process's registry
// holds its own shards), per-shard execute_raw with the signal buffer.
// Prints one line per rank and exits non-zero on a wrong value.
//   mpi_compiled            the checks
//   mpi_compiled timeout    rank 1 never calls: rank 0's call must end in
//                           CollectiveError (KILN_COLLECTIVE_TIMEOUT_S)
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "../../distributed/compiled.h"
#include "../../distributed/init.h"
#include "../../distributed/sharding_rules.h"
#include "../distributed_test_util.h"

using namespace dt;
namespace kdist = kiln::distributed;

namespace {
Tensor det_tensor(const Shape& s, int seed, double scale) {
  Tensor t = Tensor::empty(s, DType::float32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(scale * std::sin(0.37 * double(i) + seed));
  return t;
}
}  // namespace

int main(int argc, char** argv) {
  auto w = distributed::init();
  const int r = w->rank(), n = w->size();
  if (w->backend() != "mpi") {
    std::printf("mpi_compiled: not under mpiexec (backend %s)\n", w->backend().c_str());
    return 2;
  }
  const DeviceMesh mesh(cpu_devices(n), "tp");
  const int64_t m = 8, k = 16, h = 36, o = 12;
  const Tensor x = det_tensor({m, k}, 1, 1.0), w1 = det_tensor({k, h}, 2, 0.3), w2 = det_tensor({h, o}, 3, 0.3);
  const DistributedLayout lx(DType::float32, x.shape(), DeviceMapping(mesh, {Replicated()}));
  const DistributedLayout l1(DType::float32, w1.shape(), DeviceMapping(mesh, {Sharded(1)}));
  const DistributedLayout l2(DType::float32, w2.shape(), DeviceMapping(mesh, {Sharded(0)}));
  auto fn = [&](const DistributedTensor& X) {
    return kdist::matmul(kdist::relu(kdist::matmul(X, kdist::weight("w1", l1))), kdist::weight("w2", l2))
        .redistribute({Replicated()});
  };
  kdist::DistributedCompileOptions opts;
  opts.weights = kdist::shard_weights("w1", distribute(w1, l1.mapping));
  for (auto& [name, t] : kdist::shard_weights("w2", distribute(w2, l2.mapping))) opts.weights[name] = t;
  const DistributedTensor X = distribute(x, lx.mapping);
  int bad = 0;
  if (argc > 1 && std::string(argv[1]) == "timeout") {
    auto run = kdist::compile(fn, opts)(lx);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(20));  // never joins; rank 0 aborts the job first
      return 0;
    }
    try {
      run(X);
    } catch (const CollectiveError& e) {
      std::printf("rank %d: compiled call timed out as expected: %s\n", r, e.what());
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(1));
      return 0;
    }
    std::printf("rank %d: compiled call returned without rank 1\n", r);
    return 1;
  }
  // Each process's registry holds its own shard of each weight only.
  const std::string mine = kdist::shard_weight_name("w1", r);
  if (opts.weights.size() != 2 || !opts.weights.count(mine)) ++bad, std::printf("rank %d: registry wrong\n", r);
  auto run = kdist::compile(fn, opts)(lx);
  if (run.local_devices() != std::vector<int64_t>{r} || run.num_collectives() != 1) ++bad;
  if (run.signal_buffers().size() != 1) ++bad, std::printf("rank %d: %zu signal buffers\n", r, run.signal_buffers().size());
  // One device (float64 reference).
  const auto X64 = x.to_vector<double>(), W1 = w1.to_vector<double>(), W2 = w2.to_vector<double>();
  std::vector<double> H(m * h), ref(m * o, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < h; ++j) {
      double s = 0;
      for (int64_t q = 0; q < k; ++q) s += X64[i * k + q] * W1[q * h + j];
      H[i * h + j] = std::max(s, 0.0);
    }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < o; ++j)
      for (int64_t q = 0; q < h; ++q) ref[i * o + j] += H[i * h + q] * W2[q * o + j];
  const auto y = run(X)[0];
  const auto got = y.shard(r).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - ref[i]));
  if (!(worst < 1e-5)) ++bad, std::printf("rank %d: compiled differs from one device by %g\n", r, worst);
  // Strict: bitwise the eager distributed run.
  opts.session = std::make_shared<InferenceSession>(KernelOptions{true});
  auto srun = kdist::compile(fn, opts)(lx);
  const DistributedTensor eager = kdist::matmul(kdist::relu(kdist::matmul(X, distribute(w1, l1.mapping))),
                                                distribute(w2, l2.mapping))
                                      .redistribute({Replicated()});
  const Tensor a = srun(X)[0].shard(r), b = eager.shard(r);
  if (std::memcmp(a.data_ptr(), b.data_ptr(), size_t(a.numel()) * 4) != 0)
    ++bad, std::printf("rank %d: strict compiled != eager bitwise\n", r);
  // Raw call: this process's shard of x, then its signal buffer.
  const auto raw = run.execute_raw({X.shard(r).contiguous().buffer(), run.signal_buffers()[0]});
  if (raw.size() != 1 || std::memcmp(raw[0].data(), y.shard(r).data_ptr(), size_t(m * o) * 4) != 0)
    ++bad, std::printf("rank %d: execute_raw differs\n", r);
  // Export on every process (each writes the same .plan and its own device's
  // files), read back (each reads its own device's), equal results.
  const std::string prefix = (std::filesystem::temp_directory_path() /
                              ("kiln_mpi_compiled_" + std::to_string(n) + "_" + std::to_string(::getppid())))
                                 .string();
  const auto paths = run.export_mef(prefix);
  auto back = kdist::read(prefix, opts.weights);
  if (back.local_devices() != run.local_devices() || back.out_layouts() != run.out_layouts() ||
      back.describe() != run.describe())
    ++bad, std::printf("rank %d: the read program differs in its devices, layouts or collectives\n", r);
  const Tensor yb = back(X)[0].shard(r);  // collective: every rank has read its files past this call
  if (std::memcmp(yb.data_ptr(), y.shard(r).data_ptr(), size_t(m * o) * 4) != 0)
    ++bad, std::printf("rank %d: the read program's result differs\n", r);
  for (size_t i = 1; i < paths.size(); ++i) std::remove(paths[i].c_str());  // own device's files
  if (r == 0) std::remove(paths[0].c_str());
  std::printf("mpi_compiled: rank %d of %d: max |compiled - one device| %.3g: %s\n", r, n, worst,
              bad ? "FAILED" : "ok");
  return bad ? 1 : 0;
}
