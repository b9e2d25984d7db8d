// distributed/nccl.h without a GPU: the NCCL communicator is compiled and
// linked into libkiln when CMake found libnccl (KILN_HAVE_NCCL), and asking
// for an absent device or an empty group fails cleanly. The runs on GPUs
// are in tests/gpu/test_nccl.cpp (label `gpu`).
#include <doctest/doctest.h>

#include "../backends/cuda/cuda_backend.h"
#include "../distributed/nccl.h"

using namespace kiln;
namespace kn = kiln::distributed::nccl;

TEST_SUITE("nccl_link") {
  TEST_CASE("built with CUDA means built with NCCL here; absent devices are errors, not hangs") {
    if (!kn::is_built()) {
      CHECK_THROWS_AS(kn::make_group({0}), NotBuiltError);
      return;
    }
    CHECK_THROWS_AS(kn::make_group({}), ValueError);
    CHECK_THROWS_AS(kn::make_group({1, 1}), ValueError);
    const int n = cuda::is_built() ? cuda::device_count() : 0;
    CHECK_THROWS_AS(kn::make_group({n}), DeviceError);  // one past the last device
  }
}
