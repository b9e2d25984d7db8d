// Compiled CUDA plans on a device (issue 13), label `gpu`: the differential
// fuzzer's graphs (tests/fuzz_cases.h) with CUDA inputs, compiled (NVRTC
// kernels, cuBLASLt, eager row kernels) = eager CUDA within the CUDA
// tolerance (docs/cuda_numerics.md) = the float64 CPU reference within the
// fuzzer's loose bound. KILN_CUDA_FUZZ_GRAPHS sets the count (default 1000).
#include <cstdlib>

#include "../../jit/cuda_executable.h"
#include "../../jit/engine.h"
#include "../fuzz_cases.h"
#include "gpu_util.h"

namespace {
using namespace kiln;

std::vector<Tensor> to_cuda(const std::vector<Tensor>& xs) {
  std::vector<Tensor> r;
  for (const Tensor& t : xs) r.push_back(t.to(Device::cuda(0)));
  return r;
}
std::vector<Tensor> clones(const std::vector<Tensor>& xs) {
  std::vector<Tensor> r;
  for (const Tensor& t : xs) r.push_back(t.clone());
  return r;
}
}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("compiled CUDA = eager CUDA = float64 reference on the fuzzer's graphs") {
    if (!kt::gpu_or_skip()) return;
    int graphs = 1000;
    if (const char* e = std::getenv("KILN_CUDA_FUZZ_GRAPHS")) graphs = std::max(1, std::atoi(e));
    int compared = 0, eager_refused = 0, with_kernels = 0;
    for (int gi = 0; gi < graphs; ++gi) {
      const uint64_t seed = 1000 + static_cast<uint64_t>(gi);
      CAPTURE(seed);
      fuzz_cases::FuzzCase c = fuzz_cases::make_case(seed);
      auto fn = [&c](std::vector<Tensor> xs) { return fuzz_cases::run_case(c, xs); };
      const std::vector<Tensor> xs = to_cuda(c.inputs);
      std::vector<Tensor> eager;
      try {
        eager = fuzz_cases::run_case(c, clones(xs));
      } catch (const Error& e) {
        ++eager_refused;  // an op without a CUDA kernel: nothing to compare against
        continue;
      }
      CompiledCallable run = compile(fn)(xs);
      const codegen::CudaExecutable* cx = run.engine_model().artifact().cuda_plan();
      REQUIRE(cx);
      with_kernels += cx->module() != nullptr;
      std::vector<Tensor> got = run(clones(xs)).as<std::vector<Tensor>>();
      std::vector<Tensor> x64;
      if (is_floating(c.dtype))
        for (const Tensor& t : c.inputs) x64.push_back(t.to(DType::float64));
      const std::vector<Tensor> ref = x64.empty() ? std::vector<Tensor>{} : fuzz_cases::run_case(c, x64);
      REQUIRE(got.size() == eager.size());
      for (size_t k = 0; k < got.size(); ++k) {
        CAPTURE(k);
        REQUIRE(got[k].device() == Device::cuda(0));
        kt::check_cuda_matches_cpu(got[k], eager[k].to(Device::cpu()), "compiled vs eager CUDA");
        if (!ref.empty() && c.dtype == DType::float32)
          kt::check_all_close(got[k], kt::values(ref[k]), 1e-2, 1e-3, "compiled CUDA vs float64 reference");
        ++compared;
      }
    }
    MESSAGE(compared << " outputs compared over " << graphs << " graphs (" << with_kernels
                     << " plans with NVRTC kernels; " << eager_refused << " graphs eager CUDA refused)");
    CHECK(compared > 0);
  }

  TEST_CASE("compiled CUDA: the chain tanh(a*b+c)*0.5+exp(-a) is one kernel and matches eager") {
    if (!kt::gpu_or_skip()) return;
    auto f = [](Tensor a, Tensor b, Tensor c) { return tanh(a * b + c) * 0.5f + exp(-a); };
    const int64_t n = 1 << 20;
    Tensor a = random::normal({n}, 1).cuda(), b = random::normal({n}, 2).cuda(), c = random::normal({n}, 3).cuda();
    CompiledCallable run = compile(f)(a, b, c);
    const codegen::CudaExecutable* cx = run.engine_model().artifact().cuda_plan();
    REQUIRE(cx);
    CHECK(cx->plan().steps.size() == 1);
    Tensor got = run(a, b, c);
    kt::check_cuda_matches_cpu(got, f(a, b, c).to(Device::cpu()), "chain");
  }
}
