// The CUDA backend's host-side entry points. Without a GPU (or without the
// backend built) the device checks are skipped with a message, but what must
// hold everywhere is still tested: is_built() matches the build, device_count()
// never throws, bad indices raise a kiln::Error.
#include "../backends/cuda/cuda_backend.h"
#include "test_util.h"

#ifndef KILN_TEST_CUDA_BUILT
#error "tests/CMakeLists.txt defines KILN_TEST_CUDA_BUILT (1 when KILN_WITH_CUDA is on)"
#endif

TEST_SUITE("cuda") {
  TEST_CASE("is_built matches the build configuration") {
    CHECK(kiln::cuda::is_built() == bool(KILN_TEST_CUDA_BUILT));
  }

  TEST_CASE("device_count never throws") {
    int n = -1;
    CHECK_NOTHROW(n = kiln::cuda::device_count());
    CHECK(n >= 0);
    if (!kiln::cuda::is_built()) CHECK(n == 0);
  }

  TEST_CASE("bad device indices raise kiln::Error") {
    CHECK_THROWS_AS(kiln::cuda::device_name(-1), kiln::Error);
    CHECK_THROWS_AS(kiln::cuda::device_name(kiln::cuda::device_count()), kiln::Error);
    if (kiln::cuda::is_built()) {
      CHECK_THROWS_AS(kiln::cuda::device_name(-1), kiln::DeviceError);
    } else {
      CHECK_THROWS_AS(kiln::cuda::device_name(0), kiln::NotBuiltError);
      CHECK_THROWS_WITH_AS(kiln::cuda::device_name(-1), doctest::Contains("CUDA"), kiln::NotBuiltError);
    }
  }

  TEST_CASE("devices, when present") {
    const int n = kiln::cuda::device_count();
    if (n == 0) {
      MESSAGE("no CUDA device visible (built with CUDA: " << kiln::cuda::is_built()
                                                          << "): device checks skipped");
      return;
    }
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK_FALSE(kiln::cuda::device_name(i).empty());
    }
  }
}
