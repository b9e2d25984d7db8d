// kiln tests: the CUDA matmul entry points that need no device: the TF32
// switch (off by default) and matmul_epilogue's argument errors. Without
// the CUDA build every one raises NotBuiltError.
#include "../backends/cuda/cuda_backend.h"
#include "test_util.h"

TEST_SUITE("cuda matmul api") {
  TEST_CASE("TF32 is off by default and set_allow_tf32 switches it") {
    using namespace kiln;
    if (!cuda::is_built()) {
      CHECK_THROWS_AS(cuda::allow_tf32(), NotBuiltError);
      CHECK_THROWS_AS(cuda::set_allow_tf32(true), NotBuiltError);
      return;
    }
    CHECK_FALSE(cuda::allow_tf32());
    cuda::set_allow_tf32(true);
    CHECK(cuda::allow_tf32());
    cuda::set_allow_tf32(false);
    CHECK_FALSE(cuda::allow_tf32());
  }

  TEST_CASE("matmul_epilogue refuses CPU operands with DeviceError naming both devices") {
    using namespace kiln;
    Tensor a = zeros({2, 3}), b = zeros({3, 4});
    if (!cuda::is_built()) {
      CHECK_THROWS_AS(cuda::matmul_epilogue(a, b, Tensor(), cuda::Epilogue::none), NotBuiltError);
      return;
    }
    try {
      cuda::matmul_epilogue(a, b, Tensor(), cuda::Epilogue::none);
      FAIL("expected DeviceError");
    } catch (const DeviceError& e) {
      CHECK(std::string(e.what()).find("matmul_epilogue: a and b must live on one CUDA device, got cpu and cpu") !=
            std::string::npos);
    }
  }
}
