// tensor_parallel: a 2-layer MLP, y = relu(x W1 + b1) W2 + b2, with W1
// column-parallel (Sharded(1): each device computes its slice of the hidden
// layer) and W2 row-parallel (Sharded(0): each device's partial product is
// summed by one all-reduce), on a mesh of CPU devices. Prints the result's
// largest difference from the one-device run and exits 1 when it exceeds the
// tolerance.
//
//   tensor_parallel [devices] [batch] [in] [hidden] [out]
//       devices: CPU devices of this process (default KILN_CPU_DEVICES or 2)
//   mpiexec -n 2 tensor_parallel
//       one device per process; the same program, collectives through MPI
#include <kiln/kiln.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <tuple>

#include "../distributed/compiled.h"
#include "../distributed/init.h"
#include "../distributed/sharding_rules.h"
#include "../tensor/cpu_devices.h"

using namespace kiln;
namespace kd = kiln::distributed;

int main(int argc, char** argv) {
  try {
    auto world = kd::init();
    // Positional integers in [1, 2^20]; anything else is a usage error.
    auto arg = [&](int i, int64_t def) -> int64_t {
      if (argc <= i) return def;
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(argv[i], &end, 10);
      if (errno != 0 || end == argv[i] || *end != '\0' || v < 1 || v > (1 << 20))
        throw ValueError(std::string("argument ") + std::to_string(i) + " must be an integer in [1, " +
                         std::to_string(1 << 20) + "], got '" + argv[i] +
                         "' (usage: tensor_parallel [devices] [batch] [d_in] [d_hidden] [d_out])");
      return v;
    };
    // The default device count: KILN_CPU_DEVICES when set (the same range as
    // kiln's own reading of it, tensor/cpu_devices.h), else 2.
    auto env_devices = []() -> int64_t {
      const char* env = std::getenv("KILN_CPU_DEVICES");
      if (!env || !*env) return 2;
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(env, &end, 10);
      if (errno != 0 || end == env || *end != '\0' || v < 1 || v > 1024)
        throw ValueError(std::string("KILN_CPU_DEVICES: expected a number of CPU devices in [1, 1024], got '") +
                         env + "'");
      return v;
    };
    int devices = world->size() > 1 ? world->size() : int(argc > 1 ? arg(1, 2) : env_devices());
    if (world->size() == 1) set_num_cpu_devices(devices);  // before the first use of cpu:1
    const int64_t batch = arg(2, 64), d_in = arg(3, 256), d_hidden = arg(4, 1024), d_out = arg(5, 256);
    if (world->size() > 1 && argc > 1 && arg(1, devices) != devices) {
      if (world->rank() == 0) std::printf("tensor_parallel: under MPI the mesh has one device per process (%d)\n", devices);
    }

    // The same seed on every process: every process builds the same weights.
    random::seed(42);
    const double s1 = 1.0 / std::sqrt(double(d_in)), s2 = 1.0 / std::sqrt(double(d_hidden));
    Tensor x = random::normal({batch, d_in});
    Tensor w1 = random::normal({d_in, d_hidden}, 0.0, s1), b1 = random::normal({d_hidden}, 0.0, 0.1);
    Tensor w2 = random::normal({d_hidden, d_out}, 0.0, s2), b2 = random::normal({d_out}, 0.0, 0.1);

    // One device.
    Tensor ref = add(matmul(relu(add(matmul(x, w1), b1)), w2), b2);

    // Tensor parallel over `devices`.
    const kd::DeviceMesh mesh(kd::cpu_devices(devices), "tp");
    auto on = [&](const Tensor& t, kd::Placement p) { return kd::distribute(t, kd::DeviceMapping(mesh, {p})); };
    auto X = on(x, kd::Replicated()), W1 = on(w1, kd::Sharded(1)), B1 = on(b1, kd::Sharded(0));
    auto W2 = on(w2, kd::Sharded(0)), B2 = on(b2, kd::Replicated());
    auto forward = [&] {
      auto h = kd::relu(kd::add(kd::matmul(X, W1), B1));  // Sharded(1): no communication
      auto partial = kd::matmul(h, W2);                    // Partial(sum)
      auto y = kd::add(partial, B2);                       // one all-reduce, then + b2
      return std::make_tuple(h, partial, y);
    };
    forward();  // warm-up (thread pools, allocator cache)
    const auto t0 = std::chrono::steady_clock::now();
    auto [h, partial, y] = forward();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    Tensor got = y.full_tensor();

    // Compiled: one plan per device, the all-reduce a collective step between
    // its two segments; weights bound per shard ("w1", "w1.shard.1", ...).
    const kd::DistributedLayout lw1(w1.dtype(), w1.shape(), W1.mapping()), lb1(b1.dtype(), b1.shape(), B1.mapping());
    const kd::DistributedLayout lw2(w2.dtype(), w2.shape(), W2.mapping()), lb2(b2.dtype(), b2.shape(), B2.mapping());
    kd::DistributedCompileOptions co;
    for (auto [name, t] : {std::pair{"w1", W1}, {"b1", B1}, {"w2", W2}, {"b2", B2}})
      for (auto& [k, v] : kd::shard_weights(name, t)) co.weights[k] = v;
    auto compiled = kd::compile(
        [&](const kd::DistributedTensor& xs) {
          auto hs = kd::relu(kd::add(kd::matmul(xs, kd::weight("w1", lw1)), kd::weight("b1", lb1)));
          return kd::add(kd::matmul(hs, kd::weight("w2", lw2)), kd::weight("b2", lb2));
        },
        co)(X.layout());
    compiled(X);  // warm-up
    const auto t1 = std::chrono::steady_clock::now();
    Tensor got_c = compiled(X)[0].full_tensor();
    const double ms_c = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();

    double worst = 0;
    auto g = got.to_vector<double>(), gc = got_c.to_vector<double>(), r = ref.to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) worst = std::max({worst, std::abs(g[i] - r[i]), std::abs(gc[i] - r[i])});
    // float32: the hidden sum is split in `devices` parts, so the rounding
    // differs from the one-device GEMM by a few ulps of |y| ~ 1.
    const double tol = 1e-4;
    if (world->rank() == 0)
      std::printf(
          "tensor_parallel: %d device(s) (%s), MLP %lld-%lld-%lld, batch %lld: hidden %s, output %s; forward %.2f ms "
          "eager, %.2f ms compiled (%lld collective(s)); max |difference| from one device (eager and compiled): %.3g "
          "(tolerance %g)\n",
          devices, world->size() > 1 ? "one per MPI process" : "CPU devices of one process", (long long)d_in,
          (long long)d_hidden, (long long)d_out, (long long)batch, h.mapping().placements()[0].str().c_str(),
          partial.mapping().placements()[0].str().c_str(), ms, ms_c, (long long)compiled.num_collectives(), worst,
          tol);
    return worst <= tol ? 0 : 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "tensor_parallel: %s\n", e.what());
    return 2;
  }
}
