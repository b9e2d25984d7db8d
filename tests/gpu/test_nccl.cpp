// distributed/nccl.h: the NCCL Communicator on the GPUs present (labelled
// `gpu` through kiln_gpu_tests; each case skips without a device or NCCL).
#include <doctest/doctest.h>

#include <exception>
#include <thread>
#include <vector>

#include "../../backends/cuda/cuda_backend.h"
#include "../../distributed/nccl.h"
#include "gpu_util.h"

using namespace kiln;
namespace kn = kiln::distributed::nccl;

namespace {
bool nccl_or_skip() {
  if (!kt::gpu_or_skip()) return false;
  if (!kn::is_built()) {
    MESSAGE("skipped: kiln was built without NCCL");
    return false;
  }
  return true;
}
}  // namespace

TEST_SUITE("nccl") {
  TEST_CASE("all_reduce, all_gather, reduce_scatter and broadcast on every GPU against float64 sums") {
    if (!nccl_or_skip()) return;
    const int n = cuda::device_count();
    std::vector<int> devs;
    for (int i = 0; i < n; ++i) devs.push_back(i);
    auto group = kn::make_group(devs);
    REQUIRE(group.size() == size_t(n));
    CHECK(group[0]->backend() == "nccl");
    const int64_t count = 1000;
    std::vector<std::exception_ptr> errs(n);
    std::vector<std::vector<double>> reduced(n), gathered(n), scattered(n), bcast(n);
    std::vector<std::thread> th;
    for (int r = 0; r < n; ++r)
      th.emplace_back([&, r] {
        try {
          auto& c = *group[r];
          std::vector<float> host(count * n);
          for (int64_t i = 0; i < count * n; ++i) host[i] = float((r + 1) * 0.5 + i % 7);
          Tensor x = Tensor::from_vector(host).to(Device::cuda(r));
          Tensor y = Tensor::empty({count * n}, DType::float32, Device::cuda(r));
          c.all_reduce(x.data_ptr(), y.data_ptr(), size_t(count * n), DType::float32, distributed::ReduceOp::sum);
          reduced[r] = y.to(Device::cpu()).to_vector<double>();
          Tensor g = Tensor::empty({count * n}, DType::float32, Device::cuda(r));
          c.all_gather(x.data_ptr(), g.data_ptr(), size_t(count), DType::float32);
          gathered[r] = g.to(Device::cpu()).to_vector<double>();
          Tensor s = Tensor::empty({count}, DType::float32, Device::cuda(r));
          c.reduce_scatter(x.data_ptr(), s.data_ptr(), size_t(count), DType::float32, distributed::ReduceOp::max);
          scattered[r] = s.to(Device::cpu()).to_vector<double>();
          c.broadcast(x.data_ptr(), size_t(count), DType::float32, 0);
          bcast[r] = x.to(Device::cpu()).to_vector<double>();
          c.barrier();
        } catch (...) {
          errs[r] = std::current_exception();
        }
      });
    for (auto& t : th) t.join();
    for (auto& e : errs)
      if (e) std::rethrow_exception(e);
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < count; ++i) {
        double sum = 0, mx = -1e300;
        for (int q = 0; q < n; ++q) sum += (q + 1) * 0.5 + i % 7, mx = std::max(mx, (q + 1) * 0.5 + (r * count + i) % 7);
        CHECK(reduced[r][i] == doctest::Approx(sum));
        CHECK(scattered[r][i] == mx);
        CHECK(bcast[r][i] == 0.5 + i % 7);
        for (int q = 0; q < n; ++q) CHECK(gathered[r][q * count + i] == (q + 1) * 0.5 + i % 7);
      }
  }

  TEST_CASE("errors: repeated or absent devices, a dtype NCCL lacks") {
    if (!nccl_or_skip()) return;
    CHECK_THROWS_AS(kn::make_group({}), ValueError);
    CHECK_THROWS_AS(kn::make_group({0, 0}), ValueError);
    CHECK_THROWS_AS(kn::make_group({cuda::device_count()}), DeviceError);
    auto g = kn::make_group({0});
    Tensor x = Tensor::empty({4}, DType::int16, Device::cuda(0));
    CHECK_THROWS_AS(g[0]->all_reduce(x.data_ptr(), x.data_ptr(), 4, DType::int16, distributed::ReduceOp::sum),
                    DTypeError);
  }
}
