// The kernel registry (tensor/kernel_registry.h): every op-table row with a
// kernel family has a CPU kernel for every dtype, eager ops reach kernels
// through the registry (a replaced entry is what runs), and a device with no
// kernel raises DeviceError naming the op, the device and the dtype.
#include "../tensor/kernel_registry.h"
#include "test_util.h"

using namespace kiln;

namespace {
// A stand-in for exp's CPU kernel: writes 42 everywhere, so a call that went
// through the registry is unmistakable.
void fake_exp(const KernelArgs& k) {
  float* p = static_cast<float*>(k.out.data_ptr());
  for (int64_t i = 0; i < k.out.numel(); ++i) p[i] = 42.0f;
}

// Restores a registry entry when the test ends, even on a failed check.
struct KernelRestore {
  OpId op;
  Kernel saved;
  ~KernelRestore() { detail::register_kernel(op, DeviceType::cpu, saved); }
};
}  // namespace

TEST_SUITE("kernel registry") {
  TEST_CASE("every row with a kernel family has a CPU kernel for every dtype") {
    int rows = 0;
    for (int i = 0; i < kNumOps; ++i) {
      const OpId op = static_cast<OpId>(i);
      CAPTURE(op_name(op));
      if (op_info(op).category == OpCategory::View) {
        CHECK_FALSE(detail::has_kernel(op, DeviceType::cpu, DType::float32));  // views are metadata
        continue;
      }
      ++rows;
      for (DType d : kt::all_dtypes()) CHECK(detail::has_kernel(op, DeviceType::cpu, d));
    }
    CHECK(rows > 70);
  }

  TEST_CASE("eager ops run the registered kernel") {
    const Kernel real = detail::kernel_for(OpId::Exp, Device::cpu(), DType::float32);
    {
      KernelRestore restore{OpId::Exp, real};
      detail::register_kernel(OpId::Exp, DeviceType::cpu, fake_exp, dtype_bit(DType::float32));
      Tensor y = exp(tensor({0.0f, 1.0f, 2.0f}));
      CHECK(y.to_vector<float>() == std::vector<float>{42.0f, 42.0f, 42.0f});
      // The mask limits the entry to float32: float64 now has no exp kernel.
      CHECK_THROWS_WITH_AS(exp(tensor({1.0, 2.0})), "exp: no kernel for cpu of dtype float64", DeviceError);
      // An int8 input computes exp in float32 (the row's Float rule), so it
      // reaches the float32 entry.
      CHECK(exp(full({2}, 1, DType::int8)).to_vector<float>() == std::vector<float>{42.0f, 42.0f});
    }
    const std::vector<float> e = exp(tensor({0.0f, 1.0f})).to_vector<float>();
    CHECK(e[0] == 1.0f);
    CHECK(e[1] == doctest::Approx(std::exp(1.0)).epsilon(1e-6));
  }

  TEST_CASE("a device without kernels raises DeviceError naming op, device and dtype") {
    if (detail::has_kernel(OpId::Exp, DeviceType::cuda, DType::int8)) {
      MESSAGE("this build has CUDA kernels for exp; the missing-kernel message is checked on the CPU above");
      return;
    }
    CHECK_THROWS_WITH_AS(detail::kernel_for(OpId::Exp, Device::cuda(0), DType::int8),
                         doctest::Contains("exp: no kernel for cuda:0 of dtype int8"), DeviceError);
  }

  TEST_CASE("copy_into converts through the Cast kernel") {
    Tensor src = tensor({1.5, -2.5, 3.0});
    Tensor dst = Tensor::empty({3}, DType::int32);
    detail::copy_into(src, dst);
    CHECK(dst.to_vector<int32_t>() == std::vector<int32_t>{1, -2, 3});
  }

  TEST_CASE("blas_backend names the CPU device's GEMM library") {
    CHECK(std::string(blas_backend()).size() > 0);
  }
}
