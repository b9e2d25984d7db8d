// Run under `mpiexec -n N` (ctest does, N = 2 and 3): every collective of
// the MPI Communicator for every dtype against a float64 reference. Prints
// one line per rank and exits non-zero on a wrong value.
//   mpi_collectives            the collectives
//   mpi_collectives timeout    rank 1 skips an all_reduce: rank 0 must end in
//                              CollectiveError (KILN_COLLECTIVE_TIMEOUT_S)
//   mpi_collectives mismatch   rank 0 calls all_to_all while the others call
//                              all_reduce (then a count mismatch): every rank
//                              must end in CollectiveError, none in numbers
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../../distributed/init.h"
#include "../../distributed/sharded_tensor.h"
#include "../../tensor/creation.h"
#include "../../tensor/ops.h"
#include "../distributed_test_util.h"

using namespace dt;

int main(int argc, char** argv) {
  auto w = distributed::init();
  const int r = w->rank(), n = w->size();
  if (w->backend() != "mpi") {
    std::printf("mpi_collectives: not under mpiexec (backend %s)\n", w->backend().c_str());
    return 2;
  }
  if (argc > 1 && std::string(argv[1]) == "timeout") {
    float x = 1, y = 0;
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(20));  // never joins; rank 0 aborts the job first
      return 0;
    }
    try {
      w->all_reduce(&x, &y, 1, DType::float32, ReduceOp::sum);
    } catch (const CollectiveError& e) {
      std::printf("rank %d: timed out as expected: %s\n", r, e.what());
      std::fflush(stdout);
      // Exit runs MPI_Abort (the group is broken): give mpiexec time to
      // forward this line first, or the abort can drop it.
      std::this_thread::sleep_for(std::chrono::seconds(1));
      return 0;
    }
    std::printf("rank %d: all_reduce returned without rank 1\n", r);
    return 1;
  }

  if (argc > 1 && std::string(argv[1]) == "mismatch") {
    std::vector<float> x(2 * static_cast<size_t>(n), 1.0f), y(x.size(), 0.0f);
    int caught = 0;
    try {
      if (r == 0) w->all_to_all(x.data(), y.data(), 2, DType::float32);
      else w->all_reduce(x.data(), y.data(), 2, DType::float32, ReduceOp::sum);
    } catch (const CollectiveError& e) {
      std::printf("rank %d: mismatch caught: %s\n", r, e.what());
      ++caught;
    }
    try {  // the same collective, another count on the last rank
      w->all_reduce(x.data(), y.data(), r == n - 1 ? 1 : 2, DType::float32, ReduceOp::sum);
    } catch (const CollectiveError& e) {
      std::printf("rank %d: count mismatch caught: %s\n", r, e.what());
      ++caught;
    }
    // The group still works after a detected mismatch.
    w->all_reduce(x.data(), y.data(), 2, DType::float32, ReduceOp::sum);
    const bool ok = caught == 2 && y[0] == static_cast<float>(n) && y[1] == static_cast<float>(n);
    std::printf("rank %d: mismatch %s\n", r, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  }

  const DType dtypes[] = {DType::bool_,   DType::uint8,    DType::int8,    DType::int32, DType::int64,
                          DType::float16, DType::bfloat16, DType::float32, DType::float64};
  const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};
  const size_t count = 5;
  int bad = 0;
  auto expect = [&](double got, double want, const char* what, DType d) {
    if (got != want) {
      if (bad < 10) std::printf("rank %d: %s %s: got %g, want %g\n", r, what, std::string(name(d)).c_str(), got, want);
      ++bad;
    }
  };
  for (DType d : dtypes) {
    for (ReduceOp op : ops) {
      auto in = filled(d, count, [&](size_t i) { return value(d, r, i); });
      auto out = filled(d, count, [](size_t) { return 0; });
      w->all_reduce(in.data(), out.data(), count, d, op);
      for (size_t i = 0; i < count; ++i) expect(get(d, out.data(), i), reduced(d, op, n, i), "all_reduce", d);
      w->all_reduce(in.data(), in.data(), count, d, op);
      for (size_t i = 0; i < count; ++i) expect(get(d, in.data(), i), reduced(d, op, n, i), "all_reduce in place", d);
      auto blocks = filled(d, count * n, [&](size_t i) { return value(d, r, i); });
      w->reduce_scatter(blocks.data(), out.data(), count, d, op);
      for (size_t i = 0; i < count; ++i)
        expect(get(d, out.data(), i), reduced(d, op, n, r * count + i), "reduce_scatter", d);
    }
    auto in = filled(d, count, [&](size_t i) { return value(d, r, i); });
    auto all = filled(d, count * n, [](size_t) { return 0; });
    w->all_gather(in.data(), all.data(), count, d);
    for (int s = 0; s < n; ++s)
      for (size_t i = 0; i < count; ++i) expect(get(d, all.data(), s * count + i), value(d, s, i), "all_gather", d);
    for (int root = 0; root < n; ++root) {
      auto b = filled(d, count, [&](size_t i) { return value(d, r, i); });
      w->broadcast(b.data(), count, d, root);
      for (size_t i = 0; i < count; ++i) expect(get(d, b.data(), i), value(d, root, i), "broadcast", d);
    }
    auto send = filled(d, count * n, [&](size_t i) { return value(d, r, i); });
    auto recv = filled(d, count * n, [](size_t) { return 0; });
    w->all_to_all(send.data(), recv.data(), count, d);
    for (int s = 0; s < n; ++s)
      for (size_t i = 0; i < count; ++i)
        expect(get(d, recv.data(), s * count + i), value(d, s, r * count + i), "all_to_all", d);
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    auto got = filled(d, count, [](size_t) { return 0; });
    if (r % 2 == 0) {  // even ranks send first: no reliance on MPI buffering
      w->send(in.data(), count, d, next, 7);
      w->recv(got.data(), count, d, prev, 7);
    } else {
      w->recv(got.data(), count, d, prev, 7);
      w->send(in.data(), count, d, next, 7);
    }
    for (size_t i = 0; i < count; ++i) expect(get(d, got.data(), i), value(d, prev, i), "send/recv", d);
    w->barrier();
  }
  // NaN wins float max (MPI's own MPI_MAX does not promise it).
  float x = r == n - 1 ? std::numeric_limits<float>::quiet_NaN() : float(r), mx = 0;
  w->all_reduce(&x, &mx, 1, DType::float32, ReduceOp::max);
  if (!std::isnan(mx)) ++bad, std::printf("rank %d: max with a NaN gave %g\n", r, mx);
  // DistributedTensor across processes: process r holds shard r of a 1-d
  // mesh of n CPU devices; every transition against the whole tensor.
  {
    const DeviceMesh mesh(cpu_devices(n), "tp");
    const Placement ps[] = {Replicated(), Sharded(0), Sharded(1), Partial(ReduceOp::sum), Partial(ReduceOp::max)};
    for (DType d : {DType::float32, DType::int32, DType::float16, DType::bool_}) {
      const Shape s{5, 3};
      const int64_t ne = 15;
      // Partial sources: process r's value(d, r, k); the whole is their reduction.
      for (const Placement& from : ps) {
        std::vector<double> g(ne);
        DistributedTensor src;
        if (from.is_partial()) {
          Tensor t = Tensor::empty(s, d, Device{DeviceType::cpu, r});
          for (int64_t k = 0; k < ne; ++k) {
            put(d, t.data_ptr(), k, value(d, r, k));
            g[k] = reduced(d, from.op, n, k);
          }
          src = DistributedTensor::from_shards(DistributedLayout(d, s, DeviceMapping(mesh, {from})), {t});
        } else {
          auto b = filled(d, ne, [&](size_t k) { return value(d, 1, k); });
          Tensor full = Tensor::from_data(b.data(), d, ne, s);
          g = full.to_vector<double>();
          src = distribute(full, DeviceMapping(mesh, {from}));
        }
        for (const Placement& to : ps) {
          DistributedTensor t = src.redistribute({to});
          if (t.local_shards() != std::vector<int64_t>{r}) ++bad;
          if (!to.is_partial() && t.shard(r).shape() != t.local_shape(r)) ++bad;
          if (t.full_tensor().to_vector<double>() != g) {
            ++bad;
            std::printf("rank %d: %s -> %s of %s wrong\n", r, from.str().c_str(), to.str().c_str(),
                        std::string(name(d)).c_str());
          }
        }
      }
    }
  }
  // split, and a 2-d mesh (one device per process) when there are 4 processes.
  {
    auto sub = w->split(r % 2, r);
    int64_t x = r, sum = 0, want = 0;
    sub->all_reduce(&x, &sum, 1, DType::int64, ReduceOp::sum);
    for (int q = r % 2; q < n; q += 2) want += q;
    if (sum != want || sub->rank() != r / 2) ++bad, std::printf("rank %d: split gave %lld\n", r, (long long)sum);
    if (n == 4) {
      const DeviceMesh mesh(cpu_devices(4), {2, 2}, {"dp", "tp"});
      auto b = filled(DType::float32, 35, [&](size_t k) { return value(DType::float32, 2, k); });
      Tensor full = Tensor::from_data(b.data(), DType::float32, 35, {5, 7});
      const auto g = full.to_vector<double>();
      const std::vector<std::vector<Placement>> maps = {{Sharded(0), Sharded(1)}, {Replicated(), Sharded(0)},
                                                        {Partial(), Sharded(1)}, {Sharded(1), Sharded(0)},
                                                        {Replicated(), Replicated()}};
      for (const auto& f : maps)
        for (const auto& t : maps) {
          DistributedTensor src = distribute(full, DeviceMapping(mesh, f));
          if (src.redistribute(t).full_tensor().to_vector<double>() != g)
            ++bad, std::printf("rank %d: 2-d %s -> %s wrong\n", r, f[0].str().c_str(), t[0].str().c_str());
        }
    }
  }
  // full_tensor() is on this process's mesh device, cpu:r, as the README and
  // sharded_tensor.h say: .cpu() mixes it with the program's tensors; without
  // it an eager op on rank >= 1 is a DeviceError that says how to move it.
  {
    const DeviceMesh mesh(cpu_devices(n), "tp");
    const Tensor x = arange(0, 4 * n).reshape({2, 2 * n});
    const Tensor out = distribute(x, DeviceMapping(mesh, {Sharded(1)})).full_tensor();
    if (!(out.device() == Device::cpu(r)))
      ++bad, std::printf("rank %d: full_tensor on %s\n", r, out.device().str().c_str());
    if ((out.cpu() - x).to_vector<float>() != std::vector<float>(4 * static_cast<size_t>(n), 0.0f))
      ++bad, std::printf("rank %d: full_tensor().cpu() - x is not 0\n", r);
    if (r > 0) {
      try {
        (void)(out - x);
        ++bad, std::printf("rank %d: full_tensor() (cpu:%d) - x (cpu) did not throw\n", r, r);
      } catch (const DeviceError& e) {
        const std::string hint = "move one with .to(Device::cpu()) or .to(Device::cpu(" + std::to_string(r) + "))";
        if (std::string(e.what()).find(hint) == std::string::npos)
          ++bad, std::printf("rank %d: unexpected message: %s\n", r, e.what());
      }
    }
  }
  std::printf("mpi_collectives: rank %d of %d: %s\n", r, n, bad ? "FAILED" : "ok");
  return bad ? 1 : 0;
}
