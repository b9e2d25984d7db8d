// kiln GPU tests: whether a CUDA device answers, and CPU-vs-CUDA comparison.
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "../../backends/cuda/cuda_backend.h"
#include "../test_util.h"

namespace kt {

/// True when kiln has the CUDA backend and a device answers; otherwise
/// reports why (the caller returns: the test is skipped, not failed).
inline bool gpu_or_skip() {
  if (!kiln::cuda::is_built()) {
    MESSAGE("skipped: kiln was built without CUDA");
    return false;
  }
  if (kiln::cuda::device_count() == 0) {
    try {
      kiln::zeros({1}, kiln::DType::float32, kiln::Device::cuda(0));
    } catch (const kiln::Error& e) {
      MESSAGE("skipped: no CUDA device answers (" << std::string(e.what()) << ")");
    }
    return false;
  }
  return true;
}

/// Tolerance between a CUDA and a CPU result stored in `d` (docs/cuda_numerics.md):
/// both are within rtol_for(d) of the float64 reference, so twice that here;
/// integers and bool exactly.
inline double cuda_rtol(kiln::DType d) { return 2 * rtol_for(d); }

inline void check_cuda_matches_cpu(const kiln::Tensor& gpu, const kiln::Tensor& cpu, const std::string& what) {
  REQUIRE(gpu.device() == kiln::Device::cuda(0));
  CHECK_MESSAGE(gpu.dtype() == cpu.dtype(), what << ": dtype " << gpu.dtype() << " vs " << cpu.dtype());
  CHECK_MESSAGE(gpu.shape() == cpu.shape(), what << ": shape");
  const double tiny = kiln::is_floating(cpu.dtype()) ? 0x1p-126 : 0.0;
  check_all_close(gpu, values(cpu), cuda_rtol(cpu.dtype()), tiny, what);
}

/// f on the CPU inputs and on the CUDA ones: both results (the CPU's
/// first); or none when f on the CPU inputs raises DTypeError or ValueError
/// (or ShapeError, where `shape_errors`), after checking that f on the CUDA
/// inputs raises the same kind. Any other error propagates.
template <class F>
std::optional<std::pair<kiln::Tensor, kiln::Tensor>> run_on_cpu_and_cuda(F f, const std::vector<kiln::Tensor>& cpu_in,
                                                                          const std::vector<kiln::Tensor>& gpu_in,
                                                                          bool shape_errors = false) {
  kiln::Tensor want;
  try {
    want = f(cpu_in);
  } catch (const kiln::DTypeError&) {
    CHECK_THROWS_AS(f(gpu_in), kiln::DTypeError);
    return std::nullopt;
  } catch (const kiln::ValueError&) {
    CHECK_THROWS_AS(f(gpu_in), kiln::ValueError);
    return std::nullopt;
  } catch (const kiln::ShapeError&) {
    if (!shape_errors) throw;
    CHECK_THROWS_AS(f(gpu_in), kiln::ShapeError);
    return std::nullopt;
  }
  kiln::Tensor got = f(gpu_in);
  return std::make_pair(std::move(want), std::move(got));
}

}  // namespace kt
