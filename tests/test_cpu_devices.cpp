// tensor/cpu_devices.h: several CPU devices in one process (tests/main.cpp
// sets 8): the count, errors past it, and one persistent worker per device.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "../tensor/cpu_devices.h"
#include "../tensor/creation.h"
#include "../tensor/ops.h"
#include "../tensor/tensor.h"

using namespace kiln;

TEST_SUITE("cpu_devices") {
  TEST_CASE("the count is fixed; a device past it is an error") {
    CHECK(num_cpu_devices() == 8);
    CHECK(cpu_device(7) == Device{DeviceType::cpu, 7});
    CHECK_THROWS_AS(cpu_device(8), DeviceError);
    CHECK_THROWS_AS(cpu_device(-1), DeviceError);
    CHECK_NOTHROW(set_num_cpu_devices(8));  // the same count
    CHECK_THROWS_AS(set_num_cpu_devices(9), ValueError);
    CHECK_THROWS_AS(set_num_cpu_devices(0), ValueError);
    Tensor t = Tensor::empty({2, 3}, DType::float32, Device{DeviceType::cpu, 3});
    CHECK(t.device() == Device{DeviceType::cpu, 3});
    CHECK_THROWS_WITH_AS(Tensor::empty({2}, DType::float32, Device{DeviceType::cpu, 8}),
                         doctest::Contains("CPU device 8 does not exist: this process has 8"), DeviceError);
    CHECK_THROWS_AS(check_cpu_device(Device{DeviceType::cpu, -1}, "test"), DeviceError);
    // Device::cpu(i) names the same devices; it checks at allocation.
    CHECK(Device::cpu() == Device{DeviceType::cpu, 0});
    CHECK(Device::cpu(5) == cpu_device(5));
    CHECK(Device::cpu(5).str() == "cpu:5");
    CHECK(ones({3}, DType::float32, Device::cpu(6)).device() == Device::cpu(6));
    CHECK_THROWS_WITH_AS(Tensor::empty({2}, DType::float32, Device::cpu(9)),
                         doctest::Contains("CPU device 9 does not exist"), DeviceError);
    CHECK_THROWS_AS(Tensor::empty({2}, DType::float32, Device::cpu(-2)), DeviceError);
  }

  TEST_CASE("Tensor::to copies between CPU devices; a device past the count is a DeviceError") {
    Tensor a = arange(0, 6).reshape({2, 3}).to(DType::float32);
    Tensor b = a.to(Device::cpu(3));
    CHECK(b.device() == Device::cpu(3));
    Tensor t = b.transpose(0, 1);  // a strided view copies as its values
    Tensor c = t.to(Device::cpu(1));
    CHECK(c.device() == Device::cpu(1));
    Tensor back = c.cpu();
    CHECK(back.device() == Device::cpu());
    CHECK(back.shape() == Shape{3, 2});
    const std::vector<float> want{0, 3, 1, 4, 2, 5};
    CHECK(back.to_vector<float>() == want);
    CHECK(b.data_ptr() != a.data_ptr());
    CHECK(Tensor::empty({0}, DType::float32).to(Device::cpu(2)).numel() == 0);
    CHECK_THROWS_WITH_AS(a.to(Device::cpu(8)), doctest::Contains("CPU device 8 does not exist"), DeviceError);
  }

  TEST_CASE("an eager op on tensors of two CPU devices: the DeviceError says how to move one") {
    // Before: "(move one with .to(device); ...)" without the devices' names in C++ or where cpu:1 came from
    // (a DistributedTensor's full_tensor() on rank 1 under mpiexec, mixed with the program's tensors).
    const Tensor a = arange(0, 3).to(DType::float32), b = a.to(Device::cpu(1));
    CHECK_THROWS_WITH_AS(b - a,
                         "sub: input 1 is on cpu but input 0 is on cpu:1 (eager ops never copy between devices: move "
                         "one with .to(Device::cpu()) or .to(Device::cpu(1)); a DistributedTensor's shards and "
                         "full_tensor() are on its mesh devices, cpu:<rank> under mpiexec)",
                         DeviceError);
    const std::vector<float> zero{0, 0, 0};
    CHECK((b.to(Device::cpu()) - a).to_vector<float>() == zero);  // as the message says
    CHECK((b - a.to(Device::cpu(1))).to_vector<float>() == zero);
  }

  TEST_CASE("run_on_cpu_devices: one persistent worker per device, all at once") {
    const std::vector<Device> devs{Device{DeviceType::cpu, 0}, Device{DeviceType::cpu, 1}, Device{DeviceType::cpu, 2}, Device{DeviceType::cpu, 3}};
    std::vector<std::thread::id> first(4), second(4);
    // Every job waits until all four have started: run one after another,
    // this would time out.
    auto rendezvous = [](std::vector<std::thread::id>& ids) {
      std::mutex mu;
      std::condition_variable cv;
      int arrived = 0;
      bool ok = true;
      run_on_cpu_devices({Device{DeviceType::cpu, 0}, Device{DeviceType::cpu, 1}, Device{DeviceType::cpu, 2}, Device{DeviceType::cpu, 3}}, [&](size_t k) {
        ids[k] = std::this_thread::get_id();
        std::unique_lock<std::mutex> lk(mu);
        ++arrived;
        cv.notify_all();
        if (!cv.wait_for(lk, std::chrono::seconds(20), [&] { return arrived == 4; })) ok = false;
      });
      return ok;
    };
    CHECK(rendezvous(first));
    CHECK(rendezvous(second));
    CHECK(std::set<std::thread::id>(first.begin(), first.end()).size() == 4);
    CHECK(first == second);  // the same worker per device
    CHECK(first[0] != std::this_thread::get_id());
    // The lowest device's exception comes back; the others still ran.
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH_AS(run_on_cpu_devices(devs,
                                            [&](size_t k) {
                                              ++ran;
                                              if (k >= 2) throw ValueError("job " + std::to_string(k));
                                            }),
                         "job 2", ValueError);
    CHECK(ran == 4);
    // Nested use from a worker runs on fresh threads (no self-wait).
    std::atomic<int> inner{0};
    run_on_cpu_devices({Device{DeviceType::cpu, 0}, Device{DeviceType::cpu, 1}}, [&](size_t k) {
      if (k == 0) run_on_cpu_devices({Device{DeviceType::cpu, 0}, Device{DeviceType::cpu, 1}}, [&](size_t) { ++inner; });
    });
    CHECK(inner == 2);
    CHECK_THROWS_AS(run_on_cpu_devices({Device{DeviceType::cpu, 1}, Device{DeviceType::cpu, 1}}, [](size_t) {}), ValueError);
    CHECK_THROWS_AS(run_on_cpu_devices({Device{DeviceType::cpu, 0}, Device::cuda(0)}, [](size_t) {}), ValueError);
    CHECK_THROWS_AS(run_on_cpu_devices({Device{DeviceType::cpu, 0}, Device{DeviceType::cpu, 9}}, [](size_t) {}), DeviceError);
  }
}
